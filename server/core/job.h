// One job on tuttid: its rendezvous, its process sets and their negotiations. The job answers its
// ranks through an outbox of frames addressed by ZeroMQ routing id. Single-threaded. Its member
// functions are defined by concern: job.cc (the core and the dispatch of frames) and job_*.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "proto/protocol.h"
#include "server/core/autotuner.h"
#include "server/core/frames.h"
#include "server/core/job_record.h"
#include "server/core/negotiator.h"
#include "server/core/process_set_table.h"

namespace tutti::server {

class RecentErrors;
class ServiceMetrics;

// A registration's TUTTI_DATA_SECURITY; a protocol-5 rank sends none: off.
inline std::string DataSecurityOf(const wire::Register& reg) {
  return reg.data_security().empty() ? "off" : reg.data_security();
}

class Job {
 public:
  // tuttid's settings for every job; a job's ranks may override the stall thresholds.
  struct Policy {
    int64_t heartbeat_interval_ms;
    int64_t lease_ms;
    int64_t stall_warning_ms = 60000;  // 0: off
    int64_t stall_shutdown_ms = 0;     // 0: off
    Timeline* timeline = nullptr;      // tuttid's negotiation timeline, if it writes one
    // Tensors the job may have announced by some members only; more are refused (floods).
    size_t max_pending_tensors = SIZE_MAX;
    ServiceMetrics* metrics = nullptr;  // tuttid's Prometheus series, if it exposes them
    RecentErrors* errors = nullptr;     // tuttid's list of recent errors, for its status page
    // How long a rank reported by a peer (PeerReport) has to echo tuttid's Probe before it is
    // declared lost (docs/elastic.md, "Detection").
    int64_t probe_timeout_ms = 50;
    // High availability (docs/high-availability.md): releases wait while this says no (the HA
    // leader's fence; null: never), and the ids of jobs whose record changed go here (null: no
    // records are kept).
    std::function<bool()> may_release;
    std::set<std::string>* changed_records = nullptr;
    // Autotuning's trials (docs/autotune.md): at least this many tensors and milliseconds each,
    // after this many released first (<= 0, < 0, < 0: the built-in defaults); each trial ended is
    // reported here (tuttid logs it).
    int64_t autotune_trial_releases = 0;
    int64_t autotune_trial_ms = -1;
    int64_t autotune_warmup_releases = -1;
    std::function<void(const std::string& job, int32_t set, const Autotuner::Trial& trial,
                       bool converged)>
        on_autotune_trial;
  };

  // `membership_epoch`: which generation of job `id` this is (docs/lifecycle.md).
  Job(std::string id, uint64_t membership_epoch, std::string token, int32_t size,
      Clock::time_point rendezvous_deadline, int64_t rendezvous_timeout_ms, std::string secret,
      uint64_t epoch, Policy policy);

  const std::string& id() const { return id_; }
  // The epoch the generation started in: its key among the job's generations. An elastic job's
  // membership_epoch() grows past it as the job re-forms (docs/elastic.md).
  uint64_t generation() const { return generation_; }
  uint64_t membership_epoch() const { return membership_epoch_; }
  bool elastic() const { return elastic_.on; }
  // Whether `rank` was welcomed into this generation and has left it (or was lost): a new
  // registration of that rank then starts the next generation.
  bool rank_gone(int32_t rank) const {
    return welcomed_ && rank >= 0 && rank < size_ && state_[rank] != RankState::kAlive;
  }
  // Whether a registration joins this running elastic job as an added rank (Register).
  bool admits_ranks() const { return elastic_.on && welcomed_ && !failed_ && !everyone_left(); }
  const std::string& token() const { return token_; }
  // The world size its ranks registered with (the first epoch's).
  int32_t size() const { return first_size_; }
  bool welcomed() const { return welcomed_; }
  // A failed job (rendezvous timed out or disagreed) has told its ranks and can be dropped.
  bool failed() const { return failed_; }
  bool everyone_left() const { return welcomed_ && gone_ == size_; }
  std::vector<std::string> peers() const;

  // Registers `peer` as `msg.rank()`, into `*slot`; the world's last registration welcomes
  // everyone. Into a running elastic job, `peer` is an added rank (job_growth.cc): it gets the
  // next slot and waits to be admitted. `protocol` is the version of the registrant's frames: a
  // job's ranks must all speak the first registrant's. An error concerns this registrant alone,
  // unless the job failed() with it (ranks of two protocols in one rendezvous).
  Status Register(const std::string& peer, const wire::Register& msg, uint32_t protocol,
                  Clock::time_point now, int32_t* slot, Outbox* out);
  // Ranks registered after their Register call returned (early joiners, at the welcome): their
  // routing ids and slots.
  std::vector<std::pair<std::string, int32_t>> TakeLateMembers() {
    std::vector<std::pair<std::string, int32_t>> taken;
    taken.swap(late_members_);
    return taken;
  }
  // `rank` of an elastic job is at a boundary, in membership epoch `sender_epoch`: once every
  // live rank is, the ranks waiting to join are admitted (job_growth.cc).
  void AtBoundary(int32_t rank, uint64_t sender_epoch, Clock::time_point now, Outbox* out);
  // tuttid is stopping: tells every live rank, which fails its pending and later requests with
  // `status` at once instead of waiting out its lease.
  void GoingAway(const Status& status, Outbox* out) const;
  void SetAdd(int32_t rank, const wire::SetAdd& msg, Clock::time_point now, Outbox* out);
  void SetRemove(int32_t rank, const wire::SetRemove& msg, Clock::time_point now, Outbox* out);
  // `bytes`: the encoded size of the frame, for the counters. What it completes is held until
  // FlushReleased, so that everything one batch of frames completes can fuse.
  // `sender_epoch`: the membership epoch the rank sent it in (Frame.membership_epoch).
  void Announce(int32_t rank, const wire::Announce& msg, size_t bytes, uint64_t sender_epoch,
                Clock::time_point now, Outbox* out);
  // Sends the responses held back by Announce. Called once the frames waiting in the socket were
  // read, and before handling any other kind of frame (whose answers must not overtake them).
  void FlushReleased(Outbox* out);
  bool has_released() const { return !released_.empty(); }
  const wire::CoordinatorCounters& counters() const { return counters_; }
  // The job's counters with those of process set `set_id` (zeros if it never had any).
  wire::CoordinatorCounters counters(int32_t set_id) const;
  void Join(int32_t rank, const wire::Join& msg, Clock::time_point now, Outbox* out);
  // Relays the NCCL unique id the first member of a set generated to the set's other members,
  // unchanged; keeps nothing. Anything else is refused to `rank`.
  void CommId(int32_t rank, const wire::CommId& msg, Outbox* out);
  // Orderly leave (Bye): collectives still waiting for this rank fail on the others.
  void Leave(int32_t rank, Clock::time_point now, Outbox* out);
  // The application aborted `rank`: its sets break and every live rank is told, by name.
  void Abort(int32_t rank, Clock::time_point now, Outbox* out);
  // Any frame from `rank` proves its I/O path alive.
  void Touch(int32_t rank, Clock::time_point now);

  // Fast failure detection (job_detection.cc, docs/elastic.md).
  // `rank` lost its data-plane connection to msg.rank(): tuttid probes that rank.
  void PeerReport(int32_t rank, const wire::PeerReport& msg, Clock::time_point now, Outbox* out);
  // A member's report that a record from `peer` failed authentication: the set fails at once.
  void IntegrityFailure(int32_t reporter, int32_t peer, int32_t set_id, Outbox* out);
  // Fails `set_id` alone with `status`, no rank lost: what waits in it, and every live member is
  // told (Fault.broken_sets).
  void BreakSetAlone(int32_t set_id, Negotiator& negotiator, const Status& status, Outbox* out);
  // Whether a report from a lane of `set_id`'s incarnation begun in `incarnation_epoch` is about
  // an incarnation the job re-formed since (job_detection.cc).
  bool StaleIncarnation(int32_t set_id, uint64_t incarnation_epoch) const;
  // `rank` echoed a probe.
  void ProbeAnswered(int32_t rank, const wire::Probe& msg, Outbox* out);
  // tuttid's control connection to `rank` is gone (a send found no route): it is lost at the
  // next Tick, once the frames it sent before were read.
  void ConnectionClosed(int32_t rank);
  // Some control connection closed: a frame to every live rank finds out whose (the service's
  // send reports the one without a route, as ConnectionClosed).
  void CheckConnections(Outbox* out) const;
  // A frame of an elastic job's earlier membership epoch that concerns `set_id` (-1: the job's
  // set changes) is stale once the set changed since: the status to refuse it with, or ok.
  Status Stale(uint64_t sender_epoch, int32_t set_id) const;
  // Routing ids of ranks declared lost since the last call, with what to tell them if they speak.
  std::vector<std::pair<std::string, Status>> TakeEvicted();

  // High availability (job_resume.cc, docs/high-availability.md).
  // What etcd keeps of the job.
  JobRecord Record() const;
  // Makes this new generation the resumption of `record` under a new leader: its ranks come back
  // with Resume, and once all did the job runs on where it was, without a rendezvous.
  void ExpectResume(JobRecord record);
  bool resuming() const { return resume_.has_value(); }
  // `peer` resumes slot msg.slot(). Errors concern this rank alone, like Register's.
  Status Resume(const std::string& peer, const wire::Resume& msg, Clock::time_point now,
                int32_t* slot, Outbox* out);
  // A resumed rank's response cache and fast-path state of one set.
  void CacheState(int32_t rank, const wire::CacheState& msg, Outbox* out);
  // Some ranks lost this leader and came back with Resume: every other live rank is told to
  // resume too (a Redirect naming `leader`, this instance), and the job starts over as a
  // resumption.
  void AskToResume(const std::string& leader, uint64_t term, Outbox* out) const;

  // For the status page: ranks, hosts, sets and their pending tensors (at most
  // `pending_per_set` each, oldest first).
  nlohmann::json Describe(Clock::time_point now, size_t pending_per_set) const;
  size_t alive_ranks() const;
  size_t active_sets() const { return negotiators_.size(); }
  size_t pending_tensors() const { return budget_.used; }

  // Rendezvous deadline, set-change deadlines, leases, stall inspection.
  void Tick(Clock::time_point now, Outbox* out);
  std::optional<Clock::time_point> NextDeadline() const;

 private:
  // The rendezvous (job_rendezvous.cc).
  void Welcome(Clock::time_point now, Outbox* out);
  // The job's settings from its ranks' registrations: fusion, cache, fast path, stall
  // thresholds, elasticity.
  void DecideSettings();
  // A resumption's last rank came back (job_resume.cc): sets from the record, the Executes that
  // catch lagging members up, then Resumed to every rank.
  void FinishResume(Clock::time_point now, Outbox* out);
  // The job's record must be written again.
  void RecordChanged() {
    if (policy_.changed_records) policy_.changed_records->insert(id_);
  }
  void RefuseAll(Code code, const std::string& message, Outbox* out);
  // The world did not gather by the deadline: every registrant is refused, naming who is missing.
  void TimeOutRendezvous(Outbox* out);

  // Process sets and the dispatch of frames to them (job.cc).
  // Creates the negotiator of an active set.
  void OpenSet(int32_t set_id, const std::vector<int32_t>& members);
  void Apply(ProcessSetTable::Events& events, Outbox* out);
  void Refuse(int32_t rank, const Status& status, int32_t set_id, const std::string& tensor,
              Outbox* out);
  void InspectStalls(Clock::time_point now, Outbox* out);

  // The Execute builder (job_execute.cc).
  void SendExecute(int32_t set_id, Negotiator& negotiator, std::vector<wire::Response> responses,
                   Outbox* out);

  // The join barrier (job_join.cc).
  struct JoinWaiter {
    int32_t rank;
    uint64_t request_id;
    int64_t timeout_ms;
    Clock::time_point deadline;
  };
  void ReplyJoin(const JoinWaiter& waiter, int32_t set_id, const Status& status, int32_t last,
                 Outbox* out);
  // Fails the joins whose timeout passed, naming the members that never joined.
  void ExpireJoins(Clock::time_point now, Outbox* out);

  // Elastic re-formation (job_elastic.cc): `rank` is lost; the survivors form the next epoch, sets
  // that lost it go on without it, the others are untouched.
  // `orderly`: the rank said Bye; collectives already released still run to their end.
  void Reform(int32_t rank, const Status& why, bool orderly, Outbox* out);
  // The table part of a re-formation: the sets that contained `rank` fail what was pending with
  // `reformed` and go on over their survivors (fresh negotiators, sequence numbers going on);
  // set changes in flight fail. Returns the sets that changed and are still there; appends the
  // sets it emptied (and removed) to `removed`.
  std::vector<int32_t> DropFromSets(int32_t rank, const Status& reformed,
                                    std::vector<int32_t>* removed, Outbox* out);
  // Ends an elastic job that stayed below its minimum size for its elastic timeout.
  void ExpireMinimum(Clock::time_point now, Outbox* out);
  // The Welcome fields every rank of the job gets alike.
  void FillWelcome(wire::Welcome* welcome) const;
  // `slot`'s host and data-plane endpoint, as Welcome.peers and Reformed.added give them.
  void DescribePeer(int32_t slot, wire::Peer* peer) const;

  // Ranks added to a running elastic job (job_growth.cc, docs/elastic.md "Adding ranks").
  Status RegisterAdded(const std::string& peer, const wire::Register& msg, Clock::time_point now,
                       int32_t* slot, Outbox* out);
  // Admits the waiting ranks once every live rank is at a boundary.
  void MaybeAdmit(Clock::time_point now, Outbox* out);
  bool CanAdmit() const;
  // `rank`, not at a boundary, announces on the world while others wait at theirs: those will not
  // take part, so the waiting ranks are admitted now, and the announcement (of the epoch that
  // ends) fails with kReformed; the rank restores and comes back in the new epoch.
  void AdmitBeforeWorldAnnounce(int32_t rank, const wire::Announce& msg, uint64_t sender_epoch,
                                Clock::time_point now, Outbox* out);
  void Admit(Clock::time_point now, Outbox* out);
  // Tells every live rank how many ranks wait to join.
  void TellRanksWaiting(Outbox* out) const;
  // A rank waiting to join is given up: refused with `status` (its tombstone says it too).
  void DropJoiner(int32_t slot, const Status& status, Outbox* out);
  void ExpireJoiners(Clock::time_point now, Outbox* out);
  bool joining(int32_t slot) const { return state_[slot] == RankState::kJoining; }
  // Where each of `slots` (sorted) sits on its host and across hosts (Horovod's local and cross
  // ranks), indexed like `slots`.
  struct Placement {
    std::vector<int32_t> local_rank, local_size, cross_rank, cross_size;
  };
  Placement Place(const std::vector<int32_t>& slots) const;
  // Writes the placement of the i-th of the placed slots into a Welcome or Reformed.
  template <typename Message>
  static void SetPlacement(const Placement& place, size_t i, Message* message) {
    message->set_local_rank(place.local_rank[i]);
    message->set_local_size(place.local_size[i]);
    message->set_cross_rank(place.cross_rank[i]);
    message->set_cross_size(place.cross_size[i]);
  }
  // What every live rank is told of a re-formation, but its placement: the epoch, the live slots
  // and every set after it, which sets changed (those still there) and which were removed.
  wire::Reformed ReformedBase(const std::vector<int32_t>& live, const std::vector<int32_t>& lost,
                              const std::vector<int32_t>& changed,
                              const std::vector<int32_t>& removed, const Status& error,
                              bool orderly) const;
  std::vector<int32_t> LiveSlots() const;
  // The rank the ranks number `slot` with now: its position among the live slots of the job's
  // last re-formation (the slot itself until the first; docs/elastic.md), for messages.
  int32_t RankNow(int32_t slot) const;
  // Declares lost the ranks whose probe went unanswered.
  void ExpireProbes(Clock::time_point now, Outbox* out);
  // Declares lost the ranks whose control connection closed (ConnectionClosed).
  void EvictClosed(Clock::time_point now, Outbox* out);
  // Takes `rank` out as lost for `why` and tombstones its routing id (evicted_).
  void Evict(int32_t rank, const std::string& why, Clock::time_point now, Outbox* out);

  // Leases and eviction (job_leases.cc).
  // Takes `rank` out of the job: its sets break, pending work involving it fails with `status`
  // on the others; `fault` also tells every live rank (not done for an orderly leave, where
  // collectives the rank completed may still be finishing on its peers).
  void Remove(int32_t rank, const Status& status, bool fault, Clock::time_point now,
              Outbox* out);
  // Declares lost, and evicts, the ranks whose lease ran out.
  void ExpireLeases(Clock::time_point now, Outbox* out);
  bool alive(int32_t rank) const { return state_[rank] == RankState::kAlive; }

  std::string id_;
  const uint64_t generation_;
  uint64_t membership_epoch_;
  struct Elastic {
    bool on = false;
    int32_t min_size = 0;
    int32_t max_size = 0;  // 0: no limit
    int64_t timeout_ms = 0;
  } elastic_;
  // Since when an elastic job has fewer live ranks than its minimum (ExpireMinimum).
  std::optional<Clock::time_point> below_minimum_since_;
  // Ranks lost while the job was below its minimum: their sets broke instead of re-forming; an
  // admission that brings the job back to its minimum drops them from their sets (Admit).
  std::vector<int32_t> lost_below_minimum_;
  // Elastic jobs: the membership epoch each set last changed in; frames of earlier epochs about
  // it are stale (Stale).
  std::map<int32_t, uint64_t> set_changed_in_;
  // Probes in flight (PeerReport): by probed rank.
  struct ProbeWait {
    uint64_t nonce;
    Clock::time_point deadline;
    struct Report {
      int32_t reporter;
      int32_t set_id;
      uint64_t incarnation_epoch;  // of the reporting lane's set; 0: unknown
    };
    std::vector<Report> reports;
  };
  std::map<int32_t, ProbeWait> probes_;
  std::set<int32_t> closed_;  // ranks whose control connection closed, evicted at the next Tick
  // Ranks waiting to join the running elastic job, in slot order, and their deadlines.
  struct Joiner {
    int32_t slot;
    Clock::time_point deadline;
    int64_t timeout_ms;
  };
  std::vector<Joiner> joiners_;
  // Ranks to add that registered before the rendezvous completed: registered at the welcome.
  struct EarlyJoiner {
    std::string peer;
    wire::Register msg;
    Clock::time_point at;
  };
  std::vector<EarlyJoiner> early_;
  std::vector<std::pair<std::string, int32_t>> late_members_;  // TakeLateMembers
  std::set<int32_t> at_boundary_;  // live ranks at a boundary in this membership epoch
  std::vector<int32_t> numbered_;  // the slots as numbered since the last re-formation (RankNow)
  // The launcher's rank numbers (Register.rank) in use, with the slot of each: a number whose
  // rank is gone may register again, as an added rank with a new slot.
  std::map<int32_t, int32_t> slot_of_claim_;
  uint64_t next_nonce_ = 1;
  std::string token_;
  const int32_t first_size_;
  uint32_t protocol_ = 0;  // the wire protocol of the first registrant, which every rank speaks
  int32_t size_;  // slots: the first epoch's ranks, then every rank added
  Clock::time_point rendezvous_deadline_;
  int64_t rendezvous_timeout_ms_;
  std::string secret_;  // the data-plane handshake's key, told to the ranks at the rendezvous
  uint64_t epoch_;
  // By rank; a pointer (8 bytes) rather than an optional message (136) while the job waits for
  // its ranks, since the world size is declared by the first registrant (docs/security.md).
  std::vector<std::unique_ptr<wire::Register>> registrations_;
  // The static sets of the first registration; registrations that gave the same are stored
  // without theirs, and the ranks that gave others are in own_static_sets_ (Register).
  std::optional<std::vector<std::vector<int32_t>>> static_sets_;
  std::set<int32_t> own_static_sets_;
  std::vector<std::string> peer_of_rank_;
  enum class RankState { kAlive, kLost, kLeft, kJoining };
  std::vector<RankState> state_;
  std::vector<Clock::time_point> last_seen_;
  Policy policy_;
  // Decided at the rendezvous from the ranks' registrations.
  int64_t fusion_threshold_ = 0;
  uint32_t cache_capacity_ = 0;
  Clock::duration stall_warning_{}, stall_shutdown_{};
  bool fast_path_ = false;  // the members' fast path is allowed (docs/steady-state.md)
  // Per-set autotuning (docs/autotune.md): on for every set if any rank registered with
  // TUTTI_AUTOTUNE=1, else for the sets a member asked for (tutti_process_set_autotune); the
  // job's values each set starts from; which parameters a rank pinned.
  bool autotune_ = false;
  std::set<int32_t> autotune_asked_;
  bool Tuned(int32_t set_id) const { return autotune_ || autotune_asked_.count(set_id) > 0; }
  // A member's SetTensors asked to tune its set (read before anything drops the announcement).
  void AutotuneAsked(int32_t rank, int32_t set_id, const Negotiator& negotiator);
  TuningValues job_tuning_;
  AutotuneOptions autotune_options_;
  std::map<int32_t, Autotuner> tuning_;  // by set, created at its first release
  std::map<int32_t, size_t> trials_told_;  // by set: how many of its tuner's trials Executes carried
  // A member's report of its execution time under the set's trials (job_execute.cc).
  void ExecutedUnderTrials(int32_t rank, const wire::SetTensors& set, const Negotiator& negotiator);
  void LogTrialEnded(int32_t set_id, const Autotuner& tuner, uint32_t trials_before);
  wire::CoordinatorCounters counters_;
  std::map<int32_t, wire::SetCounters> set_counters_;
  // By active set, for the status page; kept across a set's re-formations (its negotiator is
  // replaced, the set goes on), dropped with the set. Negotiators point into it.
  std::map<int32_t, SetStats> set_stats_;
  std::map<int32_t, std::vector<wire::Response>> released_;  // by set, in release order
  std::vector<std::pair<std::string, Status>> evicted_;
  int32_t registered_ = 0;
  int32_t gone_ = 0;  // lost or left
  bool welcomed_ = false;
  bool failed_ = false;
  ProcessSetTable sets_;
  std::map<int32_t, Negotiator> negotiators_;  // one per active set
  PendingBudget budget_;                       // shared by negotiators_
  std::map<int32_t, std::vector<JoinWaiter>> joins_;  // by set
  // A resumption (job_resume.cc): the record it resumes, and each rank's progress per set.
  struct ResumeState {
    JobRecord record;
    std::map<int32_t, std::vector<wire::SetProgress>> progress;  // by slot
  };
  std::optional<ResumeState> resume_;
};

}  // namespace tutti::server
