// What tuttid tells the link, on its I/O thread: replies matched to waiting callers, the rest
// handed to the LinkListener; the probe echoed from here (it asks about this very thread); and
// the link's death, which ends every wait at once.
#include "client/control/coordinator_link.h"

#include "proto/status_codec.h"

namespace tutti::client {

namespace {

// What Dispatch hands the LinkListener rather than a waiting caller or the link itself.
bool ForListener(const wire::Frame& frame) {
  switch (frame.body_case()) {
    case wire::Frame::kExecute:
    case wire::Frame::kFault:
    case wire::Frame::kReformed:
    case wire::Frame::kRanksWaiting:
    case wire::Frame::kCommId:
      return true;
    case wire::Frame::kRefusal:
      return !frame.refusal().tensor_name().empty();
    default:
      return false;
  }
}

}  // namespace

void CoordinatorLink::ListenerReady() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    listener_ready_ = true;
  }
  Wake();  // the I/O thread hands over what it kept
}

bool CoordinatorLink::HoldForListener(wire::Frame& frame) {
  if (!ForListener(frame)) return false;
  DeliverHeld();
  bool ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready = listener_ready_;
  }
  if (ready || !welcomed_) return false;  // before the Welcome the runtime has built nothing
  held_.push_back(std::move(frame));
  return true;
}

void CoordinatorLink::DeliverHeld() {
  if (held_.empty() && !death_held_) return;
  Status dead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!listener_ready_) return;
    dead = dead_;
  }
  std::vector<wire::Frame> held;
  held.swap(held_);
  for (wire::Frame& frame : held) Dispatch(frame);
  if (death_held_) {
    death_held_ = false;
    listener_->OnLinkDead(dead);
  }
}

void CoordinatorLink::Dispatch(wire::Frame& frame) {
  if (HoldForListener(frame)) return;
  switch (frame.body_case()) {
    case wire::Frame::kWelcome:
    case wire::Frame::kRefusal: {
      if (frame.has_refusal() && !frame.refusal().tensor_name().empty()) {
        const wire::Refusal& refusal = frame.refusal();
        listener_->OnTensorRefused(refusal.set_id(), refusal.tensor_name(),
                                   wire::ToStatus(refusal.error()));
        return;
      }
      const Status refused = frame.has_refusal() ? wire::ToStatus(frame.refusal().error()) : Status();
      const bool welcome = frame.has_welcome();
      if (welcome) {
        std::lock_guard<std::mutex> lock(mu_);
        attaching_ = false;
      }
      if (AnswerRegistration(Answer{Status(), std::move(frame)})) {
        welcomed_ = welcome;
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!registered_ || refused.ok()) return;
      }
      // Refused after joining: evicted, or a restarted tuttid that does not know us.
      Die(refused);
      return;
    }
    case wire::Frame::kSetReply:
    case wire::Frame::kCoordinatorCounters: {
      const uint64_t id = frame.has_set_reply() ? frame.set_reply().request_id()
                                                : frame.coordinator_counters().request_id();
      std::lock_guard<std::mutex> lock(mu_);
      auto it = calls_.find(id);
      if (it == calls_.end()) return;  // its caller gave up waiting
      it->second.set_value(Answer{Status(), std::move(frame)});
      calls_.erase(it);
      return;
    }
    case wire::Frame::kExecute: {
      Status status;
      std::string warning;
      {
        std::lock_guard<std::mutex> lock(mu_);
        wire::Execute& execute = *frame.mutable_execute();
        if (ha_) RecordProgress(execute);  // as received: Apply fills in names
        status = announced_.Apply(&execute);
        if (execute.has_tuning()) autotune_unconfirmed_.erase(execute.set_id());
        // The grant: from here on the set's submissions wait in its book. What this rank
        // announced and tuttid has not answered is unsent or in flight (tuttid had nothing of
        // the set pending), and tuttid drops it: it goes into the book too, in the same
        // critical section, so that nothing is taken back twice or never.
        if (status.ok() && execute.fast_path() != 0) {
          const int32_t set_id = execute.set_id();
          fast_.Enter(set_id, execute.fast_path(), execute.fast_path_slots());
          const auto now = transport::Clock::now();
          for (auto& spec : announced_.TakeOutstanding(set_id)) {
            const auto slot = announced_.Lookup(set_id, spec);
            fast_.Add(set_id, std::move(spec), slot, now);
          }
          // Granted before tuttid heard this rank's autotuning ask: leave at the first round
          // (the lane is woken by this Execute), asking again with the exit.
          if (AskWhenGranted(set_id, &warning)) fast_.WantSlow(set_id);
        }
      }
      if (!status.ok()) return Die(status);
      if (!warning.empty()) listener_->OnWarning(warning);
      listener_->OnExecute(*frame.mutable_execute());
      return;
    }
    case wire::Frame::kFault: {
      const wire::Fault& fault = frame.fault();
      const Status status = wire::ToStatus(fault.error());
      if (fault.broken_sets_size() > 0)
        return listener_->OnSetsBroken({fault.broken_sets().begin(), fault.broken_sets().end()},
                                       status, fault.orderly());
      // No rank lost: the job is over for this rank (tuttid is stopping, an elastic job ended).
      if (fault.lost_ranks_size() == 0) return Die(status);
      listener_->OnRanksLost({fault.lost_ranks().begin(), fault.lost_ranks().end()}, status);
      return;
    }
    case wire::Frame::kProbe: {
      // Answered from this thread, which is what tuttid asks about.
      wire::Frame echo;
      echo.mutable_probe()->set_nonce(frame.probe().nonce());
      std::lock_guard<std::mutex> lock(mu_);
      outbox_.push_back(Stamp(echo));
      return;
    }
    case wire::Frame::kReformed:
      listener_->OnReformed(frame.reformed());
      return;
    case wire::Frame::kRanksWaiting:
      listener_->OnRanksWaiting(frame.ranks_waiting().count());
      return;
    case wire::Frame::kCommId: {
      const wire::CommId& relayed = frame.comm_id();
      listener_->OnCommId(relayed.set_id(), relayed.device_group(), relayed.id());
      return;
    }
    case wire::Frame::kRedirect:
      if (ha_) OnRedirect(frame.redirect());
      return;
    case wire::Frame::kResumed:
      if (ha_) OnResumed();
      return;
    default:
      return;  // nothing else is sent to ranks
  }
}

void CoordinatorLink::Die(const Status& status) {
  std::map<uint64_t, std::promise<Answer>> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return;
    dead_ = status;
    calls.swap(calls_);
  }
  fast_cv_.notify_all();
  // Callers waiting on a set change, or on the rendezvous, learn it now rather than at their
  // deadline.
  for (auto& [id, promise] : calls) promise.set_value(Answer{status, {}});
  AnswerRegistration(Answer{status, {}});
  bool ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready = listener_ready_;
  }
  if (!ready && welcomed_) {
    death_held_ = true;  // after the frames it follows, once the runtime is ready
    return;
  }
  DeliverHeld();
  listener_->OnLinkDead(status);
}

bool CoordinatorLink::AnswerRegistration(Answer answer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!registration_) return false;
  registration_->set_value(std::move(answer));
  registration_.reset();
  return true;
}

}  // namespace tutti::client
