// A rank's autotuning ask (tutti_process_set_autotune, docs/autotune.md) against a tuttid that
// does not know it. tuttid 0.12 speaks protocol 7 as this branch does, and SetTensors.autotune
// (field 9) is unknown to it: it negotiates and grants the fast path exactly as this branch's
// tuttid does for a rank that never asked. So the "old tuttid" here is this branch's coordinator
// (tuttid's event loop on a thread of this process) behind a relay that forwards every frame
// unchanged, both ways, except that it clears field 9 in what the rank sends.
//
// The link must notice when tuttid grants the fast path again after an exit that carried the ask,
// warn once, and stop asking; otherwise the set would leave its fast path at every step for
// nothing. The same relay with the field kept is the control: there tuttid tunes and nobody warns.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "client/client_test_support.h"
#include "client/link_test_support.h"
#include "unit/test_specs.h"

namespace tutti::client {
namespace {

using tutti::server::Spec;
using namespace tutti::testing;

// Ranks connect to the relay's ROUTER as to tuttid; each gets a DEALER to tuttid with its own
// routing id (tuttid knows a rank by it). One thread, its own sockets; the destructor joins it.
class AskClearingRelay {
 public:
  AskClearingRelay(const std::string& tuttid, bool clear_asks)
      : tuttid_(tuttid), clear_asks_(clear_asks), ranks_(context_, zmq::socket_type::router) {
    ranks_.set(zmq::sockopt::linger, 0);
    ranks_.bind("tcp://127.0.0.1:*");
    endpoint_ = ranks_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Run(); });
  }
  ~AskClearingRelay() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  int asks_seen() const { return asks_seen_; }

 private:
  void Run() {
    std::map<std::string, std::unique_ptr<zmq::socket_t>> upstream;  // by routing id
    while (!stop_) {
      std::vector<zmq::pollitem_t> items{{ranks_.handle(), 0, ZMQ_POLLIN, 0}};
      std::vector<std::string> ids;
      for (auto& [id, socket] : upstream) {
        items.push_back({socket->handle(), 0, ZMQ_POLLIN, 0});
        ids.push_back(id);
      }
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(50));
      if (items[0].revents & ZMQ_POLLIN) {
        zmq::message_t id, body;
        (void)ranks_.recv(id);
        (void)ranks_.recv(body);
        auto& socket = upstream[id.to_string()];
        if (!socket) {
          socket = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
          socket->set(zmq::sockopt::linger, 0);
          socket->set(zmq::sockopt::routing_id, id.to_string());
          socket->connect(tuttid_);
        }
        socket->send(zmq::buffer(Rewrite(body)), zmq::send_flags::none);
      }
      for (size_t i = 1; i < items.size(); ++i) {
        if (!(items[i].revents & ZMQ_POLLIN)) continue;
        zmq::message_t body;
        (void)upstream[ids[i - 1]]->recv(body);
        ranks_.send(zmq::buffer(ids[i - 1]), zmq::send_flags::sndmore);
        ranks_.send(body, zmq::send_flags::none);
      }
    }
  }

  // The rank's frame as tuttid gets it: unchanged, but for the ask when asks are cleared.
  std::string Rewrite(const zmq::message_t& body) {
    wire::Frame frame;
    if (!frame.ParseFromArray(body.data(), static_cast<int>(body.size())) || !frame.has_announce())
      return body.to_string();
    for (auto& set : *frame.mutable_announce()->mutable_sets()) {
      if (!set.autotune()) continue;
      ++asks_seen_;
      if (clear_asks_) set.clear_autotune();
    }
    return frame.SerializeAsString();
  }

  const std::string tuttid_;
  const bool clear_asks_;
  zmq::context_t context_;
  zmq::socket_t ranks_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<int> asks_seen_{0};
  std::thread thread_;  // last: started once everything above exists
};

// Announces the world set's one tensor step after step (as a training loop would) until tuttid's
// Execute grants the set its members' fast path; the grant's generation, or 0 after `steps`.
uint64_t StepUntilGranted(Rank& rank, int steps) {
  RecordingListener& heard = rank.listener;
  for (int step = 0; step < steps; ++step) {
    size_t before;
    {
      std::lock_guard<std::mutex> lock(heard.mu);
      before = heard.executes.size();
    }
    if (!rank.link.Announce(0, Spec("w", 4))) return 0;  // on the fast path without a grant seen
    if (!heard.WaitUntil([&] { return heard.executes.size() > before; })) return 0;
    std::lock_guard<std::mutex> lock(heard.mu);
    if (heard.executes.back().fast_path() != 0) return heard.executes.back().fast_path();
  }
  return 0;
}

// Registers a one-rank job through the relay, reaches the fast path, asks to tune the world set,
// and leaves the fast path as the set's lane would; returns the exit's generation.
uint64_t AskOnTheFastPathAndLeave(Rank& rank, const std::string& job) {
  wire::Welcome welcome;
  EXPECT_TRUE(IsOk(rank.link.Register(Registration(job, 0, 1), &welcome)));
  rank.link.ListenerReady();
  const uint64_t generation = StepUntilGranted(rank, 5);
  EXPECT_NE(generation, 0u) << "tuttid never granted the fast path";
  // On the fast path tuttid hears nothing to measure: the link asks the lane to leave.
  EXPECT_TRUE(rank.link.AskAutotune(0));
  EXPECT_TRUE(rank.link.FastPathInputOf(0).slow);
  rank.link.FastPathLeave(0, generation, 0);  // the exit carries the ask
  return generation;
}

TEST(CoordinatorLinkAutotune, ATuttidThatIgnoresTheAskIsWarnedAboutOnceAndTheSetStaysOnItsFastPath) {
  InProcessCoordinator coordinator(Options());
  AskClearingRelay old_tuttid(coordinator.endpoint(), /*clear_asks=*/true);
  Rank rank(old_tuttid.endpoint());
  const uint64_t left = AskOnTheFastPathAndLeave(rank, "autotune-old-tuttid");
  ASSERT_FALSE(HasFailure());

  // tuttid negotiates the next step and grants again, with no tuning values: it never read the
  // ask. The link warns and does not ask the lane to leave again.
  const uint64_t granted_again = StepUntilGranted(rank, 5);
  ASSERT_GT(granted_again, left);
  RecordingListener& heard = rank.listener;
  ASSERT_TRUE(heard.WaitUntil([&] { return !heard.warnings.empty(); }));
  EXPECT_FALSE(rank.link.FastPathInputOf(0).slow);
  EXPECT_EQ(rank.link.FastPathInputOf(0).generation, granted_again);
  EXPECT_EQ(old_tuttid.asks_seen(), 1);  // the exit's ask; none after the warning
  std::lock_guard<std::mutex> lock(heard.mu);
  ASSERT_EQ(heard.warnings.size(), 1u);
  EXPECT_EQ(heard.warnings[0],
            "process set 0: tuttid at " + old_tuttid.endpoint() +
                " did not take up the autotuning ask (tutti_process_set_autotune needs tuttid "
                "0.13 or later); the set is not tuned");
  for (const wire::Execute& execute : heard.executes) EXPECT_FALSE(execute.has_tuning());
  EXPECT_TRUE(heard.dead.empty());
}

TEST(CoordinatorLinkAutotune, TheSameRelayKeepingTheAskGetsTheSetTunedWithoutAWarning) {
  InProcessCoordinator coordinator(Options());
  AskClearingRelay relay(coordinator.endpoint(), /*clear_asks=*/false);
  Rank rank(relay.endpoint());
  AskOnTheFastPathAndLeave(rank, "autotune-current-tuttid");
  ASSERT_FALSE(HasFailure());

  // The next step's Execute carries the tuner's first values (its warm-up), and tuttid keeps the
  // set with it while it tunes: no grant, no warning.
  RecordingListener& heard = rank.listener;
  size_t before;
  {
    std::lock_guard<std::mutex> lock(heard.mu);
    before = heard.executes.size();
  }
  ASSERT_TRUE(rank.link.Announce(0, Spec("w", 4)));
  ASSERT_TRUE(heard.WaitUntil([&] { return heard.executes.size() > before; }));
  EXPECT_EQ(relay.asks_seen(), 1);
  std::lock_guard<std::mutex> lock(heard.mu);
  const wire::Execute& tuned = heard.executes.back();
  EXPECT_TRUE(tuned.has_tuning());
  EXPECT_EQ(tuned.tuning().trial(), 0u);
  EXPECT_EQ(tuned.fast_path(), 0u);
  EXPECT_TRUE(heard.warnings.empty());
  EXPECT_TRUE(heard.dead.empty());
}

// A rank whose link reports no execution times (no lanes here) leaves tuttid to score by the wall
// clock, where a trial ends with the Execute that releases its last tensor: the search converges
// while tuttid builds an Execute that already carries the last trial's values. Asked on the fast
// path, the set comes back with cached tensors only, so that Execute would qualify for a grant;
// it must not get one (the members would plan with the last trial's values for good). The next
// Execute carries the chosen values, the converged period, and the grant. Every trial's result
// reaches the members in order, the last marked converged, for TUTTI_AUTOTUNE_LOG.
TEST(CoordinatorLinkAutotune, TheFastPathIsGrantedWithTheChosenValuesAndEveryTrialIsReported) {
  server::CoordinatorOptions options = Options();
  options.autotune_trial_tensors = 1;
  options.autotune_trial_ms = 0;
  options.autotune_warmup_tensors = 1;
  InProcessCoordinator coordinator(options);
  Rank rank(coordinator.endpoint());
  AskOnTheFastPathAndLeave(rank, "autotune-wall-clock");
  ASSERT_FALSE(HasFailure());
  size_t before_ask;
  {
    std::lock_guard<std::mutex> lock(rank.listener.mu);
    before_ask = rank.listener.executes.size();
  }
  ASSERT_NE(StepUntilGranted(rank, 200), 0u) << "the tuner never converged";

  RecordingListener& heard = rank.listener;
  std::lock_guard<std::mutex> lock(heard.mu);
  const wire::Execute& grant = heard.executes.back();
  ASSERT_TRUE(grant.has_tuning());
  std::vector<wire::TrialResult> ended;
  for (size_t i = before_ask; i < heard.executes.size(); ++i) {
    const wire::Execute& execute = heard.executes[i];
    EXPECT_TRUE(execute.has_tuning());
    EXPECT_TRUE(&execute == &grant || execute.fast_path() == 0);
    ended.insert(ended.end(), execute.tuning().ended().begin(), execute.tuning().ended().end());
  }
  // Nothing pinned: one trial of the starting values, each other value of the three grids, and
  // three finalists again; the grant's period is one past the last.
  ASSERT_EQ(ended.size(), 16u);
  EXPECT_EQ(grant.tuning().trial(), 17u);
  for (size_t i = 0; i < ended.size(); ++i) {
    EXPECT_EQ(ended[i].trial(), i + 1);
    EXPECT_FALSE(ended[i].own_time());
    EXPECT_EQ(ended[i].confirmation(), i >= 13);
    EXPECT_EQ(ended[i].converged(), i == 15);
  }
  EXPECT_TRUE(grant.tuning().ended_size() > 0 && grant.tuning().ended().rbegin()->converged());
  // The chosen values are a finalist's (the starting ones among them).
  bool a_finalist = false;
  for (size_t i = 13; i < ended.size(); ++i)
    a_finalist |= ended[i].fusion_threshold() == grant.tuning().fusion_threshold() &&
                  ended[i].small_allreduce_bytes() == grant.tuning().small_allreduce_bytes() &&
                  ended[i].pipeline_bytes() == grant.tuning().pipeline_bytes();
  EXPECT_TRUE(a_finalist);
}

}  // namespace
}  // namespace tutti::client
