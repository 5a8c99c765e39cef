// The set's side of its members' fast path (docs/steady-state.md): when tuttid puts the set on
// it, whom it is still waiting to hear leave, and the check that every member ran the same
// rounds. Single-threaded, like the rest of the negotiator.
#include <fmt/format.h>

#include "server/core/negotiator.h"

namespace tutti::server {

bool Negotiator::OnFastPath(int32_t rank) const {
  if (fast_.members_on == 0 || !contains(rank)) return false;
  return fast_.on[IndexOf(rank)];
}

Status Negotiator::ExitFastPath(int32_t rank, uint64_t generation, uint64_t rounds) {
  if (generation != fast_.generation || !OnFastPath(rank)) return Status::Ok();  // stale
  fast_.on[IndexOf(rank)] = false;
  --fast_.members_on;
  if (!fast_.rounds) {
    fast_.rounds = rounds;
  } else if (*fast_.rounds != rounds) {
    return Status(Code::kInternal,
                  fmt::format("process set {}: its members left fast-path generation {} after "
                              "different numbers of rounds ({} and {}, rank {})",
                              set_id_, generation, *fast_.rounds, rounds, rank));
  }
  return Status::Ok();
}

uint64_t Negotiator::MaybeGrant(uint64_t seq, bool all_ok) {
  const bool steady = released_cached_ > 0 && released_other_ == 0;
  released_cached_ = released_other_ = 0;
  if (!fast_path_allowed_ || !all_ok || !steady || fast_.members_on > 0 || !broken_.ok() ||
      !pending_.empty() || !groups_.empty() || joined_count_ > 0 || !cache_.priorities_agree())
    return 0;
  fast_.generation = seq + 1;
  fast_.on.assign(members_.size(), true);
  fast_.members_on = members_.size();
  fast_.rounds.reset();
  return fast_.generation;
}

Status Negotiator::RestoreState(int32_t rank, const wire::CacheState& state) {
  if (!contains(rank))
    return Status(Code::kInvalidArgument,
                  fmt::format("cache state of process set {} from rank {}, not a member", set_id_, rank));
  const size_t index = IndexOf(rank);
  for (const wire::CachedSpec& cached : state.slots()) {
    if (cached.joined()) continue;  // it announced nothing: the slot keeps the others' spec
    TUTTI_RETURN_IF_ERROR(cache_.Restore(index, cached.slot(), cached.spec()));
  }
  if (state.fast_path() == 0) return Status::Ok();
  // Every member went through the same Executes (the resume caught up the ones that lagged), so
  // those still on the fast path report one generation; the first report opens it.
  if (fast_.generation != state.fast_path() || fast_.on.empty()) {
    fast_.generation = state.fast_path();
    fast_.on.assign(members_.size(), false);
    fast_.members_on = 0;
    fast_.rounds.reset();
  }
  if (!fast_.on[index]) {
    fast_.on[index] = true;
    ++fast_.members_on;
  }
  return Status::Ok();
}

}  // namespace tutti::server
