// A launcher's key-value exchange: the channel through which a zero-setup job's first rank hands
// the others its coordinator's endpoint and the job's token (docs/launchers.md, "Zero-setup").
// Two backends, both loaded at run time with dlopen and never linked, so that libtutti.so runs
// where neither library is installed:
//   - PMIx (libpmix.so.2): OpenMPI's mpirun and srun --mpi=pmix put PMIX_NAMESPACE and
//     PMIX_RANK in every process's environment;
//   - PMI2 (Slurm's libpmi2.so.0): srun --mpi=pmi2 hands every task a PMI_FD.
// Like the launcher's own put/fence/get, an exchange is collective over the launcher's job: every
// process must take part, once per tutti_init. One object per tutti_init, used by the thread that
// calls it; Put and Fence before Get.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace tutti::bootstrap {

class LauncherKvs {
 public:
  virtual ~LauncherKvs() = default;
  // "PMIx" or "PMI2", for messages.
  virtual const char* name() const = 0;
  // This process's rank in the launcher's job, and how many processes the job has.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether every process of the job runs on this host (so its coordinator may bind loopback).
  virtual bool AllOnThisHost() const = 0;
  // Publishes `value` under `key` for the whole job.
  virtual Status Put(const std::string& key, const std::string& value) = 0;
  // Makes every Put of every process visible to all; returns once all have called it, or fails
  // after `timeout_ms`.
  virtual Status Fence(int64_t timeout_ms) = 0;
  // What rank `rank` put under `key` (after a Fence).
  virtual Status Get(int rank, const std::string& key, std::string* value) = 0;
};

// The launcher's exchange when its environment offers one, PMIx first: `*kvs` is set, or left
// empty (and Ok returned) when this process was not started with either. A launcher that offers
// one whose library cannot be loaded or initialised is an error naming it.
Status OpenLauncherKvs(std::unique_ptr<LauncherKvs>* kvs);

// The backends, for OpenLauncherKvs: each returns Ok with `*kvs` empty when its variables are
// absent. Defined in pmix_kvs.cc and pmi2_kvs.cc.
Status OpenPmixKvs(std::unique_ptr<LauncherKvs>* kvs);
Status OpenPmi2Kvs(std::unique_ptr<LauncherKvs>* kvs);

}  // namespace tutti::bootstrap
