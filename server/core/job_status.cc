// The status description: the JSON the status pages show for a job (ranks, hosts, sets with their
// figures and stragglers, pending tensors). It only reads the job, on tuttid's thread, between
// frames; kept apart so that what the pages show can change without touching how the job runs.
#include "server/core/job.h"

#include <nlohmann/json.hpp>

namespace tutti::server {

size_t Job::alive_ranks() const {
  size_t n = 0;
  for (int32_t r = 0; r < size_; ++r)
    if (registrations_[r] && alive(r)) ++n;
  return n;
}

nlohmann::json Job::Describe(Clock::time_point now, size_t pending_per_set) const {
  using nlohmann::json;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  json ranks = json::array();
  for (int32_t r = 0; r < size_; ++r) {
    json rank = {{"rank", r}};
    if (!registrations_[r]) {
      rank["state"] = "missing";
      ranks.push_back(std::move(rank));
      continue;
    }
    // The host identity is "hostname/boot id/netns:inode": the name is what an operator knows.
    const std::string& host = registrations_[r]->host();
    rank["host"] = host.substr(0, host.find('/'));
    rank["host_id"] = host;
    rank["data_endpoint"] = registrations_[r]->data_endpoint();
    rank["state"] = state_[r] == RankState::kAlive ? "alive"
                    : state_[r] == RankState::kLost    ? "lost"
                    : state_[r] == RankState::kJoining ? "joining"
                                                       : "left";
    if (welcomed_ && alive(r)) rank["last_seen_seconds"] = seconds(now - last_seen_[r]);
    ranks.push_back(std::move(rank));
  }
  json sets = json::array();
  for (const auto& [set_id, negotiator] : negotiators_) {
    json pending = json::array();
    for (const auto& p : negotiator.Describe(now, pending_per_set))
      pending.push_back({{"name", p.name},
                         {"waited_seconds", seconds(p.waited)},
                         {"submitted", p.submitted},
                         {"missing", p.missing}});
    json set = {{"id", set_id},
                {"members", negotiator.members()},
                {"pending_count", negotiator.pending_count()},
                {"pending", std::move(pending)}};
    // What the set's own page shows (docs/operations.md): its figures and stragglers, and how
    // much of its work ran on its members' fast path, which tuttid does not see tensor by tensor.
    auto stats = set_stats_.find(set_id);
    if (stats != set_stats_.end()) set["stats"] = stats->second.ToJson();
    auto counters = set_counters_.find(set_id);
    const wire::SetCounters none;
    const wire::SetCounters& c = counters == set_counters_.end() ? none : counters->second;
    set["fast_path"] = {{"members_on", negotiator.fast_path_members()},
                        {"grants", c.fast_path_grants()},
                        {"exits", c.fast_path_exits()},
                        {"rounds", c.fast_path_rounds()}};
    auto tuned = tuning_.find(set_id);
    if (tuned != tuning_.end()) set["autotune"] = tuned->second.Status();
    sets.push_back(std::move(set));
  }
  return {{"id", id_},
          {"membership_epoch", membership_epoch_},
          {"size", size_},
          {"state", failed_ ? "failed" : welcomed_ ? "running" : "rendezvous"},
          {"registered", registered_},
          {"ranks", std::move(ranks)},
          {"process_sets", std::move(sets)},
          {"pending_tensors", budget_.used},
          {"collectives_released", counters_.collectives_released()},
          {"tensors_released", counters_.tensors_released()}};
}

}  // namespace tutti::server
