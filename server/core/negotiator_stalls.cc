// The stall inspector: tensors some members announced and others have not, reported once past the
// warning threshold, failed past the shutdown threshold, and listed for the status page. Apart
// because it runs on tuttid's clock (Job::Tick), not on announcements, and only reads the pending
// table except when it fails a tensor. Single-threaded, like Negotiator.
#include "server/core/negotiator.h"

#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace tutti::server {

void Negotiator::Inspect(Clock::time_point now, Clock::duration warn_after,
                         Clock::duration fail_after, std::vector<Stall>* warned,
                         std::vector<Stall>* stalled, std::vector<wire::Response>* failed) {
  std::vector<std::string> expired;
  const bool warns = warn_after.count() > 0, fails = fail_after.count() > 0;
  if (!warns && !fails) return;
  const auto youngest = !warns ? fail_after : !fails ? warn_after : std::min(warn_after, fail_after);
  // pending_order_ is oldest first: stop at the first tensor too young for either check.
  for (const std::string& name : pending_order_) {
    Pending& pending = pending_.at(name);
    const auto waited = now - pending.first_announced;
    if (waited < youngest) break;
    const bool warn = warns && !pending.warned && waited >= warn_after;
    const bool fail = fails && waited >= fail_after;
    if (!warn && !fail) continue;
    Stall stall{name, {}, {}, waited};
    for (size_t i = 0; i < members_.size(); ++i)
      (Announced(pending, i) || joined_[i] ? stall.submitted : stall.missing).push_back(members_[i]);
    if (warn) {
      pending.warned = true;
      warned->push_back(stall);
    }
    if (fail) {
      expired.push_back(name);
      stalled->push_back(std::move(stall));
    }
  }
  for (size_t k = 0; k < expired.size(); ++k) {
    const Stall& stall = (*stalled)[stalled->size() - expired.size() + k];
    auto entry = pending_.find(expired[k]);
    wire::Response response;
    // Grouped tensors fail as a whole: say which group, so the held siblings fail alike.
    *response.mutable_spec() = entry->second.variants.front()->spec;
    response.mutable_spec()->set_name(expired[k]);
    SetError(&response, Code::kStalled,
             fmt::format("stalled: '{}' on process set {} waited {} s for ranks {}, which never "
                         "submitted it",
                         expired[k], set_id_,
                         std::chrono::duration<double>(fail_after).count(),
                         FormatRanks(stall.missing)));
    Forget(entry);
    if (timeline_)
      timeline_->End(track_, expired[k], "NEGOTIATE", {{"error", response.error().message()}});
    const std::string group = response.spec().group();
    if (group.empty()) {
      failed->push_back(std::move(response));
      continue;
    }
    // The group can never be whole now: fail its held siblings alike, and forget its others.
    const wire::Error error = response.error();
    failed->push_back(std::move(response));
    auto held = groups_.find(group);
    if (held != groups_.end()) {
      for (auto& r : held->second) {
        *r.mutable_error() = error;
        failed->push_back(std::move(r));
      }
      groups_.erase(held);
    }
  }
}

std::vector<Negotiator::Stall> Negotiator::Describe(Clock::time_point now, size_t limit) const {
  std::vector<Stall> pending;
  for (const std::string& name : pending_order_) {
    if (pending.size() == limit) break;
    const Pending& p = pending_.at(name);
    Stall stall{name, {}, {}, now - p.first_announced};
    for (size_t i = 0; i < members_.size(); ++i)
      (Announced(p, i) || joined_[i] ? stall.submitted : stall.missing).push_back(members_[i]);
    pending.push_back(std::move(stall));
  }
  return pending;
}

std::optional<Clock::time_point> Negotiator::NextInspection(Clock::duration warn_after,
                                                            Clock::duration fail_after) const {
  if (pending_order_.empty()) return std::nullopt;
  std::optional<Clock::time_point> next;
  if (fail_after.count() > 0) next = pending_.at(pending_order_.front()).first_announced + fail_after;
  if (warn_after.count() > 0)
    for (const std::string& name : pending_order_) {
      const Pending& pending = pending_.at(name);
      if (pending.warned) continue;
      const auto at = pending.first_announced + warn_after;
      if (!next || at < *next) next = at;
      break;
    }
  return next;
}

}  // namespace tutti::server
