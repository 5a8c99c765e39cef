// Leases and eviction: how a rank leaves the job (an orderly Bye, an abort, or a lease that ran
// out) and what the others are told. All three end in Remove, which breaks the rank's sets and
// fails what waited for it; kept together so that the order of those messages (the Fault first)
// is decided in one place. Single-threaded, like Job.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "server/core/recent_errors.h"
#include "server/core/service_metrics.h"

namespace tutti::server {

void Job::Touch(int32_t rank, Clock::time_point now) { last_seen_[rank] = now; }

std::vector<std::pair<std::string, Status>> Job::TakeEvicted() {
  std::vector<std::pair<std::string, Status>> evicted;
  evicted.swap(evicted_);
  return evicted;
}

void Job::Leave(int32_t rank, Clock::time_point now, Outbox* out) {
  Remove(rank, Status(Code::kPeerLost, fmt::format("peer lost: rank {} finalized", RankNow(rank))),
         /*fault=*/false, now, out);
  state_[rank] = RankState::kLeft;
}

void Job::Abort(int32_t rank, Clock::time_point now, Outbox* out) {
  const Status status(Code::kAborted, fmt::format("aborted: rank {} called tutti_abort", RankNow(rank)));
  spdlog::warn("job '{}': {}", id_, status.message());
  Remove(rank, status, /*fault=*/true, now, out);
  evicted_.emplace_back(peer_of_rank_[rank], status);
}

void Job::Remove(int32_t rank, const Status& status, bool fault, Clock::time_point now,
                 Outbox* out) {
  if (!alive(rank)) return;
  probes_.erase(rank);
  // An elastic job re-forms around a rank that left instead of breaking its sets. A failure that
  // would leave it below its minimum size breaks its sets as any job's do, and the job ends if
  // no rank comes back within its elastic timeout (ExpireMinimum). An orderly leave always
  // re-forms it: a rank that finalized early (an exception the script let escape, the end of
  // its training) must not leave the others waiting.
  if (elastic_.on && welcomed_) {
    if (!fault || static_cast<int32_t>(alive_ranks()) - 1 >= std::max(elastic_.min_size, 1))
      return Reform(rank, status, /*orderly=*/!fault, out);
    if (!below_minimum_since_) below_minimum_since_ = now;
    lost_below_minimum_.push_back(rank);  // dropped from its sets if ranks are added in time
  }
  state_[rank] = RankState::kLost;
  ++gone_;
  if (fault && policy_.metrics) policy_.metrics->RankLost();
  if (fault && policy_.errors) policy_.errors->Add(id_, rank, status);
  // The Fault goes first: a rank whose request fails because of the loss must already know of
  // it when it submits again, so that the new request fails at once too.
  const Payload told = fault ? frames::Fault({rank}, status) : nullptr;
  for (int32_t r = 0; fault && r < size_; ++r) {
    if (!alive(r)) continue;
    out->push_back({peer_of_rank_[r], told});
  }
  for (auto& [id, negotiator] : negotiators_) {
    if (!negotiator.contains(rank)) continue;
    // Members on the set's fast path hold their tensors themselves (docs/steady-state.md):
    // without a Fault, an orderly leave would fail nothing of theirs.
    if (!fault && negotiator.fast_path_members() > 0) {
      const Payload broken = frames::SetsBroken({id}, status, /*orderly=*/true);
      for (int32_t m : negotiator.members())
        if (m != rank && alive(m)) out->push_back({peer_of_rank_[m], broken});
    }
    std::vector<wire::Response> failed;
    negotiator.Break(status, &failed);
    if (!failed.empty()) SendExecute(id, negotiator, std::move(failed), out);
  }
  ProcessSetTable::Events events;
  sets_.MarkLost(rank, status, &events);
  Apply(events, out);
  for (auto it = joins_.begin(); it != joins_.end();) {
    if (!negotiators_.at(it->first).contains(rank)) {
      ++it;
      continue;
    }
    for (const JoinWaiter& w : it->second) ReplyJoin(w, it->first, status, -1, out);
    it = joins_.erase(it);
  }
}

void Job::Evict(int32_t rank, const std::string& why, Clock::time_point now, Outbox* out) {
  if (!alive(rank)) return;
  const int32_t shown = RankNow(rank);  // before Remove renumbers the others
  spdlog::warn("job '{}': rank {} lost: {}", id_, shown, why);
  Remove(rank, Status(Code::kPeerLost, fmt::format("peer lost: rank {}: {}", shown, why)),
         /*fault=*/true, now, out);
  evicted_.emplace_back(peer_of_rank_[rank],
                        Status(Code::kEvicted,
                               fmt::format("evicted: rank {} of job '{}' was declared lost ({}); "
                                           "it can no longer take part in the job",
                                           shown, id_, why)));
}

void Job::ExpireLeases(Clock::time_point now, Outbox* out) {
  const auto lease = std::chrono::milliseconds(policy_.lease_ms);
  for (int32_t r = 0; r < size_; ++r)
    if (alive(r) && now - last_seen_[r] >= lease)
      Evict(r, fmt::format("no heartbeat for {} ms", policy_.lease_ms), now, out);
}

}  // namespace tutti::server
