// What the status page shows of a process set (server/core/set_stats.h): figures by kind, cache
// and fusion rates, latency quantiles from buckets, and stragglers by rank, fed by a real
// negotiator.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/core/negotiator.h"
#include "server/core/set_stats.h"
#include "unit/test_specs.h"

namespace tutti::server {
namespace {

TEST(SetStats, CountsKindsCacheHitsAndFusion) {
  SetStats stats;
  stats.Negotiated(wire::COLLECTIVE_ALLREDUCE, 16, 0.001, /*cached=*/true);
  stats.Negotiated(wire::COLLECTIVE_ALLREDUCE, 16, 0.001, /*cached=*/false);
  stats.Negotiated(wire::COLLECTIVE_BROADCAST, 8, 0.002, /*cached=*/false);
  stats.Released(1);
  stats.Released(3);
  const nlohmann::json j = stats.ToJson();
  EXPECT_EQ(j["negotiations"], 3);
  EXPECT_EQ(j["bytes"], 40);
  EXPECT_EQ(j["cached"], 1);
  EXPECT_DOUBLE_EQ(j["cache_hit_rate"].get<double>(), 1.0 / 3);
  EXPECT_EQ(j["by_kind"], nlohmann::json::parse(R"({"allreduce": {"negotiations": 2, "bytes": 32},
                                      "broadcast": {"negotiations": 1, "bytes": 8}})"));
  EXPECT_EQ(j["fusion"]["collectives"], 2);
  EXPECT_EQ(j["fusion"]["tensors"], 4);
  EXPECT_EQ(j["fusion"]["fused_tensors"], 3);
  EXPECT_DOUBLE_EQ(j["fusion"]["fusion_rate"].get<double>(), 0.75);
}

TEST(SetStats, QuantilesAreBucketBoundsNeverAboveTheLargestObservation) {
  SetStats::Seconds s;
  EXPECT_EQ(s.Quantile(0.5), 0);
  s.Observe(0.0005);
  EXPECT_DOUBLE_EQ(s.Quantile(0.5), 0.0005);  // bucket 1 ms, capped by the max
  for (int i = 0; i < 98; ++i) s.Observe(0.002);
  s.Observe(20);  // above the last bound
  EXPECT_DOUBLE_EQ(s.Quantile(0.5), 3e-3);
  EXPECT_DOUBLE_EQ(s.Quantile(0.99), 3e-3);
  EXPECT_DOUBLE_EQ(s.Quantile(1.0), 20);
  EXPECT_EQ(s.count(), 100u);
  EXPECT_DOUBLE_EQ(s.max(), 20);
}

TEST(SetStats, StragglersComeWorstFirstByTimesLastThenByLag) {
  SetStats stats;
  for (int i = 0; i < 3; ++i) stats.Straggled(2, 0.1);
  for (int i = 0; i < 3; ++i) stats.Straggled(1, 0.2);
  stats.Straggled(0, 0.5);
  const nlohmann::json s = stats.ToJson()["stragglers"];
  EXPECT_EQ(s["observed"], 7);
  EXPECT_EQ(s["ranks_ever_last"], 3);
  ASSERT_EQ(s["ranks"].size(), 3u);
  EXPECT_EQ(s["ranks"][0]["rank"], 1);
  EXPECT_EQ(s["ranks"][1]["rank"], 2);
  EXPECT_EQ(s["ranks"][2]["rank"], 0);
  EXPECT_EQ(s["ranks"][0]["last"], 3);
  EXPECT_NEAR(s["ranks"][0]["lag_total_seconds"].get<double>(), 0.6, 1e-12);
  EXPECT_NEAR(s["ranks"][0]["lag_mean_seconds"].get<double>(), 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(s["ranks"][2]["lag_max_seconds"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["ranks"][0]["share"].get<double>(), 3.0 / 7);
}

TEST(SetStats, ListsOnlyTheWorstStragglersButCountsEveryOne) {
  SetStats stats;
  for (int32_t rank = 0; rank < 100; ++rank)
    for (int32_t i = 0; i <= rank % 7; ++i) stats.Straggled(rank, 0.001);
  const nlohmann::json s = stats.ToJson()["stragglers"];
  EXPECT_EQ(s["ranks_ever_last"], 100);
  ASSERT_EQ(s["ranks"].size(), SetStats::kShownStragglers);
  EXPECT_EQ(s["ranks"][0]["last"], 7);
  EXPECT_EQ(s["ranks"][0]["rank"], 6);  // ties by lag, then by rank
  EXPECT_EQ(s["ranks"][SetStats::kShownStragglers - 1]["last"], 5);
}

TEST(SetStats, TheNegotiatorNamesTheMemberThatCompletedEachTensor) {
  Negotiator n(0, {0, 1, 2});
  SetStats stats;
  n.set_stats(&stats);
  std::vector<wire::Response> ready;
  for (int32_t rank : {0, 1, 2}) ASSERT_TRUE(n.Announce(rank, Spec("a", 4), &ready).ok());
  for (int32_t rank : {2, 0, 1}) ASSERT_TRUE(n.Announce(rank, Spec("b", 4), &ready).ok());
  for (int32_t rank : {1, 0, 2}) ASSERT_TRUE(n.Announce(rank, Spec("c", 4), &ready).ok());
  ASSERT_EQ(ready.size(), 3u);
  const nlohmann::json j = stats.ToJson();
  EXPECT_EQ(j["negotiations"], 3);
  EXPECT_EQ(j["bytes"], 48);
  EXPECT_EQ(j["negotiation_seconds"]["count"], 3);
  const nlohmann::json& s = j["stragglers"];
  EXPECT_EQ(s["observed"], 3);
  ASSERT_EQ(s["ranks"].size(), 2u);
  EXPECT_EQ(s["ranks"][0]["rank"], 2);
  EXPECT_EQ(s["ranks"][0]["last"], 2);
  EXPECT_EQ(s["ranks"][1]["rank"], 1);
}

TEST(SetStats, NobodyStragglesInASetOfOneOrBehindAMemberThatJoined) {
  Negotiator alone(1, {3});
  SetStats stats;
  alone.set_stats(&stats);
  std::vector<wire::Response> ready;
  ASSERT_TRUE(alone.Announce(3, Spec("a", 4), &ready).ok());
  EXPECT_EQ(stats.ToJson()["negotiations"], 1);
  EXPECT_EQ(stats.ToJson()["stragglers"]["observed"], 0);

  Negotiator n(0, {0, 1});
  SetStats joined;
  n.set_stats(&joined);
  int32_t last = -1;
  ASSERT_TRUE(n.Announce(0, Spec("g", 4), &ready).ok());
  EXPECT_FALSE(n.Join(1, &ready, &last));  // releases 'g' without rank 1
  EXPECT_EQ(joined.ToJson()["negotiations"], 1);
  EXPECT_EQ(joined.ToJson()["stragglers"]["observed"], 0);
}

}  // namespace
}  // namespace tutti::server
