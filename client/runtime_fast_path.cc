// The runtime's side of the members' fast path (docs/steady-state.md): what a lane on it asks
// (FastPathPort), the grant's reclaim of requests whose announcements tuttid will drop, and the
// way out before a join or a removal. The book of submitted tensors lives in the coordinator
// link; the requests themselves stay in the pending table, so a failure sweeping a set finds
// them wherever they wait.
#include <nlohmann/json.hpp>

#include "client/runtime.h"
#include "proto/fusion_plan.h"

namespace tutti::client {

// The lanes outlive the link at finalize: their calls find it gone (link_mu_) and stop.
FastPathInput Runtime::Input(int32_t set_id) {
  std::lock_guard<std::mutex> lock(link_mu_);
  return link_ ? link_->FastPathInputOf(set_id) : FastPathInput{};
}

std::vector<std::vector<FusedPart>> Runtime::Take(int32_t set_id, uint64_t generation,
                                                  const std::vector<uint32_t>& slots) {
  // Planned exactly as tuttid plans a release (proto/fusion_plan.h): from specs the members
  // agreed on when the slots were assigned, so every member gets the same collectives.
  std::vector<wire::Response> released;
  std::map<std::string, AnnounceCache::Template> how;
  std::vector<CoordinatorLink::Agreed> taken;
  {
    std::lock_guard<std::mutex> lock(link_mu_);
    if (link_) taken = link_->FastPathTake(set_id, generation, slots);
  }
  for (auto& agreed : taken) {
    wire::Response response;
    response.mutable_member_rows()->Add(agreed.how.member_rows.begin(), agreed.how.member_rows.end());
    response.set_device_path(agreed.how.device_path);
    response.set_device_group(agreed.how.device_group);
    how[agreed.spec.name()] = std::move(agreed.how);
    *response.mutable_spec() = std::move(agreed.spec);
    released.push_back(std::move(response));
  }
  std::vector<std::vector<FusedPart>> works;
  const SetTuning tuning = TuningOf(set_id);
  for (const auto& response : wire::PlanCollectives(std::move(released), tuning.fusion_threshold)) {
    std::vector<const std::string*> names{&response.spec().name()};
    for (const auto& part : response.fused()) names.push_back(&part.name());
    std::vector<FusedPart> parts;
    bool missing = false;
    for (const std::string* name : names) {
      auto request = TakePending(set_id, *name);
      if (!request) {
        missing = true;
        continue;
      }
      if (timeline_.on()) {
        timeline_.End(set_id, *name, "NEGOTIATE", {{"fast_path", true}});
        timeline_.Begin(set_id, *name, "QUEUE");
      }
      const AnnounceCache::Template& t = how[*name];
      parts.push_back(FusedPart{std::move(request), t.member_rows, t.device_path, t.device_group,
                                tuning.cutoffs});
    }
    if (missing) {
      // As in OnExecute: only possible once the set is already failing.
      for (auto& part : parts)
        part.request->Complete(Status(Code::kInternal, "process set " + std::to_string(set_id) +
                                                           ": a fast-path round names a tensor this "
                                                           "rank already settled"));
      continue;
    }
    if (!parts.empty()) works.push_back(std::move(parts));
  }
  return works;
}

void Runtime::Leave(int32_t set_id, uint64_t generation, uint64_t rounds) {
  std::lock_guard<std::mutex> lock(link_mu_);
  if (link_) link_->FastPathLeave(set_id, generation, rounds);
}

void Runtime::Abandon(int32_t set_id, uint64_t generation, const Status& why) {
  std::vector<wire::TensorSpec> waiting;
  {
    std::lock_guard<std::mutex> lock(link_mu_);
    if (link_) waiting = link_->FastPathAbandon(set_id, generation);
  }
  // A peer whose connection closed is tuttid's to judge (lost, left, re-formed): its verdict fails
  // these requests with the status every member reports, as for tensors still negotiating.
  if (why.code() == Code::kPeerLost || why.code() == Code::kShutDown) return;
  for (const auto& spec : waiting) {
    auto request = TakePending(set_id, spec.name());
    if (request) request->Complete(why);
  }
}

void Runtime::WakeLane(int32_t set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto lane = lanes_.find(set_id);
  if (lane != lanes_.end()) lane->second->Wake();
}

Status Runtime::LeaveFastPath(int32_t set_id, int64_t timeout_ms) {
  if (!link_->FastPathWantSlow(set_id)) return Status::Ok();
  WakeLane(set_id);
  return link_->AwaitOffFastPath(set_id,
                                 transport::Clock::now() + std::chrono::milliseconds(timeout_ms));
}

}  // namespace tutti::client
