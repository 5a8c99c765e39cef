// ReduceInto and the reduction kernels (client/kernels/reduce.h, reduce_isa.h, reduce_narrow_simd.h)
// against scalar references: every plain dtype and op on random data for each instruction set
// this CPU has, bool as "or" and "and" on any bytes, the 16-bit formats through float32,
// hand-picked wrap-around, NaN and rounding cases, FillIdentity as every op's identity, and the
// SIMD 16-bit kernels on every bit pattern.
#include "client/kernels/reduce.h"
#include "client/kernels/reduce_isa.h"
#include "client/kernels/reduce_narrow_simd.h"

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

#include "client/kernels/half.h"
#include "unit/random_values.h"

namespace tutti {
namespace {

using test_values::RandomValue;

const ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                            ReduceOp::kProduct};
// Straddles the kernels' 64-byte blocks for every element size, plus a few hundred elements.
const size_t kLengths[] = {0, 1, 7, 33, 64, 65, 300, 517};

// ---- ReduceInto against a scalar reference ------------------------------------------------------

template <typename T>
struct Elem {
  static constexpr DType kDType = std::is_same_v<T, float>     ? DType::kFloat32
                                  : std::is_same_v<T, double>  ? DType::kFloat64
                                  : std::is_same_v<T, int8_t>  ? DType::kInt8
                                  : std::is_same_v<T, uint8_t> ? DType::kUInt8
                                  : std::is_same_v<T, int16_t> ? DType::kInt16
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
using PlainTypes = ::testing::Types<float, double, int8_t, uint8_t, int16_t, int32_t, int64_t>;
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

// bool on random bytes (mostly 0 and 1, also 2, 0x80, 0xff and others): sum and max are "or",
// min and product "and", average combines like sum; every result byte is 0 or 1.
TEST(ReduceBoolTest, OrAndAndOnAnyNonzeroByteGiveZeroOrOne) {
  std::mt19937_64 rng(17);
  auto byte = [&rng]() -> uint8_t {
    switch (rng() % 6) {
      case 0: case 1: return 0;
      case 2: case 3: return 1;
      default: return static_cast<uint8_t>(rng());
    }
  };
  enum Kernel { kDispatched, kBaseline, kAvx2 };
  for (Kernel kernel : {kDispatched, kBaseline, kAvx2}) {
    if (kernel == kAvx2 && !reduce_isa::Available(reduce_isa::Isa::kAvx2)) continue;
    for (ReduceOp op : kAllOps) {
      const bool logical_and = op == ReduceOp::kMin || op == ReduceOp::kProduct;
      for (size_t n : kLengths) {
        std::vector<uint8_t> acc(n), in(n), expected(n);
        for (size_t i = 0; i < n; ++i) {
          acc[i] = byte();
          in[i] = byte();
          expected[i] = logical_and ? (acc[i] != 0 && in[i] != 0) : (acc[i] != 0 || in[i] != 0);
        }
        if (kernel == kDispatched)
          ReduceInto(acc.data(), in.data(), n, DType::kBool, op);
        else
          ASSERT_TRUE(reduce_isa::ReducePlainWith(
              kernel == kAvx2 ? reduce_isa::Isa::kAvx2 : reduce_isa::Isa::kBaseline, acc.data(),
              in.data(), n, DType::kBool, op));
        ASSERT_EQ(expected, acc) << "kernel " << kernel << " op " << static_cast<int>(op) << " n " << n;
      }
    }
  }
}

TEST(ReduceBoolTest, AndOfTwoNonzeroBytesIsTrueThoughTheirBitsShareNone) {
  uint8_t acc[] = {2, 0x80, 0, 1};
  const uint8_t in[] = {1, 0x7f, 5, 0};
  ReduceInto(acc, in, 4, DType::kBool, ReduceOp::kProduct);
  EXPECT_EQ((std::vector<uint8_t>{1, 1, 0, 0}), std::vector<uint8_t>(acc, acc + 4));
  uint8_t acc_or[] = {2, 0, 0, 0xff};
  const uint8_t in_or[] = {0, 0, 3, 0xff};
  ReduceInto(acc_or, in_or, 4, DType::kBool, ReduceOp::kSum);
  EXPECT_EQ((std::vector<uint8_t>{1, 0, 1, 1}), std::vector<uint8_t>(acc_or, acc_or + 4));
}

TEST(ReduceBoolTest, NormalizeBoolMakesEveryNonzeroByteOne) {
  std::vector<uint8_t> bytes(300);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  NormalizeBool(bytes.data(), bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(static_cast<uint8_t>(i * 7) != 0, bytes[i]) << i;
  NormalizeBool(nullptr, 0);
}

// What a joined member contributes must leave every other member's values as they are.
template <typename T>
void CheckIdentity(DType dtype, const std::vector<T>& values) {
  for (ReduceOp op : kAllOps) {
    std::vector<T> acc = values, identity(values.size());
    FillIdentity(identity.data(), identity.size(), dtype, op);
    ReduceInto(acc.data(), identity.data(), acc.size(), dtype, op);
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_TRUE(SameElement(values[i], acc[i]))
          << DTypeName(static_cast<int32_t>(dtype)) << " op " << static_cast<int>(op) << " i " << i;
  }
}

TEST(FillIdentityTest, IsTheIdentityOfEveryOpForEveryDType) {
  const float inf = std::numeric_limits<float>::infinity();
  CheckIdentity<float>(DType::kFloat32, {-3.5f, 0.0f, 7.0f, inf, -inf, NAN});
  CheckIdentity<double>(DType::kFloat64, {-3.5, 0.0, 7.0, 1e300, NAN});
  CheckIdentity<uint16_t>(DType::kFloat16, {FloatToHalf(-2.0f), FloatToHalf(0.5f), 0x7c00, 0x0000});
  CheckIdentity<uint16_t>(DType::kBFloat16, {FloatToBFloat16(-2.0f), FloatToBFloat16(3.0f), 0x0000});
  CheckIdentity<int8_t>(DType::kInt8, {-128, -1, 0, 5, 127});
  CheckIdentity<uint8_t>(DType::kUInt8, {0, 1, 200, 255});
  CheckIdentity<int16_t>(DType::kInt16, {-32768, -300, 0, 1, 32767});
  CheckIdentity<int32_t>(DType::kInt32, {std::numeric_limits<int32_t>::min(), -1, 0, 9, std::numeric_limits<int32_t>::max()});
  CheckIdentity<int64_t>(DType::kInt64, {std::numeric_limits<int64_t>::min(), 0, 3, std::numeric_limits<int64_t>::max()});
  CheckIdentity<uint8_t>(DType::kBool, {0, 1});
  uint8_t joined[2];
  FillIdentity(joined, 2, DType::kBool, ReduceOp::kMax);
  EXPECT_EQ(0, joined[0]);
  FillIdentity(joined, 2, DType::kBool, ReduceOp::kMin);
  EXPECT_EQ(1, joined[1]);
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

TEST(ReduceTest, Int16SumWrapsAndMinIsSigned) {
  int16_t acc[] = {32767, -32768, -2};
  const int16_t in[] = {1, -1, 3};
  ReduceInto(acc, in, 3, DType::kInt16, ReduceOp::kSum);
  EXPECT_EQ((std::vector<int16_t>{-32768, 32767, 1}), std::vector<int16_t>(acc, acc + 3));
  int16_t lo[] = {-5, 300};
  const int16_t other[] = {4, -300};
  ReduceInto(lo, other, 2, DType::kInt16, ReduceOp::kMin);
  EXPECT_EQ(-5, lo[0]);
  EXPECT_EQ(-300, lo[1]);
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
