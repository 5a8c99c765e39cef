// Per-set autotuning (docs/autotune.md): one tuner per process set, in tuttid (the one place that
// sees every release of the set), choosing the set's fusion threshold and the members' algorithm
// cut-offs by the measured throughput of the set's own work. The values reach every member in an
// Execute (wire::Tuning), so they take effect at one sequence number on all of them.
//
// Measuring: every Execute carries the tuner's measurement period (0 the warm-up, n its n-th
// trial), and each member reports how long its lane spent executing the collectives of each
// period (SetTensors.executed). A trial's score is the bytes its members executed per second of
// their own execution time: the set's own, not the wall time it shares with other sets in the
// same step loop. A trial ends once it released at least `trial_releases` tensors over at least
// `trial_duration` and every member reported all of them; its values stay in effect meanwhile
// (a step or so). Members that never report (an earlier library, protocol 5) leave it to the
// wall-clock score, bytes released per second, once a trial's grace (another trial's length)
// passed without a single report.
//
// Search: a coordinate pass, then a confirmation round. The first trial measures the starting
// values; then each tunable parameter in turn tries every value of its grid, the others at the
// best so far, and keeps the best. Then the `finalists` best values of the pass (the starting
// values always among them) are measured once more, and each is scored by the mean of its two
// measurements; the best wins, but it replaces the starting values only if it beats them by
// `min_gain`. Then the tuner has converged. With nothing pinned: 13 + 3 = 16 trials. A pinned
// parameter is never varied.
//
// Single-threaded and socket-free, like the coordinator core (Job calls it); time is passed in.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
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
  size_t finalists = 3;           // measured again after the pass (0: no confirmation round)
  double min_gain = 0.02;         // what a finalist must beat the starting values by
};

class Autotuner {
 public:
  using Clock = std::chrono::steady_clock;

  Autotuner(TuningValues start, AutotuneOptions options);

  // tuttid released `tensors` of the set (`collectives` once fused) carrying `bytes` in all, in
  // an Execute stamped with period() as it was before this call, at `now`; the set has `members`
  // live members. Returns true when a trial ended: the values and period may have changed.
  bool OnReleased(uint64_t tensors, uint64_t bytes, uint64_t collectives, size_t members,
                  Clock::time_point now);
  // Member `rank` reports its totals so far for the collectives of measurement period `period`.
  // Returns true when that ended a trial.
  bool OnExecuted(int32_t rank, uint32_t period, uint64_t collectives, uint64_t bytes,
                  uint64_t execute_ns, size_t members, Clock::time_point now);

  const TuningValues& current() const { return current_; }
  // What Execute.tuning.trial carries: 0 during the warm-up, n during the n-th trial.
  uint32_t period() const { return period_; }
  bool converged() const { return converged_; }
  uint32_t trial() const { return static_cast<uint32_t>(trials_.size()); }  // trials ended

  struct Trial {
    TuningValues values;
    double bytes_per_second = 0;
    bool own_time = false;      // scored by the members' execution time (else the wall clock)
    bool confirmation = false;  // a finalist measured again
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
  struct Report {
    uint64_t collectives = 0, bytes = 0, execute_ns = 0;
  };
  // Moves to the next untried value, or to the next parameter; false when none is left.
  bool Advance();
  // The pass is over: the finalists to measure again; false when there are none.
  bool StartConfirmation();
  // Ends the trial if its releases are done and every member reported them (or the grace
  // passed); then the next values take effect.
  bool MaybeEnd(size_t members, Clock::time_point now);
  void Converge();
  double MeanScore(const TuningValues& values) const;

  const AutotuneOptions options_;
  const TuningValues start_;
  std::vector<Parameter> parameters_;  // the tunable ones, in search order
  size_t parameter_ = 0, candidate_ = 0;
  int64_t pass_start_ = 0;  // the current parameter's value when its pass began
  TuningValues current_, best_;
  double best_score_ = -1;
  bool converged_ = false;
  uint32_t period_ = 0;
  bool wall_clock_only_ = false;  // no member ever reported: score by the wall clock
  std::vector<TuningValues> finalists_;  // left to confirm, in order
  bool confirming_ = false;
  // The trial in progress: releases up to its end (`closed`), then the members' reports.
  uint64_t seen_ = 0, trial_tensors_ = 0, trial_bytes_ = 0, trial_collectives_ = 0;
  uint64_t overtime_tensors_ = 0;
  bool closed_ = false;
  Clock::time_point trial_start_, closed_at_;
  double wall_score_ = 0;
  std::map<int32_t, Report> reports_;  // by member rank, for period_
  std::vector<Trial> trials_;
};

}  // namespace tutti::server
