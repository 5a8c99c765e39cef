#include "common/timeline.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <algorithm>
#include <cstring>

namespace tutti {
namespace {

int64_t Micros(Timeline::WallClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

std::string AsyncId(int32_t set_id, const std::string& name) {
  return std::to_string(set_id) + "/" + name;
}

}  // namespace

std::string RankTimelinePath(const std::string& path, int32_t rank) {
  const std::string suffix = ".rank" + std::to_string(rank);
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == 0)
    return path + suffix + ".json";
  return path.substr(0, dot) + suffix + path.substr(dot);
}

Status Timeline::Start(const std::string& path) {
  Stop();
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr)
    return Status(Code::kInvalidArgument,
                  "cannot write the timeline to '" + path + "': " + std::strerror(errno));
  std::lock_guard<std::mutex> lock(mu_);
  file_ = file;
  first_event_ = true;
  described_tracks_.clear();
  open_.clear();
  std::fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", file_);
  Write({{"name", "process_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", 0},
         {"args", {{"name", process_name_}}}});
  Write({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid_}, {"tid", 0},
         {"args", {{"sort_index", pid_}}}});
  on_.store(true, std::memory_order_relaxed);
  return Status::Ok();
}

void Timeline::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  on_.store(false, std::memory_order_relaxed);
  if (file_ == nullptr) return;
  CloseAll(Micros(WallClock::now()));
  std::fputs("\n]}\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

void Timeline::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ != nullptr) std::fflush(file_);
}

void Timeline::Write(const nlohmann::json& event) {
  if (!first_event_) std::fputs(",\n", file_);
  first_event_ = false;
  const std::string text = event.dump();
  std::fwrite(text.data(), 1, text.size(), file_);
}

void Timeline::NameTrack(int32_t track, std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  track_names_[track] = std::move(name);
}

void Timeline::DescribeTrack(int32_t track) {
  if (!described_tracks_.insert(track).second) return;
  auto named = track_names_.find(track);
  Write({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid_}, {"tid", track},
         {"args", {{"name", named != track_names_.end() ? named->second
                                                        : "process set " + std::to_string(track)}}}});
}

void Timeline::Instant(int32_t track, const std::string& what, nlohmann::json args) {
  if (!on()) return;
  const int64_t ts = Micros(WallClock::now());
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  DescribeTrack(track);
  nlohmann::json event = {{"name", what}, {"ph", "i"}, {"s", "t"}, {"pid", pid_},
                          {"tid", track}, {"ts", ts}};
  if (!args.is_null()) event["args"] = std::move(args);
  Write(std::move(event));
}

void Timeline::CloseAll(int64_t ts) {
  for (auto& [id, phases] : open_) {
    const int32_t set_id = std::stoi(id.substr(0, id.find('/')));
    for (auto it = phases.rbegin(); it != phases.rend(); ++it)
      Write({{"name", *it}, {"cat", "tensor"}, {"ph", "e"}, {"id", id}, {"pid", pid_},
             {"tid", set_id}, {"ts", ts}, {"args", {{"unfinished", true}}}});
  }
  open_.clear();
}

void Timeline::Begin(int32_t track, const std::string& name, const std::string& phase) {
  Begin(track, name, phase, nlohmann::json());
}

void Timeline::End(int32_t track, const std::string& name, const std::string& phase) {
  End(track, name, phase, nlohmann::json());
}

void Timeline::Span(int32_t track, const std::string& what, WallClock::time_point start) {
  Span(track, what, start, nlohmann::json());
}

void Timeline::Begin(int32_t set_id, const std::string& name, const std::string& phase,
                     nlohmann::json args) {
  if (!on()) return;
  const int64_t ts = Micros(WallClock::now());
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  DescribeTrack(set_id);
  const std::string id = AsyncId(set_id, name);
  open_[id].push_back(phase);
  nlohmann::json event = {{"name", phase}, {"cat", "tensor"}, {"ph", "b"}, {"id", id},
                          {"pid", pid_},  {"tid", set_id},   {"ts", ts}};
  if (!args.is_null()) event["args"] = std::move(args);
  Write(std::move(event));
}

void Timeline::End(int32_t set_id, const std::string& name, const std::string& phase,
                   nlohmann::json args) {
  if (!on()) return;
  const int64_t ts = Micros(WallClock::now());
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  const std::string id = AsyncId(set_id, name);
  auto open = open_.find(id);
  if (open == open_.end()) return;  // begun before this file: nothing to balance it with
  auto& phases = open->second;
  auto at = std::find(phases.begin(), phases.end(), phase);
  if (at == phases.end()) return;
  // Close inner phases left open (a failure skipped their end) before this one.
  while (phases.back() != phase) {
    Write({{"name", phases.back()}, {"cat", "tensor"}, {"ph", "e"}, {"id", id}, {"pid", pid_},
           {"tid", set_id}, {"ts", ts}});
    phases.pop_back();
  }
  phases.pop_back();
  nlohmann::json event = {{"name", phase}, {"cat", "tensor"}, {"ph", "e"}, {"id", id},
                          {"pid", pid_},  {"tid", set_id},   {"ts", ts}};
  if (!args.is_null()) event["args"] = std::move(args);
  Write(std::move(event));
  if (phases.empty()) open_.erase(open);
}

void Timeline::Span(int32_t set_id, const std::string& what, WallClock::time_point start,
                    nlohmann::json args) {
  if (!on()) return;
  const auto end = WallClock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  DescribeTrack(set_id);
  nlohmann::json event = {{"name", what},
                          {"ph", "X"},
                          {"pid", pid_},
                          {"tid", set_id},
                          {"ts", Micros(start)},
                          {"dur", std::max<int64_t>(Micros(end) - Micros(start), 0)}};
  if (!args.is_null()) event["args"] = std::move(args);
  Write(std::move(event));
}

}  // namespace tutti
