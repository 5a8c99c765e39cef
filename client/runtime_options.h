// Everything a runtime needs to join a job, resolved from the caller's options and the environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/control/curve_client_keys.h"
#include "client/exec/hierarchical.h"
#include "client/exec/result_buffer.h"
#include "common/status.h"
#include "transport/transport.h"

namespace tutti::client {

constexpr int64_t kDefaultTimeoutMs = 60000;

// What the caller gave explicitly; unset fields fall back to the environment, then to defaults.
struct RequestedOptions {
  std::optional<std::string> coordinator, job, token;
  std::optional<int32_t> rank, size;
  std::vector<std::vector<int32_t>> static_sets;
  int64_t timeout_ms = 0;  // 0: TUTTI_TIMEOUT_MS or kDefaultTimeoutMs
  Allocator allocator;
  std::optional<int64_t> fusion_threshold;   // bytes
  std::optional<double> cycle_time_ms;
  std::optional<int32_t> cache_capacity;
  std::optional<double> stall_warning_s, stall_shutdown_s;  // <= 0: off
  std::optional<std::string> timeline;
  std::optional<std::string> transport;  // "auto", "tcp" or "shm"
};

// Elastic jobs (docs/elastic.md), from TUTTI_ELASTIC, TUTTI_MIN_SIZE, TUTTI_MAX_SIZE and
// TUTTI_ELASTIC_TIMEOUT (seconds).
struct ElasticOptions {
  bool on = false;
  int32_t min_size = 0;        // 0: 1
  int32_t max_size = 0;        // more live ranks are not admitted; 0: no limit
  int64_t timeout_ms = 600000; // below min_size this long ends the job (Horovod's default: 600 s)
};

constexpr int64_t kDefaultFusionThreshold = 1 << 20;  // docs/fusion.md: measured
constexpr int32_t kDefaultCacheCapacity = 1024;

// 0: measured on 2 cores with ranks bound to a core each (tuttirun's default), polling made a 4 KiB
// allreduce slower (13-17 us -> 19-20 us): the waiter's core is the lane's (docs/steady-state.md).
constexpr int64_t kDefaultWaitSpinUs = 0;

struct RuntimeOptions {
  std::string coordinator;
  std::string job;
  std::string token;
  int32_t rank = 0;
  int32_t size = 1;
  std::string host_id;       // ranks with the same value share a host (and its memory)
  std::string data_address;  // IPv4 address the data plane listens on
  std::vector<std::vector<int32_t>> static_sets;
  int64_t timeout_ms = kDefaultTimeoutMs;
  Allocator allocator;  // for results handed to the application
  int64_t fusion_threshold = kDefaultFusionThreshold;  // 0: no fusion
  std::chrono::microseconds cycle_time{0};             // announcement batching window
  int32_t cache_capacity = kDefaultCacheCapacity;      // 0: no response cache
  // The members' fast path for cached tensors (docs/steady-state.md); TUTTI_FAST_PATH=0 turns it
  // off for the whole job.
  bool fast_path = true;
  // How long a wait for a request polls before it sleeps (TUTTI_WAIT_SPIN_US; docs/steady-state.md,
  // "Waiting"). 0: it sleeps at once.
  std::chrono::microseconds wait_spin{kDefaultWaitSpinUs};
  // Per-set autotuning (docs/autotune.md): TUTTI_AUTOTUNE=1. A fusion threshold given (option or
  // TUTTI_FUSION_THRESHOLD) is pinned, never tuned; so are the two cut-offs when given
  // (TUTTI_SMALL_ALLREDUCE_BYTES, TUTTI_PIPELINE_BYTES; 0: not given, the built-in values).
  bool autotune = false;
  bool fusion_threshold_pinned = false;
  int64_t small_allreduce_bytes = 0, pipeline_bytes = 0;
  // For the coordinator's stall inspector: 0 = tuttid's default, < 0 = off.
  int64_t stall_warning_ms = 0, stall_shutdown_ms = 0;
  std::string timeline;  // this rank's timeline file, from the start; empty: none
  // TUTTI_AUTOTUNE_LOG: CSV of the trials of the autotuned sets this rank is first in
  // (client/autotune_log.h); empty: none.
  std::string autotune_log;
  // "auto" or a data-plane backend's name (transport/route_planner.h): which backend carries
  // each pair; a forced backend that cannot reach a peer is an error, never a silent fallback.
  std::string transport = "auto";
  // What the TCP data plane protects (TUTTI_DATA_SECURITY=off|integrity|encrypt,
  // docs/security.md). Job-wide: tuttid refuses ranks that differ.
  transport::DataSecurity data_security = transport::DataSecurity::kOff;
  // Hierarchical allreduce across hosts (docs/algorithms.md): TUTTI_HIERARCHICAL=auto|0|1 and
  // TUTTI_HIERARCHICAL_MIN_BYTES. Job-wide: every rank must see the same values.
  HierarchyMode hierarchical = HierarchyMode::kAuto;
  int64_t hierarchical_min_bytes = kDefaultHierarchicalMinBytes;
  CurveClientKeys curve;
  ElasticOptions elastic;
};

// Resolves `requested` against the environment (TUTTI_*, then OpenMPI, Slurm and torchrun
// variables for rank and size). Errors name the missing or malformed setting.
Status ResolveOptions(const RequestedOptions& requested, RuntimeOptions* resolved);

}  // namespace tutti::client
