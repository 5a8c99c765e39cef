// Broadcast, allgather, reducescatter, alltoall and barrier across real processes: every dtype,
// sizes 0, 1 and uneven, on the world, a proper subset and two disjoint sets at once. Each rank
// checks its results exactly against a reference; members of a set must print the same digest of
// what they all received (broadcast and allgather results). Cases that need no process of their
// own (validation errors, a join that times out) run their ranks in the test process.
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"
#include "multiproc/in_process_job.h"

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

// "<status> <message>" of a collective expected to fail: its submission's if that was refused,
// else its wait's. `slot` is read after `submitted` was computed (argument order is unspecified).
std::string Failure(tutti_status_t submitted, tutti_request_t* slot) {
  tutti_request_t request = *slot;
  *slot = nullptr;
  if (submitted != TUTTI_OK) return std::to_string(submitted) + " " + tutti_last_error();
  tutti_status_t status = tutti_request_wait(request, kInProcessWaitMs);
  std::string outcome = std::to_string(status) + " " + tutti_last_error();
  tutti_request_free(request);
  return outcome;
}

using Outcomes = std::vector<std::pair<std::string, std::string>>;  // label, "<status> <message>"

// The validation failures of each kind that rank `r` of S={0,1,2} meets, in order, each followed
// by a good collective that must succeed.
Outcomes ValidationFailuresOnMember(tutti_runtime_t rt, int r, int32_t s) {
  Outcomes seen;
  tutti_request_t request = nullptr;
  // The call has returned (and set `request`) before the body reads it.
  auto fails = [&](const char* label, tutti_status_t submitted) {
    seen.emplace_back(label, Failure(submitted, &request));
  };
  ShapedTensor t(TUTTI_DTYPE_FLOAT32, {4});
  fails("outside-root", tutti_broadcast(rt, "b", s, &t.desc, 3, &request));
  fails("roots", tutti_broadcast(rt, "r", s, &t.desc, r == 2 ? 1 : 0, &request));

  ShapedTensor g(TUTTI_DTYPE_FLOAT32, {2, r == 2 ? 4 : 3});
  fails("gather-dims", tutti_allgather(rt, "g", s, &g.desc, &request));

  ShapedTensor rs(TUTTI_DTYPE_FLOAT32, {3});
  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.reduce_op = r == 2 ? TUTTI_OP_MAX : TUTTI_OP_SUM;
  fails("scatter-op", tutti_reducescatter(rt, "rs", s, &rs.desc, &options, &request));
  ShapedTensor scalar(TUTTI_DTYPE_FLOAT32, {});
  fails("scatter-scalar", tutti_reducescatter(rt, "rs0", s, &scalar.desc, nullptr, &request));

  ShapedTensor a(TUTTI_DTYPE_FLOAT32, {6, 2});
  int64_t bad[] = {1, 2, 2}, good[] = {2, 2, 2}, few[] = {3, 3};
  if (r == 1) {
    fails("splits-sum", tutti_alltoall(rt, "a", s, &a.desc, bad, 3, &request));
    fails("splits-count", tutti_alltoall(rt, "a", s, &a.desc, few, 2, &request));
  }
  ShapedTensor odd(TUTTI_DTYPE_FLOAT32, {7, 2});
  fails("splits-equal", tutti_alltoall(rt, "a", s, &odd.desc, nullptr, 0, &request));
  EXPECT_EQ(tutti_alltoall(rt, "a", s, &a.desc, good, 3, &request), TUTTI_OK) << tutti_last_error();
  EXPECT_EQ(tutti_request_wait(request, kInProcessWaitMs), TUTTI_OK) << tutti_last_error();
  tutti_request_free(request);

  ShapedTensor typed(r == 2 ? TUTTI_DTYPE_INT32 : TUTTI_DTYPE_FLOAT32, {3, 2});
  fails("alltoall-dtype", tutti_alltoall(rt, "t", s, &typed.desc, nullptr, 0, &request));

  // The name is free again; expected to fail again, since rank 2's dims still differ.
  EXPECT_EQ(tutti_allgather(rt, "g", s, &g.desc, &request), TUTTI_OK) << tutti_last_error();
  fails("after", TUTTI_OK);
  ShapedTensor fine(TUTTI_DTYPE_FLOAT32, {2, 3});
  EXPECT_EQ(tutti_allgather(rt, "fine", s, &fine.desc, &request), TUTTI_OK) << tutti_last_error();
  EXPECT_EQ(tutti_request_wait(request, kInProcessWaitMs), TUTTI_OK) << tutti_last_error();
  tutti_request_free(request);
  return seen;
}

// Each validation rule, on every member (S = {0,1,2}; rank 3 only adds S), with exact statuses
// and messages. Nothing here needs a process of its own, so the ranks live in this one.
TEST(Collectives, ValidationErrorsOnEveryMember) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 4);
  const Outcomes expected = {
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
  job.OnEveryRank([&](int r) {
    int32_t s_ranks[] = {0, 1, 2}, s = -1;
    ASSERT_EQ(tutti_process_set_add(job[r], s_ranks, 3, 0, &s), TUTTI_OK) << tutti_last_error();
    if (r < 3) {
      Outcomes want;
      for (const auto& outcome : expected) {
        if (outcome.first == "splits-equal" && r == 1) {  // only rank 1 gives wrong splits
          want.emplace_back("splits-sum",
                            "-1 alltoall 'a': splits add up to 5 rows, the input has 6");
          want.emplace_back("splits-count", "-1 alltoall 'a': 2 splits for a set of 3 ranks");
        }
        want.push_back(outcome);
      }
      EXPECT_EQ(ValidationFailuresOnMember(job[r], r, s), want) << "rank " << r;
    }
    // Nobody finalizes before every rank got this far (rank 3's add answered).
    tutti_request_t barrier = nullptr;
    ASSERT_EQ(tutti_barrier(job[r], TUTTI_WORLD, &barrier), TUTTI_OK) << tutti_last_error();
    EXPECT_EQ(tutti_request_wait(barrier, kInProcessWaitMs), TUTTI_OK) << tutti_last_error();
    tutti_request_free(barrier);
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(job.Finalize(r), TUTTI_OK) << "rank " << r;
}

// Over shared-memory streams (one host) and over TCP streams (as between hosts), plain and sealed
// ("tcp+encrypt": TUTTI_DATA_SECURITY=encrypt).
class PointToPointOver : public ::testing::TestWithParam<std::string> {};

TEST_P(PointToPointOver, PipelineStagesPassTensorsWhileEachAllreduces) {
  Tuttid tuttid;
  RankOptions options;
  const std::string param = GetParam();
  const size_t plus = param.find('+');
  options.env["TUTTI_TRANSPORT"] = param.substr(0, plus);
  if (plus != std::string::npos) options.env["TUTTI_DATA_SECURITY"] = param.substr(plus + 1);
  auto ranks = StartRanks(tuttid, "pipeline", options);
  for (auto& rank : ranks) EXPECT_TRUE(rank->ReadUntil("pipeline ok", In(120))) << rank->transcript();
  ExpectAllSucceed(ranks);
}

INSTANTIATE_TEST_SUITE_P(Transports, PointToPointOver,
                         ::testing::Values("shm", "tcp", "tcp+integrity", "tcp+encrypt"));

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

// World of 3: rank 0 joins with a 1.5 s timeout that ranks 1 and 2 never match; meanwhile its own
// submissions on the set are refused. The ranks live in this process: none is killed or stopped.
TEST(Join, TimesOutNamingTheRanksThatNeverJoinedAndRefusesSubmissionsMeanwhile) {
  Tuttid tuttid;
  InProcessJob job(tuttid, 3);
  tutti_status_t join_status = TUTTI_OK;
  std::string join_error;
  std::thread joiner([&] {
    int32_t last = -1;
    join_status = tutti_join(job[0], TUTTI_WORLD, 1500, &last);
    join_error = tutti_last_error();
  });
  // Until the join is in effect, submissions still go through: retry (bounded) until refused.
  FloatTensor t(4);
  tutti_status_t status = TUTTI_OK;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int i = 0; status == TUTTI_OK && std::chrono::steady_clock::now() < give_up; ++i) {
    tutti_request_t request = nullptr;
    status = tutti_allreduce(job[0], ("probe." + std::to_string(i)).c_str(), TUTTI_WORLD, &t.desc,
                             &t.desc, nullptr, &request);
    if (status == TUTTI_OK) {
      tutti_request_free(request);  // stays pending; finalize settles it
      std::this_thread::yield();
    }
  }
  EXPECT_EQ(status, TUTTI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tutti_last_error()),
            "rank 0 has joined process set 0; it cannot submit there until every member joined");
  joiner.join();
  EXPECT_EQ(join_status, TUTTI_ERR_TIMEOUT);
  EXPECT_EQ(join_error, "join on process set 0 timed out after 1500 ms: ranks [1, 2] never joined");
  for (int r = 0; r < 3; ++r) EXPECT_EQ(job.Finalize(r), TUTTI_OK) << "rank " << r;
}

#if !defined(TUTTI_SANITIZED)
TEST(Collectives, Large64MiBOnTheWorld) { RunCollectives("0,1,2,3", {0, 0, 0, 0}, /*large=*/true); }
#endif

}  // namespace
}  // namespace tutti::testing
