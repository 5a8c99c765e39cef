// An HA group's link (docs/high-availability.md): registering with whichever member leads, and,
// once the job runs, finding the leader again after losing the one it talked to and resuming the
// job there. All on the link's I/O thread, which owns the socket: one DEALER that disconnects
// from one member and connects to the next, keeping its routing id.
#include "client/control/coordinator_link.h"

#include <algorithm>

namespace tutti::client {
namespace {

// How long an attempt waits for its TCP connection before the next member is tried.
constexpr auto kConnectWait = std::chrono::milliseconds(500);
// A standby that names no leader (none won yet) or one just tried: wait this long before the
// next attempt rather than circling the members as fast as they answer.
constexpr auto kRedirectPause = std::chrono::milliseconds(100);
// A failover gives up after this long without a leader that takes the job back.
constexpr auto kFailoverTimeout = std::chrono::seconds(60);
// Executes of each set kept for a new leader to hand members that lag behind this rank.
constexpr size_t kRecentExecutes = 8;

}  // namespace

void CoordinatorLink::RecordProgress(const wire::Execute& execute) {
  Progress& progress = progress_[execute.set_id()];
  progress.executes = execute.seq() + 1;
  progress.recent.push_back(execute.SerializeAsString());
  if (progress.recent.size() > kRecentExecutes) progress.recent.pop_front();
}

std::string CoordinatorLink::BuildResume() const {
  wire::Frame frame;
  wire::Resume& resume = *frame.mutable_resume();
  *resume.mutable_register_() = register_request_;
  resume.set_slot(slot_);
  resume.set_membership_epoch(membership_epoch_);
  resume.set_job_secret(job_secret_);
  resume.set_term(term_);
  for (const auto& [set_id, progress] : progress_) {
    wire::SetProgress& set = *resume.add_sets();
    set.set_set_id(set_id);
    set.set_executes(progress.executes);
    for (const std::string& execute : progress.recent) set.add_recent(execute);
  }
  return Stamp(frame);
}

void CoordinatorLink::StartFailover(const std::string& why, const std::string& target) {
  std::map<uint64_t, std::promise<Answer>> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (attaching_ || !dead_.ok() || stopping_) return;
    attaching_ = true;
    hello_ = BuildResume();
    // A set change in flight may or may not have reached the old leader: the caller retries.
    calls.swap(calls_);
  }
  failover_deadline_ = transport::Clock::now() + kFailoverTimeout;
  const Status lost(Code::kCoordinatorLost,
                    "coordinator failover: " + why + "; the request was in flight and is not "
                    "known to have completed (retry it)");
  for (auto& [id, promise] : calls) promise.set_value(Answer{lost, {}});
  listener_->OnFailover(false, "coordinator " + endpoint_ + " lost (" + why +
                                   "); looking for the HA group's leader");
  TryNext(target, std::chrono::milliseconds(0));
}

void CoordinatorLink::TryNext(const std::string& target, std::chrono::milliseconds delay) {
  try {
    socket_.disconnect(endpoint_);
  } catch (const zmq::error_t&) {
    // Never connected (the attempt had not started): nothing to undo.
  }
  std::string next = target;
  if (next.empty()) {
    current_ = (current_ + 1) % endpoints_.size();
    next = endpoints_[current_];
  } else {
    auto known = std::find(endpoints_.begin(), endpoints_.end(), next);
    if (known != endpoints_.end()) current_ = static_cast<size_t>(known - endpoints_.begin());
  }
  std::lock_guard<std::mutex> lock(mu_);
  endpoint_ = next;
  hello_sent_ = connecting_ = connected_ = false;
  attempt_at_ = transport::Clock::now() + delay;
}

std::chrono::milliseconds CoordinatorLink::Attempt() {
  using std::chrono::milliseconds;
  std::string hello;
  bool registered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!attaching_ || !dead_.ok() || stopping_) return milliseconds(-1);
    hello = hello_;
    registered = registered_;
  }
  const auto now = transport::Clock::now();
  if (registered && now >= failover_deadline_) {
    std::string list;
    for (const std::string& e : endpoints_) list += (list.empty() ? "" : ", ") + e;
    Die(Status(Code::kCoordinatorLost,
               "coordinator lost: no member of the HA group (" + list + ") took the job back within " +
                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kFailoverTimeout).count()) +
                   " s"));
    return milliseconds(-1);
  }
  if (hello_sent_) return milliseconds(-1);  // the member answers (or gathers the job)
  if (!connecting_) {
    if (now < attempt_at_) return std::chrono::ceil<milliseconds>(attempt_at_ - now);
    socket_.connect(endpoint_);
    connecting_ = true;
    attempt_started_ = now;
    return kConnectWait;
  }
  if (connected_) {
    // Only once the handshake is done: the socket queues nothing for a connection still being
    // made (ZMQ_IMMEDIATE), so the hello cannot wait on a member that is down while the next one
    // is tried.
    hello_sent_ = socket_.send(zmq::buffer(hello), zmq::send_flags::dontwait).has_value();
    return hello_sent_ ? milliseconds(-1) : milliseconds(10);
  }
  if (now - attempt_started_ >= kConnectWait) {
    TryNext("", milliseconds(0));
    return milliseconds(0);
  }
  return std::chrono::ceil<milliseconds>(attempt_started_ + kConnectWait - now);
}

void CoordinatorLink::OnRedirect(const wire::Redirect& redirect) {
  bool attaching;
  {
    std::lock_guard<std::mutex> lock(mu_);
    attaching = attaching_;
  }
  if (!attaching) {
    // The leader this rank talks to asks it to resume (some ranks of the job lost it), or a
    // standby answered a rank that still took it for the leader.
    StartFailover("it redirected this rank to " +
                      (redirect.leader().empty() ? std::string("another member") : redirect.leader()),
                  redirect.leader());
    return;
  }
  // A standby: to the leader it names, unless that is where this rank just was.
  const bool nowhere = redirect.leader().empty() || redirect.leader() == endpoint_;
  TryNext(nowhere ? "" : redirect.leader(),
          nowhere ? kRedirectPause : std::chrono::milliseconds(0));
}

void CoordinatorLink::OnResumed() {
  std::vector<std::string> frames;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!attaching_ || !registered_) return;
    attaching_ = false;
    // Each set's cache as this rank holds it (after the Executes that caught it up), then what
    // the old leader never answered, announced again.
    for (int32_t set_id : announced_.SetIds()) {
      wire::Frame frame;
      *frame.mutable_cache_state() = announced_.Snapshot(set_id);
      if (fast_.on(set_id)) frame.mutable_cache_state()->set_fast_path(fast_.generation(set_id));
      frames.push_back(Stamp(frame));
      announced_.Requeue(set_id);
    }
    for (int32_t set_id : autotune_asked_) {
      autotune_unconfirmed_[set_id] = false;
      if (!fast_.on(set_id)) announced_.AskAutotune(set_id);
    }
  }
  for (const std::string& bytes : frames) (void)socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
  last_received_ = last_heartbeat_ = transport::Clock::now();
  listener_->OnFailover(true, "the job resumed with coordinator " + endpoint_ + " (term " +
                                  std::to_string(term_) + ")");
  Flush(true);
}

}  // namespace tutti::client
