#include "client/reduce_f16c.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tutti::f16c {

#if defined(__x86_64__)

bool Available() {
  static const bool available = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return available;
}

namespace {

#define TUTTI_F16C __attribute__((target("avx,f16c")))

// The scalar kernels' semantics, lane by lane: min/max pick `b` when it is smaller/larger, and a
// NaN on either side wins (a NaN `a` stays because no comparison with it is true).
struct SumOp {
  TUTTI_F16C static __m256 Apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
};
struct ProductOp {
  TUTTI_F16C static __m256 Apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
};
struct MinOp {
  TUTTI_F16C static __m256 Apply(__m256 a, __m256 b) {
    const __m256 r = _mm256_blendv_ps(a, b, _mm256_cmp_ps(b, a, _CMP_LT_OQ));
    return _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
};
struct MaxOp {
  TUTTI_F16C static __m256 Apply(__m256 a, __m256 b) {
    const __m256 r = _mm256_blendv_ps(a, b, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
    return _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
};

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

template <typename Op>
TUTTI_F16C size_t CombineWith(uint16_t* acc, const uint16_t* in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(acc + i), _mm256_cvtps_ph(Op::Apply(a, b), kRound));
  }
  return i;
}

}  // namespace

size_t Combine(uint16_t* acc, const uint16_t* in, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return CombineWith<SumOp>(acc, in, n);
    case ReduceOp::kProduct: return CombineWith<ProductOp>(acc, in, n);
    case ReduceOp::kMin: return CombineWith<MinOp>(acc, in, n);
    case ReduceOp::kMax: return CombineWith<MaxOp>(acc, in, n);
  }
  return 0;
}

TUTTI_F16C size_t Scale(uint16_t* dst, const uint16_t* src, size_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_mul_ps(x, f), kRound));
  }
  return i;
}

#else  // not x86-64: the scalar kernels do everything

bool Available() { return false; }
size_t Combine(uint16_t*, const uint16_t*, size_t, ReduceOp) { return 0; }
size_t Scale(uint16_t*, const uint16_t*, size_t, float) { return 0; }

#endif

}  // namespace tutti::f16c
