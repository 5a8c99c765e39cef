// The runtime's connection to tuttid. One I/O thread owns the ZeroMQ DEALER socket (ZeroMQ sockets
// are not thread-safe); other threads hand it frames through a locked queue and wake it with an
// eventfd that it polls beside the socket. Announcements queued between two wakeups leave as one
// Announce frame (after the batching window, if one is set), tensors the response cache holds as
// bits. Replies are matched to waiting callers; Execute and Fault frames go to callbacks
// that run on the I/O thread and must not block.
//
// Liveness: once welcomed, the I/O thread itself sends a Heartbeat every interval (so a wedged
// I/O thread stops them), and declares the coordinator lost after a lease of silence.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "client/announce_cache.h"
#include "client/counters.h"
#include "client/runtime_options.h"
#include "common/status.h"
#include "proto/protocol.h"
#include "transport/transport.h"

namespace tutti::client {

class CoordinatorLink {
 public:
  struct Callbacks {
    std::function<void(wire::Execute&)> on_execute;
    std::function<void(const wire::Refusal&)> on_tensor_refused;
    std::function<void(const wire::Fault&)> on_fault;
    // An NCCL unique id relayed from a set's first member.
    std::function<void(const wire::CommId&)> on_comm_id;
    // The link is dead for good: coordinator lost, this rank evicted, or tuttid restarted.
    std::function<void(const Status&)> on_dead;
  };

  // `cycle_time`: how long announcements may wait for more to join them (0: none).
  // `curve`: keys for a tuttid that requires CURVE (not enabled(): none).
  CoordinatorLink(std::string endpoint, Callbacks callbacks, Counters* counters,
                  std::chrono::microseconds cycle_time, const CurveClientKeys& curve);
  // Stops the I/O thread; says Bye first if registered.
  ~CoordinatorLink();

  // Sends the registration and waits for Welcome (or the refusal) until `deadline`.
  Status Register(const wire::Register& request, transport::Deadline deadline,
                  wire::Welcome* welcome);

  // Sends a SetAdd, SetRemove or Join and waits for its SetReply until `deadline`.
  Status Call(wire::Frame request, uint64_t request_id, transport::Deadline deadline,
              wire::SetReply* reply);
  // Asks tuttid for the job's counters.
  Status QueryCounters(transport::Deadline deadline, wire::CoordinatorCounters* counters);

  // Queues one tensor announcement for the next Announce frame.
  void Announce(int32_t set_id, wire::TensorSpec spec);
  // A tensor was refused; or a set is gone: their cache state goes.
  void ForgetTensor(int32_t set_id, const std::string& name);
  void ForgetSet(int32_t set_id);

  uint64_t NextRequestId() { return next_request_id_++; }

  // Tells tuttid that the application aborted this rank. Fire and forget.
  void SendAbort();
  // Sends the NCCL unique id of (set, group) for tuttid to relay to the set's other members.
  void SendCommId(int32_t set_id, int32_t group, const std::string& id);

 private:
  void Run();
  void Wake();
  // Sends the outbox, and the queued announcements if `announcements` (or if the outbox holds
  // anything they must precede).
  void Flush(bool announcements);
  // Sends the reply-awaiting `request` and waits for the frame answering `request_id`.
  Status Roundtrip(wire::Frame request, uint64_t request_id, transport::Deadline deadline,
                   wire::Frame* reply);
  void Dispatch(wire::Frame& frame);
  void Die(const Status& status);
  // A failed ZeroMQ handshake (seen through the socket monitor): wrong CURVE keys, or CURVE on
  // one side only. Fails the registration, or the link, at once instead of at a deadline.
  void OnMonitorEvent();
  // Heartbeat and lease bookkeeping; returns how long the next poll may sleep.
  std::chrono::milliseconds KeepAlive();

  const std::string endpoint_;
  const Callbacks callbacks_;
  Counters* const counters_;
  const std::chrono::microseconds cycle_time_;
  zmq::context_t context_{1};
  zmq::socket_t socket_;  // I/O thread only, after construction
  zmq::socket_t monitor_;  // receives socket_'s handshake failures; I/O thread only
  const bool curve_;
  int wakeup_ = -1;

  std::mutex mu_;  // guards everything below
  std::vector<std::string> outbox_;                           // encoded frames
  AnnounceCache announced_;
  transport::Clock::time_point first_queued_;  // when the oldest queued announcement came
  std::optional<std::promise<wire::Frame>> registration_;
  std::map<uint64_t, std::promise<wire::Frame>> calls_;  // answered by SetReply or counters
  bool registered_ = false;
  bool stopping_ = false;
  Status dead_;  // set once the link is dead; later calls fail with it
  uint64_t epoch_ = 0;
  std::chrono::milliseconds heartbeat_interval_{0}, lease_{0};

  // I/O thread only.
  transport::Clock::time_point last_received_, last_heartbeat_, last_loop_;

  std::atomic<uint64_t> next_request_id_{1};
  std::thread thread_;
};

}  // namespace tutti::client
