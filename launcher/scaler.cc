#include "launcher/scaler.h"

#include <signal.h>

#include <algorithm>
#include <thread>

#include "launcher/output.h"

namespace tutti::launcher {
namespace {

constexpr auto kScriptTimeout = std::chrono::seconds(10);

bool Live(const RankProcess& r) { return r.running() && !r.retired(); }

}  // namespace

Scaler::Scaler(Settings settings, StartRank start)
    : settings_(std::move(settings)),
      start_(std::move(start)),
      blacklist_(settings_.cooldown_min_s, settings_.cooldown_max_s) {}

bool Scaler::Discover(std::string* error) {
  std::vector<DiscoveredHost> hosts;
  if (!DiscoverHosts(settings_.script, settings_.slots_per_host, kScriptTimeout, &hosts, error))
    return false;
  for (const DiscoveredHost& h : hosts)
    if (!IsThisMachine(h.name) && warned_.insert(h.name).second)
      Say("host '" + h.name + "' is not this machine; tuttirun starts ranks on this machine "
          "only, so it is ignored");
  hosts_ = std::move(hosts);
  return true;
}

bool Scaler::Usable(const std::string& host, Clock::time_point now) const {
  return IsThisMachine(host) && !blacklist_.Blocked(host, now);
}

int Scaler::UsableSlots(Clock::time_point now) const {
  int slots = 0;
  for (const DiscoveredHost& h : hosts_)
    if (Usable(h.name, now)) slots += h.slots;
  return slots;
}

int Scaler::Target(Clock::time_point now) const {
  const int slots = UsableSlots(now);
  return settings_.max_np > 0 ? std::min(slots, settings_.max_np) : slots;
}

bool Scaler::WaitForSlots(int min_np, std::chrono::milliseconds timeout, std::string* error) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    std::string problem;
    if (!Discover(&problem)) Say(problem);
    const int slots = UsableSlots(Clock::now());
    if (slots >= min_np) return true;
    if (Clock::now() + kInterval > deadline) {
      *error = "the host discovery script lists " + std::to_string(slots) +
               " usable slots, fewer than --min-np " + std::to_string(min_np) + ", after " +
               std::to_string(timeout.count() / 1000) + " s (--elastic-timeout)";
      return false;
    }
    std::this_thread::sleep_for(kInterval);  // the script's next run, as Horovod polls it
  }
}

int Scaler::InitialSize(int np) const {
  const int target = Target(Clock::now());
  return np > 0 ? std::min(np, target) : target;
}

void Scaler::Fill(Ranks& ranks, int target) {
  const auto now = Clock::now();
  int live = static_cast<int>(std::count_if(ranks.begin(), ranks.end(),
                                            [](const auto& r) { return Live(*r); }));
  for (const DiscoveredHost& h : hosts_) {
    if (!Usable(h.name, now)) continue;
    int used = static_cast<int>(std::count_if(ranks.begin(), ranks.end(), [&](const auto& r) {
      return Live(*r) && r->host() == h.name;
    }));
    while (live < target && used < h.slots) {
      const int rank = next_rank_++;
      try {
        ranks.push_back(start_(rank, h.name));
      } catch (const std::exception& e) {
        Say("cannot start rank " + std::to_string(rank) + " on host '" + h.name + "': " + e.what());
        return;
      }
      ++live;
      ++used;
    }
  }
}

void Scaler::Poll(Ranks& ranks) {
  next_poll_ = Clock::now() + kInterval;
  std::string error;
  if (!Discover(&error)) {
    Say(error + "; keeping the hosts it listed before");
  } else {
    for (auto& r : ranks) {
      if (!Live(*r)) continue;
      const bool listed = std::any_of(hosts_.begin(), hosts_.end(),
                                      [&](const DiscoveredHost& h) { return h.name == r->host(); });
      if (listed) continue;
      Say("host '" + r->host() + "' is no longer listed by the discovery script; stopping rank " +
          std::to_string(r->rank()));
      r->Retire(SIGTERM);
    }
  }
  if (!finishing_) Fill(ranks, Target(Clock::now()));
}

void Scaler::Failed(const RankProcess& rank) {
  if (rank.host().empty()) return;
  Say("host '" + rank.host() + "' is blacklisted " + blacklist_.Add(rank.host(), Clock::now()));
}

}  // namespace tutti::launcher
