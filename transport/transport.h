// The data plane's interface: moving bytes between the ranks of a process set. Collective
// algorithms (client/) are written against it; backends (tcp/, later shm/, ibverbs/, nccl/)
// implement it. No negotiation or protobuf here.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tutti::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// The connections of one process set from this rank. Created by a Device; owned and used by that
// set's lane thread alone, so it needs no locking. Connections are made on first use.
class Context {
 public:
  virtual ~Context() = default;

  // Sends `send_len` bytes to global rank `to` while receiving `recv_len` bytes from global rank
  // `from` (`to` may equal `from`; either length may be 0). Both directions progress together, so
  // a ring step cannot deadlock on full socket buffers. Errors: kPeerLost (connection closed or
  // reset; the message names the rank), kTimeout (no progress until `deadline`), kShutDown.
  // `on_received`, if given, is called on this thread with the number of bytes received so far
  // whenever that grew, so that the caller can consume a prefix (reduce it) while the kernel
  // keeps moving the rest: the pipelining of large ring steps.
  virtual Status SendRecv(int32_t to, const void* send, size_t send_len, int32_t from, void* recv,
                          size_t recv_len, Deadline deadline,
                          const std::function<void(size_t)>& on_received = nullptr) = 0;

  // Wakes a SendRecv blocked on this context and makes it, and every later one, return `status`
  // (a peer was declared lost, the coordinator is gone). The only method any thread may call.
  virtual void Abort(const Status& status) = 0;
};

// A one-way ordered byte stream to or from one peer, for point-to-point messages. Used by one
// thread; Abort() (any thread) wakes it and makes every later call fail with the given status.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual Status Write(const void* data, size_t len, Deadline deadline) = 0;
  virtual Status Read(void* data, size_t len, Deadline deadline) = 0;
  virtual void Abort(const Status& status) = 0;
};

// One per runtime: the listener other ranks connect to and the factory of contexts. Thread-safe.
class Device {
 public:
  virtual ~Device() = default;

  // The address other ranks connect to, e.g. "10.0.0.5:40123".
  virtual const std::string& endpoint() const = 0;

  // Called once the rendezvous gives the job's key; connections must present it.
  virtual void SetJobKey(uint64_t key) = 0;

  // A context for process set `set_id`, as rank `self`, reaching rank r at `endpoints[r]`.
  virtual std::unique_ptr<Context> CreateContext(int32_t set_id, int32_t self,
                                                 std::vector<std::string> endpoints) = 0;

  // Makes every blocked and later SendRecv of every context return kShutDown.
  virtual void Shutdown() = 0;

  // Point-to-point: the sender opens a stream on `channel` to `peer`, and the receiver takes the
  // stream `peer` opened on `channel` (waiting for it until `deadline`). Channel ids share the
  // space of set ids, so callers keep them apart (negative for point-to-point).
  virtual Status OpenStream(int32_t channel, int32_t self, int32_t peer, const std::string& endpoint,
                            Deadline deadline, std::unique_ptr<Stream>* stream) = 0;
  virtual Status AcceptStream(int32_t channel, int32_t peer, Deadline deadline,
                              std::unique_ptr<Stream>* stream) = 0;
};

// A TCP device listening on `address` (an IPv4 address) with an OS-chosen port.
Status CreateTcpDevice(const std::string& address, std::unique_ptr<Device>* device);

}  // namespace tutti::transport
