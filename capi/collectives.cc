// The submitting entry points: allreduce, broadcast, allgather, reducescatter, alltoall, send and
// recv, their grouped forms, barrier and join. Each reads the caller's tensor descriptors and
// options into client::CollectiveArgs and hands them to the runtime; the caller keeps owning the
// tensors' memory until the request completes, and owns the tutti_request_t it gets back until
// tutti_request_free. Submitting returns at once; only join waits, for the set's other members.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "capi/fence.h"
#include "capi/handles.h"
#include "capi/versioned_struct.h"
#include "client/runtime.h"
#include "tutti/tutti.h"

using namespace tutti;
using namespace tutti::capi;

namespace {

// One caller descriptor in the runtime's form; rejects what would make the runtime read past the
// caller's shape array.
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

}  // namespace

extern "C" {

// Submits `args` on behalf of any collective entry point.
static tutti_status_t Submit(tutti_runtime_t rt, const char* name, client::CollectiveArgs args,
                             tutti_request_t* request) {
  if (name != nullptr && *name == '\0') return Invalid("name is empty; pass NULL for an automatic name");
  args.name = name ? name : "";
  std::shared_ptr<client::Request> created;
  Status submitted = rt->runtime->Submit(std::move(args), &created);
  if (!submitted.ok()) return Report(submitted);
  *request = new tutti_request{std::move(created), rt->runtime->timeout_ms(), CurrentProcess(),
                              rt->runtime->wait_spin()};
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
  args->compression = {o.compression,         o.compression_ratio, o.adaptive_compressor,
                       o.adaptive_interval,   o.adaptive_min_bytes, o.adaptive_max_change};
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

// send and recv differ only in their kind and in whether `peer` is the destination or the source;
// `function` is the entry point's name, for the exception fence's message.
static tutti_status_t SubmitPointToPoint(const char* function, wire::CollectiveKind kind,
                                         tutti_runtime_t rt, int32_t set_id,
                                         const tutti_tensor_t* tensor, int32_t peer, int32_t tag,
                                         tutti_request_t* request) {
  return Fenced(function, [&]() -> tutti_status_t {
    TUTTI_BEGIN_SUBMIT(set_id);
    args.kind = kind;
    if ((status = ReadTensor(tensor, "tensor", &args.input)) != TUTTI_OK) return status;
    args.root = peer;
    args.tag = tag;
    return Submit(rt, nullptr, std::move(args), request);
  });
}

TUTTI_API tutti_status_t tutti_send(tutti_runtime_t rt, int32_t set_id, const tutti_tensor_t* tensor,
                                    int32_t destination, int32_t tag, tutti_request_t* request) {
  return SubmitPointToPoint(__func__, wire::POINT_TO_POINT_SEND, rt, set_id, tensor, destination,
                            tag, request);
}

TUTTI_API tutti_status_t tutti_recv(tutti_runtime_t rt, int32_t set_id, const tutti_tensor_t* tensor,
                                    int32_t source, int32_t tag, tutti_request_t* request) {
  return SubmitPointToPoint(__func__, wire::POINT_TO_POINT_RECV, rt, set_id, tensor, source, tag,
                            request);
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
  *request = new tutti_request{std::move(created), rt->runtime->timeout_ms(), CurrentProcess(),
                              rt->runtime->wait_spin()};
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

}  // extern "C"
