// Elastic tuttirun's hosts (docs/elastic.md, "Scaling with tuttirun"): what the discovery script
// lists, which hosts are blacklisted after a failure and until when, and which of them tuttirun
// can start ranks on. Main thread only.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace tutti::launcher {

struct DiscoveredHost {
  std::string name;
  int slots = 1;
};

// Runs `script` (through /bin/sh -c) and parses its output: one host per line, "HOST" or
// "HOST:SLOTS" (`default_slots` when absent). False with `*error` set when the script fails,
// runs longer than `timeout`, or prints something else.
bool DiscoverHosts(const std::string& script, int default_slots, std::chrono::milliseconds timeout,
                   std::vector<DiscoveredHost>* hosts, std::string* error);

// Whether tuttirun starts ranks for `host` itself: it names this machine (localhost, 127.0.0.x,
// ::1, or this machine's host name). Until tuttirun runs across hosts, other hosts are ignored.
bool IsThisMachine(const std::string& host);

class HostBlacklist {
 public:
  using Clock = std::chrono::steady_clock;
  // `cooldown_min`/`cooldown_max` (seconds; 0/0: a blacklisted host never comes back): a host
  // blacklisted for its n-th time is usable again after min(max, min * 2^(n-1)) seconds.
  HostBlacklist(double cooldown_min_s, double cooldown_max_s)
      : min_s_(cooldown_min_s), max_s_(cooldown_max_s) {}

  // A rank on `host` failed: the host gets no new ranks until its cool-down ends. Returns a
  // description for tuttirun's message ("for 2 s", "for the rest of the job").
  std::string Add(const std::string& host, Clock::time_point now);
  bool Blocked(const std::string& host, Clock::time_point now) const;

 private:
  struct Entry {
    int times = 0;
    Clock::time_point until{};
    bool forever = false;
  };
  double min_s_, max_s_;
  std::map<std::string, Entry> hosts_;
};

}  // namespace tutti::launcher
