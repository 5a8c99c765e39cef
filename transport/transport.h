// The data plane's interface: moving bytes between the ranks of a process set. Collective
// algorithms (client/) are written against it; each peer pair is carried by one backend's
// channel (tcp/, shm/, pipe/ for MPI, ibverbs/). No negotiation or protobuf here. docs/transports.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/secure/data_security.h"
#include "transport/message_pipe.h"

namespace tutti::transport {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// The room every backend that relays in place keeps in flight per direction (Context::Relay).
constexpr size_t kRelayRoomBytes = 4 << 20;

// Which backend carries a peer pair. Values are those of tutti_transport_t (tutti.h): never
// change them. kIbverbs (transport/ibverbs/) has no tutti_transport_t value yet: tutti.h changes
// only with a version bump a person reviews (docs/abi-policy.md), so until then
// tutti_transport_name says "unknown" for it.
enum class Link : int32_t { kNone = 0, kTcp = 1, kShm = 2, kMpi = 3, kIbverbs = 4 };

// How to reach one rank of the job: its TCP endpoint, and the backend to use with it. kShm only
// for ranks on this host (same host identity); kNone for this rank itself.
struct PeerRoute {
  std::string endpoint;
  Link link = Link::kTcp;
};

// What a context did with one peer. `link` is the planned backend until connected, then the one
// in use (the lower rank of a pair chooses; the higher follows).
struct PeerStats {
  Link link = Link::kNone;
  bool connected = false;
  uint64_t bytes_sent = 0, bytes_received = 0;
};

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

  // Sleeps until bytes from global rank `from` can be read (or its connection closed:
  // `*incoming` true), `wake_fd` becomes readable, or `deadline` (`*incoming` false). The
  // connection to `from` is made first if there is none. Errors as SendRecv, but never kTimeout;
  // kPeerLost when the peer closed the connection with nothing left to read.
  // What a lane idle on its set's fast path waits in (docs/steady-state.md): a peer starting a
  // round, or work of its own.
  virtual Status AwaitIncoming(int32_t /*from*/, int /*wake_fd*/, Deadline /*deadline*/,
                               bool* /*incoming*/) {
    return Status(Code::kInternal, "this data plane cannot wait for a peer");
  }

  // Wakes a SendRecv blocked on this context and makes it, and every later one, return `status`
  // (a peer was declared lost, the coordinator is gone). The only method any thread may call.
  virtual void Abort(const Status& status) = 0;

  // After a call failed with kPeerLost because a connection closed: the rank at its other end
  // (-1 if none closed). The owning thread only.
  virtual int32_t closed_peer() const { return -1; }

  // The transport with global rank `peer` and the bytes moved with it. Any thread.
  virtual PeerStats Stats(int32_t peer) const = 0;

  // Zero-copy streaming for backends whose bytes in flight sit in memory both sides map (shm):
  // true if every pair among `ranks` (global, including this rank) is such a pair. The same
  // answer on every member, since it follows from the route plan, which every rank makes alike.
  virtual bool CanRelayInPlace(const std::vector<int32_t>& /*ranks*/) const { return false; }

  // Where CanRelayInPlace holds: streams `len` bytes arriving from `from` (none if from < 0) and
  // `len` bytes toward `to` (none if to < 0) through `fn(in, out, offset, n)`, called on
  // consecutive windows, `n` a multiple of `granule` (1, 2, 4, 8 or 16) and `offset` counting from
  // 0: `in` points at the next n bytes that arrived, `out` at room for the next n to send,
  // either null when absent. `fn` writes all of `out`. Errors as SendRecv.
  // Each relaying backend keeps at least kRelayRoomBytes in flight per direction; a caller's
  // windows of more than half of that could stall a ring with every FIFO full.
  using RelayFn = std::function<void(const char* in, char* out, size_t offset, size_t n)>;
  virtual Status Relay(int32_t /*to*/, int32_t /*from*/, size_t /*len*/, size_t /*granule*/,
                       Deadline /*deadline*/, const RelayFn& /*fn*/) {
    return Status(Code::kInternal, "this data plane cannot relay");
  }
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

  // Called once the rendezvous gives the job's secret and this rank: connections prove they know
  // the secret both ways (transport/handshake.h), and TCP ones then protect their bytes as
  // `security` says (transport/secure/).
  virtual void SetJobSecret(const std::string& secret, int32_t self, DataSecurity security) = 0;

  // A context for process set `set_id`, as rank `self`, reaching rank r through `routes[r]`.
  virtual std::unique_ptr<Context> CreateContext(int32_t set_id, int32_t self,
                                                 std::vector<PeerRoute> routes) = 0;

  // Makes every blocked and later SendRecv of every context return kShutDown.
  virtual void Shutdown() = 0;

  // Point-to-point: the sender opens a stream on `channel` to `peer`, and the receiver takes the
  // stream `peer` opened on `channel` (waiting for it until `deadline`). Channel ids share the
  // space of set ids, so callers keep them apart (negative for point-to-point).
  virtual Status OpenStream(int32_t channel, int32_t self, int32_t peer, const PeerRoute& route,
                            Deadline deadline, std::unique_ptr<Stream>* stream) = 0;
  virtual Status AcceptStream(int32_t channel, int32_t peer, Deadline deadline,
                              std::unique_ptr<Stream>* stream) = 0;
};

// A device listening for TCP on `address` (an IPv4 address) with an OS-chosen port, and for
// same-host shared-memory handshakes on an abstract Unix socket named after that endpoint.
// `carrier`: the runtime's MessageCarrier under TUTTI_TRANSPORT=mpi (transport/pipe/), else null.
Status CreateDevice(const std::string& address, std::unique_ptr<Device>* device,
                    std::unique_ptr<MessageCarrier> carrier = nullptr);

}  // namespace tutti::transport
