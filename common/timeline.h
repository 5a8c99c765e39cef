// A timeline (docs/timeline.md): a Chrome-trace / Perfetto JSON file. A rank writes what happened
// to each tensor (negotiation, queueing, execution) and what each process set's lane did (copies
// into and out of the fusion buffer, the transport collective): process = the rank, one track per
// process set. tuttid writes its negotiations: one track per (job, set). Per-tensor phases are
// nestable async events keyed by track and tensor name.
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
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>  // the full header only where events are built

#include "common/status.h"

namespace tutti {

class Timeline {
 public:
  using WallClock = std::chrono::system_clock;

  // Events go to process `pid`, shown as `process_name`.
  Timeline(int64_t pid, std::string process_name)
      : pid_(pid), process_name_(std::move(process_name)) {}
  ~Timeline() { Stop(); }

  // Starts writing to `path` (replacing a timeline being written).
  Status Start(const std::string& path);
  void Stop();
  // Hands what is buffered to the kernel, so that a long-running writer's file can be read.
  void Flush();
  bool on() const { return on_.load(std::memory_order_relaxed); }

  // Names track `track` (default: "process set <track>"). Takes effect at its first event.
  void NameTrack(int32_t track, std::string name);

  // Opens / closes phase `phase` of tensor `name` on `track`. Phases of a tensor nest. `args`
  // (a JSON object) is shown with the event.
  void Begin(int32_t track, const std::string& name, const std::string& phase);
  void Begin(int32_t track, const std::string& name, const std::string& phase, nlohmann::json args);
  void End(int32_t track, const std::string& name, const std::string& phase);
  void End(int32_t track, const std::string& name, const std::string& phase, nlohmann::json args);
  // A span on `track` from `start` to now.
  void Span(int32_t track, const std::string& what, WallClock::time_point start);
  void Span(int32_t track, const std::string& what, WallClock::time_point start,
            nlohmann::json args);
  // A moment on `track`.
  void Instant(int32_t track, const std::string& what, nlohmann::json args);

 private:
  void Write(const nlohmann::json& event);  // mu_ held
  void DescribeTrack(int32_t track);  // mu_ held
  void CloseAll(int64_t ts);          // mu_ held

  const int64_t pid_;
  const std::string process_name_;
  std::atomic<bool> on_{false};
  std::mutex mu_;
  std::FILE* file_ = nullptr;
  bool first_event_ = true;
  std::set<int32_t> described_tracks_;    // in this file
  std::map<int32_t, std::string> track_names_;
  std::map<std::string, std::vector<std::string>> open_;  // async id -> open phases, innermost last
};

// Where rank `rank` writes a timeline asked for as `path`: "t.json" -> "t.rank3.json".
std::string RankTimelinePath(const std::string& path, int32_t rank);

}  // namespace tutti
