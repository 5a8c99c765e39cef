// The plain dtypes' kernels (reduce_loops.h) exist twice: compiled for the baseline x86-64
// (SSE2) and for AVX2, which reduces 2.5-3.5x faster on data in cache (the shared-memory ring
// reduces L2-sized slices). ReduceInto and the scaling use Best(); tests run every available one.
#pragma once

#include <cstddef>

#include "common/dtype.h"

namespace tutti::reduce_isa {

enum class Isa { kBaseline, kAvx2 };

bool Available(Isa isa);
// The widest this CPU runs.
Isa Best();

// acc[i] = acc[i] (op) in[i] for float32, float64, the integer dtypes and bool with `isa`'s
// kernels (which must be available); false for the 16-bit floats.
bool ReducePlainWith(Isa isa, void* acc, const void* in, size_t count, DType dtype, ReduceOp op);
// dst[i] = src[i] * factor for float32, float64 and the integer dtypes (in double, truncated
// and saturated: reduce.h); false for the 16-bit floats and bool.
bool ScalePlainWith(Isa isa, void* dst, const void* src, size_t n, DType dtype, double factor);

namespace avx2 {
// Defined in reduce_avx2.cc (on x86-64; elsewhere they report false and are never chosen).
bool ReducePlain(void* acc, const void* in, size_t count, DType dtype, ReduceOp op);
bool ScalePlain(void* dst, const void* src, size_t n, DType dtype, double factor);
}  // namespace avx2

}  // namespace tutti::reduce_isa
