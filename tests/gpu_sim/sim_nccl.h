// The simulator's NCCL: a communicator between processes of one machine, made from the unique id
// tuttid relayed, as ncclCommInitRank makes one. Its collectives exchange bytes through POSIX
// shared memory and reduce in rank order (so every rank gets the same bits); each call blocks
// until every rank made its matching call, the communicator was aborted, or its deadline passed,
// as a NCCL kernel blocks its stream. This lets the NCCL path of tutti (communicators per set and
// device group, fusion, the copies in and out, uneven chunks, aborts on a lost peer) run with
// several ranks on a machine without a GPU, and its point-to-point path (a communicator per pair of
// ranks' devices) between ranks on different simulated GPUs.
//
// Shared memory: "/tutti-simnccl-<id fingerprint>" holds the rendezvous (a process-shared mutex,
// condition and barrier), unlinked once every rank joined; each collective's contributions are
// segments of their own, unlinked by their writer once every rank read them.
//
// Threads: a communicator's collectives run one at a time on its set's stream (a thread the
// engine starts for each); Abort may come from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "gpu/module_api.h"

namespace tutti::gpu::sim {

class Comm {
 public:
  // Joins the communicator of `unique_id` as `rank` of `nranks`; returns once all joined, or
  // the interrupt's status, or kTimeout at `deadline`.
  static Status Join(const std::string& unique_id, int32_t nranks, int32_t rank, Deadline deadline,
                     const Interrupt& interrupted, std::shared_ptr<Comm>* comm);
  ~Comm();

  Status Allreduce(const void* send, void* receive, size_t count, DType dtype, ReduceOp op);
  Status Broadcast(void* buffer, size_t bytes, int32_t root);
  Status Allgather(void* buffer, const Chunks& chunks);
  Status ReduceScatter(void* buffer, const Chunks& chunks, int32_t self, DType dtype, ReduceOp op);
  Status AllToAll(const void* send, const Chunks& send_chunks, void* receive, const Chunks& recv_chunks);
  // Point-to-point on a communicator of two ranks: a Send pairs with the peer's Recv made in the
  // same turn (the communicator's calls pair up in order, as ncclSend and ncclRecv do).
  Status Send(const void* data, size_t bytes, int32_t peer);
  Status Recv(void* buffer, size_t bytes, int32_t peer);

  // Makes the collective in progress, and every later one, fail at once (ncclCommAbort).
  void Abort();
  // The first failure of a collective (a peer that never came, an abort), or ok.
  Status Error() const;

 private:
  struct Shared;
  Comm(std::string name, int32_t nranks, int32_t rank, Shared* shared);
  // Every rank's contribution of this collective: publishes `bytes` of `data` behind `table` (the
  // sender's chunk layout, or empty), waits for all, hands each rank's to `read`, then waits until
  // all have read.
  using Reader = std::function<void(int32_t from, const Chunks& table, const char* data)>;
  Status Exchange(const Chunks& table, const void* data, size_t bytes, const Reader& read);
  Status Barrier();
  // ok if `peer` is the other rank of a communicator of two.
  Status Pair(int32_t peer) const;
  Status Fail(Status status);

  const std::string name_;
  const int32_t nranks_, rank_;
  Shared* const shared_;
  uint64_t sequence_ = 0;
  std::atomic<bool> aborted_{false};
  mutable std::atomic<int> failed_code_{0};
  std::string failure_;  // written once, before failed_code_
};

}  // namespace tutti::gpu::sim
