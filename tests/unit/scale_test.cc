// ScaleInPlace, ScaleCopy and DivideInPlace (client/kernels/reduce.h): scale factors on every floating
// dtype against element-wise references, factor one as a bit-exact copy, and integer division
// that truncates toward zero and wraps instead of overflowing.
#include "client/kernels/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "client/kernels/half.h"
#include "unit/random_values.h"

namespace tutti {
namespace {

using test_values::RandomValue;

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

}  // namespace
}  // namespace tutti
