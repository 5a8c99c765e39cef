// An elastic job re-forming, as this rank sees it (docs/elastic.md). tuttid's Reformed frame is
// the mark: it comes after every Execute of the earlier epoch, and the I/O thread applies it
// while no submission runs (submit_mu_), so every request belongs wholly to one epoch. Sets that
// lost a member fail what was pending with kReformed and get a fresh lane over their survivors;
// the other sets' lanes, streams and pending requests are not touched. Only the numbering the
// application sees changes (WorldMap).
#include <algorithm>

#include "client/runtime.h"
#include "proto/status_codec.h"
#include "transport/route_planner.h"

namespace tutti::client {
namespace {

// Set ids below this share the data-plane id space with the epoch a set's incarnation began in.
constexpr int64_t kChannelSetIds = int64_t{1} << 20;

}  // namespace

// A set re-formed gets a new data-plane id: its members open the new lane at slightly different
// times, and a connection for the new lane must never be taken by (or parked for) the old one.
Status Runtime::ChannelOf(int32_t set_id, uint64_t epoch, int32_t* channel) {
  const int64_t id = set_id + static_cast<int64_t>(epoch) * kChannelSetIds;
  if (set_id >= kChannelSetIds || id > INT32_MAX)
    return Status(Code::kLimitExceeded,
                  "limit exceeded: process set " + std::to_string(set_id) + " re-formed in membership "
                  "epoch " + std::to_string(epoch) + ", beyond what the data plane numbers "
                  "(set ids below 2^20, epochs below 2048)");
  *channel = static_cast<int32_t>(id);
  return Status::Ok();
}

Status Runtime::AddPeers(const google::protobuf::RepeatedPtrField<wire::Peer>& added) {
  for (const auto& peer : added) {
    if (peer.rank() != static_cast<int32_t>(peers_.size()))
      return Status(Code::kInternal, "tuttid added slot " + std::to_string(peer.rank()) +
                                         " where slot " + std::to_string(peers_.size()) +
                                         " comes next");
    peers_.push_back({peer.rank(), peer.data_endpoint(), peer.host()});
  }
  std::vector<transport::PeerRoute> routes;
  TUTTI_RETURN_IF_ERROR(
      transport::PlanRoutes(slot_, options_.host_id, peers_, options_.transport, &routes));
  p2p_->SetRoutes(routes);
  std::lock_guard<std::mutex> lock(mu_);
  routes_ = std::move(routes);
  return Status::Ok();
}

void Runtime::OnReformed(const wire::Reformed& msg) {
  const Status status = wire::ToStatus(msg.error());
  const uint64_t epoch = msg.membership_epoch();
  std::vector<int32_t> changed(msg.reformed_sets().begin(), msg.reformed_sets().end());
  changed.insert(changed.end(), msg.removed_sets().begin(), msg.removed_sets().end());
  auto is_changed = [&](int32_t id) {
    return std::find(changed.begin(), changed.end(), id) != changed.end();
  };
  std::vector<std::unique_ptr<Lane>> retired;
  {
    std::lock_guard<std::mutex> submit(submit_mu_);
    link_->EnterEpoch(epoch, changed);
    // Before any lane of the new epoch opens: the world's reaches the added ranks.
    if (msg.added_size() > 0) {
      const Status planned = AddPeers(msg.added());
      if (!planned.ok()) FailEverything(planned);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int32_t lost : msg.lost()) lost_.emplace(lost, status);
      for (int32_t id : changed) unacknowledged_.emplace(id, status);
      if (!changed.empty()) unacknowledged_epoch_ = epoch;
      ranks_waiting_ = msg.ranks_waiting();
      for (int32_t id : changed) {
        auto it = lanes_.find(id);
        if (it == lanes_.end()) continue;
        if (msg.orderly()) {
          // What it runs was completed by the rank that left: it finishes, then idles until
          // the runtime ends (destroying it here would wait for it on this thread).
          it->second->EndFastPath();  // its peers' lanes of this incarnation idle too
          retired_lanes_.push_back(std::move(it->second));
        } else {
          it->second->Abort(status);  // wakes a collective blocked on the lost rank
          retired.push_back(std::move(it->second));
        }
        lanes_.erase(it);
      }
    }
    for (int32_t lost : msg.lost()) p2p_->AbortPeer(lost, status);
    for (int32_t id : changed) {
      FailPending(id, status);
      comm_ids_.DropSet(id);
    }
    for (const auto& set : msg.sets()) {
      std::vector<int32_t> ranks(set.ranks().begin(), set.ranks().end());
      if (!is_changed(set.id())) continue;  // untouched: its lane and stream go on
      if (std::binary_search(ranks.begin(), ranks.end(), slot_)) {
        int32_t channel = 0;
        const Status numbered = ChannelOf(set.id(), epoch, &channel);
        if (!numbered.ok()) {
          FailEverything(numbered);
          break;
        }
        OpenLane(set.id(), ranks, channel, epoch);
      }
      sets_.Insert(set.id(), std::move(ranks));
      // Every member starts the set's automatic names over at the mark, where its earlier
      // requests failed: their counters agree again.
      sets_.ResetAutoNames(set.id());
    }
    for (int32_t id : msg.removed_sets()) sets_.MarkRemoved(id);
    world_.Reform({msg.members().begin(), msg.members().end()}, epoch,
                  {msg.local_rank(), msg.local_size(), msg.cross_rank(), msg.cross_size()});
    RememberMembershipEpoch(epoch);
  }
  { std::lock_guard<std::mutex> lock(epoch_mu_); }  // a waiter saw the old epoch or waits now
  epoch_cv_.notify_all();
  retired.clear();  // joins the old lanes' threads: their collectives were aborted
}

void Runtime::OnSetsBroken(const std::vector<int32_t>& set_ids, const Status& status,
                           bool orderly) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int32_t id : set_ids) {
      // A member that left in order completed what was released: its collectives finish here
      // too, and the set refuses new work (as tuttid refuses its announcements).
      if (orderly) {
        left_sets_.emplace(id, status);
        continue;
      }
      auto lane = lanes_.find(id);
      if (lane != lanes_.end()) lane->second->Abort(status);
    }
  }
  if (orderly)
    for (int32_t id : set_ids) {
      link_->FastPathAbandon(id, 0);
      WakeLane(id);  // it finds the set off the fast path
    }
  for (int32_t id : set_ids) FailPending(id, status);
}

void Runtime::OnRanksWaiting(int32_t count) {
  {
    std::lock_guard<std::mutex> epoch(epoch_mu_);
    std::lock_guard<std::mutex> lock(mu_);
    ranks_waiting_ = count;
  }
  epoch_cv_.notify_all();  // a rank waiting at a boundary for ranks that went away goes on
}

int32_t Runtime::ranks_waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return ranks_waiting_;
}

Status Runtime::AwaitEpoch(uint64_t after, int64_t timeout_ms, uint64_t* epoch) {
  if (timeout_ms <= 0) timeout_ms = options_.timeout_ms;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(epoch_mu_);
  bool at_boundary = false;  // told tuttid that this rank waits here for ranks to be admitted
  while (true) {
    *epoch = world_.membership_epoch();
    bool at_boundary_now = false;
    {
      std::lock_guard<std::mutex> state(mu_);
      if (!dead_.ok()) return dead_;
      if (shut_down_) return Status(Code::kShutDown, "the runtime is shutting down");
      // A re-formation this rank has not acknowledged is the change the caller waits for even
      // when `after` is its epoch: the mark can land between the caller's reading of the epoch
      // and a request that then fails with REFORMED for it, and no later epoch need ever come.
      // Only once the mark is wholly applied (the world is in its epoch): OnReformed records
      // the changed sets before it re-forms the world.
      const bool applied_change = !unacknowledged_.empty() && unacknowledged_epoch_ <= *epoch;
      if (*epoch > after || applied_change) {
        unacknowledged_.clear();
        return Status::Ok();
      }
      // The ranks this boundary waited for went away: nothing changes, the job goes on.
      if (at_boundary && ranks_waiting_ == 0) return Status::Ok();
      at_boundary_now = !at_boundary && ranks_waiting_ > 0 && *epoch == after;
    }
    if (at_boundary_now) {
      at_boundary = true;
      link_->SendAtBoundary();
      continue;  // a change may have come meanwhile
    }
    if (epoch_cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
        world_.membership_epoch() <= after)
      return Status(Code::kTimeout,
                    "timeout: the job did not re-form past membership epoch " +
                        std::to_string(after) + " within " + std::to_string(timeout_ms) +
                        " ms (is it elastic? TUTTI_ELASTIC=1, tuttirun --min-np)");
  }
}

}  // namespace tutti::client
