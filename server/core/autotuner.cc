#include "server/core/autotuner.h"

#include <algorithm>

namespace tutti::server {

Autotuner::Autotuner(TuningValues start, AutotuneOptions options)
    : options_(options), start_(start), current_(start), best_(start) {
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

bool Autotuner::StartConfirmation() {
  // The pass measured each combination once; a single trial can be lucky (a quiet second on a
  // busy machine), so the best few run again, and the starting values with them, so that the
  // tuner departs from them only on two measurements.
  if (options_.finalists == 0) return false;
  std::vector<const Trial*> ranked;
  for (const Trial& t : trials_) ranked.push_back(&t);
  std::stable_sort(ranked.begin(), ranked.end(), [](const Trial* a, const Trial* b) {
    return a->bytes_per_second > b->bytes_per_second;
  });
  for (const Trial* t : ranked)
    if (finalists_.size() < options_.finalists) finalists_.push_back(t->values);
  if (std::find(finalists_.begin(), finalists_.end(), start_) == finalists_.end())
    finalists_.back() = start_;
  confirming_ = true;
  current_ = finalists_.front();
  finalists_.erase(finalists_.begin());
  return true;
}

double Autotuner::MeanScore(const TuningValues& values) const {
  double sum = 0;
  int n = 0;
  for (const Trial& t : trials_)
    if (t.values == values) {
      sum += t.bytes_per_second;
      ++n;
    }
  return n > 0 ? sum / n : -1;
}

void Autotuner::Converge() {
  converged_ = true;
  if (confirming_) {
    // The finalists by the mean of their two measurements; the starting values keep their place
    // unless beaten by more than min_gain (the rest is noise on a busy machine).
    TuningValues chosen = start_;
    double chosen_score = MeanScore(start_);
    const double bar = chosen_score * (1 + options_.min_gain);
    for (const Trial& t : trials_) {
      if (!t.confirmation) continue;
      const double score = MeanScore(t.values);
      if (score > bar && score > chosen_score) {
        chosen = t.values;
        chosen_score = score;
      }
    }
    best_ = chosen;
    best_score_ = chosen_score;
  }
  current_ = best_;
}

bool Autotuner::MaybeEnd(size_t members, Clock::time_point now) {
  if (!closed_) return false;
  bool own_time = false;
  if (!wall_clock_only_) {
    size_t complete = 0;
    for (const auto& [rank, report] : reports_)
      complete += report.collectives >= trial_collectives_ && report.execute_ns > 0;
    if (complete < members) {
      // A member that lags (or never reports) holds the trial up for another trial's length at
      // most; its values stay in effect meanwhile, so whatever it reports later still counts.
      const bool grace_over = overtime_tensors_ >= options_.trial_releases &&
                              now - closed_at_ >= options_.trial_duration;
      if (!grace_over) return false;
      if (reports_.empty()) wall_clock_only_ = true;  // an earlier library: the wall clock
    }
    own_time = !reports_.empty();
  }
  double score = wall_score_;
  if (own_time) {
    // Every member ran every collective: the mean over the members of their own time.
    uint64_t bytes = 0, ns = 0;
    for (const auto& [rank, report] : reports_) {
      bytes += report.bytes;
      ns += report.execute_ns;
    }
    score = ns > 0 ? static_cast<double>(bytes) * 1e9 / static_cast<double>(ns) : 0;
  }
  trials_.push_back({current_, score, own_time, confirming_});
  if (!confirming_ && score > best_score_) {
    best_score_ = score;
    best_ = current_;
  }
  // The next trial starts with the next Execute, with the next values (or the best, once every
  // one was tried).
  ++period_;
  trial_start_ = now;
  trial_tensors_ = trial_bytes_ = trial_collectives_ = overtime_tensors_ = 0;
  closed_ = false;
  reports_.clear();
  if (confirming_) {
    if (finalists_.empty()) {
      Converge();
    } else {
      current_ = finalists_.front();
      finalists_.erase(finalists_.begin());
    }
  } else if (!Advance() && !StartConfirmation()) {
    Converge();
  }
  return true;
}

bool Autotuner::OnReleased(uint64_t tensors, uint64_t bytes, uint64_t collectives, size_t members,
                           Clock::time_point now) {
  if (converged_) return false;
  if (period_ == 0) {
    seen_ += tensors;
    if (seen_ < options_.warmup_releases) return false;
    // The first trial starts with the next Execute: what the warm-up ran is not measured.
    period_ = 1;
    trial_start_ = now;
    return true;
  }
  if (closed_) {
    overtime_tensors_ += tensors;
  } else {
    // The wall clock runs from the trial's first release: the time before it still went to
    // the previous values' work. So its bytes are those released after the first.
    if (trial_tensors_ == 0) trial_start_ = now;
    else trial_bytes_ += bytes;
    trial_tensors_ += tensors;
    trial_collectives_ += collectives;
    const auto elapsed = now - trial_start_;
    if (trial_tensors_ >= options_.trial_releases && elapsed >= options_.trial_duration) {
      closed_ = true;
      closed_at_ = now;
      const double seconds = std::chrono::duration<double>(elapsed).count();
      wall_score_ = seconds > 0 ? static_cast<double>(trial_bytes_) / seconds : 0;
    }
  }
  return MaybeEnd(members, now);
}

bool Autotuner::OnExecuted(int32_t rank, uint32_t period, uint64_t collectives, uint64_t bytes,
                           uint64_t execute_ns, size_t members, Clock::time_point now) {
  // Totals so far: the latest report replaces the member's earlier one. Reports of an ended
  // period (or of the warm-up) come late and count for nothing.
  if (converged_ || period == 0 || period != period_) return false;
  reports_[rank] = {collectives, bytes, execute_ns};
  return MaybeEnd(members, now);
}

nlohmann::json Autotuner::Status() const {
  auto values = [](const TuningValues& v) {
    return nlohmann::json{{"fusion_threshold", v.fusion_threshold},
                          {"small_allreduce_bytes", v.small_allreduce_bytes},
                          {"pipeline_bytes", v.pipeline_bytes}};
  };
  nlohmann::json trials = nlohmann::json::array();
  for (const Trial& t : trials_)
    trials.push_back({{"values", values(t.values)},
                      {"bytes_per_second", t.bytes_per_second},
                      {"scored_by", t.own_time ? "execution time" : "wall clock"},
                      {"confirmation", t.confirmation}});
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
