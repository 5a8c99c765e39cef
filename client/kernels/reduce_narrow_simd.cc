#include "client/kernels/reduce_narrow_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tutti::narrow_simd {

#if defined(__x86_64__)

namespace {

#define TUTTI_SIMD16 __attribute__((target("avx2,f16c")))

// The scalar kernels' semantics, lane by lane: min/max pick `b` when it is smaller/larger, and a
// NaN on either side wins (a NaN `a` stays because no comparison with it is true).
struct SumOp {
  TUTTI_SIMD16 static __m256 Apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
};
struct ProductOp {
  TUTTI_SIMD16 static __m256 Apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
};
struct MinOp {
  TUTTI_SIMD16 static __m256 Apply(__m256 a, __m256 b) {
    const __m256 r = _mm256_blendv_ps(a, b, _mm256_cmp_ps(b, a, _CMP_LT_OQ));
    return _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
};
struct MaxOp {
  TUTTI_SIMD16 static __m256 Apply(__m256 a, __m256 b) {
    const __m256 r = _mm256_blendv_ps(a, b, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
    return _mm256_blendv_ps(r, b, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  }
};
struct ScaleOp {
  __m256 factor;
  TUTTI_SIMD16 __m256 Apply(__m256 a) const { return _mm256_mul_ps(a, factor); }
};

// Eight stored elements <-> eight float32 lanes.
struct Half {
  TUTTI_SIMD16 static __m256 Load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  TUTTI_SIMD16 static void Store(uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

struct BFloat16 {
  TUTTI_SIMD16 static __m256 Load(const uint16_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // As FloatToBFloat16: round to nearest even on the dropped 16 bits; a NaN is truncated
  // instead (rounding could carry it into infinity), with a mantissa bit kept set.
  TUTTI_SIMD16 static void Store(uint16_t* p, __m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i top = _mm256_srli_epi32(u, 16);
    const __m256i odd = _mm256_and_si256(top, _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
    const __m256i no_mantissa =
        _mm256_cmpeq_epi32(_mm256_and_si256(top, _mm256_set1_epi32(0x7f)), _mm256_setzero_si256());
    const __m256i nan_value =
        _mm256_or_si256(top, _mm256_and_si256(no_mantissa, _mm256_set1_epi32(0x40)));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                              _mm256_set1_epi32(0x7f800000));
    const __m256i result = _mm256_blendv_epi8(rounded, nan_value, is_nan);
    // Every lane holds 16 bits: pack the two halves of the register.
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(result),
                                            _mm256_extracti128_si256(result, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
};

template <typename Format, typename Op>
TUTTI_SIMD16 size_t CombineWith(uint16_t* acc, const uint16_t* in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) Format::Store(acc + i, Op::Apply(Format::Load(acc + i), Format::Load(in + i)));
  return i;
}

template <typename Format>
size_t CombineAs(uint16_t* acc, const uint16_t* in, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return CombineWith<Format, SumOp>(acc, in, n);
    case ReduceOp::kProduct: return CombineWith<Format, ProductOp>(acc, in, n);
    case ReduceOp::kMin: return CombineWith<Format, MinOp>(acc, in, n);
    case ReduceOp::kMax: return CombineWith<Format, MaxOp>(acc, in, n);
  }
  return 0;
}

template <typename Format>
TUTTI_SIMD16 size_t ScaleAs(uint16_t* dst, const uint16_t* src, size_t n, float factor) {
  const ScaleOp op{_mm256_set1_ps(factor)};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) Format::Store(dst + i, op.Apply(Format::Load(src + i)));
  return i;
}

template <typename Format>
TUTTI_SIMD16 size_t NarrowAs(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) Format::Store(out + i, _mm256_loadu_ps(in + i));
  return i;
}

template <typename Format>
TUTTI_SIMD16 size_t WidenAs(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, Format::Load(in + i));
  return i;
}

template <typename Format>
TUTTI_SIMD16 size_t WidenAddAs(const uint16_t* in, float* acc, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), Format::Load(in + i)));
  return i;
}

}  // namespace

size_t Narrow(DType dtype, const float* in, uint16_t* out, size_t n) {
  if (!Available(dtype)) return 0;
  return dtype == DType::kFloat16 ? NarrowAs<Half>(in, out, n) : NarrowAs<BFloat16>(in, out, n);
}

size_t Widen(DType dtype, const uint16_t* in, float* out, size_t n) {
  if (!Available(dtype)) return 0;
  return dtype == DType::kFloat16 ? WidenAs<Half>(in, out, n) : WidenAs<BFloat16>(in, out, n);
}

size_t WidenAdd(DType dtype, const uint16_t* in, float* acc, size_t n) {
  if (!Available(dtype)) return 0;
  return dtype == DType::kFloat16 ? WidenAddAs<Half>(in, acc, n) : WidenAddAs<BFloat16>(in, acc, n);
}

bool Available(DType dtype) {
  static const bool avx2_f16c = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return (dtype == DType::kFloat16 || dtype == DType::kBFloat16) && avx2_f16c;
}

size_t Combine(DType dtype, uint16_t* acc, const uint16_t* in, size_t n, ReduceOp op) {
  if (!Available(dtype)) return 0;
  return dtype == DType::kFloat16 ? CombineAs<Half>(acc, in, n, op)
                                  : CombineAs<BFloat16>(acc, in, n, op);
}

size_t Scale(DType dtype, uint16_t* dst, const uint16_t* src, size_t n, float factor) {
  if (!Available(dtype)) return 0;
  return dtype == DType::kFloat16 ? ScaleAs<Half>(dst, src, n, factor)
                                  : ScaleAs<BFloat16>(dst, src, n, factor);
}

#else  // not x86-64: the scalar kernels do everything

bool Available(DType) { return false; }
size_t Combine(DType, uint16_t*, const uint16_t*, size_t, ReduceOp) { return 0; }
size_t Scale(DType, uint16_t*, const uint16_t*, size_t, float) { return 0; }
size_t Narrow(DType, const float*, uint16_t*, size_t) { return 0; }
size_t Widen(DType, const uint16_t*, float*, size_t) { return 0; }
size_t WidenAdd(DType, const uint16_t*, float*, size_t) { return 0; }

#endif

}  // namespace tutti::narrow_simd
