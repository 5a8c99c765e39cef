// Send and recv of device tensors through host memory (docs/gpu.md, "Send and recv"): the
// sender's tensor is copied to pinned host memory after its producer's work, the bytes travel
// over the host channel, and the receiver copies them to its device tensor, publishing that copy
// to the request (tutti_request_stream_wait) before it host-waits for it.
//
// Ownership and threads: one per point-to-point channel. Its channel's thread uses it, and so
// may an application thread that posts a recv whose message already arrived; calls are
// serialized by its own mutex. The device work is queued on one stream per device, opened on
// first use and kept until the channel goes.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "client/exec/device_collectives.h"
#include "client/exec/request.h"
#include "gpu/module_api.h"

namespace tutti::client {

class PointToPointStaging {
 public:
  explicit PointToPointStaging(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  static bool OnDevice(const Request& request) {
    return request.operation().spec.device_type() != 0;
  }
  // The `bytes` of `request`'s device input in host memory, valid until the next call: queued
  // after the tensor's producer, waited for on the host.
  Status ToHost(const Request& request, size_t bytes, const gpu::Interrupt& interrupted,
                const void** host);
  // Host memory of `bytes` to receive a message into, valid until the next call.
  Status HostBuffer(const Request& request, size_t bytes, void** host);
  // Copies `bytes` of `host` into `request`'s device output after the tensor's producer,
  // publishes the copy to the request, and waits for it on the host.
  Status ToDevice(Request& request, const void* host, size_t bytes, const gpu::Interrupt& interrupted);

 private:
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  DevicesInUse devices_;  // guarded by mu_
};

}  // namespace tutti::client
