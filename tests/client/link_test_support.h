// What the coordinator-link tests (coordinator_link_test.cc, coordinator_link_autotune_test.cc)
// share: a LinkListener that records what the link's I/O thread dispatches, tuttid's event loop on
// a thread of the test process, a one-rank registration, and a rank's link with its listener.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "client/client_test_support.h"
#include "client/control/coordinator_link.h"
#include "client/runtime_options.h"
#include "server/service/coordinator.h"

namespace tutti::client {

// Records what the link's I/O thread reports; tests wait on it with a bound.
class RecordingListener : public LinkListener {
 public:
  void OnExecute(wire::Execute& execute) override { Record([&] { executes.push_back(execute); }); }
  void OnTensorRefused(int32_t set_id, const std::string& name, const Status& why) override {
    Record([&] { refused.push_back({set_id, name, why}); });
  }
  void OnRanksLost(const std::vector<int32_t>& ranks, const Status&) override {
    Record([&] { lost.insert(lost.end(), ranks.begin(), ranks.end()); });
  }
  void OnSetsBroken(const std::vector<int32_t>& sets, const Status&, bool) override {
    Record([&] { broken_sets.insert(broken_sets.end(), sets.begin(), sets.end()); });
  }
  void OnReformed(const wire::Reformed& message) override {
    Record([&] { reformed.push_back(message); });
  }
  void OnRanksWaiting(int32_t) override {}
  void OnCommId(int32_t, int32_t, const std::string&) override { Record([&] { ++comm_ids; }); }
  void OnLinkDead(const Status& status) override { Record([&] { dead.push_back(status); }); }
  void OnWarning(const std::string& what) override { Record([&] { warnings.push_back(what); }); }
  void OnFailover(bool resumed, const std::string&) override {
    Record([&] { (resumed ? resumptions : failovers) += 1; });
  }

  // Waits until `done` holds (checked under the lock), at most kPatience.
  bool WaitUntil(const std::function<bool()>& done) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, testing::kPatience, done);
  }

  int failovers = 0, resumptions = 0;
  struct Refused {
    int32_t set_id;
    std::string name;
    Status why;
  };
  std::mutex mu;  // guards everything below
  std::vector<wire::Execute> executes;
  std::vector<Refused> refused;
  std::vector<int32_t> lost;
  std::vector<int32_t> broken_sets;
  std::vector<wire::Reformed> reformed;
  int comm_ids = 0;
  std::vector<Status> dead;
  std::vector<std::string> warnings;

 private:
  void Record(const std::function<void()>& change) {
    {
      std::lock_guard<std::mutex> lock(mu);
      change();
    }
    cv.notify_all();
  }
  std::condition_variable cv;
};

// tuttid's event loop on a thread of its own; Stop() (or the destructor) ends it and joins.
class InProcessCoordinator {
 public:
  explicit InProcessCoordinator(const server::CoordinatorOptions& options)
      : coordinator_(options), thread_([this] { coordinator_.Run(); }) {}
  ~InProcessCoordinator() { Stop(); }
  const std::string& endpoint() const { return coordinator_.endpoint(); }
  void Stop() {
    if (!thread_.joinable()) return;
    coordinator_.Stop();
    thread_.join();
  }

 private:
  server::Coordinator coordinator_;
  std::thread thread_;
};

inline server::CoordinatorOptions Options() {
  server::CoordinatorOptions options;
  options.bind = "tcp://127.0.0.1:*";
  options.heartbeat_interval_ms = 200;
  options.lease_ms = 20000;  // the coordinator's stop, not a lease, must end these links
  return options;
}

inline wire::Register Registration(const std::string& job, int32_t rank, int32_t size,
                            int64_t rendezvous_timeout_ms = 20000) {
  wire::Register request;
  request.set_job(job);
  request.set_token("token");
  request.set_rank(rank);
  request.set_size(size);
  request.set_host("this-host");
  request.set_data_endpoint("127.0.0.1:" + std::to_string(40000 + rank));
  request.set_rendezvous_timeout_ms(rendezvous_timeout_ms);
  request.set_cache_capacity(kDefaultCacheCapacity);
  request.set_fusion_threshold(0);  // one response per tensor
  request.set_transport("auto");
  return request;
}

// A link with its listener and counters, as one rank's runtime holds them.
struct Rank {
  explicit Rank(const std::string& endpoint)
      : link(endpoint, &listener, &counters, std::chrono::microseconds(0), CurveClientKeys{}) {}
  RecordingListener listener;
  Counters counters;
  CoordinatorLink link;  // last: stops before what it reports to
};

}  // namespace tutti::client
