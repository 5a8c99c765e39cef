// The Execute builder: what every member of a set is sent once the negotiator released responses.
// Fusion, the response cache's slot compaction, the counters and the error reports all happen on
// this one path (releases, failures, stalls, removals all go through it), so it lives alone rather
// than beside any one of its callers. Single-threaded, like Job.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "proto/status_codec.h"
#include "proto/fusion_plan.h"
#include "common/dtype.h"
#include "server/core/recent_errors.h"
#include "server/core/service_metrics.h"

namespace tutti::server {

void Job::SendExecute(int32_t set_id, Negotiator& negotiator, std::vector<wire::Response> responses,
                      Outbox* out) {
  wire::Execute execute;
  execute.set_set_id(set_id);
  bool all_ok = true;
  ResponseCache& cache = negotiator.cache();
  // A tensor whose slot every member already knows travels as the slot alone; a slot assigned
  // now travels with the spec, and later responses may refer to it.
  auto compact = [&cache](uint32_t slot_plus_one, auto clear) {
    if (slot_plus_one == 0) return;
    const uint32_t slot = slot_plus_one - 1;
    if (cache.Published(slot)) clear();
    else cache.MarkPublished(slot);
  };
  // Autotuning: this Execute is planned with the set's current values and carries them, so that
  // they apply to its responses on every member (a member added by an elastic re-formation
  // included), and the members' fast path plans with the last ones received.
  Autotuner* tuner = nullptr;
  uint64_t released_tensors = 0, released_bytes = 0;
  if (Tuned(set_id)) {
    tuner = &tuning_.try_emplace(set_id, job_tuning_, autotune_options_).first->second;
    for (const auto& r : responses)
      if (!wire::Failed(r)) {
        ++released_tensors;
        released_bytes += static_cast<uint64_t>(wire::FusionBytes(r.spec(), r.member_rows()));
      }
    const TuningValues& now = tuner->current();
    wire::Tuning* sent = execute.mutable_tuning();
    sent->set_fusion_threshold(now.fusion_threshold);
    sent->set_small_allreduce_bytes(now.small_allreduce_bytes);
    sent->set_pipeline_bytes(now.pipeline_bytes);
    sent->set_trial(tuner->period());
  }
  const int64_t threshold = tuner ? tuner->current().fusion_threshold : fusion_threshold_;
  uint64_t released_collectives = 0;  // what each member's lane will run, and report
  for (auto& response : wire::PlanCollectives(std::move(responses), threshold)) {
    released_collectives += !wire::Failed(response);
    if (wire::Failed(response)) {
      all_ok = false;
      const Status status = wire::ToStatus(response.error());
      if (policy_.metrics) policy_.metrics->Error(status.code());
      if (policy_.errors) policy_.errors->Add(id_, -1, status);
    }
    const uint64_t tensors = 1 + static_cast<uint64_t>(response.fused_size());
    counters_.set_collectives_released(counters_.collectives_released() + 1);
    counters_.set_tensors_released(counters_.tensors_released() + tensors);
    if (tensors > 1) counters_.set_tensors_fused(counters_.tensors_fused() + tensors);
    if (SetStats* stats = negotiator.stats()) stats->Released(tensors);
    compact(response.cache_slot(), [&] { response.clear_spec(); });
    for (auto& part : *response.mutable_fused())
      compact(part.cache_slot(), [&] { part.clear_name(); });
    *execute.add_responses() = std::move(response);
  }
  for (uint32_t slot : cache.TakeEvicted()) execute.add_cache_evicted(slot);
  counters_.set_cache_evictions(cache.evictions());
  if (execute.responses_size() == 0 && execute.cache_evicted_size() == 0) return;
  execute.set_seq(negotiator.TakeSeq());
  if (tuner) {
    // The trials that ended since the set's previous Execute (this one is sent); one that ends
    // with this Execute's releases goes with the next, which then carries the values the tuner
    // moved on to.
    size_t& told = trials_told_[set_id];
    const auto& trials = tuner->trials();
    for (; told < trials.size(); ++told) {
      const Autotuner::Trial& trial = trials[told];
      wire::TrialResult* result = execute.mutable_tuning()->add_ended();
      result->set_trial(static_cast<uint32_t>(told + 1));
      result->set_fusion_threshold(trial.values.fusion_threshold);
      result->set_small_allreduce_bytes(trial.values.small_allreduce_bytes);
      result->set_pipeline_bytes(trial.values.pipeline_bytes);
      result->set_bytes_per_second(trial.bytes_per_second);
      result->set_own_time(trial.own_time);
      result->set_confirmation(trial.confirmation);
      result->set_converged(tuner->converged() && told + 1 == trials.size());
    }
  }
  bool trial_ended = false;
  if (tuner && released_tensors > 0) {
    const uint32_t before = tuner->trial();
    tuner->OnReleased(released_tensors, released_bytes, released_collectives,
                      negotiator.members().size(), Clock::now());
    LogTrialEnded(set_id, *tuner, before);
    trial_ended = tuner->trial() != before;
  }
  // Steady state: the members agree on the next cached tensors among themselves until one of
  // them needs tuttid again (docs/steady-state.md).
  // While its values are being tuned the set stays with tuttid, which measures it. A trial that
  // ended just now (the search may have converged with it) changed the values after this
  // Execute took them: the fast path, which plans with the last values received, waits for the
  // next Execute, which carries the new ones.
  const bool tuning_now = tuner && (!tuner->converged() || trial_ended);
  if (const uint64_t generation = tuning_now ? 0 : negotiator.MaybeGrant(execute.seq(), all_ok)) {
    execute.set_fast_path(generation);
    execute.set_fast_path_slots(cache.slot_count());
    wire::SetCounters& per_set = set_counters_[set_id];
    per_set.set_fast_path_grants(per_set.fast_path_grants() + 1);
  }
  // Encoded once: every member gets the same bytes (docs/scale.md).
  const Payload frame = frames::Execute(std::move(execute));
  for (int32_t member : negotiator.members())
    if (alive(member)) {
      out->push_back({peer_of_rank_[member], frame});
      counters_.set_execute_messages(counters_.execute_messages() + 1);
    }
}

void Job::ExecutedUnderTrials(int32_t rank, const wire::SetTensors& set, const Negotiator& negotiator) {
  auto it = tuning_.find(set.set_id());
  if (it == tuning_.end()) return;  // not tuned yet (or no longer: the set was removed)
  Autotuner& tuner = it->second;
  for (const auto& executed : set.executed()) {
    const uint32_t before = tuner.trial();
    tuner.OnExecuted(rank, executed.trial(), executed.collectives(), executed.bytes(),
                     executed.execute_ns(), negotiator.members().size(), Clock::now());
    LogTrialEnded(set.set_id(), tuner, before);
  }
}

void Job::AutotuneAsked(int32_t rank, int32_t set_id, const Negotiator& negotiator) {
  const auto& members = negotiator.members();
  if (std::find(members.begin(), members.end(), rank) == members.end()) return;
  if (autotune_ || !autotune_asked_.insert(set_id).second) return;
  spdlog::info("job '{}' set {}: autotuning asked by rank {}", id_, set_id, rank);
}

void Job::LogTrialEnded(int32_t set_id, const Autotuner& tuner, uint32_t trials_before) {
  if (tuner.trial() != trials_before && policy_.on_autotune_trial)
    policy_.on_autotune_trial(id_, set_id, tuner.trials().back(), tuner.converged());
}

wire::CoordinatorCounters Job::counters(int32_t set_id) const {
  wire::CoordinatorCounters counters = counters_;
  auto it = set_counters_.find(set_id);
  if (it != set_counters_.end()) *counters.mutable_set() = it->second;
  counters.mutable_set()->set_set_id(set_id);
  return counters;
}

}  // namespace tutti::server
