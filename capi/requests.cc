// What a caller does with a tutti_request_t: test, wait (on the host, or by ordering a device
// stream after it), read its results, and free it. Results belong to the request: the tensors
// tutti_request_output fills in point into it and stay valid until tutti_request_free. Several
// threads may test and wait on one request at once: client::Request locks its own state.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "capi/fence.h"
#include "capi/handles.h"
#include "client/exec/gpu_module_loader.h"
#include "client/runtime.h"
#include "tutti/tutti.h"

using namespace tutti;
using namespace tutti::capi;

extern "C" {

// The request-owned result, once the request completed successfully or its device work was
// queued (what tutti_request_stream_wait returns on: client::Request::Published).
static tutti_status_t CompletedResult(client::Request& r, client::Request::Result** result) {
  auto status = r.Published();
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
    auto status = request->request->Published();
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
    auto status = request->request->WaitUntil(
        std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms), request->wait_spin);
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

}  // extern "C"
