// Broadcast, allgather, reducescatter, alltoall and barrier across real processes: every dtype,
// sizes 0, 1 and uneven, on the world, a proper subset and two disjoint sets at once. Each rank
// checks its results exactly against a reference; members of a set must print the same digest of
// what they all received (broadcast and allgather results).
#include <signal.h>

#include <map>
#include <set>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {

// Runs the "collectives" scenario on `lists`; `set_of[r]` groups ranks whose digests must agree
// (-1: not a member).
void RunCollectives(const std::string& lists, const std::vector<int>& set_of, bool large = false) {
  Tuttid tuttid;
  std::vector<std::string> args = {lists};
  if (large) args.push_back("large");
  auto ranks = StartRanks(tuttid, "collectives", 4, args);
  std::map<int, std::set<std::string>> digests;
  for (int r = 0; r < 4; ++r) {
    if (set_of[r] < 0) {
      EXPECT_TRUE(ranks[r]->ReadUntil("not a member", In(60))) << ranks[r]->transcript();
      continue;
    }
    EXPECT_TRUE(ranks[r]->ReadUntil("collectives ok", In(240))) << ranks[r]->transcript();
    EXPECT_TRUE(ranks[r]->ReadUntil("barrier ok", In(60))) << ranks[r]->transcript();
    if (large) {
      EXPECT_TRUE(ranks[r]->ReadUntil("large ok", In(240))) << ranks[r]->transcript();
    }
    auto digest = ranks[r]->ReadUntil("digest ", In(60));
    ASSERT_TRUE(digest) << ranks[r]->transcript();
    digests[set_of[r]].insert(*digest);
  }
  ExpectAllSucceed(ranks, 240);
  for (const auto& [set, distinct] : digests)
    EXPECT_EQ(distinct.size(), 1u) << "members of set " << set << " received different bytes";
}

TEST(Collectives, World) { RunCollectives("0,1,2,3", {0, 0, 0, 0}); }
TEST(Collectives, ProperSubset) { RunCollectives("0,2,3", {0, -1, 0, 0}); }
TEST(Collectives, TwoDisjointSetsAtOnce) { RunCollectives("0,1|2,3", {0, 0, 1, 1}); }

TEST(Collectives, OverlappingSetsInOppositeOrders) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "interleave", 4);
  for (auto& rank : ranks) EXPECT_TRUE(rank->ReadUntil("interleave ok", In(120))) << rank->transcript();
  ExpectAllSucceed(ranks);
}

// Each validation rule, on every member (S = {0,1,2}), with exact statuses and messages.
TEST(Collectives, ValidationErrorsOnEveryMember) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "collective_errors", 4);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"outside-root", "-1 broadcast 'b': root rank 3 is not a member of process set 1"},
      {"roots", "-5 mismatched 'r' on process set 1: rank 0 sent broadcast float32[4] root=0, "
                "rank 2 sent broadcast float32[4] root=1"},
      {"gather-dims", "-5 mismatched 'g' on process set 1: rank 0 sent allgather float32[2, 3], "
                      "rank 2 sent allgather float32[2, 4]"},
      {"scatter-op", "-5 mismatched 'rs' on process set 1: rank 0 sent reducescatter float32[3] "
                     "op=sum, rank 2 sent reducescatter float32[3] op=max"},
      {"scatter-scalar", "-1 reducescatter 'rs0': the input needs at least one dimension (its rows)"},
      {"splits-equal", "-1 alltoall 'a': 7 rows do not divide among 3 ranks; give splits"},
      {"alltoall-dtype", "-5 mismatched 't' on process set 1: rank 0 sent alltoall float32[3, 2], "
                         "rank 2 sent alltoall int32[3, 2]"},
      {"after", "-5 mismatched 'g' on process set 1: rank 0 sent allgather float32[2, 3], "
                "rank 2 sent allgather float32[2, 4]"},
  };
  for (int r = 0; r < 3; ++r) {
    for (const auto& [label, message] : expected) {
      if (label == "splits-equal" && r == 1) {
        auto sum = ranks[r]->ReadUntil("err splits-sum ", In(60));
        ASSERT_TRUE(sum) << ranks[r]->transcript();
        EXPECT_EQ(*sum, "-1 alltoall 'a': splits add up to 5 rows, the input has 6");
        auto count = ranks[r]->ReadUntil("err splits-count ", In(60));
        ASSERT_TRUE(count) << ranks[r]->transcript();
        EXPECT_EQ(*count, "-1 alltoall 'a': 2 splits for a set of 3 ranks");
      }
      auto line = ranks[r]->ReadUntil("err " + label + " ", In(60));
      ASSERT_TRUE(line) << label << "\n" << ranks[r]->transcript();
      EXPECT_EQ(*line, message) << "rank " << r;
    }
    EXPECT_TRUE(ranks[r]->ReadUntil("errors done", In(60))) << ranks[r]->transcript();
  }
  ExpectAllSucceed(ranks);
}

// Over shared-memory streams (one host) and over TCP streams (as between hosts).
class PointToPointOver : public ::testing::TestWithParam<std::string> {};

TEST_P(PointToPointOver, PipelineStagesPassTensorsWhileEachAllreduces) {
  Tuttid tuttid;
  RankOptions options;
  options.env["TUTTI_TRANSPORT"] = GetParam();
  auto ranks = StartRanks(tuttid, "pipeline", options);
  for (auto& rank : ranks) EXPECT_TRUE(rank->ReadUntil("pipeline ok", In(120))) << rank->transcript();
  ExpectAllSucceed(ranks);
}

INSTANTIATE_TEST_SUITE_P(Transports, PointToPointOver, ::testing::Values("shm", "tcp"));

TEST(PointToPoint, ArgumentErrorsSizeMismatchAndLostSender) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 3;
  auto ranks = StartRanks(tuttid, "p2p_errors", options);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"non-member", "-1 send: destination rank 2 is not a member of process set 1"},
      {"self", "-1 recv: source is this rank itself"},
      {"tag", "-1 send: negative tag -3"},
      {"size", "-5 recv from rank 1 (tag 7) on process set 0: expected 8 bytes, the sender sent 16"},
  };
  for (const auto& [label, message] : expected) {
    auto line = ranks[0]->ReadUntil("err " + label + " ", In(60));
    ASSERT_TRUE(line) << ranks[0]->transcript();
    EXPECT_EQ(*line, message);
  }
  ASSERT_TRUE(ranks[0]->ReadUntil("posted", In(60))) << ranks[0]->transcript();
  ranks[1]->Signal(SIGKILL);
  const auto hit = Clock::now();
  auto recv = ranks[0]->ReadUntil("recv ", In(60));
  ASSERT_TRUE(recv) << ranks[0]->transcript();
  EXPECT_LE(Clock::now() - hit, std::chrono::seconds(10));
  EXPECT_EQ(recv->rfind("-6 peer lost: rank 1", 0), 0u) << *recv;
  EXPECT_EQ(ranks[0]->Wait(In(60)), 0) << ranks[0]->transcript();
  EXPECT_EQ(ranks[2]->Wait(In(60)), 0) << ranks[2]->transcript();
}

TEST(Grouped, AllreduceAndAllgatherCompleteTogetherAndFailTogether) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "grouped", 4);
  for (auto& rank : ranks) {
    EXPECT_TRUE(rank->ReadUntil("grouped allreduce ok", In(60))) << rank->transcript();
    EXPECT_TRUE(rank->ReadUntil("grouped allgather ok", In(60))) << rank->transcript();
    auto group = rank->ReadUntil("group ", In(60));
    ASSERT_TRUE(group) << rank->transcript();
    EXPECT_EQ(*group,
              "-5 mismatched 'bad[1]' on process set 0: rank 0 sent allreduce float32[4] op=sum in "
              "group 'bad' (2 of 2), rank 2 sent allreduce float32[5] op=sum in group 'bad' (2 of 2)");
    EXPECT_TRUE(rank->ReadUntil("grouped done", In(60))) << rank->transcript();
  }
  ExpectAllSucceed(ranks);
}

TEST(Join, UnevenDataAcrossThreeRanks) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "join", 3);
  for (auto& rank : ranks) EXPECT_EQ(rank->ReadUntil("joined ", In(120)), "2") << rank->transcript();
  ExpectAllSucceed(ranks);
}

TEST(Collectives, ResultsComeFromTheApplicationsAllocator) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 2;
  options.env["TEST_ALLOCATOR"] = "1";
  auto ranks = StartRanks(tuttid, "allocator", options);
  for (auto& rank : ranks) {
    EXPECT_EQ(rank->ReadUntil("allocator ", In(60)), "1 0") << rank->transcript();
    EXPECT_EQ(rank->ReadUntil("allocator ", In(60)), "1 1") << rank->transcript();
  }
  ExpectAllSucceed(ranks);
}

TEST(Join, TimesOutNamingTheRanksThatNeverJoinedAndRefusesSubmissionsMeanwhile) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "join_timeout", 3);
  EXPECT_EQ(ranks[0]->ReadUntil("refused ", In(60)),
            "-1 rank 0 has joined process set 0; it cannot submit there until every member joined");
  EXPECT_EQ(ranks[0]->ReadUntil("join ", In(60)),
            "-8 join on process set 0 timed out after 1500 ms: ranks [1, 2] never joined");
  ranks[1]->WriteLine("go");
  ranks[2]->WriteLine("go");
  ExpectAllSucceed(ranks);
}

#if !defined(TUTTI_SANITIZED)
TEST(Collectives, Large64MiBOnTheWorld) { RunCollectives("0,1,2,3", {0, 0, 0, 0}, /*large=*/true); }
#endif

}  // namespace
}  // namespace tutti::testing
