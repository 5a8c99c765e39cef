#include "bootstrap/zero_setup.h"

#include <atomic>
#include <cstdlib>

#include "bootstrap/launcher_kvs.h"

namespace tutti::bootstrap {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Without an exchange: what the launcher that started us lacks, or nothing to say.
Status NoExchange() {
  const std::string named = Env("TUTTI_COORDINATOR");
  if (!Env("SLURM_PROCID").empty())
    return Status(Code::kInvalidArgument,
                  "no coordinator: srun gave this task neither PMIx nor PMI2, through which rank "
                  "0 hands the others the coordinator it starts; run srun with --mpi=pmix or "
                  "--mpi=pmi2, or set TUTTI_COORDINATOR to a running tuttid");
  if (!Env("OMPI_COMM_WORLD_RANK").empty())
    return Status(Code::kInvalidArgument,
                  "no coordinator: mpirun gave this process no PMIx (PMIX_NAMESPACE is unset); "
                  "use MPI mode (tutti_mpi_init), or set TUTTI_COORDINATOR to a running tuttid");
  if (named == "auto")
    return Status(Code::kInvalidArgument,
                  "TUTTI_COORDINATOR=auto: no launcher offers an exchange here (PMIx or PMI2); "
                  "start the ranks with mpirun or srun --mpi=pmix, or name a running tuttid");
  return Status::Ok();
}

// "ok ENDPOINT TOKEN" or "error CODE MESSAGE": what rank 0 puts for the others.
std::string Offer(const Status& started, const std::string& endpoint, const std::string& token) {
  if (started.ok()) return "ok " + endpoint + " " + token;
  return "error " + std::to_string(static_cast<int>(started.code())) + " " + started.message();
}

Status Accept(const std::string& offer, std::string* endpoint, std::string* token) {
  const size_t first = offer.find(' '), second = offer.find(' ', first + 1);
  if (first == std::string::npos || second == std::string::npos)
    return Status(Code::kInternal, "zero-setup: rank 0 put '" + offer + "', which tutti cannot read");
  const std::string verdict = offer.substr(0, first);
  const std::string a = offer.substr(first + 1, second - first - 1), b = offer.substr(second + 1);
  if (verdict == "ok") {
    *endpoint = a;
    *token = b;
    return Status::Ok();
  }
  return Status(static_cast<Code>(std::atoi(a.c_str())), "rank 0: " + b);
}

}  // namespace

Status OpenLauncherKvs(std::unique_ptr<LauncherKvs>* kvs) {
  TUTTI_RETURN_IF_ERROR(OpenPmixKvs(kvs));
  if (*kvs) return Status::Ok();
  return OpenPmi2Kvs(kvs);
}

bool ZeroSetup::Wanted(const std::optional<std::string>& named) {
  if (named && !named->empty() && *named != "auto") return false;
  const std::string env = Env("TUTTI_COORDINATOR");
  return env.empty() || env == "auto";
}

Status ZeroSetup::Run(const void* anchor, int64_t timeout_ms, std::unique_ptr<ZeroSetup>* out) {
  out->reset();
  std::unique_ptr<LauncherKvs> kvs;
  TUTTI_RETURN_IF_ERROR(OpenLauncherKvs(&kvs));
  if (!kvs) return NoExchange();
  // One key per tutti_init of this process: every process initialises as often as the others.
  static std::atomic<int> inits{0};
  const std::string key = "tutti.coordinator." + std::to_string(inits++);
  auto setup = std::make_unique<ZeroSetup>();
  setup->timeout_ms_ = timeout_ms;
  std::string offer;
  if (kvs->rank() == 0) {
    std::string endpoint, token;
    Status started = StartJobCoordinator(anchor, kvs->AllOnThisHost(), timeout_ms,
                                         &setup->child_, &endpoint);
    if (started.ok()) started = RandomToken(&token);
    offer = Offer(started, endpoint, token);
    TUTTI_RETURN_IF_ERROR(kvs->Put(key, offer));
  }
  TUTTI_RETURN_IF_ERROR(kvs->Fence(timeout_ms));
  if (kvs->rank() != 0) TUTTI_RETURN_IF_ERROR(kvs->Get(0, key, &offer));
  TUTTI_RETURN_IF_ERROR(Accept(offer, &setup->coordinator_, &setup->token_));
  *out = std::move(setup);
  return Status::Ok();
}

void ZeroSetup::AwaitJobEnd() {
  if (child_.running() && !child_.WaitForExit(timeout_ms_)) child_.Stop();
}

}  // namespace tutti::bootstrap
