// The link's side of the members' fast path (docs/steady-state.md): the book of each set on it,
// kept under the link's mutex together with the response cache and the announcement queue, so
// that a submission goes either to tuttid or into the book however it races the grant and the
// exit. The grant itself is applied in link_dispatch.cc, the routing of a submission in
// CoordinatorLink::Announce.
#include "client/control/coordinator_link.h"

namespace tutti::client {

FastPathInput CoordinatorLink::FastPathInputOf(int32_t set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return fast_.Input(set_id);
}

std::vector<CoordinatorLink::Agreed> CoordinatorLink::FastPathTake(
    int32_t set_id, uint64_t generation, const std::vector<uint32_t>& slots) {
  std::vector<Agreed> agreed;
  std::lock_guard<std::mutex> lock(mu_);
  if (fast_.generation(set_id) != generation) return agreed;
  for (auto& submitted : fast_.Take(set_id, slots)) {
    const AnnounceCache::Template* how = announced_.TemplateOf(set_id, *submitted.slot);
    agreed.push_back(Agreed{std::move(submitted.spec), how ? *how : AnnounceCache::Template{}});
  }
  return agreed;
}

void CoordinatorLink::FastPathLeave(int32_t set_id, uint64_t generation, uint64_t rounds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation == 0 || fast_.generation(set_id) != generation) return;
    if (announced_.empty()) first_queued_ = transport::Clock::now();
    announced_.MarkExit(set_id, generation, rounds);
    auto unconfirmed = autotune_unconfirmed_.find(set_id);
    if (unconfirmed != autotune_unconfirmed_.end()) {
      announced_.AskAutotune(set_id);
      unconfirmed->second = true;
    }
    // In submission order, as bits where the cache still holds them: tuttid negotiates them as
    // if they had just been submitted.
    for (auto& submitted : fast_.Leave(set_id)) announced_.Add(set_id, std::move(submitted.spec));
  }
  fast_cv_.notify_all();
  Wake();
}

std::vector<wire::TensorSpec> CoordinatorLink::FastPathAbandon(int32_t set_id,
                                                              uint64_t generation) {
  std::vector<wire::TensorSpec> waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != 0 && fast_.generation(set_id) != generation) return waiting;
    for (auto& submitted : fast_.Leave(set_id)) waiting.push_back(std::move(submitted.spec));
  }
  fast_cv_.notify_all();
  return waiting;
}

bool CoordinatorLink::FastPathWantSlow(int32_t set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!fast_.on(set_id)) return false;
  fast_.WantSlow(set_id);
  return true;
}

bool CoordinatorLink::AskAutotune(int32_t set_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    autotune_asked_.insert(set_id);
    autotune_unconfirmed_.emplace(set_id, false);
    if (fast_.on(set_id)) {
      fast_.WantSlow(set_id);
      return true;
    }
    if (announced_.empty()) first_queued_ = transport::Clock::now();
    announced_.AskAutotune(set_id);
  }
  Wake();
  return false;
}

bool CoordinatorLink::AskWhenGranted(int32_t set_id, std::string* warning) {
  auto unconfirmed = autotune_unconfirmed_.find(set_id);
  if (unconfirmed == autotune_unconfirmed_.end()) return false;
  if (!unconfirmed->second) return true;  // granted before tuttid read the ask
  // An exit carried the ask and tuttid granted again without tuning values: it does not know
  // the ask (a 0.12 tuttid speaks this protocol too). Leaving every grant would cost a round per
  // step for nothing.
  autotune_unconfirmed_.erase(unconfirmed);
  *warning = "process set " + std::to_string(set_id) + ": tuttid at " + endpoint_ +
             " did not take up the autotuning ask (tutti_process_set_autotune needs tuttid 0.13 "
             "or later); the set is not tuned";
  return false;
}

Status CoordinatorLink::AwaitOffFastPath(int32_t set_id, transport::Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!fast_cv_.wait_until(lock, deadline, [&] { return !fast_.on(set_id) || !dead_.ok(); }))
    return Status(Code::kTimeout, "timed out waiting for the members of process set " +
                                      std::to_string(set_id) + " to leave its fast path");
  return dead_;
}

}  // namespace tutti::client
