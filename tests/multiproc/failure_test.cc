// Failures across real processes: dead, frozen and evicted ranks, a lost or restarted
// coordinator, a forked child. Deadlines are functional limits with margin (leases are 5 s, the
// promise is 10 s), not performance measurements.
#include <signal.h>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {

constexpr auto kPromise = std::chrono::seconds(10);

bool StartsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// Waits for "big started 0" on the ranks of S, then applies `signal` to rank 2.
Clock::time_point HitRankTwoDuringBigAllreduce(std::vector<std::unique_ptr<Process>>& ranks,
                                               int signal) {
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(ranks[r]->ReadUntil("big started 0", In(120))) << ranks[r]->transcript();
  ranks[2]->Signal(signal);
  return Clock::now();
}

// Ranks 0 and 1 report "peer lost: rank 2..." within the promise; the bystander set D={3,4} keeps
// completing allreduces afterwards.
void ExpectPeerLostAndBystandersUnaffected(std::vector<std::unique_ptr<Process>>& ranks,
                                           Clock::time_point hit, const std::string& prefix) {
  for (int r = 0; r < 2; ++r) {
    auto failed = ranks[r]->ReadUntil("big failed ", hit + std::chrono::seconds(60));
    ASSERT_TRUE(failed) << ranks[r]->transcript();
    EXPECT_LE(Clock::now() - hit, kPromise) << *failed;
    EXPECT_TRUE(StartsWith(*failed, "-6 " + prefix)) << *failed;
    auto after = ranks[r]->ReadUntil("after ", In(30));
    ASSERT_TRUE(after) << ranks[r]->transcript();
    EXPECT_TRUE(StartsWith(*after, "-6 " + prefix)) << *after;  // later requests fail at once
  }
  for (int r = 3; r < 5; ++r)
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(ranks[r]->ReadUntil("d ", In(60))) << ranks[r]->transcript();
}

TEST(Failures, KilledRankIsReportedToItsSetsPeersOnly) {
  Tuttid tuttid;
  RankOptions other_job;  // shares tuttid, must not notice
  other_job.size = 2;
  auto bystanders = StartRanks(tuttid, "steady", other_job);
  auto ranks = StartRanks(tuttid, "big", 5);
  auto hit = HitRankTwoDuringBigAllreduce(ranks, SIGKILL);
  ExpectPeerLostAndBystandersUnaffected(ranks, hit, "peer lost: rank 2");
  for (auto& rank : bystanders)
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(rank->ReadUntil("w ", In(60))) << rank->transcript();
  for (auto& rank : bystanders) rank->WriteLine("go");
  ExpectAllSucceed(bystanders);
  for (int r : {0, 1, 3, 4}) ranks[r]->WriteLine("go");
  for (int r : {0, 1, 3, 4}) EXPECT_EQ(ranks[r]->Wait(In(60)), 0) << ranks[r]->transcript();
}

TEST(Failures, FrozenRankIsDeclaredLostThenEvictedWhenItWakes) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "big", 5);
  auto hit = HitRankTwoDuringBigAllreduce(ranks, SIGSTOP);
  // A frozen rank keeps its sockets open: only the lease can tell, and the Fault must wake the
  // peers blocked inside their ring step.
  ExpectPeerLostAndBystandersUnaffected(ranks, hit, "peer lost: rank 2: no heartbeat for 5000 ms");
  ranks[2]->Signal(SIGCONT);
  auto evicted = ranks[2]->ReadUntil("big failed ", In(60));
  ASSERT_TRUE(evicted) << ranks[2]->transcript();
  const std::string expected = "-17 evicted: rank 2 of job '";
  EXPECT_TRUE(StartsWith(*evicted, expected)) << *evicted;
  EXPECT_NE(evicted->find("was declared lost (no heartbeat for 5000 ms); it can no longer take "
                          "part in the job"),
            std::string::npos)
      << *evicted;
  auto after = ranks[2]->ReadUntil("after ", In(30));
  ASSERT_TRUE(after) << ranks[2]->transcript();
  EXPECT_TRUE(StartsWith(*after, expected)) << *after;
  for (auto& rank : ranks) rank->WriteLine("go");
  ExpectAllSucceed(ranks);
}

TEST(Failures, KilledParentWhoseForkedChildHoldsItsSocketsIsDetected) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "fork", 3);
  auto child = ranks[1]->ReadUntil("child ", In(60));
  ASSERT_TRUE(child) << ranks[1]->transcript();
  EXPECT_TRUE(StartsWith(*child, "-1 this runtime belongs to process "));
  EXPECT_NE(child->find("; a process forked from it cannot use it (call tutti_init in the child)"),
            std::string::npos);
  auto finalize = ranks[1]->ReadUntil("child finalize ", In(30));
  ASSERT_TRUE(finalize) << ranks[1]->transcript();
  EXPECT_EQ(*finalize, "-1");
  // Parent and child write to one pipe in either order.
  if (ranks[1]->transcript().find("forked\n") == std::string::npos) {
    ASSERT_TRUE(ranks[1]->ReadUntil("forked", In(30))) << ranks[1]->transcript();
  }
  ranks[1]->Signal(SIGKILL);
  const auto hit = Clock::now();
  for (int r : {0, 2}) {
    auto status = ranks[r]->ReadUntil("status after-fork ", hit + std::chrono::seconds(60));
    ASSERT_TRUE(status) << ranks[r]->transcript();
    EXPECT_LE(Clock::now() - hit, kPromise);
    EXPECT_EQ(*status, "-6 peer lost: rank 1: no heartbeat for 5000 ms");
    EXPECT_EQ(ranks[r]->Wait(In(60)), 0) << ranks[r]->transcript();
  }
}

// tuttid killed, or frozen: every rank reports it within the promise.
class CoordinatorLoss : public ::testing::TestWithParam<int> {};

TEST_P(CoordinatorLoss, IsReportedByEveryRank) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "coordinator_loss", 4);
  for (auto& rank : ranks) ASSERT_TRUE(rank->ReadUntil("submitted", In(60))) << rank->transcript();
  tuttid.process().Signal(GetParam());
  const auto hit = Clock::now();
  const std::string lost = "-7 coordinator lost: no message from " + tuttid.endpoint() + " for 5000 ms";
  for (auto& rank : ranks) {
    auto line = rank->ReadUntil("lost ", hit + std::chrono::seconds(60));
    ASSERT_TRUE(line) << rank->transcript();
    EXPECT_LE(Clock::now() - hit, kPromise);
    EXPECT_EQ(*line, lost);
    EXPECT_EQ(rank->ReadUntil("after ", In(30)), lost);
    EXPECT_EQ(rank->ReadUntil("add ", In(30)), lost);
  }
  ExpectAllSucceed(ranks);
}

INSTANTIATE_TEST_SUITE_P(Failures, CoordinatorLoss, ::testing::Values(SIGKILL, SIGSTOP),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGKILL ? std::string("Killed") : std::string("Frozen");
                         });

// tuttid stopped with SIGTERM tells every rank before it exits: their requests fail at once with
// the reason, not at the end of the 5 s lease, and tuttid exits cleanly.
TEST(Failures, StoppedCoordinatorTellsEveryRankAtOnce) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "coordinator_loss", 4);
  for (auto& rank : ranks) ASSERT_TRUE(rank->ReadUntil("submitted", In(60))) << rank->transcript();
  tuttid.process().Signal(SIGTERM);
  const auto hit = Clock::now();
  const std::string lost = "-7 coordinator lost: tuttid is stopping";
  for (auto& rank : ranks) {
    auto line = rank->ReadUntil("lost ", hit + std::chrono::seconds(60));
    ASSERT_TRUE(line) << rank->transcript();
    // Well under the lease, which would report "no message from ..." after 5 s.
    EXPECT_LE(Clock::now() - hit, std::chrono::seconds(4));
    EXPECT_EQ(*line, lost);
    EXPECT_EQ(rank->ReadUntil("after ", In(30)), lost);
    EXPECT_EQ(rank->ReadUntil("add ", In(30)), lost);
  }
  EXPECT_EQ(tuttid.process().Wait(In(30)), 0);
  ExpectAllSucceed(ranks);
}

TEST(Failures, RestartedCoordinatorRefusesRanksOfTheOldEpoch) {
  auto first = std::make_unique<Tuttid>();
  const std::string endpoint = first->endpoint();
  auto ranks = StartRanks(*first, "coordinator_loss", 4);
  for (auto& rank : ranks) ASSERT_TRUE(rank->ReadUntil("submitted", In(60))) << rank->transcript();
  first->process().Signal(SIGKILL);
  ASSERT_TRUE(first->process().Wait(In(30)));
  Tuttid second({"--bind", endpoint});  // the same port: the ranks reconnect to it
  for (auto& rank : ranks) {
    auto line = rank->ReadUntil("lost ", In(60));
    ASSERT_TRUE(line) << rank->transcript();
    EXPECT_TRUE(StartsWith(*line, "-7 coordinator lost: tuttid restarted (this rank joined epoch "))
        << *line;
    EXPECT_NE(line->find(", tuttid now runs epoch "), std::string::npos) << *line;
  }
  ExpectAllSucceed(ranks);
}

// Abort while rank 0's ring step waits on a frozen peer: its request ends at once (well within a
// quarter of the 60 s timeout), later calls fail, finalize works, and rank 1 is told who aborted.
TEST(Failures, AbortEndsRequestsAtOnceAndNamesTheRankToItsPeers) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "abort", 3);
  for (auto& rank : ranks) ASSERT_TRUE(rank->ReadUntil("started", In(60))) << rank->transcript();
  ranks[2]->Signal(SIGSTOP);
  ranks[0]->WriteLine("go");
  auto aborted = ranks[0]->ReadUntil("aborted ", In(60));
  ASSERT_TRUE(aborted) << ranks[0]->transcript();
  EXPECT_TRUE(StartsWith(*aborted, "-9 ")) << *aborted;
  EXPECT_LT(std::stoll(aborted->substr(3)), 15000) << *aborted;
  EXPECT_NE(aborted->find("aborted: this rank called tutti_abort"), std::string::npos) << *aborted;
  EXPECT_EQ(ranks[0]->ReadUntil("later ", In(30)), "-9 aborted: this rank called tutti_abort");
  auto peer = ranks[1]->ReadUntil("peer ", In(60));
  ASSERT_TRUE(peer) << ranks[1]->transcript();
  EXPECT_TRUE(StartsWith(*peer, "-9 aborted: rank 0 called tutti_abort")) << *peer;
  ranks[0]->WriteLine("go");
  EXPECT_EQ(ranks[0]->ReadUntil("finalized ", In(30)), "0");
  EXPECT_EQ(ranks[0]->Wait(In(30)), 0);
  EXPECT_EQ(ranks[1]->Wait(In(30)), 0) << ranks[1]->transcript();
}

TEST(Failures, FinalizeWithACollectiveInFlightReturnsPromptly) {
  Tuttid tuttid;
  auto ranks = StartRanks(tuttid, "finalize_in_flight", 2);
  for (auto& rank : ranks) ASSERT_TRUE(rank->ReadUntil("started", In(60))) << rank->transcript();
  ranks[1]->Signal(SIGSTOP);  // rank 0's ring step now waits on a peer that never answers
  ranks[0]->WriteLine("go");
  auto finalized = ranks[0]->ReadUntil("finalized ", In(60));
  ASSERT_TRUE(finalized) << ranks[0]->transcript();
  EXPECT_TRUE(StartsWith(*finalized, "0 ")) << *finalized;
  EXPECT_LT(std::stoll(finalized->substr(2)), 10000) << *finalized;
  auto request = ranks[0]->ReadUntil("request ", In(30));
  ASSERT_TRUE(request) << ranks[0]->transcript();
  EXPECT_TRUE(StartsWith(*request, "-13 the runtime was finalized")) << *request;
  EXPECT_EQ(ranks[0]->Wait(In(30)), 0);
}

}  // namespace
}  // namespace tutti::testing
