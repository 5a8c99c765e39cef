// Ranks added to a running elastic job (docs/elastic.md, "Adding ranks"). A registration into the
// running job gets the next slot (above every slot so far, so the added ranks number after the
// survivors) and waits. Every live rank is told (RanksWaiting); each says when it is at a point
// where the job may change (AtBoundary: a commit of its elastic state). Once every live rank is,
// the job moves to its next membership epoch with the added ranks in the world: the world set
// re-forms (nothing of it is in flight, since every member waits at its boundary) and the added
// ranks are welcomed; no other set changes. A rank that waits longer than its rendezvous timeout,
// or whose connection closes, is given up and the others are told. Single-threaded, like Job.
#include "server/core/frames.h"
#include "server/core/job.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "proto/status_codec.h"
#include "server/core/message_codec.h"

namespace tutti::server {

Status Job::RegisterAdded(const std::string& peer, const wire::Register& msg,
                          Clock::time_point now, int32_t* slot, Outbox* out) {
  const int32_t claim = msg.rank();
  auto held = slot_of_claim_.find(claim);
  if (held != slot_of_claim_.end() && (alive(held->second) || joining(held->second)))
    return Status(Code::kInvalidArgument,
                  fmt::format("rank {} of job '{}' is already registered", claim, id_));
  if (msg.transport() != registrations_[0]->transport())
    return Status(Code::kMismatch,
                  fmt::format("transports differ: job '{}' runs with '{}', the rank added as {} "
                              "asked for '{}' (set TUTTI_TRANSPORT alike on every rank)",
                              id_, registrations_[0]->transport(), claim, msg.transport()));
  if (DataSecurityOf(msg) != DataSecurityOf(*registrations_[0]))
    return Status(Code::kMismatch,
                  fmt::format("data-plane security differs: job '{}' runs with '{}', the rank "
                              "added as {} asked for '{}' (set TUTTI_DATA_SECURITY alike on every "
                              "rank)",
                              id_, DataSecurityOf(*registrations_[0]), claim, DataSecurityOf(msg)));
  if (msg.static_sets_size() > 0)
    return Status(Code::kUnsupported,
                  fmt::format("unsupported: rank {} joins the running elastic job '{}' with static "
                              "process sets; an added rank starts in the world set only (add sets "
                              "with tutti_process_set_add, e.g. in a reset callback)",
                              claim, id_));
  const size_t live = alive_ranks();
  if (elastic_.max_size > 0 && live + joiners_.size() >= static_cast<size_t>(elastic_.max_size))
    return Status(Code::kLimitExceeded,
                  fmt::format("limit exceeded: elastic job '{}' has {} ranks and {} waiting to "
                              "join, its maximum is {} (TUTTI_MAX_SIZE, tuttirun --max-np)",
                              id_, live, joiners_.size(), elastic_.max_size));
  if (size_ >= kMaxWorldSize)
    return Status(Code::kLimitExceeded,
                  fmt::format("limit exceeded: elastic job '{}' has numbered {} slots, tuttid's "
                              "limit; restart the job",
                              id_, size_));
  *slot = size_++;
  registrations_.push_back(std::make_unique<wire::Register>(msg));
  peer_of_rank_.push_back(peer);
  state_.push_back(RankState::kJoining);
  last_seen_.push_back(now);
  slot_of_claim_[claim] = *slot;
  const int64_t timeout =
      msg.rendezvous_timeout_ms() > 0 ? msg.rendezvous_timeout_ms() : rendezvous_timeout_ms_;
  joiners_.push_back({*slot, now + std::chrono::milliseconds(timeout), timeout});
  spdlog::info("job '{}': rank {} asks to join in slot {}; waiting for every rank to reach a "
               "boundary ({} waiting)",
               id_, claim, *slot, joiners_.size());
  TellRanksWaiting(out);
  MaybeAdmit(now, out);
  return Status::Ok();
}

void Job::AtBoundary(int32_t rank, uint64_t sender_epoch, Clock::time_point now, Outbox* out) {
  // Sent in an epoch that ended since: the change it waited for came (or another did); the rank
  // sees it and, with ranks still waiting, comes back to a boundary.
  if (!elastic_.on || sender_epoch != membership_epoch_ || joiners_.empty()) return;
  at_boundary_.insert(rank);
  MaybeAdmit(now, out);
}

bool Job::CanAdmit() const {
  if (joiners_.empty()) return false;
  // Below its minimum the job's sets are broken: only enough added ranks bring it back.
  return !below_minimum_since_ ||
         alive_ranks() + joiners_.size() >= static_cast<size_t>(std::max(elastic_.min_size, 1));
}

void Job::MaybeAdmit(Clock::time_point now, Outbox* out) {
  if (!CanAdmit()) return;
  // A world collective announced by a rank not at its boundary cannot complete while the others
  // wait at theirs: admitting now fails it (it belongs to the epoch that ends), instead of
  // waiting for a boundary that rank will never reach (AdmitBeforeWorldAnnounce is the other
  // order of the same race).
  const bool world_waits = !at_boundary_.empty() && negotiators_.at(0).pending_count() > 0;
  if (!world_waits)
    for (int32_t r : LiveSlots())
      if (!at_boundary_.count(r)) return;
  Admit(now, out);
}

void Job::AdmitBeforeWorldAnnounce(int32_t rank, const wire::Announce& msg, uint64_t sender_epoch,
                                   Clock::time_point now, Outbox* out) {
  if (at_boundary_.empty() || at_boundary_.count(rank) || sender_epoch != membership_epoch_ ||
      !CanAdmit())
    return;
  const bool on_world = std::any_of(msg.sets().begin(), msg.sets().end(),
                                    [](const wire::SetTensors& set) { return set.set_id() == 0; });
  if (!on_world) return;
  spdlog::info("job '{}': rank {} announced on the world while {} ranks wait at a boundary: "
               "admitting the waiting ranks now",
               id_, RankNow(rank), at_boundary_.size());
  Admit(now, out);
}

void Job::Admit(Clock::time_point now, Outbox* out) {
  RecordChanged();  // the record now says the job cannot be resumed
  // What the old epoch released goes out before its mark (a registration or an announcement in
  // the same batch of frames may admit).
  FlushReleased(out);
  std::vector<int32_t> added;
  for (const Joiner& j : joiners_) added.push_back(j.slot);
  joiners_.clear();
  at_boundary_.clear();
  for (int32_t s : added) {
    state_[s] = RankState::kAlive;
    last_seen_[s] = now;
  }
  const std::vector<int32_t> live = LiveSlots();
  ++membership_epoch_;
  numbered_ = live;
  const Status reformed(Code::kReformed,
                        fmt::format("re-formed: {} rank{} added; job '{}' goes on with {} ranks in "
                                    "membership epoch {}",
                                    added.size(), added.size() == 1 ? "" : "s", id_, live.size(),
                                    membership_epoch_));
  spdlog::info("job '{}': {}", id_, reformed.message());

  // Ranks lost below the minimum leave their (broken) sets now, which go on over the survivors.
  std::vector<int32_t> changed{0}, removed;
  const std::vector<int32_t> lost = lost_below_minimum_;
  for (int32_t slot : lost)
    for (int32_t id : DropFromSets(slot, reformed, &removed, out))
      if (std::find(changed.begin(), changed.end(), id) == changed.end()) changed.push_back(id);
  lost_below_minimum_.clear();
  below_minimum_since_.reset();
  // The world fails what was pending (nothing, when every rank waited at its boundary) and starts
  // a fresh negotiator over the grown world, its sequence numbers going on.
  {
    Negotiator& world = negotiators_.at(0);
    std::vector<wire::Response> failed;
    world.FailPending(reformed, &failed);
    if (!failed.empty()) SendExecute(0, world, std::move(failed), out);
    auto waiting = joins_.find(0);
    if (waiting != joins_.end()) {
      for (const JoinWaiter& w : waiting->second) ReplyJoin(w, 0, reformed, -1, out);
      joins_.erase(waiting);
    }
  }
  ProcessSetTable::Events events;
  sets_.Grow(added, reformed, &events);
  Apply(events, out);
  const uint64_t next_seq = negotiators_.at(0).TakeSeq();
  negotiators_.erase(0);
  OpenSet(0, live);
  negotiators_.at(0).set_next_seq(next_seq);
  set_changed_in_[0] = membership_epoch_;
  set_changed_in_[-1] = membership_epoch_;

  const Placement place = Place(live);
  // Not orderly: every rank waits at its boundary, so the world's old lane is idle, and aborting
  // it lets each rank join its threads now instead of keeping them until it finalizes (a world
  // request still in flight there fails with `reformed`, as any of the old epoch does).
  wire::Reformed base = ReformedBase(live, lost, changed, removed, reformed, /*orderly=*/false);
  for (int32_t s : added) {
    DescribePeer(s, base.add_added());
  }

  wire::Welcome welcome_base;
  FillWelcome(&welcome_base);
  for (int32_t s = 0; s < size_; ++s) {
    DescribePeer(s, welcome_base.add_peers());
  }
  welcome_base.mutable_members()->Add(live.begin(), live.end());
  for (const auto& [id, negotiator] : negotiators_) {
    if (id == 0) continue;
    auto* set = welcome_base.add_sets();
    set->set_id(id);
    set->mutable_ranks()->Add(negotiator.members().begin(), negotiator.members().end());
  }

  // The ranks that were there get one Reformed, the added ones one Welcome, each encoded once.
  const frames::Reformeds reformeds(base);
  const frames::Welcomes welcomes(welcome_base);
  for (size_t i = 0; i < live.size(); ++i) {
    const int32_t s = live[i];
    if (std::find(added.begin(), added.end(), s) != added.end()) {
      wire::Welcome own;
      own.set_slot(s);
      SetPlacement(place, i, &own);
      out->push_back(welcomes.To(peer_of_rank_[s], own));
      continue;
    }
    wire::Reformed own;
    SetPlacement(place, i, &own);
    out->push_back(reformeds.To(peer_of_rank_[s], own));
  }
}

void Job::TellRanksWaiting(Outbox* out) const {
  const Payload waiting = frames::RanksWaiting(static_cast<int32_t>(joiners_.size()));
  for (int32_t r : LiveSlots()) out->push_back({peer_of_rank_[r], waiting});
}

void Job::DropJoiner(int32_t slot, const Status& status, Outbox* out) {
  auto it = std::find_if(joiners_.begin(), joiners_.end(),
                         [&](const Joiner& j) { return j.slot == slot; });
  if (it == joiners_.end()) return;
  joiners_.erase(it);
  state_[slot] = RankState::kLost;
  ++gone_;
  spdlog::warn("job '{}': {}", id_, status.message());
  out->push_back({peer_of_rank_[slot], frames::Refusal(status)});
  evicted_.emplace_back(peer_of_rank_[slot], status);
  // Ranks waiting at a boundary for nobody go on; they come back at their next one if need be.
  if (joiners_.empty()) at_boundary_.clear();
  TellRanksWaiting(out);
}

void Job::ExpireJoiners(Clock::time_point now, Outbox* out) {
  std::vector<Joiner> expired;
  for (const Joiner& j : joiners_)
    if (j.deadline <= now) expired.push_back(j);
  for (const Joiner& j : expired) {
    std::vector<int32_t> away;  // numbered as the ranks number themselves now
    const std::vector<int32_t> live = LiveSlots();
    for (size_t r = 0; r < live.size(); ++r)
      if (!at_boundary_.count(live[r])) away.push_back(static_cast<int32_t>(r));
    DropJoiner(j.slot,
               Status(Code::kTimeout,
                      fmt::format("timeout: could not join the running elastic job '{}' within "
                                  "{} ms: ranks {} never reached a boundary (a commit of their "
                                  "elastic state)",
                                  id_, j.timeout_ms, FormatRanks(away))),
               out);
  }
}

}  // namespace tutti::server
