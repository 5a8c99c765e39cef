// Elastic tuttirun with a host discovery script (docs/elastic.md, "Scaling with tuttirun"): keeps
// the job's ranks matched to the hosts the script lists. Re-run every second by the supervisor,
// it stops the ranks of hosts that disappeared and starts ranks on free slots of usable hosts
// (listed, naming this machine, not blacklisted) up to --max-np. A started rank registers as a
// rank added to the running job, which tuttid admits at the job's next boundary. A host whose
// rank fails is blacklisted (HostBlacklist). Main thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "launcher/host_discovery.h"
#include "launcher/rank_process.h"

namespace tutti::launcher {

class Scaler {
 public:
  using Clock = std::chrono::steady_clock;
  using Ranks = std::vector<std::unique_ptr<RankProcess>>;
  // Starts rank number `rank` on `host`; throws what RankProcess::Start throws.
  using StartRank = std::function<std::unique_ptr<RankProcess>(int rank, const std::string& host)>;
  struct Settings {
    std::string script;
    int slots_per_host = 1;
    int max_np = 0;  // 0: every usable slot
    double cooldown_min_s = 0, cooldown_max_s = 0;
  };
  static constexpr auto kInterval = std::chrono::seconds(1);  // Horovod's discovery frequency

  Scaler(Settings settings, StartRank start);

  // Runs the script until at least `min_np` slots are usable, for at most `timeout`; false
  // with `*error` saying what was found otherwise.
  bool WaitForSlots(int min_np, std::chrono::milliseconds timeout, std::string* error);
  // How many ranks the job starts with: `np` (<= 0: every usable slot), at most --max-np and
  // the usable slots.
  int InitialSize(int np) const;
  // Starts ranks on free usable slots until `target` run.
  void Fill(Ranks& ranks, int target);

  Clock::time_point next_poll() const { return next_poll_; }
  // Runs the script again and matches the ranks to what it lists.
  void Poll(Ranks& ranks);
  // A rank failed: its host is blacklisted.
  void Failed(const RankProcess& rank);
  // A rank exited 0: the job is finishing, and its slot is not filled again (a rank started now
  // would wait to join a job whose ranks no longer reach a boundary).
  void Finished() { finishing_ = true; }

 private:
  bool Discover(std::string* error);
  bool Usable(const std::string& host, Clock::time_point now) const;
  int UsableSlots(Clock::time_point now) const;
  int Target(Clock::time_point now) const;

  const Settings settings_;
  const StartRank start_;
  std::vector<DiscoveredHost> hosts_;  // as the script last listed them
  std::set<std::string> warned_;       // hosts named once as not this machine
  HostBlacklist blacklist_;
  int next_rank_ = 0;
  bool finishing_ = false;
  Clock::time_point next_poll_{};
};

}  // namespace tutti::launcher
