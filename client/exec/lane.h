// A lane executes one process set's ordered stream on a thread of its own, so that a set blocked
// on its data plane never delays negotiation or any other set. The I/O thread pushes collectives
// (one tensor, or several fused) in stream order; the lane runs them one after the other and
// completes them. The lane owns its set's host fusion buffer and, for device tensors, its streams,
// device buffers and NCCL communicators (DeviceLaneState; docs/gpu.md).
//
// Fast path (lane_fast_path.cc, docs/steady-state.md): once an Execute puts the set on its
// members' fast path, the lane itself runs the set's stream: it waits for this rank's
// submissions or a peer's round, runs rounds with its peers, and runs what they agree on, until a
// round says to leave; then the stream comes from tuttid again.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "client/counters.h"
#include "client/exec/compressed_allreduce.h"
#include "client/exec/device_collectives.h"
#include "client/exec/fast_path_port.h"
#include "client/exec/fused_collectives.h"
#include "client/exec/hierarchical.h"
#include "client/exec/request.h"
#include "common/timeline.h"
#include "transport/transport.h"

namespace tutti::client {

class Lane {
 public:
  // How device collectives reach tuttid to relay NCCL unique ids (DeviceArgs).
  struct CommIdRelay {
    std::function<void(int32_t group, const std::string& id)> publish;
    std::function<Status(int32_t group, gpu::Deadline deadline, const gpu::Interrupt& interrupted,
                       std::string* id)> await;
  };

  // `counters`, `set_counters` (this set's) and `timeline` outlive the lane. `report_closed(peer, integrity)` runs on the lane thread,
  // once, when a collective failed because the data-plane connection to `peer` closed, or (with
  // `integrity`) because a record from `peer` failed authentication.
  // `topology`: the members' hosts and the job's hierarchy mode (client/exec/hierarchical.h).
  Lane(int32_t set_id, std::vector<int32_t> members, int32_t self,
       std::unique_ptr<transport::Context> context, std::chrono::milliseconds step_timeout,
       Counters* counters, SetCounters* set_counters, Timeline* timeline, CommIdRelay relay,
       std::function<void(int32_t peer, bool integrity)> report_closed = nullptr, FastPathPort* fast_path = nullptr,
       std::chrono::milliseconds fast_path_patience = std::chrono::milliseconds(1000),
       SetTopology topology = {});
  // Runs what is still queued, then joins the thread. Every member released the same queue, so
  // draining it keeps the members in step when a set is removed; at finalize the device is shut
  // down first and each queued collective fails at once with kShutDown.
  ~Lane();

  // One collective: a single tensor, or two or more fused. `member_rows` of each: the
  // coordinator's per-member rows for allgather and alltoall.
  void Push(std::vector<FusedPart> parts);
  // After what was pushed so far, the set is on its members' fast path as `generation` (the
  // round bitmaps' size comes from the link's book). I/O thread.
  void EnterFastPath(uint64_t generation);
  // Something for the fast path changed (a submission, a request to leave). Any thread.
  void Wake();
  // The set re-formed around a rank that left in order: this lane's incarnation runs no more
  // rounds. Any thread.
  void EndFastPath();

  const MemberList& members() const { return members_; }

  // Wakes the collective in progress and fails it, and every later one, with `status`. Any thread.
  void Abort(const Status& status) {
    Interrupt(status);
    context_->Abort(status);
    Wake();
  }
  // Stops device work only (host collectives stop through the transport device): a wait on the
  // GPU or on a communicator returns `status`. Any thread.
  void Interrupt(const Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (interrupted_.ok()) interrupted_ = status;
  }

  // The backend and traffic with global rank `peer`. Any thread.
  transport::PeerStats PeerStats(int32_t peer) const { return context_->Stats(peer); }

  // Once a collective lost a peer, the set's data plane is unusable: the status to fail new
  // submissions with at once, or ok. Any thread.
  Status broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_;
  }

 private:
  using Work = std::vector<FusedPart>;
  struct Item {
    Work work;
    uint64_t fast_path = 0;  // non-zero: a mark that enters this fast-path generation
  };

  void Run();
  // Runs one collective and completes its requests (also what a fast-path round agreed on).
  void RunWork(Work& work);
  // The fast path (lane_fast_path.cc): waits for a reason to run a round, then runs at most one.
  void StartFastPath(uint64_t generation);
  void FastPathStep();
  void FastPathFailed(const Status& status);
  void DrainWake();
  Status Execute(Work& work);
  Status ExecuteOnDevice(const RingArgs& ring, Work& work);
  // An allreduce compressed by the library (compressed_allreduce.h), with its timeline and counters.
  Status ExecuteCompressed(const RingArgs& ring, Work& work);

  const int32_t set_id_;
  const MemberList members_;
  const SetTopology topology_;
  const int32_t self_;
  std::unique_ptr<transport::Context> context_;
  const std::chrono::milliseconds step_timeout_;
  Counters* const counters_;
  SetCounters* const set_counters_;
  Timeline* const timeline_;
  std::vector<char> scratch_;
  std::vector<char> fusion_buffer_;  // lane thread only; grows to the largest fused collective
  CompressionState compression_;     // lane thread only
  std::string peer_lost_cause_;  // lane thread only
  const CommIdRelay relay_;
  const std::function<void(int32_t, bool)> report_closed_;
  bool reported_closed_ = false;  // lane thread only
  DeviceLaneState device_state_;  // lane thread only; destroyed with the lane, after the thread
  FastPathPort* const port_;
  const std::chrono::milliseconds patience_;  // a tensor waits this long on the fast path at most
  struct FastPath {
    bool on = false;
    bool connected = false;  // the ring's connections were made at the first generation
    uint64_t generation = 0;
    uint64_t rounds = 0;
    uint64_t changes_seen = 0;
  } fast_;  // lane thread only
  int wake_fd_ = -1;  // eventfd: submissions, requests to leave, stop
  // Set by the first Wake since the lane last drained wake_fd_: later ones skip the write, so a
  // step's hundreds of submissions cost the lane one wake-up, not one system call each.
  std::atomic<bool> wake_pending_{false};

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  bool end_fast_path_ = false;
  Status broken_;
  Status interrupted_;  // why device waits stop (Abort, Interrupt)
  std::thread thread_;
};

}  // namespace tutti::client
