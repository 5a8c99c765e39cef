#include "launcher/hosts.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace tutti::launcher {
namespace {

constexpr int kMaxSlots = 1 << 20;  // tutti's largest world

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

bool ParseSlots(const std::string& text, int* slots) {
  if (text.empty() || text.size() > 7 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  *slots = std::stoi(text);
  return *slots >= 1 && *slots <= kMaxSlots;
}

// A name ssh can be given as its destination: no spaces, quotes or shell characters, and no
// leading '-', which ssh would take for an option. "user@host" passes, as ssh accepts it.
std::string HostNameProblem(const std::string& name) {
  if (name.empty()) return "an empty host name";
  if (name[0] == '-') return "host '" + name + "' starts with '-'";
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_' || c == '@';
    if (!ok) {
      if (c == ':')
        return "host '" + name + "': IPv6 addresses are not supported; give the host's name";
      return "host '" + name + "' has a character a host name cannot have ('" +
             std::string(1, c) + "')";
    }
  }
  return "";
}

// Adds `host`, refusing a second entry for the same name: two counts for one host would leave
// the user guessing which one tuttirun took.
bool Add(const HostSlots& host, std::vector<HostSlots>* hosts, std::string* error) {
  const bool known = std::any_of(hosts->begin(), hosts->end(),
                                 [&](const HostSlots& h) { return h.name == host.name; });
  if (known) {
    *error = "host '" + host.name + "' is listed twice";
    return false;
  }
  hosts->push_back(host);
  return true;
}

// "host" or "host:N".
bool ParseEntry(const std::string& entry, HostSlots* host, std::string* error) {
  const auto colon = entry.rfind(':');
  host->name = entry.substr(0, colon);
  host->slots = 1;
  if (colon != std::string::npos && !ParseSlots(entry.substr(colon + 1), &host->slots)) {
    *error = "'" + entry + "': slots must be a number from 1 to " + std::to_string(kMaxSlots);
    return false;
  }
  *error = HostNameProblem(host->name);
  return error->empty();
}

}  // namespace

bool ParseHostList(const std::string& text, std::vector<HostSlots>* hosts, std::string* error) {
  hosts->clear();
  std::stringstream in(text);
  for (std::string raw; std::getline(in, raw, ',');) {
    const std::string entry = Trim(raw);
    HostSlots host;
    std::string problem;
    if (entry.empty()) problem = "an empty entry";
    else if (ParseEntry(entry, &host, &problem)) Add(host, hosts, &problem);
    if (!problem.empty()) {
      *error = "-H '" + text + "': " + problem + " (expected HOST:SLOTS,HOST:SLOTS,...)";
      return false;
    }
  }
  if (text.empty() || text.back() == ',') {  // getline sees no entry after a last comma
    *error = "-H '" + text + "': an empty entry (expected HOST:SLOTS,HOST:SLOTS,...)";
    return false;
  }
  return true;
}

bool ParseHostfileText(const std::string& text, const std::string& source,
                       std::vector<HostSlots>* hosts, std::string* error) {
  hosts->clear();
  std::istringstream in(text);
  int number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++number;
    const std::string line = Trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string first, second, extra;
    words >> first >> second >> extra;
    HostSlots host;
    std::string problem;
    if (!extra.empty() || (!second.empty() && second.rfind("slots=", 0) != 0)) {
      problem = "expected 'HOST slots=N', 'HOST:N' or 'HOST', not '" + line + "'";
    } else if (!second.empty()) {
      host.name = first;
      problem = HostNameProblem(first);
      if (problem.empty() && !ParseSlots(second.substr(6), &host.slots))
        problem = "'" + line + "': slots must be a number from 1 to " + std::to_string(kMaxSlots);
    } else {
      ParseEntry(first, &host, &problem);
    }
    if (problem.empty()) Add(host, hosts, &problem);
    if (!problem.empty()) {
      *error = source + ":" + std::to_string(number) + ": " + problem;
      return false;
    }
  }
  if (hosts->empty()) {
    *error = source + ": no hosts in it";
    return false;
  }
  return true;
}

bool ParseHostfile(const std::string& path, std::vector<HostSlots>* hosts, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "--hostfile " + path + ": cannot be read";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!ParseHostfileText(text.str(), path, hosts, error)) {
    *error = "--hostfile " + *error;
    return false;
  }
  return true;
}

int TotalSlots(const std::vector<HostSlots>& hosts) {
  int64_t total = 0;
  for (const HostSlots& h : hosts) total += h.slots;
  return static_cast<int>(std::min<int64_t>(total, INT32_MAX));
}

std::vector<Placement> PlaceRanks(const std::vector<HostSlots>& hosts, int np) {
  std::vector<Placement> placements;
  // Per local rank, the hosts that have one, in host order: horovodrun's cross communicator.
  std::map<int, std::vector<std::string>> hosts_with_local_rank;
  for (const HostSlots& host : hosts) {
    const size_t first = placements.size();
    for (int local = 0; local < host.slots && static_cast<int>(placements.size()) < np; ++local) {
      Placement p;
      p.host = host.name;
      p.rank = static_cast<int>(placements.size());
      p.local_rank = local;
      p.cross_rank = static_cast<int>(hosts_with_local_rank[local].size());
      hosts_with_local_rank[local].push_back(host.name);
      placements.push_back(p);
    }
    for (size_t i = first; i < placements.size(); ++i)
      placements[i].local_size = static_cast<int>(placements.size() - first);
  }
  for (Placement& p : placements)
    p.cross_size = static_cast<int>(hosts_with_local_rank[p.local_rank].size());
  return placements;
}

}  // namespace tutti::launcher
