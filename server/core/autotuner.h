// Per-set autotuning (docs/autotune.md): one tuner per process set, in tuttid (the one place that
// sees every release of the set), choosing the set's fusion threshold and the members' algorithm
// cut-offs by measured throughput of the set's own work. The values reach every member in an
// Execute (wire::Tuning), so they take effect at one sequence number on all of them.
//
// Search: a coordinate search, one pass. The first trial measures the current values; then each
// tunable parameter in turn tries every value of its grid, the others at the best so far, and
// keeps the best. Each trial lasts at least `trial_releases` releases of the set's tensors and
// `trial_duration`; its score is the bytes released per second over it. A pinned parameter is
// never varied. Then the tuner converges: the best values stay, and the set may go on its
// members' fast path (tuttid withholds it while tuning, since it would see nothing there).
// Single-threaded and socket-free, like the coordinator core; time is passed in.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tutti::server {

struct TuningValues {
  int64_t fusion_threshold = 0, small_allreduce_bytes = 0, pipeline_bytes = 0;
  bool operator==(const TuningValues& o) const {
    return fusion_threshold == o.fusion_threshold && small_allreduce_bytes == o.small_allreduce_bytes &&
           pipeline_bytes == o.pipeline_bytes;
  }
};

struct AutotuneOptions {
  bool fusion_pinned = false, small_pinned = false, pipeline_pinned = false;
  uint64_t trial_releases = 50;  // tensors released per trial, at least
  std::chrono::milliseconds trial_duration{1000};
  uint64_t warmup_releases = 20;  // released before the first trial starts (caches fill, ...)
};

class Autotuner {
 public:
  using Clock = std::chrono::steady_clock;

  Autotuner(TuningValues start, AutotuneOptions options);

  // After tuttid released `tensors` of the set carrying `bytes` in all, at `now`. Returns true
  // when the values changed: a new trial starts with the next release.
  bool OnReleased(uint64_t tensors, uint64_t bytes, Clock::time_point now);

  const TuningValues& current() const { return current_; }
  bool converged() const { return converged_; }
  uint32_t trial() const { return static_cast<uint32_t>(trials_.size()); }

  struct Trial {
    TuningValues values;
    double bytes_per_second = 0;
  };
  const std::vector<Trial>& trials() const { return trials_; }

  // For the status pages: state, the values in effect, the best, and every trial so far.
  nlohmann::json Status() const;

 private:
  struct Parameter {
    const char* name;
    int64_t TuningValues::*field;
    std::vector<int64_t> grid;
  };
  // Moves to the next untried value, or to the next parameter; false when none is left.
  bool Advance();

  const AutotuneOptions options_;
  std::vector<Parameter> parameters_;  // the tunable ones, in search order
  size_t parameter_ = 0, candidate_ = 0;
  int64_t pass_start_ = 0;  // the current parameter's value when its pass began
  TuningValues current_, best_;
  double best_score_ = -1;
  bool converged_ = false, measuring_ = false;
  uint64_t seen_ = 0, trial_tensors_ = 0, trial_bytes_ = 0;
  Clock::time_point trial_start_;
  std::vector<Trial> trials_;
};

}  // namespace tutti::server
