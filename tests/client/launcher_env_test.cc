// Where a rank finds its job's id (client/launcher_env.h): tuttirun's TUTTI_JOB first, then the
// ids OpenMPI, Slurm and torchrun give every rank of one job, and nothing at all otherwise.
#include "client/launcher_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>

namespace tutti::client {
namespace {

// Sets exactly `vars` among the variables JobIdFromLauncher reads, and restores them after.
class LauncherEnv {
 public:
  explicit LauncherEnv(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* name : kRead) {
      if (const char* old = std::getenv(name)) saved_[name] = old;
      unsetenv(name);
    }
    for (const auto& [name, value] : vars) setenv(name, value, 1);
  }
  LauncherEnv(const LauncherEnv&) = delete;
  LauncherEnv& operator=(const LauncherEnv&) = delete;
  ~LauncherEnv() {
    for (const char* name : kRead) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  static constexpr const char* kRead[] = {"TUTTI_JOB",    "OMPI_MCA_ess_base_jobid",
                                          "PMIX_NAMESPACE", "SLURM_JOB_ID",
                                          "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID",
                                          "MASTER_ADDR",  "MASTER_PORT"};
  std::map<std::string, std::string> saved_;
};

TEST(JobIdFromLauncher, TuttiJobWinsOverEveryLauncher) {
  LauncherEnv env({{"TUTTI_JOB", "mine"}, {"SLURM_JOB_ID", "7"}, {"OMPI_MCA_ess_base_jobid", "9"}});
  EXPECT_EQ(JobIdFromLauncher(), "mine");
}

TEST(JobIdFromLauncher, OpenMpiJobIdOrPmixNamespace) {
  {
    LauncherEnv env({{"OMPI_MCA_ess_base_jobid", "3735928559"}, {"PMIX_NAMESPACE", "ns"}});
    EXPECT_EQ(JobIdFromLauncher(), "mpi-3735928559");
  }
  LauncherEnv env({{"PMIX_NAMESPACE", "prterun-host-1234@1"}});
  EXPECT_EQ(JobIdFromLauncher(), "mpi-prterun-host-1234@1");
}

TEST(JobIdFromLauncher, SlurmJobAndStep) {
  {
    LauncherEnv env({{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "3"}});
    EXPECT_EQ(JobIdFromLauncher(), "slurm-4242.3");
  }
  LauncherEnv env({{"SLURM_JOB_ID", "4242"}});
  EXPECT_EQ(JobIdFromLauncher(), "slurm-4242.0");
}

TEST(JobIdFromLauncher, TorchrunRunIdOrItsRendezvousEndpointForTheDefaultNone) {
  {
    LauncherEnv env({{"TORCHELASTIC_RUN_ID", "exp-17"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
    EXPECT_EQ(JobIdFromLauncher(), "torchrun-exp-17");
  }
  {
    LauncherEnv env({{"TORCHELASTIC_RUN_ID", "none"}, {"MASTER_ADDR", "10.0.0.1"},
                     {"MASTER_PORT", "29500"}});
    EXPECT_EQ(JobIdFromLauncher(), "torchrun-10.0.0.1:29500");
  }
  LauncherEnv env({{"TORCHELASTIC_RUN_ID", "none"}});
  EXPECT_EQ(JobIdFromLauncher(), std::nullopt);
}

TEST(JobIdFromLauncher, NothingSetAndEmptyValuesNameNoJob) {
  {
    LauncherEnv env({});
    EXPECT_EQ(JobIdFromLauncher(), std::nullopt);
  }
  LauncherEnv env({{"TUTTI_JOB", ""}, {"SLURM_JOB_ID", ""}});
  EXPECT_EQ(JobIdFromLauncher(), std::nullopt);
}

}  // namespace
}  // namespace tutti::client
