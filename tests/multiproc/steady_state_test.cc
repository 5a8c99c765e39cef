// The members' fast path (docs/steady-state.md) across real processes and a real tuttid: what
// tuttid sees of a steady state (nothing after the second step), a randomized schedule checked on
// every rank, and the ways out (a join, a rank killed mid-round).
#include <signal.h>

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {


// Done when of docs/steady-state.md: 1,000 steps on the world and on a pair set, and tuttid
// received no announcement for either after step 2.
void ExpectSilentCoordinator(int size) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "steady_state", size, {"1000"});
  for (int r = 0; r < size; ++r) {
    auto early = ranks[r]->ReadUntil("counters early ", In(240));
    ASSERT_TRUE(early) << ranks[r]->transcript();
    auto late = ranks[r]->ReadUntil("counters late ", In(600));
    ASSERT_TRUE(late) << ranks[r]->transcript();
    const auto e = Fields(*early), l = Fields(*late);
    EXPECT_EQ(l.at("world"), e.at("world")) << "rank " << r << ": " << *early << " / " << *late;
    EXPECT_EQ(l.at("pair"), e.at("pair")) << "rank " << r << ": " << *early << " / " << *late;
    EXPECT_EQ(l.at("exits"), e.at("exits")) << *late;
    EXPECT_GE(l.at("grants"), r < 2 ? 2 : 1) << *late;
    // Every step after the grant ran through rounds: at least one per step and set.
    EXPECT_GE(l.at("rounds") - e.at("rounds"), r < 2 ? 2 * 997 : 997) << *late;
    EXPECT_TRUE(ranks[r]->ReadUntil("steady ok", In(120))) << ranks[r]->transcript();
  }
  ExpectAllSucceed(ranks);
}

TEST(SteadyState, TuttidHearsNothingAfterTheSecondStepOnTwoRanks) { ExpectSilentCoordinator(2); }
TEST(SteadyState, TuttidHearsNothingAfterTheSecondStepOnFourRanks) { ExpectSilentCoordinator(4); }

// Cached, new and changed tensors, one-rank shape changes (MISMATCH everywhere), set changes,
// each rank submitting in its own order: every result checked on every rank. Several seeds.
TEST(SteadyState, RandomizedSchedulesRunTheSameSequenceOnEveryMember) {
  for (const char* seed : {"1", "7", "42"}) {
    Tuttid tuttid;
    auto ranks = StartRanks(tuttid, "fast_path_schedule", 3, {seed, "50"});
    for (auto& rank : ranks) {
      auto ok = rank->ReadUntil("schedule ok", In(300));
      ASSERT_TRUE(ok) << "seed " << seed << "\n" << rank->transcript();
      EXPECT_GT(Fields(*ok).at("rounds"), 0) << *ok;
    }
    ExpectAllSucceed(ranks);
  }
}

// A shape change on one rank while the others hold the tensor cached: ResponseCache.ShapeChange
// (fusion_test.cc) changes it on the fast path (its third step) and expects the same MISMATCH on
// every rank.

TEST(SteadyState, AJoinEndsTheFastPathAndTheJoinedRankContributesNothing) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "fast_path_join", 3);
  for (auto& rank : ranks) {
    auto line = rank->ReadUntil("join last=", In(120));
    ASSERT_TRUE(line) << rank->transcript();
    EXPECT_NE(*line, "2") << "the last rank joined first";
  }
  ExpectAllSucceed(ranks);
}

}  // namespace
}  // namespace tutti::testing
