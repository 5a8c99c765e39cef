// The runtime's connection to tuttid. One I/O thread owns the ZeroMQ DEALER socket (ZeroMQ sockets
// are not thread-safe); other threads hand it frames through a locked queue and wake it with an
// eventfd that it polls beside the socket. Announcements queued between two wakeups leave as one
// Announce frame (after the batching window, if one is set), tensors the response cache holds as
// bits. Replies are matched to waiting callers, who see a local failure (the link died, a refused
// handshake) as a Status; Execute, Refusal, Fault and CommId frames go to the LinkListener on the
// I/O thread. Request ids and set frames are built here: callers use the typed calls.
//
// Liveness: once welcomed, the I/O thread itself sends a Heartbeat every interval (so a wedged
// I/O thread stops them), and declares the coordinator lost after a lease of silence.
//
// HA groups (docs/high-availability.md): `endpoint` may list several tuttids, comma-separated.
// The link registers with whichever leads (a standby answers with a Redirect), and when it loses
// it (the connection closed, a lease of silence, a Redirect) it does not die: it looks for the
// leader among the endpoints and resumes the job there (Resume), handing over where each set's
// stream is; meanwhile requests wait, set changes in flight fail, and the members' fast path
// runs on. It dies only if no leader takes the job back within kFailoverTimeout.
//
// Files: coordinator_link.cc (calls, framing, the I/O loop), link_dispatch.cc (what tuttid says,
// the link's death), link_liveness.cc (heartbeats, the lease, the handshake monitor),
// link_fast_path.cc (the books of sets on their members' fast path), link_failover.cc (finding
// the HA group's leader and resuming there).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <deque>
#include <map>
#include <set>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "client/control/announce_cache.h"
#include "client/control/curve_client_keys.h"
#include "client/control/link_listener.h"
#include "client/fastpath/fast_path_book.h"
#include "client/counters.h"
#include "common/status.h"
#include "proto/protocol.h"
#include "transport/transport.h"

namespace tutti::client {

class CoordinatorLink {
 public:
  // `listener` hears what tuttid says (on the I/O thread) and must outlive the link.
  // `cycle_time`: how long announcements may wait for more to join them (0: none).
  // `curve`: keys for a tuttid that requires CURVE (not enabled(): none).
  CoordinatorLink(std::string endpoint, LinkListener* listener, Counters* counters,
                  std::chrono::microseconds cycle_time, const CurveClientKeys& curve);
  // Says Bye if registered and joins the I/O thread: once it returns, the listener hears
  // nothing more. Idempotent; any thread but the I/O thread. The owner calls it before
  // releasing the link so that callbacks still running may use the link (a unique_ptr is
  // already null while the object it held is being destroyed).
  void Stop();
  // Stop(), then closes the sockets.
  ~CoordinatorLink();

  // Sends the registration and waits for Welcome (or the refusal). tuttid enforces the
  // request's rendezvous timeout itself and names the missing ranks; the link waits a little
  // longer for that answer.
  Status Register(const wire::Register& request, wire::Welcome* welcome);
  // The listener can act on what tuttid says: until this call, what tuttid sends it after the
  // Welcome (a Reformed, RanksWaiting, Fault...: an elastic job can change while a rank still
  // builds its lanes and routes from the Welcome) waits, in order, on the I/O thread, as does
  // the link's death. Called once by the runtime when its rendezvous is complete.
  void ListenerReady();

  // Set changes, collective over the set's members. tuttid enforces `timeout_ms` itself and
  // names the ranks that never came; the link waits a little longer for that answer.
  // AddSet: the set's id and sorted members (also for a non-member caller).
  Status AddSet(const std::vector<int32_t>& ranks, int64_t timeout_ms, int32_t* set_id,
                std::vector<int32_t>* members);
  Status RemoveSet(int32_t set_id, int64_t timeout_ms);
  // Waits until every member joined; `last_rank`: the global rank that joined last.
  Status JoinSet(int32_t set_id, int64_t timeout_ms, int32_t* last_rank);
  // Asks tuttid for the job's counters (and those of process set `set_id`), waiting until
  // `deadline`.
  Status QueryCounters(transport::Deadline deadline, wire::CoordinatorCounters* counters,
                       int32_t set_id = 0);

  // Queues one tensor announcement for the next Announce frame. False when the set is on its
  // members' fast path instead: the tensor waits in its book, and the caller wakes the set's lane.
  bool Announce(int32_t set_id, wire::TensorSpec spec);

  // The members' fast path (docs/steady-state.md). The book of each set on it lives here, under
  // the lock that also guards the cache and the queue. Any thread.
  FastPathInput FastPathInputOf(int32_t set_id);
  // A round agreed on `slots`: their tensors leave the book (with how each ran last).
  struct Agreed {
    wire::TensorSpec spec;
    AnnounceCache::Template how;
  };
  // Every call below names the generation its lane is in, and does nothing to a book of another
  // (a later incarnation of the set); 0 for Abandon: whichever is open.
  std::vector<Agreed> FastPathTake(int32_t set_id, uint64_t generation,
                                   const std::vector<uint32_t>& slots);
  // The members left the set's fast path after `rounds` rounds: the exit and whatever is still
  // in the book go to tuttid.
  void FastPathLeave(int32_t set_id, uint64_t generation, uint64_t rounds);
  // The set's round failed: off the fast path without telling tuttid. The tensors still waiting.
  std::vector<wire::TensorSpec> FastPathAbandon(int32_t set_id, uint64_t generation);
  // This rank needs tuttid for the set (a join, a removal). True if it was on the fast path:
  // then the caller wakes the set's lane, which leaves at its next round, and waits with
  // AwaitOffFastPath.
  bool FastPathWantSlow(int32_t set_id);
  // tutti_process_set_autotune: asks tuttid to tune the set (docs/autotune.md) with the set's
  // next SetTensors. Off the fast path that is a SetTensors of its own; on it, the rank wants
  // tuttid (FastPathWantSlow: true, and the caller wakes the lane) and the ask goes with the
  // exit. Until an Execute of the set carries tuning values the ask stands: a grant tuttid sent
  // before it heard the ask is left again at once, and the exit asks again; an ask an elastic
  // re-formation dropped is queued again. Asked sets are asked again of a new HA leader (which
  // tunes them afresh).
  bool AskAutotune(int32_t set_id);
  Status AwaitOffFastPath(int32_t set_id, transport::Deadline deadline);
  // A tensor was refused; or a set is gone: their cache state goes.
  void ForgetTensor(int32_t set_id, const std::string& name);
  void ForgetSet(int32_t set_id);

  // Tells tuttid that the application aborted this rank. Fire and forget.
  void SendAbort();
  // Sends the NCCL unique id of (set, group) for tuttid to relay to the set's other members.
  void SendCommId(int32_t set_id, int32_t group, const std::string& id);
  // This rank's data-plane connection to `rank` closed while `set_id`'s lane of the incarnation
  // begun in membership epoch `incarnation_epoch` used it (or, `integrity_failure`, a record from
  // `rank` failed authentication). Fire and forget.
  void SendPeerReport(int32_t set_id, int32_t rank, uint64_t incarnation_epoch,
                      bool integrity_failure = false);
  // This rank is at a boundary where its elastic job may change (docs/elastic.md, "Adding ranks").
  void SendAtBoundary();
  // An elastic job re-formed (docs/elastic.md): later frames carry `membership_epoch`, and the
  // announcements still queued for `changed_sets` are dropped with their cache state (their
  // requests fail with the re-formation).
  void EnterEpoch(uint64_t membership_epoch, const std::vector<int32_t>& changed_sets);

 private:
  // Client-side margin over a deadline the coordinator enforces itself, so that its precise error
  // (naming missing ranks) arrives before the client gives up on the coordinator.
  static constexpr std::chrono::seconds kCoordinatorGrace{5};

  void Run();
  void Wake();
  // Encodes `frame` with this link's coordinator and membership epochs. Caller holds mu_.
  std::string Stamp(wire::Frame& frame) const;
  // Sends the outbox, and the queued announcements if `announcements` (or if the outbox holds
  // anything they must precede).
  void Flush(bool announcements);
  // How a reply-awaiting request ended: its answer, or the local failure (the link died, a
  // refused handshake) that ended the wait.
  struct Answer {
    Status local;
    wire::Frame frame;
  };
  // Sends `request` (its request id already set to `request_id`) and waits for its answer.
  Status Roundtrip(wire::Frame request, uint64_t request_id, transport::Deadline deadline,
                   wire::Frame* reply);
  // A set change (`request` holds its SetAdd, SetRemove or Join): stamps the request id and
  // timeout, makes the round trip, then returns the SetReply's own error.
  Status SetCall(wire::Frame request, int64_t timeout_ms, wire::SetReply* reply);
  // Resolves the waiting registration, if any; true if there was one.
  bool AnswerRegistration(Answer answer);
  void Dispatch(wire::Frame& frame);
  // Between the Welcome and ListenerReady(): keeps `frame` if it is for the listener (true), else
  // false. After it: hands over what was kept (and a death that waited), then false.
  bool HoldForListener(wire::Frame& frame);
  void DeliverHeld();
  // The link is dead for good: every waiting call and the registration end with `status`, later
  // calls fail with it, and the listener hears it once.
  void Die(const Status& status);
  // A failed ZeroMQ handshake (seen through the socket monitor): wrong CURVE keys, or CURVE on
  // one side only. Fails the registration, or the link, at once instead of at a deadline.
  void OnMonitorEvent();
  // Heartbeat and lease bookkeeping; returns how long the next poll may sleep.
  std::chrono::milliseconds KeepAlive();

  // HA groups (link_failover.cc). All on the I/O thread.
  // The coordinator is lost (`why`): look for the leader, `target` first if it names one.
  void StartFailover(const std::string& why, const std::string& target);
  // Sends the hello (Register or Resume) to the endpoint tried now, moves on to the next when
  // it does not connect, and gives up at the failover deadline. Returns how long the poll may
  // sleep (-1: nothing to do).
  std::chrono::milliseconds Attempt();
  // Moves to `target` (an endpoint, or "" for the next in the list), after `delay`.
  void TryNext(const std::string& target, std::chrono::milliseconds delay);
  // A standby answered: go where it says.
  void OnRedirect(const wire::Redirect& redirect);
  // The leader took the job back: the sets' caches and what is unanswered go to it.
  void OnResumed();
  // The Resume frame: the registration, the slot and every set's progress. Caller holds mu_.
  std::string BuildResume() const;
  // An Execute arrived (before Apply resolved it): the set's progress. Caller holds mu_.
  void RecordProgress(const wire::Execute& execute);

  const std::vector<std::string> endpoints_;  // an HA group's members; one for a lone tuttid
  const bool ha_;                             // more than one endpoint
  std::string endpoint_;                      // the one talked to now (I/O thread; mu_ to read)
  LinkListener* const listener_;
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
  FastPathBook fast_;
  std::set<int32_t> autotune_asked_;  // every set this rank asked to tune
  // Those no Execute carried tuning values for yet; true once a fast-path exit carried the ask
  // (tuttid reads an exit before it can grant again, so a later grant without tuning values
  // means a tuttid that does not know the ask: AskWhenGranted gives up).
  std::map<int32_t, bool> autotune_unconfirmed_;
  // A grant of `set_id` arrived: whether the set must leave it at once to ask again; sets
  // `warning` (for the listener, once the caller let go of mu_) when giving up. Caller holds mu_.
  bool AskWhenGranted(int32_t set_id, std::string* warning);
  std::condition_variable fast_cv_;  // notified when a set leaves its fast path
  transport::Clock::time_point first_queued_;  // when the oldest queued announcement came
  std::optional<std::promise<Answer>> registration_;
  std::map<uint64_t, std::promise<Answer>> calls_;  // answered by SetReply or counters
  bool registered_ = false;
  bool stopping_ = false;
  Status dead_;  // set once the link is dead; later calls fail with it
  uint64_t epoch_ = 0;
  uint64_t membership_epoch_ = 0;
  std::chrono::milliseconds heartbeat_interval_{0}, lease_{0};

  bool listener_ready_ = false;  // ListenerReady() was called

  // HA groups: the registration and Welcome fields a Resume repeats, and each set's progress.
  wire::Register register_request_;
  int32_t slot_ = -1;
  std::string job_secret_;
  struct Progress {
    uint64_t executes = 0;            // Executes received: the next seq expected
    std::deque<std::string> recent;   // the last few, serialized as received
  };
  std::map<int32_t, Progress> progress_;
  // Waiting for the answer to hello_ (a Welcome, or Resumed after a failover): nothing else is
  // sent meanwhile.
  bool attaching_ = false;
  std::string hello_;          // the frame each attempt sends first (Register, then Resume)

  // I/O thread only.
  transport::Clock::time_point last_received_, last_heartbeat_, last_loop_;
  bool welcomed_ = false;          // the registration was answered with a Welcome
  std::vector<wire::Frame> held_;  // for the listener, after the Welcome, before ListenerReady()
  bool death_held_ = false;        // the link died before ListenerReady(): OnLinkDead pending
  // HA attempts: which endpoint, whether the hello left and the connection came up, and when to
  // move on; the highest leader term heard (frames of lower terms are dropped).
  size_t current_ = 0;
  bool connecting_ = false, connected_ = false, hello_sent_ = false;
  transport::Clock::time_point attempt_at_, attempt_started_, failover_deadline_;
  uint64_t term_ = 0;

  std::atomic<uint64_t> next_request_id_{1};
  std::thread thread_;
};

}  // namespace tutti::client
