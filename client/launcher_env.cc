#include "client/launcher_env.h"

#include <cstdlib>

namespace tutti::client {

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::optional<std::string> JobIdFromLauncher() {
  if (auto job = Env("TUTTI_JOB")) return job;
  if (auto mpi = Env("OMPI_MCA_ess_base_jobid")) return "mpi-" + *mpi;
  if (auto pmix = Env("PMIX_NAMESPACE")) return "mpi-" + *pmix;
  if (auto slurm = Env("SLURM_JOB_ID"))
    return "slurm-" + *slurm + "." + Env("SLURM_STEP_ID").value_or("0");
  if (auto run = Env("TORCHELASTIC_RUN_ID")) {
    if (*run != "none") return "torchrun-" + *run;
    // torchrun's default names no job; the rendezvous endpoint does, for the job's lifetime.
    auto addr = Env("MASTER_ADDR"), port = Env("MASTER_PORT");
    if (addr && port) return "torchrun-" + *addr + ":" + *port;
  }
  return std::nullopt;
}

}  // namespace tutti::client
