// RecentErrors: the last errors tuttid told ranks, newest last, for the status page. Bounded, so a
// job that fails the same way a million times costs the same as one that fails once.
// Single-threaded: owned by the coordinator's loop, which publishes copies (StatusBoard).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tutti::server {

class RecentErrors {
 public:
  static constexpr size_t kKept = 100;

  // `rank` -1: not a rank's (a connection that never registered, a whole job).
  void Add(const std::string& job, int32_t rank, const Status& status) {
    if (entries_.size() == kKept) entries_.pop_front();
    entries_.push_back({std::chrono::system_clock::now(), job, rank, status});
  }

  nlohmann::json ToJson() const;

 private:
  struct Entry {
    std::chrono::system_clock::time_point when;
    std::string job;
    int32_t rank;
    Status status;
  };
  std::deque<Entry> entries_;
};

}  // namespace tutti::server
