#include "server/core/autotuner.h"

namespace tutti::server {

Autotuner::Autotuner(TuningValues start, AutotuneOptions options)
    : options_(options), current_(start), best_(start) {
  // Grids around the defaults, spanning what the measurements in docs/fusion.md and
  // docs/algorithms.md found useful on loopback and shaped links.
  if (!options_.fusion_pinned)
    parameters_.push_back({"fusion_threshold", &TuningValues::fusion_threshold,
                           {0, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}});
  if (!options_.small_pinned)
    parameters_.push_back({"small_allreduce_bytes", &TuningValues::small_allreduce_bytes,
                           {0, 4 << 10, 16 << 10, 64 << 10, 256 << 10}});
  if (!options_.pipeline_pinned)
    parameters_.push_back({"pipeline_bytes", &TuningValues::pipeline_bytes,
                           {64 << 10, 256 << 10, 1 << 20, 4 << 20}});
  converged_ = parameters_.empty();
}

bool Autotuner::Advance() {
  while (parameter_ < parameters_.size()) {
    const Parameter& p = parameters_[parameter_];
    // The value the parameter had when its pass began was measured by an earlier trial.
    if (candidate_ == 0) pass_start_ = best_.*p.field;
    while (candidate_ < p.grid.size()) {
      const int64_t value = p.grid[candidate_++];
      if (value == pass_start_) continue;
      current_ = best_;
      current_.*p.field = value;
      return true;
    }
    ++parameter_;
    candidate_ = 0;
  }
  return false;
}

bool Autotuner::OnReleased(uint64_t tensors, uint64_t bytes, Clock::time_point now) {
  if (converged_) return false;
  seen_ += tensors;
  if (!measuring_) {
    if (seen_ < options_.warmup_releases) return false;
    // The trial starts at this release; its own tensors were negotiated before it began.
    measuring_ = true;
    trial_start_ = now;
    trial_tensors_ = trial_bytes_ = 0;
    return false;
  }
  trial_tensors_ += tensors;
  trial_bytes_ += bytes;
  const auto elapsed = now - trial_start_;
  if (trial_tensors_ < options_.trial_releases || elapsed < options_.trial_duration) return false;
  const double seconds = std::chrono::duration<double>(elapsed).count();
  const double score = seconds > 0 ? static_cast<double>(trial_bytes_) / seconds : 0;
  trials_.push_back({current_, score});
  if (score > best_score_) {
    best_score_ = score;
    best_ = current_;
  }
  // The next trial starts now, with the next values (or the best, once every one was tried).
  trial_start_ = now;
  trial_tensors_ = trial_bytes_ = 0;
  const TuningValues before = current_;
  if (!Advance()) {
    converged_ = true;
    current_ = best_;
  }
  return !(current_ == before);
}

nlohmann::json Autotuner::Status() const {
  auto values = [](const TuningValues& v) {
    return nlohmann::json{{"fusion_threshold", v.fusion_threshold},
                          {"small_allreduce_bytes", v.small_allreduce_bytes},
                          {"pipeline_bytes", v.pipeline_bytes}};
  };
  nlohmann::json trials = nlohmann::json::array();
  for (const Trial& t : trials_)
    trials.push_back({{"values", values(t.values)}, {"bytes_per_second", t.bytes_per_second}});
  nlohmann::json pinned = nlohmann::json::array();
  if (options_.fusion_pinned) pinned.push_back("fusion_threshold");
  if (options_.small_pinned) pinned.push_back("small_allreduce_bytes");
  if (options_.pipeline_pinned) pinned.push_back("pipeline_bytes");
  return {{"state", converged_ ? "converged" : "tuning"},
          {"current", values(current_)},
          {"best", values(best_)},
          {"best_bytes_per_second", best_score_ < 0 ? 0.0 : best_score_},
          {"pinned", std::move(pinned)},
          {"trials", std::move(trials)}};
}

}  // namespace tutti::server
