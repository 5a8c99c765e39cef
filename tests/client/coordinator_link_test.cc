// The coordinator link (client/control/coordinator_link.h) against a real coordinator running tuttid's
// event loop (server/service/coordinator.h) on a thread of this process, bound to an OS-chosen loopback
// port. A recording LinkListener sees what the I/O thread dispatches. Covered: registration of a
// one-rank job and the typed set calls (AddSet, JoinSet answering with this rank as last_rank,
// RemoveSet), QueryCounters, announcements answered by Execute frames whose second round is a
// cache reference named by the link, a tensor refused on an unknown set; and the coordinator
// stopping: OnLinkDead once with tuttid's reason, a waiting set call and every later call ending
// with that kCoordinatorLost status, and what a registration still waiting for other ranks sees.
#include "client/control/coordinator_link.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/client_test_support.h"
#include "client/link_test_support.h"
#include "client/runtime_options.h"
#include "server/service/coordinator.h"
#include "unit/test_specs.h"

namespace tutti::client {
namespace {

using tutti::server::Spec;
using namespace tutti::testing;

const std::string kStopping = "coordinator lost: tuttid is stopping";

// Registers ranks 0 and 1 of a two-rank job at once (each waits for the other).
void RegisterTwoRanks(const std::string& job, Rank& zero, Rank& one) {
  RunOnThreads(2, [&](size_t r) {
    wire::Welcome welcome;
    const auto request = Registration(job, static_cast<int32_t>(r), 2);
    EXPECT_TRUE(IsOk((r == 0 ? zero : one).link.Register(request, &welcome)));
    (r == 0 ? zero : one).link.ListenerReady();
  });
}

constexpr int64_t kSetTimeoutMs = 20000;

TEST(CoordinatorLink, OneRankJobRegistersJoinsAndQueriesCounters) {
  InProcessCoordinator coordinator(Options());
  Rank rank(coordinator.endpoint());
  wire::Welcome welcome;
  ASSERT_TRUE(IsOk(rank.link.Register(Registration("link-world", 0, 1), &welcome)));
  rank.link.ListenerReady();  // as the runtime does once it built its lanes
  ASSERT_EQ(welcome.peers_size(), 1);
  EXPECT_EQ(welcome.peers(0).data_endpoint(), "127.0.0.1:40000");
  EXPECT_EQ(welcome.local_size(), 1);
  EXPECT_EQ(welcome.heartbeat_interval_ms(), 200);
  EXPECT_EQ(welcome.job_secret().size(), transport::kJobSecretBytes);
  EXPECT_NE(welcome.coordinator_epoch(), 0u);

  // The world's ranks are the world set: adding them again gives set 0, which stays.
  int32_t set_id = -1;
  std::vector<int32_t> members;
  ASSERT_TRUE(IsOk(rank.link.AddSet({0}, kSetTimeoutMs, &set_id, &members)));
  EXPECT_EQ(set_id, 0);
  EXPECT_EQ(members, std::vector<int32_t>{0});
  int32_t last_rank = -1;
  ASSERT_TRUE(IsOk(rank.link.JoinSet(set_id, kSetTimeoutMs, &last_rank)));
  EXPECT_EQ(last_rank, 0);
  EXPECT_TRUE(IsStatus(rank.link.RemoveSet(0, kSetTimeoutMs), Code::kInvalidArgument,
                       "the world process set (0) cannot be removed"));

  wire::CoordinatorCounters counters;
  ASSERT_TRUE(IsOk(rank.link.QueryCounters(In(kPatience), &counters)));
  EXPECT_EQ(counters.announce_messages(), 0u);
  EXPECT_EQ(counters.collectives_released(), 0u);
  std::lock_guard<std::mutex> lock(rank.listener.mu);
  EXPECT_TRUE(rank.listener.dead.empty());
}

TEST(CoordinatorLink, SetOfOneRankIsAddedJoinedAndRemoved) {
  InProcessCoordinator coordinator(Options());
  Rank zero(coordinator.endpoint()), one(coordinator.endpoint());
  RegisterTwoRanks("link-sets", zero, one);
  // Rank 1 alone is the set's only member; rank 0, not a member, is answered without waiting.
  int32_t set_id = -1, seen_by_zero = -1;
  std::vector<int32_t> members, members_seen_by_zero;
  ASSERT_TRUE(IsOk(one.link.AddSet({1}, kSetTimeoutMs, &set_id, &members)));
  EXPECT_GT(set_id, 0);
  EXPECT_EQ(members, std::vector<int32_t>{1});
  ASSERT_TRUE(IsOk(zero.link.AddSet({1}, kSetTimeoutMs, &seen_by_zero, &members_seen_by_zero)));
  EXPECT_EQ(seen_by_zero, set_id);
  EXPECT_EQ(members_seen_by_zero, std::vector<int32_t>{1});

  int32_t last_rank = -1;
  ASSERT_TRUE(IsOk(one.link.JoinSet(set_id, kSetTimeoutMs, &last_rank)));
  EXPECT_EQ(last_rank, 1);

  ASSERT_TRUE(IsOk(one.link.RemoveSet(set_id, kSetTimeoutMs)));
  EXPECT_TRUE(IsStatus(one.link.RemoveSet(set_id, kSetTimeoutMs), Code::kUnknownSet,
                       "process set " + std::to_string(set_id) + " was removed"));
  for (Rank* rank : {&zero, &one}) {
    std::lock_guard<std::mutex> lock(rank->listener.mu);
    EXPECT_TRUE(rank->listener.dead.empty());
  }
}

TEST(CoordinatorLink, RepeatedAnnouncementIsOneBitAndItsExecuteIsNamedByTheLink) {
  InProcessCoordinator coordinator(Options());
  Rank rank(coordinator.endpoint());
  wire::Welcome welcome;
  ASSERT_TRUE(IsOk(rank.link.Register(Registration("link-cache", 0, 1), &welcome)));
  rank.link.ListenerReady();  // as the runtime does once it built its lanes
  RecordingListener& heard = rank.listener;

  rank.link.Announce(0, Spec("w", 4));
  ASSERT_TRUE(heard.WaitUntil([&] { return heard.executes.size() == 1; }));
  rank.link.Announce(0, Spec("w", 4));
  ASSERT_TRUE(heard.WaitUntil([&] { return heard.executes.size() == 2; }));
  {
    std::lock_guard<std::mutex> lock(heard.mu);
    for (const wire::Execute& execute : heard.executes) {
      EXPECT_EQ(execute.set_id(), 0);
      ASSERT_EQ(execute.responses_size(), 1);
      EXPECT_EQ(execute.responses(0).spec().name(), "w");
      EXPECT_EQ(execute.responses(0).error().code(), 0);
    }
    EXPECT_EQ(heard.executes[0].seq(), 0u);
    EXPECT_EQ(heard.executes[1].seq(), 1u);
    // Assigned with the full spec the first time, referred to by the same slot the second.
    EXPECT_NE(heard.executes[0].responses(0).cache_slot(), 0u);
    EXPECT_EQ(heard.executes[1].responses(0).cache_slot(),
              heard.executes[0].responses(0).cache_slot());
    EXPECT_EQ(heard.executes[0].responses(0).spec().shape(0), 4);
  }
  EXPECT_EQ(rank.counters.announce_messages.load(), 2u);
  EXPECT_EQ(rank.counters.tensors_announced.load(), 1u);
  EXPECT_EQ(rank.counters.tensors_announced_cached.load(), 1u);
  EXPECT_EQ(rank.counters.execute_messages.load(), 2u);

  wire::CoordinatorCounters counters;
  ASSERT_TRUE(IsOk(rank.link.QueryCounters(In(kPatience), &counters)));
  EXPECT_EQ(counters.announce_messages(), 2u);
  EXPECT_EQ(counters.tensors_announced(), 1u);
  EXPECT_EQ(counters.tensors_announced_cached(), 1u);
  EXPECT_EQ(counters.collectives_released(), 2u);
}

TEST(CoordinatorLink, TensorOnAnUnknownSetIsRefusedToTheListener) {
  InProcessCoordinator coordinator(Options());
  Rank rank(coordinator.endpoint());
  wire::Welcome welcome;
  ASSERT_TRUE(IsOk(rank.link.Register(Registration("link-refused", 0, 1), &welcome)));
  rank.link.ListenerReady();  // as the runtime does once it built its lanes
  rank.link.Announce(42, Spec("stray", 4));
  RecordingListener& heard = rank.listener;
  ASSERT_TRUE(heard.WaitUntil([&] { return !heard.refused.empty(); }));
  std::lock_guard<std::mutex> lock(heard.mu);
  ASSERT_EQ(heard.refused.size(), 1u);
  EXPECT_EQ(heard.refused[0].set_id, 42);
  EXPECT_EQ(heard.refused[0].name, "stray");
  EXPECT_TRUE(IsStatus(heard.refused[0].why, Code::kUnknownSet, "process set 42 does not exist"));
  EXPECT_TRUE(heard.executes.empty());
  EXPECT_TRUE(heard.dead.empty());
}

TEST(CoordinatorLink, StoppedCoordinatorEndsTheLinkOnceAndEveryLaterCall) {
  InProcessCoordinator coordinator(Options());
  Rank rank(coordinator.endpoint());
  wire::Welcome welcome;
  ASSERT_TRUE(IsOk(rank.link.Register(Registration("link-stop", 0, 1), &welcome)));
  rank.link.ListenerReady();  // as the runtime does once it built its lanes
  coordinator.Stop();
  RecordingListener& heard = rank.listener;
  ASSERT_TRUE(heard.WaitUntil([&] { return !heard.dead.empty(); }));

  wire::CoordinatorCounters counters;
  EXPECT_TRUE(IsStatus(rank.link.QueryCounters(In(kPatience), &counters),
                       Code::kCoordinatorLost, kStopping));
  int32_t set_id = -1, last_rank = -1;
  std::vector<int32_t> members;
  EXPECT_TRUE(IsStatus(rank.link.AddSet({0}, kSetTimeoutMs, &set_id, &members),
                       Code::kCoordinatorLost, kStopping));
  EXPECT_TRUE(IsStatus(rank.link.JoinSet(0, kSetTimeoutMs, &last_rank), Code::kCoordinatorLost,
                       kStopping));
  EXPECT_TRUE(IsStatus(rank.link.RemoveSet(0, kSetTimeoutMs), Code::kCoordinatorLost, kStopping));
  EXPECT_EQ(set_id, -1);
  EXPECT_EQ(last_rank, -1);
  wire::Welcome again;
  EXPECT_TRUE(IsStatus(rank.link.Register(Registration("link-stop", 0, 1), &again),
                       Code::kCoordinatorLost, kStopping));
  rank.link.Announce(0, Spec("late", 4));  // queued; nothing answers it
  std::lock_guard<std::mutex> lock(heard.mu);
  ASSERT_EQ(heard.dead.size(), 1u);
  EXPECT_TRUE(IsStatus(heard.dead[0], Code::kCoordinatorLost, kStopping));
  EXPECT_TRUE(heard.lost.empty());  // tuttid going away is no rank lost
}

TEST(CoordinatorLink, SetCallWaitingForAnotherRankEndsWhenTheCoordinatorStops) {
  InProcessCoordinator coordinator(Options());
  Rank zero(coordinator.endpoint()), one(coordinator.endpoint());
  RegisterTwoRanks("link-wait", zero, one);
  // Rank 0 joins the world; rank 1 never does, so the call waits until the link ends it.
  Status joined;
  int32_t last_rank = -1;
  const auto started = transport::Clock::now();
  std::thread join([&] { joined = zero.link.JoinSet(0, kSetTimeoutMs, &last_rank); });
  // The Join is in flight or already waiting on tuttid; either way the stop must end it.
  coordinator.Stop();
  join.join();
  EXPECT_TRUE(IsStatus(joined, Code::kCoordinatorLost, kStopping));
  EXPECT_EQ(last_rank, -1);
  // Ended by the link's death, long before the call's own deadline.
  EXPECT_LT(transport::Clock::now() - started, std::chrono::milliseconds(kSetTimeoutMs));
  for (Rank* rank : {&zero, &one}) {
    ASSERT_TRUE(rank->listener.WaitUntil([&] { return !rank->listener.dead.empty(); }));
    std::lock_guard<std::mutex> lock(rank->listener.mu);
    ASSERT_EQ(rank->listener.dead.size(), 1u);
    EXPECT_TRUE(IsStatus(rank->listener.dead[0], Code::kCoordinatorLost, kStopping));
  }
}

// tuttid tells a rank waiting for its rendezvous that it is stopping: the link dies at once
// (OnLinkDead) and the waiting Register returns tuttid's reason then, not at its own deadline
// (the rendezvous timeout plus the link's 5 s of grace).
TEST(CoordinatorLink, RegistrationWaitingForOtherRanksEndsWithTheLinkAndTuttidsReason) {
  InProcessCoordinator coordinator(Options());
  constexpr int64_t kRendezvousMs = 2000;
  Rank first(coordinator.endpoint()), second(coordinator.endpoint());
  // Both claim rank 0 of a two-rank job: whichever the coordinator hears second is refused at
  // once, which proves the other's registration arrived and now waits for rank 1.
  std::mutex mu;
  std::condition_variable cv;
  int refusals = 0;
  Status results[2];
  transport::Clock::time_point stopped;
  std::thread registering[2];
  for (int i = 0; i < 2; ++i)
    registering[i] = std::thread([&, i] {
      wire::Welcome welcome;
      Rank& rank = i == 0 ? first : second;
      Status status = rank.link.Register(Registration("link-rendezvous", 0, 2, kRendezvousMs),
                                         &welcome);
      std::lock_guard<std::mutex> lock(mu);
      results[i] = status;
      if (status.code() == Code::kInvalidArgument) ++refusals;
      cv.notify_all();
    });
  {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, kPatience, [&] { return refusals > 0; }));
  }
  coordinator.Stop();
  stopped = transport::Clock::now();
  for (auto& thread : registering) thread.join();
  const int waited = results[0].code() == Code::kInvalidArgument ? 1 : 0;
  EXPECT_TRUE(IsStatus(results[1 - waited], Code::kInvalidArgument,
                       "rank 0 of job 'link-rendezvous' is already registered"));
  // The waiting rank's link died with tuttid's reason (the link ends the registration's wait
  // before it tells the listener, so wait for that)...
  Rank& waiting = waited == 0 ? first : second;
  EXPECT_TRUE(waiting.listener.WaitUntil([&] { return !waiting.listener.dead.empty(); }));
  {
    std::lock_guard<std::mutex> lock(waiting.listener.mu);
    ASSERT_EQ(waiting.listener.dead.size(), 1u);
    EXPECT_TRUE(IsStatus(waiting.listener.dead[0], Code::kCoordinatorLost, kStopping));
  }
  // ...and so did its Register, well before the registration's own deadline.
  EXPECT_TRUE(IsStatus(results[waited], Code::kCoordinatorLost, kStopping));
  EXPECT_LT(transport::Clock::now() - stopped, std::chrono::milliseconds(kRendezvousMs));
}

}  // namespace
}  // namespace tutti::client
