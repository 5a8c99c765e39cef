// reduce_loops.h compiled for AVX2. The standard headers and half.h come first, before the
// target pragma, so that their inline functions stay baseline code (the linker keeps one copy of
// each, which any CPU must be able to run).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "client/kernels/half.h"
#include "client/kernels/reduce_isa.h"
#include "common/dtype.h"

#if defined(__x86_64__)
#pragma GCC target("avx2")
#include "client/kernels/reduce_loops.h"

namespace tutti::reduce_isa::avx2 {

bool ReducePlain(void* acc, const void* in, size_t count, DType dtype, ReduceOp op) {
  return ::tutti::ReducePlain(acc, in, count, dtype, op);
}

bool ScalePlain(void* dst, const void* src, size_t n, DType dtype, double factor) {
  return ::tutti::ScalePlain(dst, src, n, dtype, factor);
}

}  // namespace tutti::reduce_isa::avx2

#else

namespace tutti::reduce_isa::avx2 {
bool ReducePlain(void*, const void*, size_t, DType, ReduceOp) { return false; }
bool ScalePlain(void*, const void*, size_t, DType, double) { return false; }
}  // namespace tutti::reduce_isa::avx2

#endif
