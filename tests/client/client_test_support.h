// Helpers shared by the client tests (tests/client): status assertions, deadlines, running one
// function per rank on threads that are always joined, and the in-process data plane those
// ranks use (real devices on loopback, one context per rank).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "transport/handshake.h"
#include "transport/route_planner.h"
#include "transport/transport.h"

namespace tutti::testing {

// Generous bound on every wait in these tests: reached only when something is broken.
constexpr std::chrono::seconds kPatience{30};

inline transport::Deadline In(std::chrono::milliseconds after) {
  return transport::Clock::now() + after;
}

// EXPECT_TRUE(IsStatus(s, Code::kX, "message")): the code and the whole message.
inline ::testing::AssertionResult IsStatus(const Status& status, Code code,
                                           const std::string& message) {
  if (status.code() == code && status.message() == message) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got code " << static_cast<int>(status.code()) << " \"" << status.message()
         << "\", expected code " << static_cast<int>(code) << " \"" << message << "\"";
}

inline ::testing::AssertionResult IsOk(const Status& status) {
  return IsStatus(status, Code::kOk, "");
}

// Runs fn(0) ... fn(n - 1) on n threads and joins every one before returning. Use EXPECT_*
// inside `fn` (an ASSERT_* only leaves that thread's call).
inline void RunOnThreads(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) threads.emplace_back(fn, i);
  for (auto& thread : threads) thread.join();
}

// N ranks of one job in this process, each with its own device listening on loopback, all
// knowing one job secret. Ranks on host "this-host" unless `hosts` says otherwise.
class LoopbackJob {
 public:
  // `security`: what the TCP data plane protects (transport/secure/).
  explicit LoopbackJob(size_t n, std::vector<std::string> hosts = {},
                       transport::DataSecurity security = transport::DataSecurity::kOff)
      : hosts_(std::move(hosts)) {
    if (hosts_.empty()) hosts_.assign(n, "this-host");
    const std::string secret = transport::NewJobSecret();
    for (size_t r = 0; r < n; ++r) {
      std::unique_ptr<transport::Device> device;
      Status status = transport::CreateDevice("127.0.0.1", &device);
      EXPECT_TRUE(IsOk(status));
      if (!device) return;
      device->SetJobSecret(secret, static_cast<int32_t>(r), security);
      devices_.push_back(std::move(device));
    }
  }

  size_t size() const { return devices_.size(); }
  transport::Device& device(size_t r) { return *devices_.at(r); }

  // Every rank as route planning sees it.
  std::vector<transport::PeerAddress> Peers() const {
    std::vector<transport::PeerAddress> peers;
    for (size_t r = 0; r < devices_.size(); ++r)
      peers.push_back({static_cast<int32_t>(r), devices_[r]->endpoint(), hosts_[r]});
    return peers;
  }

  // Rank r's context for `set_id`, routed as `transport` ("auto", "tcp", "shm") plans it, then as
  // `edit` changes the routes (a test's relay in the path), if given.
  std::unique_ptr<transport::Context> Context(
      size_t r, int32_t set_id, const std::string& transport,
      const std::function<void(std::vector<transport::PeerRoute>*)>& edit = nullptr) {
    std::vector<transport::PeerRoute> routes;
    Status status =
        transport::PlanRoutes(static_cast<int32_t>(r), hosts_.at(r), Peers(), transport, &routes);
    EXPECT_TRUE(IsOk(status));
    if (!status.ok()) return nullptr;
    if (edit) edit(&routes);
    return devices_.at(r)->CreateContext(set_id, static_cast<int32_t>(r), std::move(routes));
  }

 private:
  std::vector<std::string> hosts_;
  std::vector<std::unique_ptr<transport::Device>> devices_;
};

}  // namespace tutti::testing
