// One submitted collective, shared between the application (which waits on it), the I/O thread
// (which matches it to the coordinator's response) and the set's lane (which executes it).
#pragma once

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/exec/result_buffer.h"
#include "common/dtype.h"
#include "common/status.h"
#include "gpu/module_api.h"
#include "proto/protocol.h"

namespace tutti::client {

class Request {
 public:
  // What the lane needs to run the collective; fixed at submission.
  struct Operation {
    wire::TensorSpec spec;
    const void* input = nullptr;
    void* output = nullptr;  // caller-owned (allreduce, broadcast); null where the result is ours
    size_t count = 0;        // input elements
    // Device tensors: recorded on the producer's stream at submission; the collective runs
    // after it (docs/gpu.md).
    std::shared_ptr<gpu::Event> ready;
  };

  // What allgather, reducescatter and alltoall produce: the request owns it. Written by the lane
  // before completion, read by the application after it (Complete/Wait order the two).
  struct Result {
    ResultBuffer data;
    std::vector<int64_t> shape;
    std::vector<int64_t> received_splits;  // alltoall: rows received from each member
  };

  explicit Request(Operation operation) : operation_(std::move(operation)) {}

  // When the request was made: at its submission (the lane's wait_ns counts from here).
  std::chrono::steady_clock::time_point submitted() const { return submitted_; }

  // A request that owns the memory it works on (what a joined rank runs in others' collectives).
  static std::shared_ptr<Request> WithOwnBuffer(Operation operation, std::vector<char> buffer) {
    auto request = std::make_shared<Request>(std::move(operation));
    request->buffer_ = std::move(buffer);
    request->operation_.input = request->buffer_.data();
    request->operation_.output = request->buffer_.data();
    return request;
  }

  // Grouped collectives: the parent completes once every child did, with the first error if any.
  static std::shared_ptr<Request> Group(std::string name, wire::CollectiveKind kind,
                                        std::vector<std::shared_ptr<Request>> children);
  const std::vector<std::shared_ptr<Request>>& children() const { return children_; }

  const Operation& operation() const { return operation_; }
  const std::string& name() const { return operation_.spec.name(); }
  Result& result() { return result_; }

  // The first completion wins; later ones are ignored (a request fails once).
  void Complete(Status status);
  // Called once with the final status, on the completing thread, before waiters wake. Set it
  // before the request is shared.
  void set_observer(std::function<void(const Status&)> observer) { observer_ = std::move(observer); }

  // Device requests: the lane publishes the event that ends the request's device work once that
  // work is queued, before it host-waits for it, so that tutti_request_stream_wait() can order a
  // stream after it without the host waiting for the transfer.
  void SetDeviceWork(std::shared_ptr<gpu::Event> done);
  // Waits until the device work is queued (`*done` set; returns ok) or the request completed
  // (its status; `*done` as published, possibly null); nullopt at `deadline`.
  std::optional<Status> WaitQueued(std::chrono::steady_clock::time_point deadline,
                                   std::shared_ptr<gpu::Event>* done) const;

  // kOk or the error once done; nullopt while pending.
  std::optional<Status> Test() const;

  // Whether the result may be read: Test(), except that device work counts as done once it is
  // queued. The lane writes a device result's descriptor (pointer, shape, splits) before it
  // publishes the work (SetDeviceWork), and the bytes are there for any stream ordered after the
  // published event (tutti_request_stream_wait), before the lane's own host wait ends. A group
  // is published once every tensor of it is.
  std::optional<Status> Published() const;

  // Waits until done or `deadline`; nullopt if the deadline passed first. It first polls for up
  // to `spin`, yielding the core between polls (docs/steady-state.md, "Waiting"): a small
  // collective often completes within microseconds, and a waiter that never slept needs no
  // wake-up; a longer one sleeps on the condition variable as before.
  std::optional<Status> WaitUntil(std::chrono::steady_clock::time_point deadline,
                                  std::chrono::nanoseconds spin = std::chrono::nanoseconds(0)) const;

 private:
  void ChildDone(const Status& status);

  Operation operation_;
  const std::chrono::steady_clock::time_point submitted_ = std::chrono::steady_clock::now();
  Result result_;
  std::vector<char> buffer_;
  std::vector<std::shared_ptr<Request>> children_;
  std::weak_ptr<Request> parent_;  // weak: the application may free the group first
  size_t children_left_ = 0;       // guarded by mu_
  Status first_child_error_;       // guarded by mu_
  mutable std::mutex mu_;
  mutable std::condition_variable done_cv_;
  bool done_ = false;
  // done_, readable without mu_ by a spinning waiter (set after done_ and status_, under mu_).
  std::atomic<bool> done_flag_{false};
  bool completing_ = false;
  Status status_;
  std::shared_ptr<gpu::Event> device_work_;  // guarded by mu_
  std::function<void(const Status&)> observer_;
};

}  // namespace tutti::client
