// tutti_init, tutti_finalize and tutti_abort: the runtime handle's life. tutti_init checks the
// caller's header version and turns tutti_init_options_t into client::RequestedOptions (an unset
// field is left to the environment and the defaults, which client::ResolveOptions applies). The
// handle it returns belongs to the caller until tutti_finalize destroys it; tutti_abort only
// fails what is pending and leaves the handle valid, so finalize still follows it.
#include <cstdlib>
#include <memory>
#include <string>

#include "capi/fence.h"
#include "capi/handles.h"
#include "capi/versioned_struct.h"
#include "client/runtime.h"
#include "tutti/tutti.h"

using namespace tutti;
using namespace tutti::capi;

extern "C" {

TUTTI_API tutti_status_t tutti_init(const tutti_init_options_t* options, tutti_runtime_t* runtime) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_OUT(runtime);
    *runtime = nullptr;
    const tutti_init_options_t defaults = TUTTI_INIT_OPTIONS_INIT;
    tutti_init_options_t o = defaults;
    if (options != nullptr) {
      tutti_status_t status = ReadVersioned(options, defaults, "options", &o);
      if (status != TUTTI_OK) return status;
    }
    const int32_t major = o.header_version / 10000, minor = o.header_version / 100 % 100;
    if (major != TUTTI_VERSION_MAJOR || minor > TUTTI_VERSION_MINOR)
      return Fail(TUTTI_ERR_VERSION_MISMATCH,
                  "version mismatch: header " + std::to_string(o.header_version) + ", library " +
                      std::to_string(TUTTI_VERSION) + "; rebuild against this library's tutti.h");

    client::RequestedOptions requested;
    if (o.coordinator) requested.coordinator = o.coordinator;
    if (o.job) requested.job = o.job;
    if (o.token) requested.token = o.token;
    if (o.rank >= 0) requested.rank = o.rank;
    if (o.size >= 0) requested.size = o.size;
    if (o.timeout_ms < 0) return Invalid("options.timeout_ms is negative");
    requested.timeout_ms = o.timeout_ms;
    if (o.num_static_sets < 0) return Invalid("options.num_static_sets is negative");
    if (o.num_static_sets > 0 && (o.static_set_sizes == nullptr || o.static_set_ranks == nullptr))
      return Invalid("options.static_set_sizes or options.static_set_ranks is NULL");
    const int32_t* next = o.static_set_ranks;
    for (int32_t i = 0; i < o.num_static_sets; ++i) {
      if (o.static_set_sizes[i] < 0)
        return Invalid("options.static_set_sizes[" + std::to_string(i) + "] is negative");
      requested.static_sets.emplace_back(next, next + o.static_set_sizes[i]);
      next += o.static_set_sizes[i];
    }

    if ((o.allocate == nullptr) != (o.deallocate == nullptr))
      return Invalid("options.allocate and options.deallocate must be given together");
    requested.allocator = {o.allocate, o.deallocate, o.allocator_user};
    if (o.fusion_threshold_bytes >= 0) requested.fusion_threshold = o.fusion_threshold_bytes;
    if (o.cycle_time_ms >= 0) requested.cycle_time_ms = o.cycle_time_ms;
    if (o.cache_capacity >= 0) requested.cache_capacity = o.cache_capacity;
    if (o.stall_warning_seconds != 0) requested.stall_warning_s = o.stall_warning_seconds;
    if (o.stall_shutdown_seconds != 0) requested.stall_shutdown_s = o.stall_shutdown_seconds;
    if (o.timeline_path) requested.timeline = o.timeline_path;
    if (o.transport) requested.transport = o.transport;

    auto handle = std::make_unique<tutti_runtime>();
    if (requested.coordinator == "auto") requested.coordinator.reset();  // as if unset
    if (bootstrap::ZeroSetup::Wanted(requested.coordinator)) {
      // Before the options are resolved: the coordinator and token may come from the launcher.
      const char* env_timeout = std::getenv("TUTTI_TIMEOUT_MS");
      const int64_t env_ms = env_timeout != nullptr ? std::atoll(env_timeout) : 0;
      const int64_t timeout_ms = o.timeout_ms > 0 ? o.timeout_ms
                                 : env_ms > 0     ? env_ms
                                                  : client::kDefaultTimeoutMs;
      Status status = bootstrap::ZeroSetup::Run(reinterpret_cast<const void*>(&tutti_init),
                                                timeout_ms, &handle->zero_setup);
      if (!status.ok()) return Report(status);
      if (handle->zero_setup) {
        requested.coordinator = handle->zero_setup->coordinator();
        if (!requested.token) requested.token = handle->zero_setup->token();
      }
    }
    client::RuntimeOptions resolved;
    Status status = client::ResolveOptions(requested, &resolved);
    if (!status.ok()) return Report(status);
    status = client::Runtime::Create(resolved, &handle->runtime);
    if (!status.ok()) return Report(status);
    *runtime = handle.release();
    return TUTTI_OK;
  });
}

TUTTI_API tutti_status_t tutti_abort(tutti_runtime_t runtime) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(runtime);
    runtime->runtime->Abort();
    return TUTTI_OK;
  });
}

TUTTI_API tutti_status_t tutti_finalize(tutti_runtime_t runtime) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(runtime);
    // The runtime leaves the job first; a zero-setup rank 0 then lets the others leave too
    // before its coordinator goes.
    runtime->runtime.reset();
    if (runtime->zero_setup) runtime->zero_setup->AwaitJobEnd();
    delete runtime;
    return TUTTI_OK;
  });
}

}  // extern "C"
