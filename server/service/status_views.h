// Lookups in tuttid's snapshot for the per-job and per-set pages and their JSON
// (docs/operations.md): which job and set an address names, and the set as its page shows it.
// Pure functions of the snapshot; any thread.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tutti::server {

// The job `id` of the snapshot, its newest generation if several are there; null if none.
const nlohmann::json* FindJob(const nlohmann::json& snapshot, const std::string& id);
// The set `set_id` of `job`; null if the job has no such active set.
const nlohmann::json* FindSet(const nlohmann::json& job, int64_t set_id);

// The set's description with "job" (the job's id and state) and "member_states": each member's
// entry of the job's ranks (state, host, last heard) with, under "straggler", its figures when it
// is among the stragglers the set lists (SetStats::kShownStragglers, worst first). What
// /job/<id>/set/<set> renders and /status.json?job=<id>&set=<set> returns.
nlohmann::json SetView(const nlohmann::json& job, const nlohmann::json& set);

// What a page address names: `target` is the request's target as sent, still percent-encoded
// (httplib's Request::target; a query is ignored), "/job/<id>" or "/job/<id>/set/<set>" with the
// job id one segment, '/' in it sent as %2F (JobPath's links do that), so that no job id can be
// taken for another job's set page. Otherwise nothing, with the text of the 404.
struct PageTarget {
  const nlohmann::json* job = nullptr;
  const nlohmann::json* set = nullptr;  // set only for a set page
  std::string not_found;                // the 404's text when job is null
};
PageTarget ResolveJobPath(const nlohmann::json& snapshot, const std::string& target);

// What "/status.json?job=<id>[&set=<set>]" returns (null with `not_found` set otherwise): the
// job's entry, or the set's SetView. `set` empty: the job.
nlohmann::json JsonView(const nlohmann::json& snapshot, const std::string& job,
                        const std::string& set, std::string* not_found);

}  // namespace tutti::server
