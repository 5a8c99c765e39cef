// The core of a job on tuttid: construction, process sets opening and closing, and the dispatch of
// each frame and tick to the part that handles it. The parts have their own files (job_*.cc): the
// rendezvous, the Execute builder, the join barrier, the NCCL unique-id relay, leases and the
// status description. Single-threaded.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "proto/cache_bits.h"
#include "server/core/recent_errors.h"
#include "server/core/service_metrics.h"

namespace tutti::server {

Job::Job(std::string id, uint64_t membership_epoch, std::string token, int32_t size,
         Clock::time_point rendezvous_deadline, int64_t rendezvous_timeout_ms, std::string secret,
         uint64_t epoch, Policy policy)
    : id_(std::move(id)),
      generation_(membership_epoch),
      membership_epoch_(membership_epoch),
      token_(std::move(token)),
      first_size_(size),
      size_(size),
      rendezvous_deadline_(rendezvous_deadline),
      rendezvous_timeout_ms_(rendezvous_timeout_ms),
      secret_(std::move(secret)),
      epoch_(epoch),
      registrations_(size),
      peer_of_rank_(size),
      state_(size, RankState::kAlive),
      last_seen_(size),
      policy_(policy),
      sets_(size),
      budget_{0, policy.max_pending_tensors, id_} {}

std::vector<std::string> Job::peers() const {
  std::vector<std::string> peers;
  for (const auto& p : peer_of_rank_)
    if (!p.empty()) peers.push_back(p);
  return peers;
}

void Job::OpenSet(int32_t set_id, const std::vector<int32_t>& members) {
  // Host identities tell members that share a GPU apart from members that each have their own.
  std::vector<std::string> hosts;
  hosts.reserve(members.size());
  for (int32_t m : members) hosts.push_back(registrations_[m]->host());
  Negotiator& negotiator =
      negotiators_.emplace(set_id, Negotiator(set_id, members, cache_capacity_, hosts))
          .first->second;
  negotiator.set_job(id_);
  negotiator.set_budget(&budget_);
  negotiator.set_fast_path_allowed(fast_path_);
  negotiator.set_metrics(policy_.metrics);
  negotiator.set_stats(&set_stats_[set_id]);
  if (policy_.timeline == nullptr) return;
  // One track per (job, set) in tuttid's timeline, numbered in order of creation.
  static int32_t next_track = 1;
  const int32_t track = next_track++;
  policy_.timeline->NameTrack(track, fmt::format("job '{}' set {}", id_, set_id));
  negotiator.set_timeline(policy_.timeline, track);
}

void Job::Refuse(int32_t rank, const Status& status, int32_t set_id, const std::string& tensor,
                 Outbox* out) {
  if (policy_.metrics) {
    policy_.metrics->Error(status.code());
    if (status.code() == Code::kLimitExceeded) policy_.metrics->Limited("pending_tensors");
  }
  if (policy_.errors) policy_.errors->Add(id_, rank, status);
  out->push_back({peer_of_rank_[rank], frames::Refusal(status, set_id, tensor)});
}

void Job::SetAdd(int32_t rank, const wire::SetAdd& msg, Clock::time_point now, Outbox* out) {
  ProcessSetTable::Events events;
  sets_.Add(rank, msg.request_id(), {msg.ranks().begin(), msg.ranks().end()}, msg.timeout_ms(), now,
            &events);
  Apply(events, out);
}

void Job::SetRemove(int32_t rank, const wire::SetRemove& msg, Clock::time_point now, Outbox* out) {
  ProcessSetTable::Events events;
  sets_.Remove(rank, msg.request_id(), msg.set_id(), msg.timeout_ms(), now, &events);
  Apply(events, out);
}

void Job::Apply(ProcessSetTable::Events& events, Outbox* out) {
  if (!events.activated.empty() || !events.removed.empty()) RecordChanged();
  for (int32_t id : events.activated) {
    const std::vector<int32_t>* ranks = nullptr;
    (void)sets_.Members(id, &ranks);
    OpenSet(id, *ranks);
    spdlog::info("job '{}': process set {} = {} added", id_, id, FormatRanks(*ranks));
  }
  // Tensors pending on a removed set fail before the members hear that the removal completed, so
  // each member's requests end before its remove call returns.
  for (int32_t id : events.removed) {
    auto it = negotiators_.find(id);
    std::vector<wire::Response> failed;
    it->second.FailPending(
        Status(Code::kSetRemoved, fmt::format("process set {} was removed", id)), &failed);
    if (!failed.empty()) SendExecute(id, it->second, std::move(failed), out);
    negotiators_.erase(it);
    set_stats_.erase(id);
    tuning_.erase(id);  // a set added again later is tuned afresh (if asked again)
    trials_told_.erase(id);
    autotune_asked_.erase(id);
    // Joins waiting on the set can never complete now: they fail like its pending tensors (and
    // joins_ keeps only sets that have a negotiator, which Tick and Remove rely on).
    auto waiting = joins_.find(id);
    if (waiting != joins_.end()) {
      const Status removed(Code::kSetRemoved, fmt::format("process set {} was removed", id));
      for (const JoinWaiter& w : waiting->second) ReplyJoin(w, id, removed, -1, out);
      joins_.erase(waiting);
    }
    spdlog::info("job '{}': process set {} removed", id_, id);
  }
  for (auto& reply : events.replies) {
    if (!alive(reply.rank)) continue;
    out->push_back({peer_of_rank_[reply.rank],
                    frames::SetReply(reply.request_id, reply.set_id, reply.status, reply.ranks)});
  }
}

void Job::Announce(int32_t rank, const wire::Announce& msg, size_t bytes, uint64_t sender_epoch,
                   Clock::time_point now, Outbox* out) {
  counters_.set_announce_messages(counters_.announce_messages() + 1);
  if (!joiners_.empty()) AdmitBeforeWorldAnnounce(rank, msg, sender_epoch, now, out);
  for (const auto& set : msg.sets()) {
    // Announced before the rank heard that this set re-formed: its requests failed there already
    // (at the mark, Runtime::OnReformed), and its cache bits name slots of the set's previous
    // negotiator. Dropped, and counted: a refusal would tell the rank nothing it does not know,
    // and could reach it after it submitted the same name again in the new epoch.
    if (!Stale(sender_epoch, set.set_id()).ok()) {
      wire::SetCounters& per_set = set_counters_[set.set_id()];
      per_set.set_announcements_dropped(per_set.announcements_dropped() + 1);
      continue;
    }
    auto it = negotiators_.find(set.set_id());
    std::vector<wire::Response> ready;
    if (it == negotiators_.end()) {
      // Unknown or removed: each full announcement is refused by name (bits name nothing).
      const std::vector<int32_t>* unused = nullptr;
      const Status status = sets_.Members(set.set_id(), &unused);
      if (!status.ok())
        for (const auto& spec : set.tensors()) Refuse(rank, status, set.set_id(), spec.name(), out);
      continue;
    }
    Negotiator& negotiator = it->second;
    wire::SetCounters& per_set = set_counters_[set.set_id()];
    per_set.set_announcements(per_set.announcements() + 1);
    // Before the tensors: a trial these reports end makes way for the next values, which the
    // release below then already runs with.
    if (set.autotune()) AutotuneAsked(rank, set.set_id(), negotiator);
    if (Tuned(set.set_id()) && set.executed_size() > 0) ExecutedUnderTrials(rank, set, negotiator);
    // The members' fast path (docs/steady-state.md): an exit makes the rank's announcements count
    // again; while it has not left, what it sent before it heard of the grant is dropped here
    // (it took those tensors back onto the fast path itself).
    if (set.fast_path_exit() != 0 && negotiator.OnFastPath(rank)) {
      per_set.set_fast_path_exits(per_set.fast_path_exits() + 1);
      per_set.set_fast_path_rounds(per_set.fast_path_rounds() + set.fast_path_rounds());
      const Status status =
          negotiator.ExitFastPath(rank, set.fast_path_exit(), set.fast_path_rounds());
      if (!status.ok()) {
        spdlog::error("job '{}': {}", id_, status.message());
        std::vector<wire::Response> failed;
        negotiator.Break(status, &failed);
        if (!failed.empty()) SendExecute(set.set_id(), negotiator, std::move(failed), out);
        continue;
      }
    }
    if (negotiator.OnFastPath(rank)) {
      per_set.set_announcements_dropped(per_set.announcements_dropped() + 1);
      continue;
    }
    counters_.set_tensors_announced(counters_.tensors_announced() + set.tensors_size());
    per_set.set_tensors_announced(per_set.tensors_announced() + set.tensors_size());
    for (const auto& spec : set.tensors()) {
      Status status = negotiator.Announce(rank, spec, &ready, now);
      if (!status.ok()) Refuse(rank, status, set.set_id(), spec.name(), out);
    }
    // Bits naming empty slots come only from a broken or hostile rank, and a frame can carry
    // millions: one refusal per set and frame, so that answers never outgrow the question.
    bool refused_empty_slot = false;
    const size_t bits = negotiator.AnnounceCachedBits(
        rank, set, &ready, now, [&](uint32_t slot, const std::string& name, const Status& status) {
          if (!name.empty()) {
            Refuse(rank, status, set.set_id(), name, out);
          } else if (!refused_empty_slot) {
            Refuse(rank, status, set.set_id(), fmt::format("#cache-slot-{}", slot), out);
            refused_empty_slot = true;
          }
        });
    counters_.set_tensors_announced_cached(counters_.tensors_announced_cached() + bits);
    per_set.set_tensors_announced_cached(per_set.tensors_announced_cached() + bits);
    // After the bits: a bit sent before the rank applied an eviction still meant the old tensor.
    negotiator.AcknowledgeEvictions(rank, set.evictions_seen());
    auto& held = released_[set.set_id()];
    held.insert(held.end(), std::make_move_iterator(ready.begin()),
                std::make_move_iterator(ready.end()));
    if (held.empty()) released_.erase(set.set_id());
  }
  counters_.set_announce_bytes(counters_.announce_bytes() + bytes);
}

void Job::FlushReleased(Outbox* out) {
  // An HA leader that may no longer hold its lease releases nothing (its fence): the responses
  // wait here until it renews, or it steps down and the ranks resume elsewhere.
  if (policy_.may_release && !released_.empty() && !policy_.may_release()) return;
  for (auto& [set_id, responses] : released_) {
    auto it = negotiators_.find(set_id);
    if (it != negotiators_.end()) SendExecute(set_id, it->second, std::move(responses), out);
  }
  released_.clear();
}

void Job::GoingAway(const Status& status, Outbox* out) const {
  const Payload refusal = frames::Refusal(status), fault = frames::Fault({}, status);
  for (int32_t r = 0; r < size_; ++r) {
    if (peer_of_rank_[r].empty()) continue;
    // A rank waiting to join is refused; the live ones are told as a Fault naming nobody.
    if (joining(r)) out->push_back({peer_of_rank_[r], refusal});
    else if (alive(r)) out->push_back({peer_of_rank_[r], fault});
  }
}

void Job::Tick(Clock::time_point now, Outbox* out) {
  if (!welcomed_ && !failed_ && now >= rendezvous_deadline_) return TimeOutRendezvous(out);
  ProcessSetTable::Events events;
  sets_.Expire(now, &events);
  Apply(events, out);
  if (!welcomed_) return;
  InspectStalls(now, out);
  ExpireJoins(now, out);
  ExpireProbes(now, out);
  EvictClosed(now, out);
  ExpireLeases(now, out);
  ExpireMinimum(now, out);
  ExpireJoiners(now, out);
}

void Job::InspectStalls(Clock::time_point now, Outbox* out) {
  for (auto& [set_id, negotiator] : negotiators_) {
    std::vector<Negotiator::Stall> warned, stalled;
    std::vector<wire::Response> failed;
    negotiator.Inspect(now, stall_warning_, stall_shutdown_, &warned, &stalled, &failed);
    for (const auto& stall : warned)
      spdlog::warn("job '{}': stall on process set {}: ranks {} have not submitted '{}' after {} s "
                   "(submitted by ranks {})",
                   id_, set_id, FormatRanks(stall.missing), stall.name,
                   std::chrono::duration_cast<std::chrono::seconds>(stall.waited).count(),
                   FormatRanks(stall.submitted));
    for (const auto& stall : stalled)
      spdlog::error("job '{}': failing '{}' on process set {} with a stall: ranks {} never "
                    "submitted it",
                    id_, stall.name, set_id, FormatRanks(stall.missing));
    for (size_t i = 0; policy_.metrics && i < warned.size(); ++i) policy_.metrics->StallWarned();
    for (size_t i = 0; policy_.metrics && i < stalled.size(); ++i) policy_.metrics->StallFailed();
    counters_.set_stall_warnings(counters_.stall_warnings() + warned.size());
    counters_.set_stalls_failed(counters_.stalls_failed() + stalled.size());
    if (!failed.empty()) SendExecute(set_id, negotiator, std::move(failed), out);
  }
}

std::optional<Clock::time_point> Job::NextDeadline() const {
  if (!welcomed_) return rendezvous_deadline_;
  // Due now. Not time_point::min(): the event loop subtracts the clock from a deadline, which
  // overflows from there (UBSan stopped tuttid on it).
  if (!closed_.empty()) return Clock::time_point{};
  std::optional<Clock::time_point> next = sets_.NextDeadline();
  for (const auto& [set_id, negotiator] : negotiators_) {
    auto at = negotiator.NextInspection(stall_warning_, stall_shutdown_);
    if (at && (!next || *at < *next)) next = at;
  }
  for (const auto& [set_id, waiters] : joins_)
    for (const JoinWaiter& w : waiters)
      if (!next || w.deadline < *next) next = w.deadline;
  const auto lease = std::chrono::milliseconds(policy_.lease_ms);
  for (int32_t r = 0; r < size_; ++r)
    if (alive(r) && (!next || last_seen_[r] + lease < *next)) next = last_seen_[r] + lease;
  for (const auto& [rank, probe] : probes_)
    if (!next || probe.deadline < *next) next = probe.deadline;
  if (below_minimum_since_) {
    const auto end = *below_minimum_since_ + std::chrono::milliseconds(elastic_.timeout_ms);
    if (!next || end < *next) next = end;
  }
  for (const Joiner& j : joiners_)
    if (!next || j.deadline < *next) next = j.deadline;
  return next;
}

}  // namespace tutti::server
