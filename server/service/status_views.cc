#include "server/service/status_views.h"

#include <algorithm>
#include <map>

#include "server/service/status_html.h"

namespace tutti::server {

using nlohmann::json;

const json* FindJob(const json& snapshot, const std::string& id) {
  const json* found = nullptr;
  // Generations of one id come oldest first (CoordinatorCore::ForEachJob): the last is the one
  // its ranks talk to now.
  for (const json& job : snapshot.at("jobs"))
    if (job.at("id").get_ref<const std::string&>() == id) found = &job;
  return found;
}

const json* FindSet(const json& job, int64_t set_id) {
  for (const json& set : job.at("process_sets"))
    if (set.at("id").get<int64_t>() == set_id) return &set;
  return nullptr;
}

json SetView(const json& job, const json& set) {
  json view = set;
  view["job"] = {{"id", job.at("id")}, {"state", job.at("state")}, {"size", job.at("size")}};
  std::map<int64_t, const json*> rank_entry;
  for (const json& rank : job.at("ranks")) rank_entry[rank.at("rank").get<int64_t>()] = &rank;
  std::map<int64_t, const json*> straggler;
  if (set.contains("stats"))
    for (const json& s : set.at("stats").at("stragglers").at("ranks"))
      straggler[s.at("rank").get<int64_t>()] = &s;
  json members = json::array();
  for (const json& member : set.at("members")) {
    const int64_t r = member.get<int64_t>();
    auto entry = rank_entry.find(r);
    json m = entry != rank_entry.end() ? *entry->second : json{{"rank", r}, {"state", "unknown"}};
    auto s = straggler.find(r);
    if (s != straggler.end()) {
      json figures = *s->second;
      figures.erase("rank");
      m["straggler"] = std::move(figures);
    }
    members.push_back(std::move(m));
  }
  view["member_states"] = std::move(members);
  return view;
}

namespace {

// "<digits>" as a set id, or -1.
int64_t ParseSetId(const std::string& text) {
  if (text.empty() || text.size() > 10) return -1;
  for (char c : text)
    if (c < '0' || c > '9') return -1;
  const int64_t id = std::stoll(text);
  return id <= INT32_MAX ? id : -1;
}

}  // namespace

PageTarget ResolveJobPath(const json& snapshot, const std::string& target) {
  PageTarget found;
  static const std::string kJob = "/job/", kSet = "/set/";
  const std::string path = target.substr(0, target.find('?'));
  // "/job/" <id> ["/set/" <set>], the id percent-encoded in one segment.
  const size_t id_end = std::min(path.find('/', kJob.size()), path.size());
  std::string id;
  const std::string rest = path.substr(id_end);
  int64_t set_id = -1;
  const bool page = path.compare(0, kJob.size(), kJob) == 0 &&
                    UrlUnescape(path.substr(kJob.size(), id_end - kJob.size()), &id) &&
                    !id.empty() &&
                    (rest.empty() || (rest.compare(0, kSet.size(), kSet) == 0 &&
                                      (set_id = ParseSetId(rest.substr(kSet.size()))) >= 0));
  if (!page) {
    found.not_found = "not a page of tuttid: /job/<job id> or /job/<job id>/set/<set id>, with "
                      "'/' in the job id as %2F\n";
    return found;
  }
  const json* job = FindJob(snapshot, id);
  if (!job) {
    found.not_found = "no job '" + id + "' on this tuttid\n";
    return found;
  }
  if (set_id < 0) {
    found.job = job;
    return found;
  }
  found.set = FindSet(*job, set_id);
  if (!found.set) {
    found.not_found = "job '" + id + "' has no active process set " + std::to_string(set_id) + "\n";
    return found;
  }
  found.job = job;
  return found;
}

json JsonView(const json& snapshot, const std::string& job_id, const std::string& set,
              std::string* not_found) {
  const json* job = FindJob(snapshot, job_id);
  if (!job) {
    *not_found = "no job '" + job_id + "' on this tuttid\n";
    return nullptr;
  }
  if (set.empty()) return *job;
  const int64_t set_id = ParseSetId(set);
  const json* found = set_id >= 0 ? FindSet(*job, set_id) : nullptr;
  if (!found) {
    *not_found = "job '" + job_id + "' has no active process set '" + set + "'\n";
    return nullptr;
  }
  return SetView(*job, *found);
}

}  // namespace tutti::server
