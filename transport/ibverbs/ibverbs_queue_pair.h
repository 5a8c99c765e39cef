// One reliable-connected queue pair with its completion queue and the completion channel a
// thread sleeps on: the verbs an ibverbs channel (transport/ibverbs/ibverbs_channel.h) needs, and
// nothing of its protocol.
//
// One completion queue serves both directions, so that one poll tells a channel everything that
// happened: its writes completed, the peer's writes landed (receive completions with the
// immediate), or the connection failed. The completion channel's fd is non-blocking, so that a
// poll(2) on it sits beside the context's abort, shutdown and deadline (docs/transports.md).
//
// Threads: owned and used by one channel, on its thread.
// Lifetime: the IbvDevice outlives it (the channel holds both). Destroying it destroys the queue
// pair, then the completion queue (after acknowledging its events), then the channel; the owner
// must have moved it to the error state and drained it first (IbverbsChannel's destructor).
#pragma once

#include <infiniband/verbs.h>

#include <memory>

#include "common/status.h"
#include "transport/ibverbs/ibverbs_device.h"
#include "transport/ibverbs/qp_params.h"

namespace tutti::transport::ibverbs {

class QueuePair {
 public:
  // A queue pair in INIT on the device's port, accepting remote writes into memory registered
  // for them, with room for `send_depth` and `recv_depth` requests.
  static Status Create(IbvDevice* device, uint32_t send_depth, uint32_t recv_depth,
                       std::unique_ptr<QueuePair>* out);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  uint32_t qpn() const { return qp_->qp_num; }

  // INIT -> RTR toward the peer's queue pair, whose first packet number is `peer.psn`.
  Status ToRtr(const QpParams& peer);
  // RTR -> RTS, sending from `psn`.
  Status ToRts(uint32_t psn);
  // Any state -> ERR: every posted request completes, flushed. For teardown.
  void ToError();

  // An RDMA write with immediate of `len` bytes from `source` (0 bytes: the immediate alone,
  // no memory named) into the peer's memory at `remote` under `rkey`. Always signaled.
  Status PostWrite(uint64_t id, const void* source, uint32_t len, uint32_t lkey, uint64_t remote,
                   uint32_t rkey, uint32_t immediate);
  // A receive request for the next write with immediate (no memory: the write names its own).
  Status PostReceive(uint64_t id);
  // Up to `max` completions; negative if the device failed.
  int Poll(ibv_wc* completions, int max) { return ibv_poll_cq(cq_, max, completions); }

  // Asks for an event on the completion channel at the next completion.
  Status Arm();
  int event_fd() const { return channel_->fd; }
  // Reads the events that made event_fd() readable (acknowledged in batches).
  void TakeEvents();

 private:
  QueuePair(IbvDevice* device) : device_(device) {}

  IbvDevice* device_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  unsigned unacked_events_ = 0;
};

}  // namespace tutti::transport::ibverbs
