// The runtime inside one rank: joins the job through the coordinator, keeps the process sets it
// knows, negotiates submitted collectives and runs them on one lane per set.
//
// Threads (docs/thread-model.md): application threads call the public methods; the coordinator
// link's I/O thread calls the LinkListener methods, which match responses to requests and hand
// them to lanes; each lane runs its set's collectives. Locks are held only for short bookkeeping,
// never across I/O or a wait.
//
// Files: runtime.cc (rendezvous, lanes, lifetime), runtime_sets.cc (set changes and join),
// runtime_submit.cc (submission), runtime_dispatch.cc (what tuttid says).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <condition_variable>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "client/autotune_log.h"
#include "client/control/comm_id_mailbox.h"
#include "client/control/coordinator_link.h"
#include "client/control/link_listener.h"
#include "client/counters.h"
#include "client/exec/fast_path_port.h"
#include "client/exec/lane.h"
#include "client/exec/point_to_point.h"
#include "client/exec/request.h"
#include "client/pending_table.h"
#include "client/runtime_options.h"
#include "client/set_registry.h"
#include "client/submission_checks.h"
#include "client/world_map.h"
#include "common/timeline.h"
#include "transport/backend.h"

namespace tutti::client {

class Runtime : private LinkListener, private FastPathPort {
 public:
  // Joins the job; returns once the whole world registered.
  static Status Create(const RuntimeOptions& options, std::unique_ptr<Runtime>* runtime);
  // Leaves the job; pending requests fail with kShutDown.
  ~Runtime();

  // The world in the current membership epoch (they change when an elastic job re-forms).
  int32_t rank() const { return world_.RankOf(slot_); }
  int32_t size() const { return world_.size(); }
  int32_t local_rank() const { return world_.placement().local_rank; }
  int32_t local_size() const { return world_.placement().local_size; }
  int32_t cross_rank() const { return world_.placement().cross_rank; }
  int32_t cross_size() const { return world_.placement().cross_size; }
  uint64_t membership_epoch() const { return world_.membership_epoch(); }
  // Waits until this rank is in a membership epoch later than `after` (an elastic job re-formed
  // after a request failed), or has a re-formation it has not acknowledged (its mark came after
  // `after` was read); kTimeout after `timeout_ms`, or the runtime's failure. Success
  // acknowledges the re-formations: the sets they changed take submissions again.
  // With ranks waiting to join (ranks_waiting()), this is a boundary where they may be admitted:
  // tuttid admits them once every live rank is at one, and the call returns in the epoch that
  // has them, or as it was if they stopped waiting.
  Status AwaitEpoch(uint64_t after, int64_t timeout_ms, uint64_t* epoch);
  // How many ranks wait to join the running elastic job (docs/elastic.md, "Adding ranks").
  int32_t ranks_waiting();
  int64_t timeout_ms() const { return options_.timeout_ms; }
  std::chrono::microseconds wait_spin() const { return options_.wait_spin; }
  // The process that created the runtime: after fork() only it may use the runtime.
  pid_t owner() const { return owner_; }

  Status AddProcessSet(std::vector<int32_t> ranks, int64_t timeout_ms, int32_t* set_id);
  Status RemoveProcessSet(int32_t set_id, int64_t timeout_ms);
  Status ProcessSetRanks(int32_t set_id, std::vector<int32_t>* ranks) const;
  // Asks tuttid to autotune the set (docs/autotune.md); one member's ask is enough. Returns once
  // the ask is queued: tuning starts with the set's next Execute after tuttid reads it.
  Status AutotuneProcessSet(int32_t set_id);

  // This rank has no more data for the set: until every member joined, the others' collectives
  // run with this rank taking part with identity values (allreduce) or no rows (allgather) and
  // relaying (broadcast). Returns the global rank that joined last.
  Status Join(int32_t set_id, int64_t timeout_ms, int32_t* last_rank);

  Status Submit(CollectiveArgs args, std::shared_ptr<Request>* request);

  // Several allreduces or allgathers negotiated and completed as one unit: `args` is the shared
  // part, `inputs`/`outputs` one entry per tensor (outputs: allreduce only). The returned request
  // completes when all did; children() hold each tensor's request.
  Status SubmitGroup(CollectiveArgs args, const std::vector<TensorArgs>& inputs,
                     const std::vector<TensorArgs>& outputs, std::shared_ptr<Request>* request);

  // Fails every pending request (waking lanes blocked in the data plane) and every later call
  // with kAborted, and tells the peers through tuttid. Finalize still works afterwards.
  void Abort();

  const Counters& counters() const { return counters_; }
  // Asks tuttid what it did for this job (and for process set `set_id`).
  Status QueryCoordinatorCounters(wire::CoordinatorCounters* counters, int32_t set_id = 0);

  // Which backend carries this rank's traffic with `peer` in `set_id`, and how much it moved.
  Status PeerStats(int32_t set_id, int32_t peer, transport::PeerStats* stats);
  // This rank's work in one of its sets since init (tutti_get_set_counters). Any thread.
  struct SetCountersSnapshot {
    uint64_t collectives = 0, tensors = 0, tensors_fused = 0, bytes = 0, wait_ns = 0,
             execute_ns = 0, tensors_compressed = 0, adaptive_revisits = 0,
             adaptive_compress_choices = 0;
  };
  Status GetSetCounters(int32_t set_id, SetCountersSnapshot* snapshot);

  Status StartTimeline(const std::string& path) { return timeline_.Start(path); }
  void StopTimeline() { timeline_.Stop(); }

 private:
  explicit Runtime(const RuntimeOptions& options);
  // Registers with tuttid and waits for the whole world (runtime.cc).
  Status Rendezvous();
  // `channel`: the data-plane id of this incarnation of the set (runtime_elastic.cc).
  // `incarnation_epoch`: the membership epoch this incarnation of the set begins in, which the
  // lane's reports of closed connections carry (a re-formed set's old lane is ignored).
  void OpenLane(int32_t set_id, const std::vector<int32_t>& ranks, int32_t channel,
                uint64_t incarnation_epoch);
  // The rank of `slot` for messages and results (WorldMap); the slot itself if it left.
  int32_t RankForUser(int32_t slot) const;
  // The job's next registration from this process says it was in `epoch` (docs/lifecycle.md).
  void RememberMembershipEpoch(uint64_t epoch);

  // Submission (runtime_submit.cc). Negotiated collectives, single (`grouped` false, one input
  // and output) or grouped: checked, named, then announced all or none.
  Status SubmitNegotiated(CollectiveArgs args, const std::vector<TensorArgs>& inputs,
                          const std::vector<TensorArgs>& outputs, bool grouped,
                          std::shared_ptr<Request>* request);
  // Send and recv: between two ranks only, no negotiation, no lane.
  Status SubmitPointToPoint(const CollectiveArgs& args, Request::Operation op,
                            std::shared_ptr<Request>* request);
  // Fails every pending request and every later call with `status`; lanes and point-to-point
  // transfers blocked in the data plane wake with it.
  void FailEverything(const Status& status);
  // Why new work on `set_id` must fail at once (the runtime or a member is lost), or ok. Caller
  // holds mu_.
  Status Broken(int32_t set_id, const std::vector<int32_t>& members);
  // Registers `requests` as pending on the set (all or none: names must be free) and announces
  // them to tuttid.
  Status Enqueue(int32_t set_id, const std::vector<int32_t>& members,
                 const std::vector<std::shared_ptr<Request>>& requests);
  // Records the request's completion on the timeline.
  void Observe(int32_t set_id, Request& request);

  // What tuttid says, on the link's I/O thread (runtime_dispatch.cc).
  void OnExecute(wire::Execute& execute) override;
  void OnTensorRefused(int32_t set_id, const std::string& name, const Status& why) override;
  void OnRanksLost(const std::vector<int32_t>& lost_ranks, const Status& status) override;
  void OnSetsBroken(const std::vector<int32_t>& set_ids, const Status& status, bool orderly) override;
  void OnCommId(int32_t set_id, int32_t device_group, const std::string& id) override;
  // Elastic re-formation (runtime_elastic.cc).
  void OnReformed(const wire::Reformed& reformed) override;
  void OnRanksWaiting(int32_t count) override;
  // Ranks joined: `added` extends the peers, and the routes are planned again over all of them.
  Status AddPeers(const google::protobuf::RepeatedPtrField<wire::Peer>& added);
  // The data-plane id of the incarnation of `set_id` that began in membership epoch `epoch`.
  static Status ChannelOf(int32_t set_id, uint64_t epoch, int32_t* channel);
  void OnLinkDead(const Status& status) override;
  void OnFailover(bool resumed, const std::string& what) override;
  void OnWarning(const std::string& what) override;
  // The members' fast path, for the lanes (runtime_fast_path.cc, docs/steady-state.md).
  FastPathInput Input(int32_t set_id) override;
  std::vector<std::vector<FusedPart>> Take(int32_t set_id, uint64_t generation,
                                           const std::vector<uint32_t>& slots) override;
  void Leave(int32_t set_id, uint64_t generation, uint64_t rounds) override;
  void Abandon(int32_t set_id, uint64_t generation, const Status& why) override;
  // Wakes the set's lane: its fast path has something new. Caller does not hold mu_.
  void WakeLane(int32_t set_id);
  // Before a join or a removal, which tuttid handles: this rank's members leave the set's fast
  // path (at their next round) if they are on it.
  Status LeaveFastPath(int32_t set_id, int64_t timeout_ms);
  // While this rank is joined to `set_id`: a request for its share in a collective the others
  // run (identity values, no rows, or a relay buffer); else null.
  std::shared_ptr<Request> JoinedShare(int32_t set_id, const wire::TensorSpec& spec);
  // Removes and returns this rank's pending request for (set, name); null if none.
  std::shared_ptr<Request> TakePending(int32_t set_id, const std::string& name);
  void FailPending(int32_t set_id, const Status& status);

  const RuntimeOptions options_;
  // Before the lanes and the link, which record into them: destroyed after both.
  Counters counters_;
  // One per set this rank opened a lane for, kept for the runtime's life (guarded by mu_; the
  // counters themselves are atomics the lanes write).
  std::map<int32_t, std::unique_ptr<SetCounters>> set_counters_;
  SetCounters* SetCountersOf(int32_t set_id);  // creates it; mu_ held
  Timeline timeline_;
  AutotuneLog autotune_log_;  // written on the link's I/O thread only (OnExecute)
  std::unique_ptr<transport::Device> device_;
  wire::Welcome welcome_;
  // This rank's number on the wire: its rank in the first epoch, or the slot tuttid gave it when
  // it was added to the running elastic job. Set by Rendezvous, before any other thread runs.
  int32_t slot_ = -1;
  std::vector<transport::PeerAddress> peers_;  // by slot: the welcome's, then those added
  std::vector<transport::PeerRoute> routes_;  // by slot, planned from peers_; guarded by mu_
  SetRegistry sets_;  // in slots
  WorldMap world_;
  // Held across a submission's checks and announcement, and across applying a re-formation, so
  // that every request belongs wholly to one membership epoch.
  std::mutex submit_mu_;
  std::mutex epoch_mu_;
  std::condition_variable epoch_cv_;  // notified when the membership epoch changes or the runtime dies

  const pid_t owner_;

  std::mutex mu_;  // guards pending_, lanes_, shut_down_, dead_, lost_, left_sets_, joined_,
                  // unacknowledged_
  PendingTable pending_;
  std::map<int32_t, std::unique_ptr<Lane>> lanes_;
  // Autotuned sets (docs/autotune.md): the values of the last Execute that carried a Tuning, for
  // the collectives of that Execute and the set's fast path; the Welcome's for the others.
  struct SetTuning {
    int64_t fusion_threshold = 0;
    AlgorithmCutoffs cutoffs;
  };
  std::map<int32_t, SetTuning> tuning_;  // guarded by mu_
  // Whether any Execute carried a Tuning: until then TuningOf reads the Welcome's values without
  // taking mu_ (the fast path asks every round).
  std::atomic<bool> any_tuning_{false};
  SetTuning TuningOf(int32_t set_id);    // takes mu_ once a set was tuned
  std::vector<std::unique_ptr<Lane>> retired_lanes_;  // of sets re-formed after an orderly leave
  bool shut_down_ = false;
  Status dead_;                      // coordinator lost or this rank evicted: everything fails
  std::map<int32_t, Status> lost_;  // ranks declared lost, with the status their sets fail with
  std::map<int32_t, Status> left_sets_;  // sets a member left in order while on the fast path
  std::map<int32_t, int> joined_;   // sets this rank is joining (count of concurrent joins)
  // Sets re-formed since the application last acknowledged a re-formation (AwaitEpoch), with the
  // status their submissions fail with until it does: every member of such a set sees the
  // re-formation once, whether a request of its was pending at the mark or not.
  std::map<int32_t, Status> unacknowledged_;
  uint64_t unacknowledged_epoch_ = 0;  // the epoch whose mark recorded them
  int32_t ranks_waiting_ = 0;  // ranks waiting to join the elastic job (guarded by mu_)

  std::unique_ptr<PointToPoint> p2p_;
  CommIdMailbox comm_ids_;  // NCCL unique ids relayed by tuttid, until the lanes take them

  // Declared last: destroyed first, so its I/O thread stops before the state it calls into.
  // link_mu_ orders lanes' NCCL id relays with its destruction (everything else uses link_ from
  // threads that finish before it goes).
  std::mutex link_mu_;
  std::unique_ptr<CoordinatorLink> link_;
};

}  // namespace tutti::client
