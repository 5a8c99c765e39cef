// The extern "C" entry points: argument checks, translation to client::Runtime, and the exception
// fence. Nothing here knows about sockets or the wire.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "capi/status_text.h"
#include "client/gpu_module_loader.h"
#include "client/runtime.h"
#include "tutti/tutti.h"

struct tutti_runtime {
  std::unique_ptr<tutti::client::Runtime> runtime;
};

struct tutti_request {
  std::shared_ptr<tutti::client::Request> request;
  int64_t default_timeout_ms;
  pid_t owner;
};

namespace tutti::capi {
namespace {

#define TUTTI_SAME_CODE(c, k) static_assert(c == static_cast<int>(Code::k), #c " drifted from Code::" #k)
TUTTI_SAME_CODE(TUTTI_ERR_INVALID_ARGUMENT, kInvalidArgument);
TUTTI_SAME_CODE(TUTTI_ERR_UNKNOWN_SET, kUnknownSet);
TUTTI_SAME_CODE(TUTTI_ERR_NOT_A_MEMBER, kNotAMember);
TUTTI_SAME_CODE(TUTTI_ERR_DUPLICATE_NAME, kDuplicateName);
TUTTI_SAME_CODE(TUTTI_ERR_MISMATCH, kMismatch);
TUTTI_SAME_CODE(TUTTI_ERR_PEER_LOST, kPeerLost);
TUTTI_SAME_CODE(TUTTI_ERR_COORDINATOR_LOST, kCoordinatorLost);
TUTTI_SAME_CODE(TUTTI_ERR_TIMEOUT, kTimeout);
TUTTI_SAME_CODE(TUTTI_ERR_ABORTED, kAborted);
TUTTI_SAME_CODE(TUTTI_ERR_STALLED, kStalled);
TUTTI_SAME_CODE(TUTTI_ERR_VERSION_MISMATCH, kVersionMismatch);
TUTTI_SAME_CODE(TUTTI_ERR_AUTH_FAILED, kAuthFailed);
TUTTI_SAME_CODE(TUTTI_ERR_SHUT_DOWN, kShutDown);
TUTTI_SAME_CODE(TUTTI_ERR_INTERNAL, kInternal);
TUTTI_SAME_CODE(TUTTI_ERR_SET_REMOVED, kSetRemoved);
TUTTI_SAME_CODE(TUTTI_ERR_UNSUPPORTED, kUnsupported);
TUTTI_SAME_CODE(TUTTI_ERR_EVICTED, kEvicted);
TUTTI_SAME_CODE(TUTTI_ERR_LIMIT_EXCEEDED, kLimitExceeded);
TUTTI_SAME_CODE(TUTTI_ERR_DEVICE_UNAVAILABLE, kDeviceUnavailable);
#undef TUTTI_SAME_CODE

tutti_status_t Report(const Status& status) {
  if (status.ok()) return TUTTI_OK;
  return Fail(static_cast<tutti_status_t>(status.code()), status.message());
}

tutti_status_t Invalid(std::string message) {
  return Fail(TUTTI_ERR_INVALID_ARGUMENT, std::move(message));
}

// Runs `body` with the thread's last error cleared; no exception leaves the library.
template <typename Body>
tutti_status_t Fenced(const char* function, Body&& body) noexcept {
  try {
    ClearError();
    return body();
  } catch (const std::exception& e) {
    return Fail(TUTTI_ERR_INTERNAL, std::string(function) + ": " + e.what());
  } catch (...) {
    return Fail(TUTTI_ERR_INTERNAL, std::string(function) + ": unknown exception");
  }
}

// Copies what the caller's struct_size covers over `defaults`: older callers get defaults for
// fields appended after they compiled, newer callers' extra fields are ignored.
template <typename T>
tutti_status_t ReadVersioned(const T* given, const T& defaults, const char* what, T* out) {
  if (given->struct_size < sizeof(size_t))
    return Invalid(std::string(what) + ".struct_size is " + std::to_string(given->struct_size) +
                   "; initialize the struct with its _INIT macro");
  *out = defaults;
  std::memcpy(out, given, std::min(given->struct_size, sizeof(T)));
  out->struct_size = sizeof(T);
  return TUTTI_OK;
}

// Copies `values` into the caller's struct, as much of it as the caller's struct_size covers.
template <typename T>
tutti_status_t WriteVersioned(const T& values, T* out, const char* what) {
  if (out->struct_size < sizeof(size_t))
    return Invalid(std::string(what) + ".struct_size is " + std::to_string(out->struct_size) +
                   "; initialize the struct with its _INIT macro");
  const size_t size = std::min(out->struct_size, sizeof(T));
  std::memcpy(reinterpret_cast<char*>(out) + sizeof(size_t),
              reinterpret_cast<const char*>(&values) + sizeof(size_t), size - sizeof(size_t));
  return TUTTI_OK;
}

tutti_status_t ReadTensor(const tutti_tensor_t* given, const char* what, client::TensorArgs* out) {
  if (given == nullptr) return Invalid(std::string(what) + " is NULL");
  const tutti_tensor_t defaults = TUTTI_TENSOR_INIT;
  tutti_tensor_t t;
  tutti_status_t status = ReadVersioned(given, defaults, what, &t);
  if (status != TUTTI_OK) return status;
  if (t.ndim < 0 || t.ndim > TUTTI_MAX_DIMS)
    return Invalid(std::string(what) + ".ndim is " + std::to_string(t.ndim) + ", not in [0, " +
                   std::to_string(TUTTI_MAX_DIMS) + "]");
  if (t.ndim > 0 && t.shape == nullptr) return Invalid(std::string(what) + ".shape is NULL");
  out->data = t.data;
  out->dtype = t.dtype;
  out->shape.assign(t.shape, t.shape + t.ndim);
  out->device_type = t.device_type;
  out->device_index = t.device_index;
  out->stream = t.stream;
  return TUTTI_OK;
}

// After fork() the child holds a copy of the runtime without its threads: it must not touch it
// (nor tear it down), and must be told why.
tutti_status_t ForkedChild(pid_t owner) {
  return Invalid("this runtime belongs to process " + std::to_string(owner) +
                 "; a process forked from it cannot use it (call tutti_init in the child)");
}

#define TUTTI_CHECK_RUNTIME(rt)                                            \
  if ((rt) == nullptr || !(rt)->runtime) return Invalid("runtime is NULL"); \
  if ((rt)->runtime->owner() != getpid()) return ForkedChild((rt)->runtime->owner())
#define TUTTI_CHECK_REQUEST(request)                                   \
  if ((request) == nullptr) return Invalid("request is NULL");         \
  if ((request)->owner != getpid()) return ForkedChild((request)->owner)
#define TUTTI_CHECK_OUT(p) \
  if ((p) == nullptr) return Invalid(#p " is NULL")

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
}  // namespace tutti::capi

using namespace tutti;
using namespace tutti::capi;

extern "C" {

TUTTI_API tutti_status_t tutti_get_version(int32_t* version) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_OUT(version);
    *version = TUTTI_VERSION;
    return TUTTI_OK;
  });
}

TUTTI_API const char* tutti_status_string(tutti_status_t status) { return StatusString(status); }

TUTTI_API const char* tutti_last_error(void) { return LastError(); }

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

    client::RuntimeOptions resolved;
    Status status = client::ResolveOptions(requested, &resolved);
    if (!status.ok()) return Report(status);
    auto handle = std::make_unique<tutti_runtime>();
    status = client::Runtime::Create(resolved, &handle->runtime);
    if (!status.ok()) return Report(status);
    *runtime = handle.release();
    return TUTTI_OK;
  });
}

TUTTI_API tutti_status_t tutti_finalize(tutti_runtime_t runtime) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(runtime);
    delete runtime;
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

TUTTI_API tutti_status_t tutti_process_set_add(tutti_runtime_t rt, const int32_t* ranks,
                                               int32_t nranks, int64_t timeout_ms,
                                               int32_t* set_id) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(set_id);
    if (nranks < 1) return Invalid("nranks is " + std::to_string(nranks) + "; a set needs a rank");
    if (ranks == nullptr) return Invalid("ranks is NULL");
    return Report(rt->runtime->AddProcessSet({ranks, ranks + nranks}, timeout_ms, set_id));
  });
}

TUTTI_API tutti_status_t tutti_process_set_remove(tutti_runtime_t rt, int32_t set_id,
                                                  int64_t timeout_ms) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    return Report(rt->runtime->RemoveProcessSet(set_id, timeout_ms));
  });
}

TUTTI_API tutti_status_t tutti_process_set_ranks(tutti_runtime_t rt, int32_t set_id, int32_t* ranks,
                                                 int32_t capacity, int32_t* count) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(count);
    if (capacity < 0) return Invalid("capacity is negative");
    if (capacity > 0 && ranks == nullptr) return Invalid("ranks is NULL");
    std::vector<int32_t> members;
    Status status = rt->runtime->ProcessSetRanks(set_id, &members);
    if (!status.ok()) return Report(status);
    *count = static_cast<int32_t>(members.size());
    std::copy_n(members.begin(), std::min<size_t>(members.size(), capacity), ranks);
    return TUTTI_OK;
  });
}

TUTTI_API tutti_status_t tutti_process_set_size(tutti_runtime_t rt, int32_t set_id, int32_t* size) {
  return tutti_process_set_ranks(rt, set_id, nullptr, 0, size);
}

// Position of this rank in the set, or -1: shared by included() and rank().
static tutti_status_t PositionInSet(tutti_runtime_t rt, int32_t set_id, int32_t* position) {
  TUTTI_CHECK_RUNTIME(rt);
  std::vector<int32_t> members;
  Status status = rt->runtime->ProcessSetRanks(set_id, &members);
  if (!status.ok()) return Report(status);
  auto it = std::lower_bound(members.begin(), members.end(), rt->runtime->rank());
  *position = (it != members.end() && *it == rt->runtime->rank())
                  ? static_cast<int32_t>(it - members.begin())
                  : -1;
  return TUTTI_OK;
}

TUTTI_API tutti_status_t tutti_process_set_included(tutti_runtime_t rt, int32_t set_id,
                                                    int32_t* included) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_OUT(included);
    int32_t position = -1;
    tutti_status_t status = PositionInSet(rt, set_id, &position);
    if (status == TUTTI_OK) *included = position >= 0;
    return status;
  });
}

TUTTI_API tutti_status_t tutti_process_set_rank(tutti_runtime_t rt, int32_t set_id,
                                                int32_t* rank_in_set) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_OUT(rank_in_set);
    int32_t position = -1;
    tutti_status_t status = PositionInSet(rt, set_id, &position);
    if (status != TUTTI_OK) return status;
    if (position < 0)
      return Fail(TUTTI_ERR_NOT_A_MEMBER, "rank " + std::to_string(rt->runtime->rank()) +
                                              " is not a member of process set " +
                                              std::to_string(set_id));
    *rank_in_set = position;
    return TUTTI_OK;
  });
}

// Submits `args` on behalf of any collective entry point.
static tutti_status_t Submit(tutti_runtime_t rt, const char* name, client::CollectiveArgs args,
                             tutti_request_t* request) {
  if (name != nullptr && *name == '\0') return Invalid("name is empty; pass NULL for an automatic name");
  args.name = name ? name : "";
  std::shared_ptr<client::Request> created;
  Status submitted = rt->runtime->Submit(std::move(args), &created);
  if (!submitted.ok()) return Report(submitted);
  *request = new tutti_request{std::move(created), rt->runtime->timeout_ms(), getpid()};
  return TUTTI_OK;
}

// Reads the reduce op and scale factors shared by allreduce and reducescatter.
static tutti_status_t ReadReduceOptions(const tutti_allreduce_options_t* options,
                                        client::CollectiveArgs* args) {
  const tutti_allreduce_options_t defaults = TUTTI_ALLREDUCE_OPTIONS_INIT;
  tutti_allreduce_options_t o = defaults;
  if (options != nullptr) {
    tutti_status_t status = ReadVersioned(options, defaults, "options", &o);
    if (status != TUTTI_OK) return status;
  }
  args->reduce_op = o.reduce_op;
  args->prescale = o.prescale_factor;
  args->postscale = o.postscale_factor;
  args->priority = o.priority;
  return TUTTI_OK;
}

#define TUTTI_BEGIN_SUBMIT(set)            \
  TUTTI_CHECK_RUNTIME(rt);                 \
  TUTTI_CHECK_OUT(request);                \
  *request = nullptr;                      \
  client::CollectiveArgs args;             \
  args.set_id = (set);                     \
  tutti_status_t status = TUTTI_OK

TUTTI_API tutti_status_t tutti_allreduce(tutti_runtime_t rt, const char* name, int32_t set_id,
                                         const tutti_tensor_t* input, const tutti_tensor_t* output,
                                         const tutti_allreduce_options_t* options,
                                         tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    args.kind = wire::COLLECTIVE_ALLREDUCE;
    if ((status = ReadTensor(input, "input", &args.input)) != TUTTI_OK) return status;
    if ((status = ReadTensor(output, "output", &args.output)) != TUTTI_OK) return status;
    if ((status = ReadReduceOptions(options, &args)) != TUTTI_OK) return status;
    return Submit(rt, name, std::move(args), request);
  });
}

TUTTI_API tutti_status_t tutti_broadcast(tutti_runtime_t rt, const char* name, int32_t set_id,
                                         const tutti_tensor_t* tensor, int32_t root,
                                         tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    args.kind = wire::COLLECTIVE_BROADCAST;
    if ((status = ReadTensor(tensor, "tensor", &args.input)) != TUTTI_OK) return status;
    args.root = root;
    return Submit(rt, name, std::move(args), request);
  });
}

TUTTI_API tutti_status_t tutti_allgather(tutti_runtime_t rt, const char* name, int32_t set_id,
                                         const tutti_tensor_t* input, tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    args.kind = wire::COLLECTIVE_ALLGATHER;
    if ((status = ReadTensor(input, "input", &args.input)) != TUTTI_OK) return status;
    return Submit(rt, name, std::move(args), request);
  });
}

TUTTI_API tutti_status_t tutti_reducescatter(tutti_runtime_t rt, const char* name, int32_t set_id,
                                             const tutti_tensor_t* input,
                                             const tutti_allreduce_options_t* options,
                                             tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    args.kind = wire::COLLECTIVE_REDUCESCATTER;
    if ((status = ReadTensor(input, "input", &args.input)) != TUTTI_OK) return status;
    if ((status = ReadReduceOptions(options, &args)) != TUTTI_OK) return status;
    return Submit(rt, name, std::move(args), request);
  });
}

TUTTI_API tutti_status_t tutti_alltoall(tutti_runtime_t rt, const char* name, int32_t set_id,
                                        const tutti_tensor_t* input, const int64_t* splits,
                                        int32_t nsplits, tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    args.kind = wire::COLLECTIVE_ALLTOALL;
    if ((status = ReadTensor(input, "input", &args.input)) != TUTTI_OK) return status;
    if (splits != nullptr) {
      if (nsplits < 0) return Invalid("nsplits is negative");
      args.splits.emplace(splits, splits + nsplits);
    }
    return Submit(rt, name, std::move(args), request);
  });
}

TUTTI_API tutti_status_t tutti_send(tutti_runtime_t rt, int32_t set_id, const tutti_tensor_t* tensor,
                                    int32_t destination, int32_t tag, tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    args.kind = wire::POINT_TO_POINT_SEND;
    if ((status = ReadTensor(tensor, "tensor", &args.input)) != TUTTI_OK) return status;
    args.root = destination;
    args.tag = tag;
    return Submit(rt, nullptr, std::move(args), request);
  });
}

TUTTI_API tutti_status_t tutti_recv(tutti_runtime_t rt, int32_t set_id, const tutti_tensor_t* tensor,
                                    int32_t source, int32_t tag, tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    args.kind = wire::POINT_TO_POINT_RECV;
    if ((status = ReadTensor(tensor, "tensor", &args.input)) != TUTTI_OK) return status;
    args.root = source;
    args.tag = tag;
    return Submit(rt, nullptr, std::move(args), request);
  });
}

// Reads `count` descriptors laid out with the caller's struct_size as stride (an older or newer
// caller's descriptors are not sizeof(tutti_tensor_t) apart).
static tutti_status_t ReadTensors(const tutti_tensor_t* tensors, int32_t count, const char* what,
                                  std::vector<client::TensorArgs>* out) {
  if (tensors == nullptr) return Invalid(std::string(what) + " is NULL");
  const size_t stride = tensors->struct_size;
  for (int32_t i = 0; i < count; ++i) {
    const auto* t = reinterpret_cast<const tutti_tensor_t*>(reinterpret_cast<const char*>(tensors) + i * stride);
    client::TensorArgs args;
    const std::string name = std::string(what) + "[" + std::to_string(i) + "]";
    tutti_status_t status = ReadTensor(t, name.c_str(), &args);
    if (status != TUTTI_OK) return status;
    out->push_back(std::move(args));
  }
  return TUTTI_OK;
}

static tutti_status_t SubmitGroup(tutti_runtime_t rt, const char* name, client::CollectiveArgs args,
                                  int32_t count, const tutti_tensor_t* inputs,
                                  const tutti_tensor_t* outputs, tutti_request_t* request) {
  if (name != nullptr && *name == '\0') return Invalid("name is empty; pass NULL for an automatic name");
  if (count < 1) return Invalid("count is " + std::to_string(count) + "; a group needs a tensor");
  std::vector<client::TensorArgs> in, out;
  tutti_status_t status = ReadTensors(inputs, count, "inputs", &in);
  if (status == TUTTI_OK && args.kind == wire::COLLECTIVE_ALLREDUCE)
    status = ReadTensors(outputs, count, "outputs", &out);
  if (status != TUTTI_OK) return status;
  args.name = name ? name : "";
  std::shared_ptr<client::Request> created;
  Status submitted = rt->runtime->SubmitGroup(std::move(args), in, out, &created);
  if (!submitted.ok()) return Report(submitted);
  *request = new tutti_request{std::move(created), rt->runtime->timeout_ms(), getpid()};
  return TUTTI_OK;
}

TUTTI_API tutti_status_t tutti_grouped_allreduce(tutti_runtime_t rt, const char* name, int32_t set_id,
                                                 int32_t count, const tutti_tensor_t* inputs,
                                                 const tutti_tensor_t* outputs,
                                                 const tutti_allreduce_options_t* options,
                                                 tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    args.kind = wire::COLLECTIVE_ALLREDUCE;
    if ((status = ReadReduceOptions(options, &args)) != TUTTI_OK) return status;
    return SubmitGroup(rt, name, std::move(args), count, inputs, outputs, request);
  });
}

TUTTI_API tutti_status_t tutti_grouped_allgather(tutti_runtime_t rt, const char* name, int32_t set_id,
                                                 int32_t count, const tutti_tensor_t* inputs,
                                                 tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    (void)status;
    args.kind = wire::COLLECTIVE_ALLGATHER;
    return SubmitGroup(rt, name, std::move(args), count, inputs, nullptr, request);
  });
}

TUTTI_API tutti_status_t tutti_join(tutti_runtime_t rt, int32_t set_id, int64_t timeout_ms,
                                    int32_t* last_rank) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_RUNTIME(rt);
    TUTTI_CHECK_OUT(last_rank);
    return Report(rt->runtime->Join(set_id, timeout_ms, last_rank));
  });
}

TUTTI_API tutti_status_t tutti_barrier(tutti_runtime_t rt, int32_t set_id, tutti_request_t* request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    (void)status;
    args.kind = wire::COLLECTIVE_BARRIER;
    return Submit(rt, nullptr, std::move(args), request);
  });
}

// The request-owned result, once the request completed successfully.
static tutti_status_t CompletedResult(client::Request& r, client::Request::Result** result) {
  auto status = r.Test();
  if (!status) return Fail(TUTTI_IN_PROGRESS, "'" + r.name() + "' has not completed yet");
  if (!status->ok()) return Report(*status);
  const auto kind = r.operation().spec.kind();
  if (kind != wire::COLLECTIVE_ALLGATHER && kind != wire::COLLECTIVE_REDUCESCATTER &&
      kind != wire::COLLECTIVE_ALLTOALL)
    return Invalid("'" + r.name() + "' is a " + wire::KindName(kind) +
                   ", which has no result of its own");
  *result = &r.result();
  return TUTTI_OK;
}

static tutti_status_t FillOutput(client::Request& r, tutti_tensor_t* output) {
  if (output == nullptr) return Invalid("output is NULL");
  if (!r.children().empty())
    return Invalid("'" + r.name() + "' is a group: read its tensors with tutti_request_output_at");
  if (output->struct_size < sizeof(tutti_tensor_t))
    return Invalid("output.struct_size is " + std::to_string(output->struct_size) +
                   "; initialize it with TUTTI_TENSOR_INIT");
  client::Request::Result* result = nullptr;
  tutti_status_t status = CompletedResult(r, &result);
  if (status != TUTTI_OK) return status;
  output->data = result->data.data();
  output->dtype = r.operation().spec.dtype();
  output->ndim = static_cast<int32_t>(result->shape.size());
  output->shape = result->shape.data();
  // Device requests leave their results in device memory of the input's device.
  output->device_type = r.operation().spec.device_type();
  output->device_index = r.operation().spec.device_index();
  output->stream = nullptr;
  return TUTTI_OK;
}

TUTTI_API tutti_status_t tutti_request_output(tutti_request_t request, tutti_tensor_t* output) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_REQUEST(request);
    return FillOutput(*request->request, output);
  });
}

TUTTI_API tutti_status_t tutti_request_output_at(tutti_request_t request, int32_t index,
                                                 tutti_tensor_t* output) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_REQUEST(request);
    const auto& children = request->request->children();
    if (index < 0 || static_cast<size_t>(index) >= children.size())
      return Invalid("index " + std::to_string(index) + " outside the group's " +
                     std::to_string(children.size()) + " tensors");
    auto status = request->request->Test();
    if (!status) return Fail(TUTTI_IN_PROGRESS, "'" + request->request->name() + "' has not completed yet");
    if (!status->ok()) return Report(*status);
    return FillOutput(*children[index], output);
  });
}

TUTTI_API tutti_status_t tutti_request_received_splits(tutti_request_t request, int64_t* splits,
                                                       int32_t capacity, int32_t* count) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_REQUEST(request);
    TUTTI_CHECK_OUT(count);
    if (capacity < 0) return Invalid("capacity is negative");
    if (capacity > 0 && splits == nullptr) return Invalid("splits is NULL");
    client::Request::Result* result = nullptr;
    tutti_status_t status = CompletedResult(*request->request, &result);
    if (status != TUTTI_OK) return status;
    if (request->request->operation().spec.kind() != wire::COLLECTIVE_ALLTOALL)
      return Invalid("'" + request->request->name() + "' is not an alltoall");
    *count = static_cast<int32_t>(result->received_splits.size());
    std::copy_n(result->received_splits.begin(),
                std::min<size_t>(result->received_splits.size(), capacity), splits);
    return TUTTI_OK;
  });
}

static tutti_status_t Settled(const Status& status) {
  return status.ok() ? TUTTI_OK : Report(status);
}

TUTTI_API tutti_status_t tutti_request_test(tutti_request_t request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_REQUEST(request);
    auto status = request->request->Test();
    return status ? Settled(*status) : TUTTI_IN_PROGRESS;
  });
}

TUTTI_API tutti_status_t tutti_request_wait(tutti_request_t request, int64_t timeout_ms) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_REQUEST(request);
    if (timeout_ms < 0) timeout_ms = request->default_timeout_ms;
    auto status = request->request->WaitUntil(std::chrono::steady_clock::now() +
                                              std::chrono::milliseconds(timeout_ms));
    if (!status)
      return Fail(TUTTI_ERR_TIMEOUT, "wait for '" + request->request->name() + "' timed out after " +
                                         std::to_string(timeout_ms) +
                                         " ms; the request is still pending");
    return Settled(*status);
  });
}

TUTTI_API tutti_status_t tutti_request_stream_wait(tutti_request_t request, void* stream,
                                                   int64_t timeout_ms) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    TUTTI_CHECK_REQUEST(request);
    if (timeout_ms < 0) timeout_ms = request->default_timeout_ms;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    auto& r = *request->request;
    std::vector<client::Request*> parts;
    if (r.children().empty())
      parts.push_back(&r);
    else
      for (const auto& child : r.children()) parts.push_back(child.get());
    for (client::Request* part : parts) {
      std::shared_ptr<gpu::Event> done;
      auto status = part->WaitQueued(deadline, &done);
      if (!status)
        return Fail(TUTTI_ERR_TIMEOUT, "'" + r.name() + "' was not queued on the device within " +
                                           std::to_string(timeout_ms) +
                                           " ms; the request is still pending");
      if (!status->ok()) return Report(*status);
      if (done == nullptr) continue;  // a host request, or one that completed without device work
      gpu::Module* module;
      Status loaded = client::LoadGpuModule(&module);
      if (!loaded.ok()) return Report(loaded);
      Status ordered = module->StreamWait(stream, *done);
      if (!ordered.ok()) return Report(ordered);
    }
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

TUTTI_API tutti_status_t tutti_request_free(tutti_request_t request) {
  return Fenced(__func__, [&]() -> tutti_status_t {
    if (request == nullptr) return TUTTI_OK;
    TUTTI_CHECK_REQUEST(request);
    // A completed request's results go back to the allocator now, not whenever a lane drops its
    // last reference; a pending one keeps them until it completes.
    auto& r = *request->request;
    if (r.Test()) {
      r.result().data.Release();
      for (const auto& child : r.children()) child->result().data.Release();
    }
    delete request;
    return TUTTI_OK;
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

TUTTI_API const char* tutti_transport_name(tutti_transport_t transport) {
  switch (transport) {
    case TUTTI_TRANSPORT_TCP: return "tcp";
    case TUTTI_TRANSPORT_SHM: return "shm";
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
