// A rank's timeline (docs/timeline.md): a Chrome-trace / Perfetto JSON file of what happened to
// each tensor (negotiation, queueing, execution) and what each process set's lane did (copies
// into and out of the fusion buffer, the transport collective). Process = this rank, one thread
// track per process set; per-tensor phases are nestable async events keyed by set and name.
//
// Threads: any thread may record; a mutex serializes writes. When the timeline is off, recording
// costs one relaxed atomic load. Events are balanced per file: stopping closes what is open, and
// an end without its begin in this file is dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tutti::client {

class Timeline {
 public:
  using WallClock = std::chrono::system_clock;

  explicit Timeline(int32_t rank) : rank_(rank) {}
  ~Timeline() { Stop(); }

  // Starts writing to `path` (replacing a timeline being written).
  Status Start(const std::string& path);
  void Stop();
  bool on() const { return on_.load(std::memory_order_relaxed); }

  // Opens / closes phase `phase` of tensor `name` on set `set_id`. Phases of a tensor nest.
  void Begin(int32_t set_id, const std::string& name, const std::string& phase,
             nlohmann::json args = nullptr);
  void End(int32_t set_id, const std::string& name, const std::string& phase,
           nlohmann::json args = nullptr);
  // A span of the set's lane from `start` to now.
  void Span(int32_t set_id, const std::string& what, WallClock::time_point start,
            nlohmann::json args = nullptr);

 private:
  void Write(nlohmann::json event);  // mu_ held
  void NameTrack(int32_t set_id);     // mu_ held
  void CloseAll(int64_t ts);          // mu_ held

  const int32_t rank_;
  std::atomic<bool> on_{false};
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  bool first_event_ = true;
  std::set<int32_t> named_tracks_;
  std::map<std::string, std::vector<std::string>> open_;  // async id -> open phases, innermost last
};

// Where rank `rank` writes a timeline asked for as `path`: "t.json" -> "t.rank3.json".
std::string RankTimelinePath(const std::string& path, int32_t rank);

}  // namespace tutti::client
