// What the launcher that started this rank says about its job, read in one place: tuttirun's
// TUTTI_* variables first, then OpenMPI's, Slurm's and torchrun's. Later engines (Spark, Ray)
// add theirs here.
#pragma once

#include <optional>
#include <string>

namespace tutti::client {

// An environment variable's value; unset and empty alike give nullopt.
std::optional<std::string> Env(const char* name);

// The job's id: TUTTI_JOB; OpenMPI's OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE (prefixed
// "mpi-"); Slurm's SLURM_JOB_ID.SLURM_STEP_ID ("slurm-"); torchrun's TORCHELASTIC_RUN_ID
// ("torchrun-"), whose default "none" names no job and is combined with MASTER_ADDR:MASTER_PORT.
// nullopt when none of them is set: two unrelated jobs must never share an id by default.
std::optional<std::string> JobIdFromLauncher();

}  // namespace tutti::client
