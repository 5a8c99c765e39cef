// Process-set changes and join, as this rank sees them: the coordinator link carries the call,
// and the runtime opens or closes the set's lane around it so that a set is never visible here
// without the lane its collectives need.
#include <algorithm>

#include "client/runtime.h"

namespace tutti::client {
namespace {

Status Invalid(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }

}  // namespace

Status Runtime::AddProcessSet(std::vector<int32_t> ranks, int64_t timeout_ms, int32_t* set_id) {
  if (timeout_ms <= 0) timeout_ms = options_.timeout_ms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
  }
  std::vector<int32_t> slots, members;
  TUTTI_RETURN_IF_ERROR(world_.ToSlots(ranks, &slots));
  TUTTI_RETURN_IF_ERROR(link_->AddSet(slots, timeout_ms, set_id, &members));
  const bool member = std::binary_search(members.begin(), members.end(), slot_);
  bool has_lane;
  {
    std::lock_guard<std::mutex> lock(mu_);
    has_lane = lanes_.count(*set_id) > 0;
  }
  // The lane first: once the set is visible, a submission on it may be answered at once.
  if (member && !has_lane) OpenLane(*set_id, members, *set_id, membership_epoch());
  sets_.Insert(*set_id, members);
  return Status::Ok();
}

Status Runtime::RemoveProcessSet(int32_t set_id, int64_t timeout_ms) {
  if (timeout_ms <= 0) timeout_ms = options_.timeout_ms;
  if (set_id == 0) return Invalid("the world process set (0) cannot be removed");
  std::vector<int32_t> members;
  TUTTI_RETURN_IF_ERROR(sets_.Ranks(set_id, &members));
  const bool member = std::binary_search(members.begin(), members.end(), slot_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
  }
  if (member) TUTTI_RETURN_IF_ERROR(LeaveFastPath(set_id, timeout_ms));
  Status removed = link_->RemoveSet(set_id, timeout_ms);
  // A set this rank knew that tuttid no longer has was removed by its members meanwhile: it is
  // gone here too. For a non-member that is its removal done (every rank calls remove, as in
  // Horovod, and the members may simply have been first).
  if (removed.code() == Code::kUnknownSet) {
    sets_.MarkRemoved(set_id);
    if (!member) return Status::Ok();
  }
  TUTTI_RETURN_IF_ERROR(removed);
  sets_.MarkRemoved(set_id);
  std::unique_ptr<Lane> lane;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lanes_.find(set_id);
    if (it != lanes_.end()) {
      lane = std::move(it->second);
      lanes_.erase(it);
    }
    tuning_.erase(set_id);
  }
  lane.reset();  // its stream ended: the coordinator released nothing after the removal
  comm_ids_.DropSet(set_id);
  link_->ForgetSet(set_id);
  FailPending(set_id, Status(Code::kSetRemoved, "process set " + std::to_string(set_id) +
                                                    " was removed while the request was pending"));
  return Status::Ok();
}

Status Runtime::Join(int32_t set_id, int64_t timeout_ms, int32_t* last_rank) {
  if (timeout_ms <= 0) timeout_ms = options_.timeout_ms;
  TUTTI_RETURN_IF_ERROR(sets_.CheckMember(set_id));
  // tuttid runs the join: the members leave the set's fast path first (docs/steady-state.md).
  TUTTI_RETURN_IF_ERROR(LeaveFastPath(set_id, timeout_ms));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
    auto reformed = unacknowledged_.find(set_id);
    if (reformed != unacknowledged_.end()) return reformed->second;
    ++joined_[set_id];  // from now on, collectives of the set run here without a request
  }
  Status status = link_->JoinSet(set_id, timeout_ms, last_rank);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--joined_[set_id] == 0) joined_.erase(set_id);
  }
  if (status.ok()) *last_rank = RankForUser(*last_rank);
  return status;
}

Status Runtime::AutotuneProcessSet(int32_t set_id) {
  TUTTI_RETURN_IF_ERROR(sets_.CheckMember(set_id));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;
  }
  // On the fast path tuttid sees nothing to measure: the lane leaves it and the exit asks.
  if (link_->AskAutotune(set_id)) WakeLane(set_id);
  // A removal on another thread marks the set removed before it makes the link forget it: if the
  // set is gone now, the removal may have forgotten it before the ask arrived, so forget it again
  // (ForgetSet is idempotent) and say why, instead of leaving the ask behind for a dead id.
  Status still = sets_.CheckMember(set_id);
  if (!still.ok()) link_->ForgetSet(set_id);
  return still;
}

Status Runtime::ProcessSetRanks(int32_t set_id, std::vector<int32_t>* ranks) const {
  std::vector<int32_t> slots;
  TUTTI_RETURN_IF_ERROR(sets_.Ranks(set_id, &slots));
  *ranks = world_.ToRanks(slots);
  return Status::Ok();
}

}  // namespace tutti::client
