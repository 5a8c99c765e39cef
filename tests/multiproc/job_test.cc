// Jobs on one tuttid: isolation, tokens, rendezvous deadlines; tuttid and tuttirun as programs.
#include <signal.h>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"

namespace tutti::testing {
namespace {

// Starts rank 0 of `options.job` alone and returns once tuttid (logging at info) created the job,
// so that whatever starts next registers second.
std::unique_ptr<Process> StartFirstRank(Tuttid& tuttid, RankOptions options) {
  options.ranks = {0};
  auto rank0 = StartRanks(tuttid, "basic", options);
  const bool created = tuttid.process()
                           .ReadUntilContaining("job '" + options.job + "': created by rank 0", In(60))
                           .has_value();
  EXPECT_TRUE(created) << tuttid.process().transcript();
  return std::move(rank0[0]);
}

TEST(Jobs, TwoJobsShareOneTuttid) {
  Tuttid tuttid;
  RankOptions a, b;
  a.size = b.size = 2;
  a.token = "token-a";
  b.token = "token-b";
  auto job_a = StartRanks(tuttid, "basic", a);
  auto job_b = StartRanks(tuttid, "basic", b);
  for (auto* job : {&job_a, &job_b})
    for (auto& rank : *job) EXPECT_TRUE(rank->ReadUntil("basic ok", In(120))) << rank->transcript();
  ExpectAllSucceed(job_a);
  ExpectAllSucceed(job_b);
}

// Rank 0 creates the job (tuttid's log says so); rank 1 then comes with another token and is
// refused; rank 0's rendezvous then times out naming rank 1.
TEST(Jobs, WrongTokenIsRefusedAndTheRendezvousNamesTheMissingRank) {
  Tuttid tuttid({"--log-level", "info"});
  RankOptions options;
  options.size = 2;
  options.job = UniqueJobId();
  options.timeout_ms = 3000;
  auto rank0 = StartFirstRank(tuttid, options);
  options.ranks = {1};
  options.token = "not-the-token";
  auto rank1 = StartRanks(tuttid, "basic", options);
  auto refused = rank1[0]->ReadUntil("fail init: ", In(60));
  ASSERT_TRUE(refused) << rank1[0]->transcript();
  EXPECT_EQ(*refused, "-12 wrong token for job '" + options.job + "'");
  auto timed_out = rank0->ReadUntil("fail init: ", In(60));
  ASSERT_TRUE(timed_out) << rank0->transcript();
  EXPECT_EQ(*timed_out, "-8 rendezvous of job '" + options.job +
                            "' timed out after 3000 ms: 1/2 ranks joined, missing [1]");
}

TEST(Jobs, RendezvousTimeoutReachesEveryWaitingRank) {
  Tuttid tuttid;
  RankOptions options;
  options.size = 4;
  options.job = UniqueJobId();
  options.timeout_ms = 1500;
  options.ranks = {0, 2};
  auto ranks = StartRanks(tuttid, "basic", options);
  ExpectLineOnEvery(ranks, "fail init: ",
                    "-8 rendezvous of job '" + options.job +
                        "' timed out after 1500 ms: 2/4 ranks joined, missing [1, 3]");
}

TEST(Jobs, WorldSizeDisagreementIsRefused) {
  Tuttid tuttid({"--log-level", "info"});
  RankOptions options;
  options.size = 2;
  options.job = UniqueJobId();
  options.timeout_ms = 2000;
  auto rank0 = StartFirstRank(tuttid, options);
  options.size = 3;
  options.ranks = {1};
  auto rank1 = StartRanks(tuttid, "basic", options);
  auto line = rank1[0]->ReadUntil("fail init: ", In(60));
  ASSERT_TRUE(line) << rank1[0]->transcript();
  EXPECT_EQ(*line, "-5 rank 1 joined job '" + options.job +
                       "' with world size 3, but the job has size 2");
}

TEST(Tuttid, HelpAndCleanExitOnSigterm) {
  Process help({TUTTID_PATH, "--help"}, {});
  EXPECT_EQ(help.Wait(In(30)), 0);
  EXPECT_NE(help.transcript().find("--bind"), std::string::npos);

  Tuttid tuttid;
  tuttid.process().Signal(SIGTERM);
  EXPECT_EQ(tuttid.process().Wait(In(30)), 0) << tuttid.process().transcript();
  Tuttid again;
  again.process().Signal(SIGINT);
  EXPECT_EQ(again.process().Wait(In(30)), 0) << again.process().transcript();
}

TEST(Tuttirun, RunsTheExampleOnAnEmbeddedCoordinator) {
  Process run({TUTTIRUN_PATH, "-np", "4", EXAMPLE_PATH}, {});
  ASSERT_EQ(run.Wait(In(120)), 0) << run.transcript();
  for (int r = 0; r < 4; ++r) {
    const std::string expected = "[" + std::to_string(r) + "] rank " + std::to_string(r) + ": " +
                                 (r % 2 == 0 ? "even" : "odd");
    EXPECT_NE(run.transcript().find(expected), std::string::npos) << run.transcript();
  }
  EXPECT_EQ(run.transcript().find("WRONG"), std::string::npos) << run.transcript();
}

}  // namespace
}  // namespace tutti::testing
