// Elastic re-formation (docs/elastic.md): when an elastic job loses a rank, the survivors go on in
// the job's next membership epoch instead of failing. Ranks keep their slot (their rank in the
// first epoch) on the wire and in every table here; only the numbering the applications see
// changes, which each rank derives from Reformed.members. So a set that did not contain the lost
// rank is not touched at all: its negotiator, stream and cache go on across the change. A set
// that did fails what was pending with kReformed and starts a fresh negotiator over its
// survivors, under the same id, with its sequence numbers going on. Single-threaded, like Job.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "proto/status_codec.h"
#include "server/core/recent_errors.h"
#include "server/core/service_metrics.h"

namespace tutti::server {

std::vector<int32_t> Job::LiveSlots() const {
  std::vector<int32_t> live;
  for (int32_t r = 0; r < size_; ++r)
    if (alive(r)) live.push_back(r);
  return live;
}

int32_t Job::RankNow(int32_t slot) const {
  if (numbered_.empty()) return slot;  // never re-formed: slots are ranks
  auto at = std::lower_bound(numbered_.begin(), numbered_.end(), slot);
  return at != numbered_.end() && *at == slot ? static_cast<int32_t>(at - numbered_.begin()) : slot;
}

Status Job::Stale(uint64_t sender_epoch, int32_t set_id) const {
  // 0: a frame without the field (a client before 0.6, which cannot be in an elastic job).
  if (!elastic_.on || sender_epoch == 0 || sender_epoch >= membership_epoch_) return Status::Ok();
  if (set_id >= 0) {
    auto changed = set_changed_in_.find(set_id);
    if (changed == set_changed_in_.end() || changed->second <= sender_epoch) return Status::Ok();
  }
  return Status(Code::kReformed,
                fmt::format("re-formed: sent in membership epoch {} of job '{}', which re-formed "
                            "into epoch {} since",
                            sender_epoch, id_, membership_epoch_));
}

void Job::Reform(int32_t rank, const Status& why, bool orderly, Outbox* out) {
  RecordChanged();  // the record now says the job cannot be resumed
  state_[rank] = RankState::kLost;
  ++gone_;
  if (!orderly && policy_.metrics) policy_.metrics->RankLost();
  if (!orderly && policy_.errors) policy_.errors->Add(id_, rank, why);
  const std::vector<int32_t> live = LiveSlots();
  if (live.empty()) {
    spdlog::warn("job '{}': {}; no rank is left", id_, why.message());
    return;
  }
  ++membership_epoch_;
  numbered_ = live;
  at_boundary_.clear();  // ranks waiting at a boundary wake with this change
  const Status reformed(Code::kReformed,
                        fmt::format("re-formed: {}; job '{}' goes on with {} ranks in membership "
                                    "epoch {}",
                                    why.message(), id_, live.size(), membership_epoch_));
  spdlog::warn("job '{}': {}", id_, reformed.message());

  std::vector<int32_t> removed;
  const std::vector<int32_t> changed = DropFromSets(rank, reformed, &removed, out);

  const wire::Reformed base = ReformedBase(live, {rank}, changed, removed, reformed, orderly);
  const Placement place = Place(live);
  const frames::Reformeds reformeds(base);
  for (size_t i = 0; i < live.size(); ++i) {
    wire::Reformed own;
    SetPlacement(place, i, &own);
    out->push_back(reformeds.To(peer_of_rank_[live[i]], own));
  }
}

wire::Reformed Job::ReformedBase(const std::vector<int32_t>& live,
                                 const std::vector<int32_t>& lost,
                                 const std::vector<int32_t>& changed,
                                 const std::vector<int32_t>& removed, const Status& error,
                                 bool orderly) const {
  wire::Reformed base;
  base.set_membership_epoch(membership_epoch_);
  base.mutable_lost()->Add(lost.begin(), lost.end());
  base.mutable_members()->Add(live.begin(), live.end());
  for (const auto& [id, negotiator] : negotiators_) {
    auto* set = base.add_sets();
    set->set_id(id);
    set->mutable_ranks()->Add(negotiator.members().begin(), negotiator.members().end());
  }
  for (int32_t id : changed)
    if (negotiators_.count(id)) base.add_reformed_sets(id);
  base.mutable_removed_sets()->Add(removed.begin(), removed.end());
  wire::ToWire(error, base.mutable_error());
  base.set_orderly(orderly);
  base.set_ranks_waiting(static_cast<int32_t>(joiners_.size()));
  return base;
}

std::vector<int32_t> Job::DropFromSets(int32_t rank, const Status& reformed,
                                       std::vector<int32_t>* removed, Outbox* out) {
  // The sets that contained the rank fail what was pending, joins included.
  std::vector<int32_t> changed;
  for (auto& [id, negotiator] : negotiators_) {
    if (!negotiator.contains(rank)) continue;
    changed.push_back(id);
    std::vector<wire::Response> failed;
    negotiator.FailPending(reformed, &failed);
    if (!failed.empty()) SendExecute(id, negotiator, std::move(failed), out);
    auto waiting = joins_.find(id);
    if (waiting == joins_.end()) continue;
    for (const JoinWaiter& w : waiting->second) ReplyJoin(w, id, reformed, -1, out);
    joins_.erase(waiting);
  }
  // Set changes in flight fail on every set (their callers numbered ranks in the old epoch).
  ProcessSetTable::Events events;
  sets_.Reform(rank, reformed, &events);
  Apply(events, out);  // sets emptied by the loss close here
  for (int32_t id : changed) {
    auto it = negotiators_.find(id);
    if (it == negotiators_.end()) continue;  // emptied and removed
    const uint64_t next_seq = it->second.TakeSeq();
    negotiators_.erase(it);
    const std::vector<int32_t>* members = nullptr;
    (void)sets_.Members(id, &members);
    OpenSet(id, *members);
    negotiators_.at(id).set_next_seq(next_seq);
    set_changed_in_[id] = membership_epoch_;
  }
  set_changed_in_[-1] = membership_epoch_;  // set changes of earlier epochs are stale
  removed->insert(removed->end(), events.removed.begin(), events.removed.end());
  std::vector<int32_t> kept;
  for (int32_t id : changed)
    if (negotiators_.count(id)) kept.push_back(id);
  return kept;
}

void Job::ExpireMinimum(Clock::time_point now, Outbox* out) {
  if (!below_minimum_since_ ||
      now < *below_minimum_since_ + std::chrono::milliseconds(elastic_.timeout_ms))
    return;
  const std::vector<int32_t> live = LiveSlots();
  const Status status(Code::kTimeout,
                      fmt::format("timeout: elastic job '{}' ended: {} ranks left, fewer than its "
                                  "minimum of {}, for {} ms (TUTTI_ELASTIC_TIMEOUT)",
                                  id_, live.size(), elastic_.min_size, elastic_.timeout_ms));
  spdlog::error("{}", status.message());
  const Payload fault = frames::Fault({}, status);
  for (int32_t r : live) {
    out->push_back({peer_of_rank_[r], fault});
    state_[r] = RankState::kLost;
    ++gone_;
  }
  below_minimum_since_.reset();
  while (!joiners_.empty()) DropJoiner(joiners_.front().slot, status, out);
}

}  // namespace tutti::server
