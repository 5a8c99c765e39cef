// Gradient compression's pure parts (client/compress/): the 16-bit codecs round to nearest even
// and decode exactly, top-k picks by magnitude with ties to the lower index and keeps the rest
// as error, the sparse sum, and the adaptive policy's revisits (docs/compression.md).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "client/compress/adaptive_policy.h"
#include "client/compress/codecs.h"
#include "client/kernels/half.h"

namespace tutti::client::compress {
namespace {

TEST(Codecs, SixteenBitsRoundToNearestEvenAndAccumulateInFloat32) {
  const std::vector<float> in = {1.0f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65504.0f, -0.1f};
  std::vector<uint16_t> half(in.size()), bf16(in.size());
  Encode(Kind::kFp16, in.data(), half.data(), in.size());
  Encode(Kind::kBf16, in.data(), bf16.data(), in.size());
  std::vector<float> back(in.size());
  Decode(Kind::kFp16, half.data(), back.data(), in.size());
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 1.0f);                 // halfway: to the even neighbour below
  EXPECT_EQ(back[2], 1.0f + 4.0f / 2048);   // halfway: to the even neighbour above
  EXPECT_EQ(back[3], 65504.0f);
  Decode(Kind::kBf16, bf16.data(), back.data(), in.size());
  EXPECT_EQ(back[4], -0.10009765625f);
  std::vector<float> acc = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
  DecodeAdd(Kind::kFp16, half.data(), acc.data(), acc.size());
  EXPECT_EQ(acc[0], 1.5f);
  EXPECT_EQ(acc[3], 65504.5f);  // the sum is float32: beyond float16's range
}

TEST(Codecs, TheVectorisedPathGivesTheScalarConversionsBits) {
  // Normal, subnormal (in float16), overflowing and halfway values, more than 8 of them so the
  // SIMD kernels (where the CPU has them) take the first multiple of 8 and the scalar loop the tail.
  std::vector<float> in;
  for (int i = 0; i < 1003; ++i)
    in.push_back(static_cast<float>(i - 500) * (i % 3 == 0 ? 1e-6f : i % 3 == 1 ? 0.37f : 300.1f));
  in.push_back(70000.0f);
  in.push_back(1.0f + 1.0f / 2048);
  for (Kind kind : {Kind::kFp16, Kind::kBf16}) {
    std::vector<uint16_t> encoded(in.size());
    Encode(kind, in.data(), encoded.data(), in.size());
    std::vector<float> decoded(in.size()), summed(in.size(), 1.0f);
    Decode(kind, encoded.data(), decoded.data(), in.size());
    DecodeAdd(kind, encoded.data(), summed.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t scalar = kind == Kind::kFp16 ? FloatToHalf(in[i]) : FloatToBFloat16(in[i]);
      ASSERT_EQ(encoded[i], scalar) << KindName(kind) << " element " << i;
      const float wide = kind == Kind::kFp16 ? HalfToFloat(scalar) : BFloat16ToFloat(scalar);
      ASSERT_EQ(decoded[i], wide) << KindName(kind) << " element " << i;
      ASSERT_EQ(summed[i], 1.0f + wide) << KindName(kind) << " element " << i;
    }
  }
}

TEST(TopK, PicksTheLargestMagnitudesTiesToTheLowerIndexAndKeepsTheRest) {
  std::vector<float> corrected = {0.5f, -3.0f, 2.0f, 3.0f, -2.0f, 0.0f};
  std::vector<SparseEntry> picked(3);
  SelectTopK(corrected.data(), corrected.size(), 3, picked.data());
  // |-3| = |3| first (index 1 before 3), then |2| at index 2 before |-2| at index 4.
  ASSERT_EQ(picked[0].index, 1u);
  ASSERT_EQ(picked[1].index, 2u);
  ASSERT_EQ(picked[2].index, 3u);
  EXPECT_EQ(picked[0].value, -3.0f);
  EXPECT_EQ(picked[1].value, 2.0f);
  EXPECT_EQ(picked[2].value, 3.0f);
  EXPECT_EQ(corrected, (std::vector<float>{0.5f, 0, 0, 0, -2.0f, 0.0f}));
  std::vector<float> dense(6, 0.0f);
  ScatterAdd(picked.data(), picked.size(), dense.data());
  ScatterAdd(picked.data(), 1, dense.data());
  EXPECT_EQ(dense, (std::vector<float>{0, -6.0f, 2.0f, 3.0f, 0, 0}));
}

TEST(TopK, CountIsAtLeastOneAndAtMostAll) {
  EXPECT_EQ(TopKCount(0, 0.5), 0u);
  EXPECT_EQ(TopKCount(1000, 0.01), 10u);
  EXPECT_EQ(TopKCount(1001, 0.01), 11u);
  EXPECT_EQ(TopKCount(10, 1e-9), 1u);
  EXPECT_EQ(TopKCount(10, 1.0), 10u);
}

TEST(AdaptivePolicy, CompressesLargeStableTensorsFromTheFirstRevisit) {
  const AdaptiveSettings settings{Kind::kBf16, 3, 1000, 0.1};
  TensorPolicy large, small, swinging;
  std::vector<Kind> seen;
  for (int step = 0; step < 9; ++step) {
    std::optional<Decision> revisit;
    seen.push_back(large.Choose(settings, 4000, &revisit));
    EXPECT_EQ(revisit.has_value(), step == 3 || step == 6) << step;
    if (revisit) EXPECT_EQ(revisit->allreduce, static_cast<uint64_t>(step));
    large.Observe(settings, 10.0 + 0.01 * step);
    EXPECT_EQ(small.Choose(settings, 400, &revisit), Kind::kNone);
    small.Observe(settings, 10.0);
    EXPECT_EQ(swinging.Choose(settings, 4000, &revisit), Kind::kNone);
    // 5, 1, 5, ...: the first and last of each interval agree, the spread does not.
    swinging.Observe(settings, step % 2 ? 1.0 : 5.0);
  }
  EXPECT_EQ(seen, (std::vector<Kind>{Kind::kNone, Kind::kNone, Kind::kNone, Kind::kBf16,
                                     Kind::kBf16, Kind::kBf16, Kind::kBf16, Kind::kBf16,
                                     Kind::kBf16}));
}

TEST(AdaptivePolicy, RelativeChangeAndNorm) {
  EXPECT_EQ(Spread(0, 0), 0);
  EXPECT_DOUBLE_EQ(Spread(2, 4), 0.5);
  EXPECT_EQ(Spread(3, 3), 0);
  const float values[] = {3, 4};
  EXPECT_EQ(Norm(values, 2), 5.0);
}

}  // namespace
}  // namespace tutti::client::compress
