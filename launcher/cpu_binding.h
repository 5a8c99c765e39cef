// Which CPUs each local rank runs on (tuttirun --bind-to), as mpirun binds its ranks: a rank that
// stays on its own core keeps its caches and, above all, never waits behind its peer for the
// same core, which on a small machine is the difference between a 20 µs and a 90 µs collective
// (docs/launcher.md, "CPU binding"). Built once in tuttirun's main thread before any rank starts;
// read-only afterwards.
#pragma once

#include <sched.h>

#include <optional>
#include <string>
#include <vector>

namespace tutti::launcher {

class CpuBinding {
 public:
  // `policy`: "none", "hwthread", "core", "socket", or "auto" (core when every local rank can
  // have a core of its own, else none, as mpirun leaves an oversubscribed job unbound).
  // `max_local_ranks`: the most ranks that can run here at once (0: no bound, an elastic job
  // without --max-np). `allowed`: the CPUs tuttirun itself may use, which the ranks' sets are
  // cut from. Returns nothing and sets `problem` when the policy cannot be met.
  static std::optional<CpuBinding> Make(const std::string& policy, int max_local_ranks,
                                        const cpu_set_t& allowed, std::string* problem);

  bool bound() const { return !units_.empty(); }
  // The CPUs of local rank `rank`; nullptr when ranks are not bound.
  const cpu_set_t* For(int rank) const;
  // "core 1 (CPUs 1,5)", for --report-bindings; only when bound.
  std::string Describe(int rank) const;

 private:
  struct Unit {
    int id;  // the core's, socket's or CPU's number
    cpu_set_t cpus;
    std::vector<int> list;
  };
  std::string kind_;
  std::vector<Unit> units_;  // ordered by their first CPU
};

// The CPUs this process may run on (sched_getaffinity).
cpu_set_t AllowedCpus();

}  // namespace tutti::launcher
