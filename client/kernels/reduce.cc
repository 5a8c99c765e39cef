#include "client/kernels/reduce.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "client/kernels/half.h"
#include "client/kernels/reduce_isa.h"
#include "client/kernels/reduce_loops.h"
#include "client/kernels/reduce_narrow_simd.h"

namespace tutti {

namespace reduce_isa {

bool Available(Isa isa) {
  if (isa == Isa::kBaseline) return true;
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#else
  return false;
#endif
}

Isa Best() {
  static const Isa best = Available(Isa::kAvx2) ? Isa::kAvx2 : Isa::kBaseline;
  return best;
}

bool ReducePlainWith(Isa isa, void* acc, const void* in, size_t count, DType dtype, ReduceOp op) {
  if (isa == Isa::kAvx2) return avx2::ReducePlain(acc, in, count, dtype, op);
  return ReducePlain(acc, in, count, dtype, op);
}

bool ScalePlainWith(Isa isa, void* dst, const void* src, size_t n, DType dtype, double factor) {
  if (isa == Isa::kAvx2) return avx2::ScalePlain(dst, src, n, dtype, factor);
  return ScalePlain(dst, src, n, dtype, factor);
}

}  // namespace reduce_isa

namespace {

void Scale(void* dst, const void* src, size_t n, DType dtype, double factor) {
  const float f32 = static_cast<float>(factor);
  auto by_f32 = [f32](float x) { return x * f32; };
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: {
      // The scalar 16-bit conversions are far below memory speed: eight at a time where the
      // CPU can, the tail below.
      auto* d = static_cast<uint16_t*>(dst);
      const auto* s = static_cast<const uint16_t*>(src);
      const size_t done = narrow_simd::Scale(dtype, d, s, n, f32);
      if (dtype == DType::kFloat16) return Map<Half>(d + done, s + done, n - done, by_f32);
      return Map<BFloat16>(d + done, s + done, n - done, by_f32);
    }
    default:
      if (!reduce_isa::ScalePlainWith(reduce_isa::Best(), dst, src, n, dtype, factor))
        Die("bool buffers cannot be scaled by a factor other than 1");
  }
}

template <typename T>
void DivideInt(void* buf, size_t n, int64_t divisor) {
  if (divisor == -1) {
    // INT64_MIN / -1 overflows; negating in unsigned wraps like every other integer result.
    return Map<Plain<T>>(buf, buf, n,
                         [](T x) { return static_cast<T>(0 - static_cast<uint64_t>(x)); });
  }
  Map<Plain<T>>(buf, buf, n,
                [divisor](T x) { return static_cast<T>(static_cast<int64_t>(x) / divisor); });
}

}  // namespace

void ReduceInto(void* acc, const void* in, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: {
      // The scalar 16-bit conversions run at a fraction of memory speed: eight elements at a
      // time where the CPU can, the tail below.
      auto* a = static_cast<uint16_t*>(acc);
      const auto* b = static_cast<const uint16_t*>(in);
      const size_t done = narrow_simd::Combine(dtype, a, b, count, op);
      if (dtype == DType::kFloat16) return ReduceTyped<Half, Half>(a + done, b + done, count - done, op);
      return ReduceTyped<BFloat16, BFloat16>(a + done, b + done, count - done, op);
    }
    default:
      if (!reduce_isa::ReducePlainWith(reduce_isa::Best(), acc, in, count, dtype, op))
        Die("invalid dtype");
  }
}

void ScaleInPlace(void* buf, size_t count, DType dtype, double factor) {
  if (factor == 1.0) return;
  Scale(buf, buf, count, dtype, factor);
}

void ScaleCopy(void* dst, const void* src, size_t count, DType dtype, double factor) {
  if (factor != 1.0) return Scale(dst, src, count, dtype, factor);
  if (dst != src && count != 0) std::memmove(dst, src, count * ElementSize(dtype));
}

void ScaleReduce(void* dst, const void* own, const void* in, size_t count, DType dtype, ReduceOp op,
                 double factor) {
  // Small enough for L1 and L2 alike; a multiple of every SIMD width, so blocks split no vector.
  constexpr size_t kBlockBytes = 32 << 10;
  const size_t element = ElementSize(dtype), block = kBlockBytes / element;
  char* d = static_cast<char*>(dst);
  const char* o = static_cast<const char*>(own);
  const char* i = static_cast<const char*>(in);
  for (size_t done = 0; done < count; done += block) {
    const size_t k = std::min(block, count - done), at = done * element;
    ScaleCopy(d + at, o + at, k, dtype, factor);
    ReduceInto(d + at, i + at, k, dtype, op);
  }
}

void DivideInPlace(void* buf, size_t count, DType dtype, int64_t divisor) {
  if (divisor == 0) Die("division by zero");
  if (divisor == 1) return;
  const auto by = [divisor](auto x) { return x / static_cast<decltype(x)>(divisor); };
  switch (dtype) {
    case DType::kFloat16: return Map<Half>(buf, buf, count, by);
    case DType::kBFloat16: return Map<BFloat16>(buf, buf, count, by);
    case DType::kFloat32: return Map<Plain<float>>(buf, buf, count, by);
    case DType::kFloat64: return Map<Plain<double>>(buf, buf, count, by);
    case DType::kInt8: return DivideInt<int8_t>(buf, count, divisor);
    case DType::kUInt8: return DivideInt<uint8_t>(buf, count, divisor);
    case DType::kInt32: return DivideInt<int32_t>(buf, count, divisor);
    case DType::kInt64: return DivideInt<int64_t>(buf, count, divisor);
    case DType::kInt16: return DivideInt<int16_t>(buf, count, divisor);
    case DType::kBool: Die("bool buffers have no average");
  }
  Die("invalid dtype");
}

namespace {

template <typename T>
void Fill(void* buf, size_t count, T value) {
  std::fill_n(static_cast<T*>(buf), count, value);
}

// The identity of `op` for an arithmetic type T.
template <typename T>
T Identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProduct: return T(1);
    case ReduceOp::kMin:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
    case ReduceOp::kMax:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    default: return T(0);
  }
}

}  // namespace

void FillIdentity(void* buf, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kFloat16: return Fill<uint16_t>(buf, count, FloatToHalf(Identity<float>(op)));
    case DType::kBFloat16: return Fill<uint16_t>(buf, count, FloatToBFloat16(Identity<float>(op)));
    case DType::kFloat32: return Fill<float>(buf, count, Identity<float>(op));
    case DType::kFloat64: return Fill<double>(buf, count, Identity<double>(op));
    case DType::kInt8: return Fill<int8_t>(buf, count, Identity<int8_t>(op));
    case DType::kUInt8: return Fill<uint8_t>(buf, count, Identity<uint8_t>(op));
    case DType::kInt32: return Fill<int32_t>(buf, count, Identity<int32_t>(op));
    case DType::kInt64: return Fill<int64_t>(buf, count, Identity<int64_t>(op));
    case DType::kInt16: return Fill<int16_t>(buf, count, Identity<int16_t>(op));
    case DType::kBool:  // false for "or" (sum, max), true for "and" (min, product)
      return Fill<uint8_t>(buf, count, op == ReduceOp::kMin || op == ReduceOp::kProduct ? 1 : 0);
  }
}

void NormalizeBool(void* buf, size_t count) {
  Map<Plain<uint8_t>>(buf, buf, count, [](uint8_t x) { return static_cast<uint8_t>(x != 0); });
}

}  // namespace tutti
