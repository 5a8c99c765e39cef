// The 16-bit float conversions (client/kernels/half.h) on every bit pattern and on random floats, against
// independent references computed in double: float16 and bfloat16 decoding, rounding and round
// trips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "client/kernels/half.h"

namespace tutti {
namespace {

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

}  // namespace
}  // namespace tutti
