// Queries about the library and a runtime: the version, rank and size, this rank's and the
// coordinator's counters, per-peer transport stats and whether a device is usable; and the
// timeline switch, the one entry here that changes anything (it starts or stops a trace file).
// Out-structs are written only as far as the caller's struct_size reaches (versioned_struct.h).
#include <atomic>
#include <cstdint>
#include <string>

#include "capi/fence.h"
#include "capi/handles.h"
#include "capi/versioned_struct.h"
#include "client/exec/gpu_module_loader.h"
#include "client/runtime.h"
#include "tutti/tutti.h"

using namespace tutti;
using namespace tutti::capi;

namespace {

template <typename Getter>
tutti_status_t GetInt(const char* function, tutti_runtime_t rt, int32_t* out, Getter getter) {
  return Fenced(function, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(out);
    *out = getter(*rt->runtime);
    return TUTTI_OK;
  });
}

}  // namespace

extern "C" {

TUTTI_API tutti_status_t tutti_get_version(int32_t* version) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_OUT(version);
    *version = TUTTI_VERSION;
    return TUTTI_OK;
  });
}

TUTTI_API tutti_status_t tutti_rank(tutti_runtime_t rt, int32_t* out) {
  return GetInt(__func__, rt, out, [](client::Runtime& r) { return r.rank(); });
}
TUTTI_API tutti_status_t tutti_size(tutti_runtime_t rt, int32_t* out) {
  return GetInt(__func__, rt, out, [](client::Runtime& r) { return r.size(); });
}
TUTTI_API tutti_status_t tutti_local_rank(tutti_runtime_t rt, int32_t* out) {
  return GetInt(__func__, rt, out, [](client::Runtime& r) { return r.local_rank(); });
}
TUTTI_API tutti_status_t tutti_local_size(tutti_runtime_t rt, int32_t* out) {
  return GetInt(__func__, rt, out, [](client::Runtime& r) { return r.local_size(); });
}
TUTTI_API tutti_status_t tutti_cross_rank(tutti_runtime_t rt, int32_t* out) {
  return GetInt(__func__, rt, out, [](client::Runtime& r) { return r.cross_rank(); });
}
TUTTI_API tutti_status_t tutti_cross_size(tutti_runtime_t rt, int32_t* out) {
  return GetInt(__func__, rt, out, [](client::Runtime& r) { return r.cross_size(); });
}

TUTTI_API tutti_status_t tutti_membership_epoch(tutti_runtime_t rt, uint64_t* epoch) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(epoch);
    *epoch = rt->runtime->membership_epoch();
    return TUTTI_OK;
  });
}

TUTTI_API tutti_status_t tutti_await_membership_epoch(tutti_runtime_t rt, uint64_t after,
                                                      int64_t timeout_ms, uint64_t* epoch) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(epoch);
    return Report(rt->runtime->AwaitEpoch(after, timeout_ms, epoch));
  });
}

TUTTI_API tutti_status_t tutti_ranks_waiting(tutti_runtime_t rt, int32_t* count) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(count);
    *count = rt->runtime->ranks_waiting();
    return TUTTI_OK;
  });
}

TUTTI_API tutti_status_t tutti_device_check(int32_t device_type, int32_t device_index) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    if (device_index < 0) return Invalid("device_index is negative");
    if (device_type == TUTTI_DEVICE_CPU) return TUTTI_OK;
    if (device_type != TUTTI_DEVICE_CUDA)
      return Invalid("unknown device type " + std::to_string(device_type));
    return Report(client::CheckCudaDevice(device_index));
  });
}

TUTTI_API tutti_status_t tutti_nccl_version(int32_t* version) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_OUT(version);
    return Report(client::NcclVersion(version));
  });
}

TUTTI_API tutti_status_t tutti_get_counters(tutti_runtime_t rt, tutti_counters_t* counters) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(counters);
    const client::Counters& c = rt->runtime->counters();
    auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
    tutti_counters_t values = TUTTI_COUNTERS_INIT;
    values.announce_messages = get(c.announce_messages);
    values.announce_bytes = get(c.announce_bytes);
    values.tensors_announced = get(c.tensors_announced);
    values.tensors_announced_cached = get(c.tensors_announced_cached);
    values.execute_messages = get(c.execute_messages);
    values.execute_bytes = get(c.execute_bytes);
    values.collectives = get(c.collectives);
    values.tensors_executed = get(c.tensors_executed);
    values.tensors_fused = get(c.tensors_fused);
    values.fast_path_rounds = get(c.fast_path_rounds);
    values.fast_path_tensors = get(c.fast_path_tensors);
    return WriteVersioned(values, counters, "counters");
  });
}

TUTTI_API tutti_status_t tutti_get_coordinator_counters(tutti_runtime_t rt,
                                                        tutti_coordinator_counters_t* counters) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(counters);
    wire::CoordinatorCounters c;
    tutti_status_t status = Report(rt->runtime->QueryCoordinatorCounters(&c));
    if (status != TUTTI_OK) return status;
    tutti_coordinator_counters_t values = TUTTI_COORDINATOR_COUNTERS_INIT;
    values.announce_messages = c.announce_messages();
    values.announce_bytes = c.announce_bytes();
    values.tensors_announced = c.tensors_announced();
    values.tensors_announced_cached = c.tensors_announced_cached();
    values.execute_messages = c.execute_messages();
    values.collectives_released = c.collectives_released();
    values.tensors_released = c.tensors_released();
    values.tensors_fused = c.tensors_fused();
    values.cache_evictions = c.cache_evictions();
    values.stall_warnings = c.stall_warnings();
    values.stalls_failed = c.stalls_failed();
    return WriteVersioned(values, counters, "counters");
  });
}

TUTTI_API tutti_status_t tutti_get_coordinator_set_counters(
    tutti_runtime_t rt, int32_t set_id, tutti_coordinator_set_counters_t* counters) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(counters);
    wire::CoordinatorCounters c;
    tutti_status_t status = Report(rt->runtime->QueryCoordinatorCounters(&c, set_id));
    if (status != TUTTI_OK) return status;
    const wire::SetCounters& set = c.set();
    tutti_coordinator_set_counters_t values = TUTTI_COORDINATOR_SET_COUNTERS_INIT;
    values.set_id = set_id;
    values.announcements = set.announcements();
    values.tensors_announced = set.tensors_announced();
    values.tensors_announced_cached = set.tensors_announced_cached();
    values.fast_path_grants = set.fast_path_grants();
    values.fast_path_exits = set.fast_path_exits();
    values.announcements_dropped = set.announcements_dropped();
    values.fast_path_rounds = set.fast_path_rounds();
    return WriteVersioned(values, counters, "counters");
  });
}

TUTTI_API tutti_status_t tutti_get_peer_stats(tutti_runtime_t rt, int32_t set_id, int32_t peer,
                                              tutti_peer_stats_t* stats) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(stats);
    transport::PeerStats s;
    tutti_status_t status = Report(rt->runtime->PeerStats(set_id, peer, &s));
    if (status != TUTTI_OK) return status;
    tutti_peer_stats_t values = TUTTI_PEER_STATS_INIT;
    values.transport = static_cast<tutti_transport_t>(s.link);
    values.connected = s.connected ? 1 : 0;
    values.bytes_sent = s.bytes_sent;
    values.bytes_received = s.bytes_received;
    return WriteVersioned(values, stats, "stats");
  });
}

TUTTI_API tutti_status_t tutti_get_set_counters(tutti_runtime_t rt, int32_t set_id,
                                                tutti_set_counters_t* counters) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(counters);
    client::Runtime::SetCountersSnapshot s;
    tutti_status_t status = Report(rt->runtime->GetSetCounters(set_id, &s));
    if (status != TUTTI_OK) return status;
    tutti_set_counters_t values = TUTTI_SET_COUNTERS_INIT;
    values.set_id = set_id;
    values.collectives = s.collectives;
    values.tensors = s.tensors;
    values.tensors_fused = s.tensors_fused;
    values.bytes = s.bytes;
    values.wait_ns = s.wait_ns;
    values.execute_ns = s.execute_ns;
    values.tensors_compressed = s.tensors_compressed;
    values.adaptive_revisits = s.adaptive_revisits;
    values.adaptive_compress_choices = s.adaptive_compress_choices;
    return WriteVersioned(values, counters, "counters");
  });
}

TUTTI_API const char* tutti_transport_name(tutti_transport_t transport) {
  switch (transport) {
    case TUTTI_TRANSPORT_TCP: return "tcp";
    case TUTTI_TRANSPORT_SHM: return "shm";
    case TUTTI_TRANSPORT_MPI: return "mpi";
  }
  return "unknown";
}

TUTTI_API tutti_status_t tutti_timeline_start(tutti_runtime_t rt, const char* path) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    if (path == nullptr || *path == '\0') return Invalid("path is NULL or empty");
    return Report(rt->runtime->StartTimeline(path));
  });
}

TUTTI_API tutti_status_t tutti_timeline_stop(tutti_runtime_t rt) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    rt->runtime->StopTimeline();
    return TUTTI_OK;
  });
}

}  // extern "C"
