// Process-set semantics across real processes: independence, members-only add, removal, timeouts.
#include <signal.h>

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"
#include "multiproc/in_process_job.h"

namespace tutti::testing {
namespace {

TEST(ProcessSets, StaticSetsRunConcurrentlyWithTheWorld) {
  Tuttid tuttid;
  RankOptions options;
  options.env["TEST_STATIC_SETS"] = "0,1;2,3";
  auto ranks = StartRanks(tuttid, "static_sets", options);
  for (auto& rank : ranks) EXPECT_TRUE(rank->ReadUntil("sets ok", In(120))) << rank->transcript();
  ExpectAllSucceed(ranks);
}

TEST(ProcessSets, DisjointAddedSetsRunConcurrently) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "added_sets", 4);
  for (int r = 0; r < 4; ++r) {
    auto id = ranks[r]->ReadUntil("set ", In(60));
    ASSERT_TRUE(id) << ranks[r]->transcript();
    EXPECT_EQ(*id, r < 2 ? "1" : "2");
    EXPECT_TRUE(ranks[r]->ReadUntil("sets ok", In(120))) << ranks[r]->transcript();
  }
  ExpectAllSucceed(ranks);
}

TEST(ProcessSets, StaticSetsThatDifferAreRefusedOnEveryRank) {
  Tuttid tuttid;
  RankOptions options;
  options.rank_env = [](int r) {
    return std::map<std::string, std::string>{{"TEST_STATIC_SETS", r == 2 ? "0,1" : "0,1;2,3"}};
  };
  auto ranks = StartRanks(tuttid, "basic", options);
  for (auto& rank : ranks) {
    auto line = rank->ReadUntil("fail init: ", In(60));
    ASSERT_TRUE(line) << rank->transcript();
    EXPECT_EQ(*line, "-5 static process sets differ: rank 0 gave [[0, 1], [2, 3]], rank 2 gave [[0, 1]]");
    EXPECT_EQ(rank->Wait(In(30)), 1);
  }
}

TEST(ProcessSets, StaticSetWithRanksOutsideTheWorldIsRefused) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 2;
  options.env["TEST_STATIC_SETS"] = "0,5,7";
  auto ranks = StartRanks(tuttid, "basic", options);
  for (auto& rank : ranks) {
    auto line = rank->ReadUntil("fail init: ", In(60));
    ASSERT_TRUE(line) << rank->transcript();
    EXPECT_EQ(*line, "-1 static process set 1: ranks [5, 7] are outside the world of 2 ranks");
  }
}

// A={0,1,2}, B={1,2,3}: 100 allreduces on B complete on ranks 1-3 while their A request waits for
// rank 0, which submits only after the harness saw those 100 completions.
TEST(ProcessSets, OverlappingSetsProgressIndependently) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "independence", 4);
  for (auto& rank : ranks) ASSERT_TRUE(rank->ReadUntil("ready", In(60))) << rank->transcript();
  for (int r = 1; r < 4; ++r) ASSERT_TRUE(ranks[r]->ReadUntil("B 99", In(240))) << ranks[r]->transcript();
  ranks[0]->WriteLine("go");
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(ranks[r]->ReadUntil("A ok", In(60))) << ranks[r]->transcript();
  ExpectAllSucceed(ranks);
}

// Ranks 2 and 3 are stopped while 0 and 1 add {0,1} and allreduce on it; a non-member's add,
// once it runs, returns the same id at once.
TEST(ProcessSets, AddIsCollectiveOverMembersOnly) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "members_only_add", 4);
  for (auto& rank : ranks) ASSERT_TRUE(rank->ReadUntil("ready", In(60))) << rank->transcript();
  ranks[2]->Signal(SIGSTOP);
  ranks[3]->Signal(SIGSTOP);
  ranks[0]->WriteLine("go");
  ranks[1]->WriteLine("go");
  std::string id;
  for (int r = 0; r < 2; ++r) {
    auto added = ranks[r]->ReadUntil("added ", In(60));
    ASSERT_TRUE(added) << ranks[r]->transcript();
    if (r == 0) id = *added;
    EXPECT_EQ(*added, id);
    ASSERT_TRUE(ranks[r]->ReadUntil("pair ok", In(60))) << ranks[r]->transcript();
  }
  ranks[2]->Signal(SIGCONT);
  ranks[3]->Signal(SIGCONT);
  for (int r = 2; r < 4; ++r) {
    ranks[r]->WriteLine("go");
    auto added = ranks[r]->ReadUntil("added ", In(60));
    ASSERT_TRUE(added) << ranks[r]->transcript();
    EXPECT_EQ(*added, id);
  }
  ranks[0]->WriteLine("go");
  ranks[1]->WriteLine("go");
  for (auto& rank : ranks) EXPECT_TRUE(rank->ReadUntil("done", In(60))) << rank->transcript();
  ExpectAllSucceed(ranks);
}

TEST(ProcessSets, RemovedSetFailsPendingAndLaterRequests) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "remove", 4);
  for (int r = 0; r < 4; ++r) {
    Process& rank = *ranks[r];
    const bool member = r == 0 || r == 2;
    if (!member) {
      auto line = rank.ReadUntil("nonmember ", In(60));
      ASSERT_TRUE(line) << rank.transcript();
      EXPECT_EQ(*line, "-3 rank " + std::to_string(r) + " is not a member of process set 1");
    }
    auto removed = rank.ReadUntil("removed ", In(60));
    ASSERT_TRUE(removed) << rank.transcript();
    EXPECT_EQ(*removed, "1");
    if (r == 0) {
      auto orphan = rank.ReadUntil("orphan ", In(60));
      ASSERT_TRUE(orphan) << rank.transcript();
      EXPECT_EQ(*orphan, "-15 process set 1 was removed while 'orphan' was pending");
    }
    auto after = rank.ReadUntil("after ", In(60));
    ASSERT_TRUE(after) << rank.transcript();
    EXPECT_EQ(*after, "-2 process set 1 was removed");
    auto again = rank.ReadUntil("remove again ", In(60));
    ASSERT_TRUE(again) << rank.transcript();
    EXPECT_EQ(*again, "-2 process set 1 was removed");
    auto readded = rank.ReadUntil("readded ", In(60));
    ASSERT_TRUE(readded) << rank.transcript();
    EXPECT_EQ(*readded, "2");  // ids are never reused
  }
  ExpectAllSucceed(ranks);
}

// In a world of 3, rank 0 adds {0,1} with a 1.5 s timeout while rank 1 never does. The ranks
// live in this process: none of them needs to be killed or stopped.
TEST(ProcessSets, AddTimesOutNamingTheRanksThatNeverCame) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 3);
  int32_t pair[] = {0, 1}, id = -1;
  EXPECT_EQ(tutti_process_set_add(job[0], pair, 2, 1500, &id), TUTTI_ERR_TIMEOUT);
  EXPECT_EQ(std::string(tutti_last_error()),
            "process set 1 add of [0, 1] timed out after 1500 ms: ranks [1] never arrived");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(job.Finalize(r), TUTTI_OK) << "rank " << r;
}

}  // namespace
}  // namespace tutti::testing
