#include "client/reduce.h"
#include "client/reduce_isa.h"
#include "client/reduce_narrow_simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <type_traits>
#include <vector>

#include "client/half.h"

namespace tutti {
namespace {

const ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                            ReduceOp::kProduct};
// Straddles the kernels' 64-byte blocks for every element size, plus a few hundred elements.
const size_t kLengths[] = {0, 1, 7, 33, 64, 65, 300, 517};

uint32_t Bits(float f) { return FloatBits(f); }

// ---- independent references for the 16-bit formats ---------------------------------------------

// Rounds |x| to a binary format with `mantissa_bits` explicit bits, smallest normal exponent
// `min_exp`, and overflow to infinity at `overflow` (halfway past the largest finite value).
// Done in double with nearbyint, i.e. the FPU's own round-half-even, not the kernels' bit tricks.
double RoundToFormat(double x, int mantissa_bits, int min_exp, double overflow) {
  double a = std::fabs(x);
  if (a >= overflow) return std::copysign(std::numeric_limits<double>::infinity(), x);
  int e = 0;
  std::frexp(a, &e);
  double ulp = std::ldexp(1.0, std::max(e - 1, min_exp) - mantissa_bits);
  return std::copysign(std::nearbyint(a / ulp) * ulp, x);
}

double RoundToHalf(float f) { return RoundToFormat(f, 10, -14, 65520.0); }
double RoundToBFloat16(float f) {
  return RoundToFormat(f, 7, -126, std::ldexp(2.0 - std::ldexp(1.0, -8), 127));
}

// Decodes binary16 arithmetically rather than by shuffling bits.
double DecodeHalf(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mantissa = h & 0x3ff;
  double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0x1f) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  if (exp == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exp - 25);
}

// Same value and same sign (so -0 and +0 differ); any NaN matches any NaN.
void ExpectSameFloat(double expected, float actual, const char* what, uint32_t input_bits) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(actual)) << what << " input bits 0x" << std::hex << input_bits;
    return;
  }
  EXPECT_EQ(static_cast<float>(expected), actual)
      << what << " input bits 0x" << std::hex << input_bits;
  EXPECT_EQ(std::signbit(expected), std::signbit(actual))
      << what << " input bits 0x" << std::hex << input_bits;
}

TEST(HalfTest, DecodesEveryBitPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    ExpectSameFloat(DecodeHalf(static_cast<uint16_t>(h)), HalfToFloat(static_cast<uint16_t>(h)),
                    "HalfToFloat", h);
  }
}

TEST(HalfTest, RoundTripsEveryBitPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = HalfToFloat(static_cast<uint16_t>(h));
    uint16_t back = FloatToHalf(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(back))) << std::hex << h;
      EXPECT_EQ(h & 0x8000, back & 0x8000u) << std::hex << h;
    } else {
      EXPECT_EQ(h, back) << std::hex << h;
    }
  }
}

TEST(BFloat16Test, RoundTripsEveryBitPattern) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = BFloat16ToFloat(static_cast<uint16_t>(b));
    EXPECT_EQ(b << 16, Bits(f)) << std::hex << b;
    uint16_t back = FloatToBFloat16(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(BFloat16ToFloat(back))) << std::hex << b;
    } else {
      EXPECT_EQ(b, back) << std::hex << b;
    }
  }
}

// Random float bit patterns, biased toward the half range so that its subnormals, normals and
// overflow boundary all get hit, checked against the double-precision reference rounding.
TEST(HalfTest, RoundsLikeReference) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 1 << 20; ++i) {
    uint32_t u = rng();
    if (i % 2) u = (u & 0x807fffff) | ((100 + rng() % 46) << 23);  // exponents 2^-27 .. 2^18
    float f;
    std::memcpy(&f, &u, sizeof f);
    ExpectSameFloat(RoundToHalf(f), HalfToFloat(FloatToHalf(f)), "FloatToHalf", u);
    if (HasFailure()) return;
  }
}

TEST(BFloat16Test, RoundsLikeReference) {
  std::mt19937 rng(4321);
  for (int i = 0; i < 1 << 20; ++i) {
    uint32_t u = rng();
    if (i % 4 == 0) u &= 0x807fffff;  // float subnormals
    if (i % 4 == 1) u |= 0x7f000000;  // near overflow
    float f;
    std::memcpy(&f, &u, sizeof f);
    ExpectSameFloat(RoundToBFloat16(f), BFloat16ToFloat(FloatToBFloat16(f)), "FloatToBFloat16", u);
    if (HasFailure()) return;
  }
}

TEST(HalfTest, SpecificRounding) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(0x3c00, FloatToHalf(1.0f + std::ldexp(1.0f, -11)));      // tie, down to even
  EXPECT_EQ(0x3c02, FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)));  // tie, up to even
  EXPECT_EQ(0x3c01, FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)));
  EXPECT_EQ(0x7bff, FloatToHalf(65504.0f));
  EXPECT_EQ(0x7bff, FloatToHalf(65519.996f));
  EXPECT_EQ(0x7c00, FloatToHalf(65520.0f));
  EXPECT_EQ(0xfc00, FloatToHalf(-65520.0f));
  EXPECT_EQ(0x7c00, FloatToHalf(1e10f));
  EXPECT_EQ(0x7c00, FloatToHalf(inf));
  EXPECT_EQ(0xfc00, FloatToHalf(-inf));
  EXPECT_EQ(0x8000, FloatToHalf(-0.0f));
  EXPECT_EQ(0x0400, FloatToHalf(std::ldexp(1.0f, -14)));  // smallest normal
  EXPECT_EQ(0x0001, FloatToHalf(std::ldexp(1.0f, -24)));  // smallest subnormal
  EXPECT_EQ(0x0000, FloatToHalf(std::ldexp(1.0f, -25)));  // tie, down to zero
  EXPECT_EQ(0x0001, FloatToHalf(std::ldexp(1.0f, -25) * 1.0001f));
  EXPECT_EQ(0x0002, FloatToHalf(3 * std::ldexp(1.0f, -25)));  // tie, up to even
  EXPECT_EQ(0x0400, FloatToHalf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)));  // carry to normal
  EXPECT_EQ(0x8000, FloatToHalf(-std::numeric_limits<float>::denorm_min()));
  EXPECT_EQ(0x3555, FloatToHalf(1.0f / 3));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  float low_payload_nan;
  uint32_t bits = 0x7f800001;  // payload only in bits the conversion drops
  std::memcpy(&low_payload_nan, &bits, sizeof bits);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(low_payload_nan))));
  EXPECT_EQ(1.0f, HalfToFloat(0x3c00));
  EXPECT_EQ(std::ldexp(1.0f, -24), HalfToFloat(0x0001));
}

TEST(BFloat16Test, SpecificRounding) {
  EXPECT_EQ(0x3f80, FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)));      // tie, down to even
  EXPECT_EQ(0x3f82, FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)));  // tie, up to even
  EXPECT_EQ(0x7f80, FloatToBFloat16(std::numeric_limits<float>::max()));
  EXPECT_EQ(0xff80, FloatToBFloat16(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(0x0001, FloatToBFloat16(std::ldexp(1.0f, -133)));  // bfloat16 subnormal
  EXPECT_EQ(0x0000, FloatToBFloat16(std::ldexp(1.0f, -140)));
  EXPECT_EQ(0x8000, FloatToBFloat16(-0.0f));
  for (uint32_t nan_bits : {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7fffffffu}) {
    float f;
    std::memcpy(&f, &nan_bits, sizeof f);
    EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(f)))) << std::hex << nan_bits;
  }
}

// ---- ReduceInto against a scalar reference ------------------------------------------------------

template <typename T>
struct Elem {
  static constexpr DType kDType = std::is_same_v<T, float>     ? DType::kFloat32
                                  : std::is_same_v<T, double>  ? DType::kFloat64
                                  : std::is_same_v<T, int8_t>  ? DType::kInt8
                                  : std::is_same_v<T, uint8_t> ? DType::kUInt8
                                  : std::is_same_v<T, int32_t> ? DType::kInt32
                                                               : DType::kInt64;
};

template <typename F>
F FloatRef(F a, F b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMin: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case ReduceOp::kMax: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  }
  return 0;
}

// Integer reference: wrap-around computed in uint64, then truncated to T's width.
template <typename T>
T IntRef(T a, T b, ReduceOp op) {
  uint64_t ua = static_cast<uint64_t>(static_cast<int64_t>(a));
  uint64_t ub = static_cast<uint64_t>(static_cast<int64_t>(b));
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return static_cast<T>(ua + ub);
    case ReduceOp::kProduct: return static_cast<T>(ua * ub);
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
  }
  return 0;
}

template <typename T>
T RandomValue(std::mt19937_64& rng) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (rng() % 16) {
      case 0: return std::numeric_limits<T>::quiet_NaN();
      case 1: return -std::numeric_limits<T>::infinity();
      case 2: return 0;
      case 3: return -T(0);
      case 4: return std::numeric_limits<T>::max();
      default: return static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
    }
  } else {
    switch (rng() % 8) {
      case 0: return std::numeric_limits<T>::min();
      case 1: return std::numeric_limits<T>::max();
      case 2: return static_cast<T>(-1);
      case 3: return 0;
      case 4: return static_cast<T>(rng() % 7);  // small: products that do not wrap
      default: return static_cast<T>(rng());    // full range: sums and products that wrap
    }
  }
}

template <typename T>
bool SameElement(T expected, T actual) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(expected)) return std::isnan(actual);
    return std::memcmp(&expected, &actual, sizeof(T)) == 0;  // distinguishes -0 from +0
  } else {
    return expected == actual;
  }
}

template <typename T>
class ReduceTypedTest : public ::testing::Test {};
using PlainTypes = ::testing::Types<float, double, int8_t, uint8_t, int32_t, int64_t>;
TYPED_TEST_SUITE(ReduceTypedTest, PlainTypes);

// ReduceInto, and each instruction set's kernels this CPU can run (reduce_isa.h).
TYPED_TEST(ReduceTypedTest, MatchesScalarReference) {
  using T = TypeParam;
  std::mt19937_64 rng(99);
  enum Kernel { kDispatched, kBaseline, kAvx2 };
  for (Kernel kernel : {kDispatched, kBaseline, kAvx2}) {
    if (kernel == kAvx2 && !reduce_isa::Available(reduce_isa::Isa::kAvx2)) continue;
    for (ReduceOp op : kAllOps) {
      for (size_t n : kLengths) {
        std::vector<T> acc(n), in(n);
        for (size_t i = 0; i < n; ++i) {
          acc[i] = RandomValue<T>(rng);
          in[i] = RandomValue<T>(rng);
        }
        std::vector<T> expected(n);
        for (size_t i = 0; i < n; ++i) {
          if constexpr (std::is_floating_point_v<T>) {
            expected[i] = FloatRef(acc[i], in[i], op);
          } else {
            expected[i] = IntRef(acc[i], in[i], op);
          }
        }
        if (kernel == kDispatched)
          ReduceInto(acc.data(), in.data(), n, Elem<T>::kDType, op);
        else
          ASSERT_TRUE(reduce_isa::ReducePlainWith(
              kernel == kAvx2 ? reduce_isa::Isa::kAvx2 : reduce_isa::Isa::kBaseline, acc.data(),
              in.data(), n, Elem<T>::kDType, op));
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(SameElement(expected[i], acc[i]))
              << "kernel " << kernel << " op " << static_cast<int>(op) << " n " << n << " i " << i
              << " expected " << +expected[i] << " got " << +acc[i];
        }
      }
    }
  }
}

struct Narrow {
  DType dtype;
  float (*to_float)(uint16_t);
  uint16_t (*from_float)(float);
};

void PrintTo(const Narrow& p, std::ostream* os) { *os << DTypeName(static_cast<int32_t>(p.dtype)); }

class ReduceNarrowTest : public ::testing::TestWithParam<Narrow> {};

// Random bit patterns cover NaNs, infinities, subnormals and both zeros.
TEST_P(ReduceNarrowTest, MatchesFloat32Reference) {
  const Narrow& p = GetParam();
  std::mt19937 rng(7);
  for (ReduceOp op : kAllOps) {
    for (size_t n : kLengths) {
      std::vector<uint16_t> acc(n), in(n), expected(n);
      for (size_t i = 0; i < n; ++i) {
        acc[i] = static_cast<uint16_t>(rng());
        in[i] = static_cast<uint16_t>(rng());
        expected[i] = p.from_float(FloatRef(p.to_float(acc[i]), p.to_float(in[i]), op));
      }
      ReduceInto(acc.data(), in.data(), n, p.dtype, op);
      for (size_t i = 0; i < n; ++i) {
        float want = p.to_float(expected[i]);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(p.to_float(acc[i])))
              << "op " << static_cast<int>(op) << " i " << i;
        } else {
          ASSERT_EQ(expected[i], acc[i]) << "op " << static_cast<int>(op) << " i " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ReduceNarrowTest,
                         ::testing::Values(Narrow{DType::kFloat16, HalfToFloat, FloatToHalf},
                                           Narrow{DType::kBFloat16, BFloat16ToFloat,
                                                  FloatToBFloat16}));

// ---- hand-picked cases --------------------------------------------------------------------------

TEST(ReduceTest, IntegerSumAndProductWrap) {
  int32_t acc32[] = {std::numeric_limits<int32_t>::max(), -5};
  const int32_t in32[] = {1, 3};
  ReduceInto(acc32, in32, 2, DType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(std::numeric_limits<int32_t>::min(), acc32[0]);
  EXPECT_EQ(-2, acc32[1]);

  int8_t acc8[] = {16, -128, -3};
  const int8_t in8[] = {16, -1, 5};
  ReduceInto(acc8, in8, 3, DType::kInt8, ReduceOp::kProduct);
  EXPECT_EQ(0, acc8[0]);
  EXPECT_EQ(-128, acc8[1]);
  EXPECT_EQ(-15, acc8[2]);

  uint8_t accu[] = {200, 3};
  const uint8_t inu[] = {100, 250};
  ReduceInto(accu, inu, 2, DType::kUInt8, ReduceOp::kSum);
  EXPECT_EQ(44, accu[0]);
  EXPECT_EQ(253, accu[1]);

  int64_t acc64[] = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  const int64_t in64[] = {-1, 2};
  ReduceInto(acc64, in64, 2, DType::kInt64, ReduceOp::kProduct);
  EXPECT_EQ(std::numeric_limits<int64_t>::min(), acc64[0]);
  EXPECT_EQ(-2, acc64[1]);
}

TEST(ReduceTest, IntegerMinMaxAreSigned) {
  int8_t acc[] = {-128, 127, -1};
  const int8_t in[] = {0, -1, 1};
  ReduceInto(acc, in, 3, DType::kInt8, ReduceOp::kMin);
  EXPECT_EQ(-128, acc[0]);
  EXPECT_EQ(-1, acc[1]);
  EXPECT_EQ(-1, acc[2]);
  uint8_t uacc[] = {255, 0};
  const uint8_t uin[] = {1, 7};
  ReduceInto(uacc, uin, 2, DType::kUInt8, ReduceOp::kMax);
  EXPECT_EQ(255, uacc[0]);
  EXPECT_EQ(7, uacc[1]);
}

TEST(ReduceTest, FloatMinMaxPropagateNaNFromEitherSide) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    float acc[] = {nan, 1.0f, nan, 2.0f};
    const float in[] = {1.0f, nan, nan, -3.0f};
    ReduceInto(acc, in, 4, DType::kFloat32, op);
    EXPECT_TRUE(std::isnan(acc[0]));
    EXPECT_TRUE(std::isnan(acc[1]));
    EXPECT_TRUE(std::isnan(acc[2]));
    EXPECT_EQ(op == ReduceOp::kMin ? -3.0f : 2.0f, acc[3]);

    const uint16_t half_nan = 0x7e00, half_one = 0x3c00;
    uint16_t hacc[] = {half_nan, half_one};
    const uint16_t hin[] = {half_one, half_nan};
    ReduceInto(hacc, hin, 2, DType::kFloat16, op);
    EXPECT_TRUE(std::isnan(HalfToFloat(hacc[0])));
    EXPECT_TRUE(std::isnan(HalfToFloat(hacc[1])));
  }
}

TEST(ReduceTest, HalfRoundsEachCall) {
  // 1 + 2^-11 is exact in float32 but ties back down to 1 in half, so repeated small
  // contributions vanish: the documented cost of rounding per element per call.
  uint16_t acc[] = {FloatToHalf(1.0f)};
  const uint16_t in[] = {FloatToHalf(std::ldexp(1.0f, -11))};
  ReduceInto(acc, in, 1, DType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(FloatToHalf(1.0f), acc[0]);
  uint16_t big[] = {FloatToHalf(60000.0f)};
  const uint16_t more[] = {FloatToHalf(10000.0f)};
  ReduceInto(big, more, 1, DType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(0x7c00, big[0]);
}

TEST(ReduceTest, AverageCombinesLikeSum) {
  std::vector<double> a = {1.5, -2, 3}, b = {0.25, 2, -7};
  std::vector<double> s = a;
  ReduceInto(s.data(), b.data(), 3, DType::kFloat64, ReduceOp::kSum);
  ReduceInto(a.data(), b.data(), 3, DType::kFloat64, ReduceOp::kAverage);
  EXPECT_EQ(s, a);
}

// ---- scaling and division -----------------------------------------------------------------------

// Per floating dtype: random finite inputs (plus NaN and inf), scaled by several factors in place
// and by copy, against the element-wise reference.
template <typename S>
void CheckScale(DType dtype, std::vector<S> input, double (*reference)(S, double)) {
  for (double factor : {0.5, 1.0 / 3, 1.0, -2.0, 1e-3, 0.0}) {
    std::vector<S> in_place = input;
    ScaleInPlace(in_place.data(), in_place.size(), dtype, factor);
    std::vector<S> copied(input.size());
    ScaleCopy(copied.data(), input.data(), input.size(), dtype, factor);
    std::vector<S> aliased = input;
    ScaleCopy(aliased.data(), aliased.data(), aliased.size(), dtype, factor);
    for (size_t i = 0; i < input.size(); ++i) {
      if (factor == 1.0) {
        ASSERT_EQ(0, std::memcmp(&input[i], &in_place[i], sizeof(S))) << "factor 1 must not touch";
      }
      double want = reference(input[i], factor);
      for (const auto* got : {&in_place, &copied, &aliased}) {
        S g = (*got)[i];
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(reference(g, 1.0))) << "factor " << factor << " i " << i;
        } else {
          ASSERT_EQ(want, reference(g, 1.0)) << "factor " << factor << " i " << i;
        }
      }
    }
    EXPECT_EQ(0, std::memcmp(in_place.data(), copied.data(), input.size() * sizeof(S)));
  }
}

TEST(ScaleTest, Float32AndFloat64) {
  std::mt19937_64 rng(5);
  std::vector<float> f(301);
  std::vector<double> d(301);
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = RandomValue<float>(rng);
    d[i] = RandomValue<double>(rng);
  }
  CheckScale<float>(DType::kFloat32, f, [](float x, double k) {
    return static_cast<double>(x * static_cast<float>(k));
  });
  CheckScale<double>(DType::kFloat64, d, [](double x, double k) { return x * k; });
}

TEST(ScaleTest, HalfAndBFloat16ComputeInFloat32) {
  std::mt19937 rng(6);
  std::vector<uint16_t> bits(1000);
  for (auto& b : bits) b = static_cast<uint16_t>(rng());
  CheckScale<uint16_t>(DType::kFloat16, bits, [](uint16_t h, double k) {
    return static_cast<double>(HalfToFloat(FloatToHalf(HalfToFloat(h) * static_cast<float>(k))));
  });
  CheckScale<uint16_t>(DType::kBFloat16, bits, [](uint16_t b, double k) {
    return static_cast<double>(
        BFloat16ToFloat(FloatToBFloat16(BFloat16ToFloat(b) * static_cast<float>(k))));
  });
  uint16_t h[] = {FloatToHalf(3.0f)};
  ScaleInPlace(h, 1, DType::kFloat16, 0.5);
  EXPECT_EQ(1.5f, HalfToFloat(h[0]));
}

TEST(ScaleTest, FactorOneIsAPlainCopyForEveryDType) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                      DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64}) {
    std::vector<uint8_t> src(37 * ElementSize(dtype));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + 11);
    std::vector<uint8_t> dst(src.size());
    ScaleCopy(dst.data(), src.data(), 37, dtype, 1.0);
    EXPECT_EQ(src, dst);  // NaN payloads included: no arithmetic touches the bits
    std::vector<uint8_t> same = src;
    ScaleCopy(same.data(), same.data(), 37, dtype, 1.0);
    ScaleInPlace(same.data(), 37, dtype, 1.0);
    EXPECT_EQ(src, same);
  }
  ScaleCopy(nullptr, nullptr, 0, DType::kInt32, 1.0);
}

TEST(ScaleDeathTest, IntegerScaledByNonOneAborts) {
  int32_t v[] = {4};
  EXPECT_DEATH(ScaleInPlace(v, 1, DType::kInt32, 0.5), "floating");
}

TEST(DivideTest, TruncatesTowardZero) {
  int32_t v[] = {-7, 7, -1, 1, 0, std::numeric_limits<int32_t>::min(), -6};
  DivideInPlace(v, 7, DType::kInt32, 2);
  EXPECT_EQ((std::vector<int32_t>{-3, 3, 0, 0, 0, -1073741824, -3}),
            std::vector<int32_t>(v, v + 7));

  int64_t w[] = {-7, 7, std::numeric_limits<int64_t>::min()};
  DivideInPlace(w, 3, DType::kInt64, -2);
  EXPECT_EQ(3, w[0]);
  EXPECT_EQ(-3, w[1]);
  EXPECT_EQ(std::numeric_limits<int64_t>::min() / -2, w[2]);

  int8_t b[] = {-128, -127, 100};
  DivideInPlace(b, 3, DType::kInt8, 3);
  EXPECT_EQ(-42, b[0]);
  EXPECT_EQ(-42, b[1]);
  EXPECT_EQ(33, b[2]);

  uint8_t u[] = {255, 200, 2};
  DivideInPlace(u, 3, DType::kUInt8, 3);
  EXPECT_EQ(85, u[0]);
  EXPECT_EQ(66, u[1]);
  EXPECT_EQ(0, u[2]);
}

TEST(DivideTest, MinusOneWrapsInsteadOfOverflowing) {
  int64_t w[] = {std::numeric_limits<int64_t>::min(), 5};
  DivideInPlace(w, 2, DType::kInt64, -1);
  EXPECT_EQ(std::numeric_limits<int64_t>::min(), w[0]);
  EXPECT_EQ(-5, w[1]);
  int8_t b[] = {-128, -5};
  DivideInPlace(b, 2, DType::kInt8, -1);
  EXPECT_EQ(-128, b[0]);
  EXPECT_EQ(5, b[1]);
}

TEST(DivideTest, LongBufferAndDivisorOne) {
  std::vector<int32_t> v(517);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i) - 258;
  std::vector<int32_t> same = v;
  DivideInPlace(same.data(), same.size(), DType::kInt32, 1);
  EXPECT_EQ(v, same);
  DivideInPlace(v.data(), v.size(), DType::kInt32, 4);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ((static_cast<int32_t>(i) - 258) / 4, v[i]);
}

TEST(DivideTest, FloatingDividesExactly) {
  float f[] = {1.0f, -7.0f};
  DivideInPlace(f, 2, DType::kFloat32, 3);
  EXPECT_EQ(1.0f / 3, f[0]);
  EXPECT_EQ(-7.0f / 3, f[1]);
  uint16_t h[] = {FloatToHalf(6.0f)};
  DivideInPlace(h, 1, DType::kFloat16, 4);
  EXPECT_EQ(1.5f, HalfToFloat(h[0]));
}

// ---- the SIMD 16-bit kernels against the scalar conversions, on every bit pattern --------------

class NarrowSimdTest : public ::testing::TestWithParam<Narrow> {};

TEST_P(NarrowSimdTest, EveryBitPatternMatchesTheScalarKernelsAcrossOps) {
  const Narrow& p = GetParam();
  if (!narrow_simd::Available(p.dtype)) GTEST_SKIP() << "this CPU lacks AVX2 and F16C";
  // Partners: zeros, ones, the smallest subnormal/denormal, the largest finite, infinity, NaN.
  const float partner_values[] = {0.0f, -0.0f, 1.0f, -1.0f, 1e-7f, 6.0e4f, INFINITY, NAN};
  std::vector<uint16_t> acc(65536 * 8), in(65536 * 8);
  for (uint32_t a = 0; a < 65536; ++a)
    for (size_t k = 0; k < 8; ++k) {
      acc[a * 8 + k] = static_cast<uint16_t>(a);
      in[a * 8 + k] = p.from_float(partner_values[k]);
    }
  for (ReduceOp op : kAllOps) {
    std::vector<uint16_t> got = acc;
    ASSERT_EQ(narrow_simd::Combine(p.dtype, got.data(), in.data(), got.size(), op), got.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const uint16_t want = p.from_float(FloatRef(p.to_float(acc[i]), p.to_float(in[i]), op));
      if (std::isnan(p.to_float(want))) {
        ASSERT_TRUE(std::isnan(p.to_float(got[i]))) << std::hex << acc[i] << " " << in[i];
      } else {
        ASSERT_EQ(want, got[i]) << std::hex << acc[i] << " op " << static_cast<int>(op) << " "
                                << in[i];
      }
    }
  }
  std::vector<uint16_t> scaled(65536);
  for (uint32_t a = 0; a < 65536; ++a) scaled[a] = static_cast<uint16_t>(a);
  ASSERT_EQ(narrow_simd::Scale(p.dtype, scaled.data(), scaled.data(), scaled.size(), 0.1f),
            scaled.size());
  for (uint32_t a = 0; a < 65536; ++a) {
    const uint16_t want = p.from_float(p.to_float(static_cast<uint16_t>(a)) * 0.1f);
    if (std::isnan(p.to_float(want))) {
      ASSERT_TRUE(std::isnan(p.to_float(scaled[a]))) << std::hex << a;
    } else {
      ASSERT_EQ(want, scaled[a]) << std::hex << a;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, NarrowSimdTest,
                         ::testing::Values(Narrow{DType::kFloat16, HalfToFloat, FloatToHalf},
                                           Narrow{DType::kBFloat16, BFloat16ToFloat,
                                                  FloatToBFloat16}));

}  // namespace
}  // namespace tutti
