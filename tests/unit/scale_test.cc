// ScaleInPlace, ScaleCopy and DivideInPlace (client/kernels/reduce.h): scale factors on every floating
// dtype against element-wise references, integers scaled as Horovod scales them (in double, cast
// back truncating, saturating where C++ leaves it undefined) on every instruction set, factor one
// as a bit-exact copy, bool refusing any other factor, and integer division that truncates toward
// zero and wraps instead of overflowing.
#include "client/kernels/reduce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "client/kernels/half.h"
#include "client/kernels/reduce_isa.h"
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

// The integer rule written out: (T)(x * factor) in double, truncated toward zero; beyond T's
// range its limit, NaN 0.
template <typename T>
T IntegerReference(T x, double factor) {
  const double y = static_cast<double>(x) * factor;
  if (std::isnan(y)) return 0;
  const double t = std::trunc(y);
  if (t <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (t >= std::ldexp(1.0, std::numeric_limits<T>::digits)) return std::numeric_limits<T>::max();
  return static_cast<T>(t);
}

template <typename T>
class ScaleIntegerTest : public ::testing::Test {};
using IntegerTypes = ::testing::Types<int8_t, uint8_t, int16_t, int32_t, int64_t>;
TYPED_TEST_SUITE(ScaleIntegerTest, IntegerTypes);

TYPED_TEST(ScaleIntegerTest, MatchesTheReferenceInPlaceByCopyAndOnEveryInstructionSet) {
  using T = TypeParam;
  const DType dtype = std::is_same_v<T, int8_t>    ? DType::kInt8
                      : std::is_same_v<T, uint8_t> ? DType::kUInt8
                      : std::is_same_v<T, int16_t> ? DType::kInt16
                      : std::is_same_v<T, int32_t> ? DType::kInt32
                                                   : DType::kInt64;
  std::mt19937_64 rng(8);
  std::vector<T> input(301);
  for (auto& v : input) v = RandomValue<T>(rng);
  for (double factor : {0.5, 1.0 / 3, -2.0, 1.5, 1e-3, 0.0, -1.0, 1e30, -1e30, std::nan("")}) {
    std::vector<T> in_place = input, copied(input.size()), baseline(input.size()), avx2(input.size());
    ScaleInPlace(in_place.data(), in_place.size(), dtype, factor);
    ScaleCopy(copied.data(), input.data(), input.size(), dtype, factor);
    ASSERT_TRUE(reduce_isa::ScalePlainWith(reduce_isa::Isa::kBaseline, baseline.data(), input.data(),
                                           input.size(), dtype, factor));
    const bool have_avx2 = reduce_isa::Available(reduce_isa::Isa::kAvx2);
    if (have_avx2) {
      ASSERT_TRUE(reduce_isa::ScalePlainWith(reduce_isa::Isa::kAvx2, avx2.data(), input.data(),
                                             input.size(), dtype, factor));
    }
    for (size_t i = 0; i < input.size(); ++i) {
      const T want = IntegerReference(input[i], factor);
      ASSERT_EQ(+want, +in_place[i]) << "factor " << factor << " x " << +input[i];
      ASSERT_EQ(+want, +copied[i]) << "factor " << factor << " x " << +input[i];
      ASSERT_EQ(+want, +baseline[i]) << "factor " << factor << " x " << +input[i];
      if (have_avx2) {
        ASSERT_EQ(+want, +avx2[i]) << "factor " << factor << " x " << +input[i];
      }
    }
  }
}

// Horovod's ScaleBuffer: output[i] = scale_factor * input[i], a double cast back to T.
TEST(ScaleTest, IntegersTruncateTowardZeroLikeHorovod) {
  int32_t v[] = {1, 2, 3, -3, -1};
  ScaleInPlace(v, 5, DType::kInt32, 0.5);
  EXPECT_EQ((std::vector<int32_t>{0, 1, 1, -1, 0}), std::vector<int32_t>(v, v + 5));
  int16_t h[] = {7, -7, 1000};
  ScaleInPlace(h, 3, DType::kInt16, 1.0 / 3);
  EXPECT_EQ((std::vector<int16_t>{2, -2, 333}), std::vector<int16_t>(h, h + 3));
  // In double: 2^53 + 3 is not a double (it becomes 2^53 + 4), so half of it is 2^52 + 2.
  int64_t big[] = {(int64_t{1} << 53) + 3};
  ScaleInPlace(big, 1, DType::kInt64, 0.5);
  EXPECT_EQ((int64_t{1} << 52) + 2, big[0]);
}

TEST(ScaleTest, IntegersBeyondTheirRangeSaturateAndNaNGivesZero) {
  int8_t b[] = {100, -100, 3};
  ScaleInPlace(b, 3, DType::kInt8, 2.0);
  EXPECT_EQ((std::vector<int8_t>{127, -128, 6}), std::vector<int8_t>(b, b + 3));
  uint8_t u[] = {5, 200};
  ScaleInPlace(u, 2, DType::kUInt8, -1.0);
  EXPECT_EQ((std::vector<uint8_t>{0, 0}), std::vector<uint8_t>(u, u + 2));
  int64_t w[] = {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 9};
  ScaleInPlace(w, 3, DType::kInt64, 2.0);
  EXPECT_EQ(std::numeric_limits<int64_t>::max(), w[0]);
  EXPECT_EQ(std::numeric_limits<int64_t>::min(), w[1]);
  EXPECT_EQ(18, w[2]);
  int32_t n[] = {5, -5};
  ScaleInPlace(n, 2, DType::kInt32, std::nan(""));
  EXPECT_EQ(0, n[0]);
  EXPECT_EQ(0, n[1]);
}

TEST(ScaleTest, FactorOneIsAPlainCopyForEveryDType) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                      DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64, DType::kInt16,
                      DType::kBool}) {
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

// ScaleReduce is ScaleCopy then ReduceInto, bit for bit, across its blocks (several here, and a
// short last one) and with own == dst.
TEST(ScaleReduceTest, EqualsScaleCopyThenReduceIntoForEveryDTypeAndOp) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                      DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64, DType::kInt16,
                      DType::kBool}) {
    const size_t count = (100 << 10) / ElementSize(dtype) + 3, bytes = count * ElementSize(dtype);
    std::vector<uint8_t> own(bytes), in(bytes);
    for (size_t i = 0; i < bytes; ++i) {
      own[i] = static_cast<uint8_t>(i * 37 + 11);
      in[i] = static_cast<uint8_t>(i * 101 + 7);
    }
    if (dtype == DType::kFloat16 || dtype == DType::kBFloat16)  // keep clear of NaN payloads
      for (size_t i = 1; i < bytes; i += 2) own[i] &= 0x3f, in[i] &= 0x3f;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct})
      for (double factor : {1.0, 0.3}) {
        if (dtype == DType::kBool && factor != 1.0) continue;
        std::vector<uint8_t> want(bytes), got(bytes, 0xA5);
        ScaleCopy(want.data(), own.data(), count, dtype, factor);
        ReduceInto(want.data(), in.data(), count, dtype, op);
        ScaleReduce(got.data(), own.data(), in.data(), count, dtype, op, factor);
        EXPECT_EQ(want, got) << DTypeName(static_cast<int32_t>(dtype)) << " factor " << factor;
        std::vector<uint8_t> aliased = own;
        ScaleReduce(aliased.data(), aliased.data(), in.data(), count, dtype, op, factor);
        EXPECT_EQ(want, aliased) << DTypeName(static_cast<int32_t>(dtype)) << " factor " << factor;
      }
  }
}

// Submission refuses these (client/submission_checks.cc): reaching the kernel is a bug.
TEST(ScaleDeathTest, BoolScaledByNonOneOrAveragedAborts) {
  uint8_t v[] = {1};
  EXPECT_DEATH(ScaleInPlace(v, 1, DType::kBool, 0.5), "bool buffers cannot be scaled");
  EXPECT_DEATH(DivideInPlace(v, 1, DType::kBool, 2), "bool buffers have no average");
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

  int16_t h[] = {-32768, 32767, -5};
  DivideInPlace(h, 3, DType::kInt16, 4);
  EXPECT_EQ(-8192, h[0]);
  EXPECT_EQ(8191, h[1]);
  EXPECT_EQ(-1, h[2]);
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
