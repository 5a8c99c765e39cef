// Zero-setup launch through a launcher's exchange (docs/launchers.md, "Zero-setup"): when no
// coordinator is named, `mpirun -np 4 ./train` and `srun --mpi=pmi2 -n 4 ./train` need no
// tuttid started by hand. The launcher's rank 0 starts tuttid as its child (tuttid_child.h) and
// puts its endpoint and a fresh random job token into the launcher's exchange (launcher_kvs.h);
// every process takes them from there. No fixed port: two jobs on one host never collide.
// tutti_init runs it, on the calling thread, before the runtime exists; the runtime handle owns
// the result, which outlives the runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "bootstrap/tuttid_child.h"
#include "common/status.h"

namespace tutti::bootstrap {

class ZeroSetup {
 public:
  // Whether tutti_init should bootstrap: no coordinator in the options (`named`; "auto" counts
  // as none) and TUTTI_COORDINATOR unset, empty or "auto".
  static bool Wanted(const std::optional<std::string>& named);

  // Collective over the launcher's job. Ok with `*out` empty where no launcher offers an
  // exchange and TUTTI_COORDINATOR is unset: init then says that no coordinator is named.
  // Every process returns the same error when rank 0 could not start the coordinator, prefixed
  // "rank 0: ". `anchor`: an address in libtutti.so, to find the tuttid beside it.
  static Status Run(const void* anchor, int64_t timeout_ms, std::unique_ptr<ZeroSetup>* out);

  // Rank 0, once its own runtime has left the job (tutti_finalize): the coordinator exits by
  // itself once every rank has left too; this waits up to the job's timeout for that, then
  // stops it. Destroying the object without it stops the coordinator at once (a failed init).
  void AwaitJobEnd();

  const std::string& coordinator() const { return coordinator_; }
  const std::string& token() const { return token_; }

 private:
  std::string coordinator_, token_;
  TuttidChild child_;  // rank 0's
  int64_t timeout_ms_ = 0;
};

}  // namespace tutti::bootstrap
