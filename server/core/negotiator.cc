// The core of a set's negotiation: members' announcements (full or from the response cache)
// collected per tensor, released in order once complete, held back while their group is partial,
// failed when the set breaks or is removed. How a complete tensor resolves is elsewhere: spec
// agreement in negotiator_agreement.cc, the device path in negotiator_device_path.cc; stalls are
// inspected in negotiator_stalls.cc. Single-threaded.
#include "server/core/negotiator.h"

#include <algorithm>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/dtype.h"
#include "proto/status_codec.h"
#include "server/core/service_metrics.h"

namespace tutti::server {

void Negotiator::SetError(wire::Response* response, Code code, const std::string& message) {
  wire::ToWire(Status(code, message), response->mutable_error());
}

Negotiator::Negotiator(int32_t set_id, std::vector<int32_t> members, uint32_t cache_capacity,
                       const std::vector<std::string>& hosts)
    : set_id_(set_id),
      members_(std::move(members)),
      joined_(members_.size(), false),
      cache_(members_.size(), cache_capacity),
      host_of_(members_.size(), 0),
      host_names_(members_.size()) {
  if (hosts.size() != members_.size()) return;  // one host
  std::unordered_map<std::string, uint32_t> first_on;
  for (size_t i = 0; i < members_.size(); ++i) {
    host_of_[i] = first_on.try_emplace(hosts[i], static_cast<uint32_t>(i)).first->second;
    // The identity is "hostname/boot id/netns:inode": the name is what an operator knows.
    host_names_[i] = hosts[i].substr(0, hosts[i].find('/'));
  }
}

size_t Negotiator::IndexOf(int32_t rank) const {
  return static_cast<size_t>(std::lower_bound(members_.begin(), members_.end(), rank) -
                             members_.begin());
}

bool Negotiator::Complete(const Pending& pending) const {
  for (size_t i = 0; i < members_.size(); ++i)
    if (!joined_[i] && !pending.by_member[i]) return false;
  return true;
}

bool Negotiator::Join(int32_t rank, std::vector<wire::Response>* ready, int32_t* last_joined) {
  const size_t index = static_cast<size_t>(std::lower_bound(members_.begin(), members_.end(), rank) -
                                           members_.begin());
  if (!joined_[index]) {
    joined_[index] = true;
    ++joined_count_;
  }
  // Tensors that only waited for this rank go now, in first-announced order.
  std::vector<std::string> names(pending_order_.begin(), pending_order_.end());
  for (const auto& name : names) {
    auto entry = pending_.find(name);
    if (entry != pending_.end()) ReleaseIfComplete(entry, rank, ready);
  }
  if (joined_count_ < members_.size()) return false;
  *last_joined = rank;
  std::fill(joined_.begin(), joined_.end(), false);
  joined_count_ = 0;
  return true;
}

void Negotiator::Unjoin(int32_t rank) {
  const size_t index = static_cast<size_t>(std::lower_bound(members_.begin(), members_.end(), rank) -
                                           members_.begin());
  if (index < members_.size() && joined_[index]) {
    joined_[index] = false;
    --joined_count_;
  }
}

bool Negotiator::contains(int32_t rank) const {
  return std::binary_search(members_.begin(), members_.end(), rank);
}

void Negotiator::Break(const Status& status, std::vector<wire::Response>* out) {
  if (!broken_.ok()) return;
  FailPending(status, out);
  broken_ = status;
}

Status Negotiator::AnnounceCached(int32_t rank, uint32_t slot, std::vector<wire::Response>* ready,
                                  Clock::time_point now, std::string* name) {
  if (!broken_.ok()) return broken_;
  if (!contains(rank))
    return Status(Code::kNotAMember,
                  fmt::format("rank {} is not a member of process set {}", rank, set_id_));
  const wire::TensorSpec* spec = cache_.Expand(IndexOf(rank), slot);
  if (spec == nullptr)
    return Status(Code::kInvalidArgument,
                  fmt::format("rank {} announced response-cache slot {} of process set {}, which "
                              "holds no tensor of it",
                              rank, slot, set_id_));
  if (name) *name = spec->name();
  return Record(rank, *spec, /*cached=*/true, ready, now);
}

void Negotiator::AcknowledgeEvictions(int32_t rank, uint64_t seen) {
  if (contains(rank)) cache_.Acknowledge(IndexOf(rank), seen);
}

Status Negotiator::Announce(int32_t rank, const wire::TensorSpec& spec,
                            std::vector<wire::Response>* ready, Clock::time_point now) {
  if (!broken_.ok()) return broken_;
  auto it = std::lower_bound(members_.begin(), members_.end(), rank);
  if (it == members_.end() || *it != rank)
    return Status(Code::kNotAMember,
                  fmt::format("rank {} is not a member of process set {}", rank, set_id_));
  cache_.Observe(static_cast<size_t>(it - members_.begin()), spec);
  return Record(rank, spec, /*cached=*/false, ready, now);
}

Status Negotiator::Record(int32_t rank, const wire::TensorSpec& spec, bool cached,
                          std::vector<wire::Response>* ready, Clock::time_point now) {
  const size_t index = IndexOf(rank);

  if (!pending_.count(spec.name())) {
    if (pending_.size() >= kMaxPending)
      return Status(Code::kLimitExceeded,
                    fmt::format("limit exceeded: process set {} already has {} tensors waiting for "
                                "members",
                                set_id_, kMaxPending));
    if (budget_ && budget_->used >= budget_->limit)
      return Status(Code::kLimitExceeded,
                    fmt::format("limit exceeded: job '{}' already has {} tensors announced by some "
                                "members only (tuttid --max-pending-tensors); '{}' was refused",
                                budget_->job, budget_->limit, spec.name()));
  }
  auto [entry, fresh] = pending_.try_emplace(spec.name());
  Pending& pending = entry->second;
  if (fresh) {
    if (budget_) ++budget_->used;
    pending.by_member.resize(members_.size());
    pending.order = pending_order_.insert(pending_order_.end(), spec.name());
    pending.first_announced = now;
    if (timeline_) timeline_->Begin(track_, spec.name(), "NEGOTIATE", {{"first_rank", rank}});
  }
  if (timeline_) timeline_->Instant(track_, "ANNOUNCED", {{"tensor", spec.name()}, {"rank", rank}});
  if (pending.by_member[index])
    return Status(Code::kDuplicateName,
                  fmt::format("rank {} announced '{}' twice on process set {}", rank, spec.name(),
                              set_id_));
  pending.by_member[index] = spec;
  if (!cached) pending.all_cached = false;
  ReleaseIfComplete(entry, rank, ready);
  return Status::Ok();
}

void Negotiator::ReleaseIfComplete(std::unordered_map<std::string, Pending>::iterator entry,
                                   int32_t last_rank, std::vector<wire::Response>* ready) {
  if (!Complete(entry->second)) return;
  const auto& members = entry->second.by_member;
  wire::Response response = Resolve(entry->first, entry->second);
  response.set_last_rank(last_rank);
  if (timeline_)
    timeline_->End(track_, entry->first, "NEGOTIATE",
                   {{"last_rank", last_rank},
                    {"error", wire::StatusOf(response).message()}});
  const bool everyone = std::all_of(members.begin(), members.end(),
                                    [](const auto& s) { return s.has_value(); });
  const bool steady = everyone && entry->second.all_cached && !wire::Failed(response);
  ++(steady ? released_cached_ : released_other_);
  if (!everyone) {
    response.set_partial(true);
  } else if (!wire::Failed(response)) {
    std::vector<const wire::TensorSpec*> specs;
    for (const auto& s : members) specs.push_back(&*s);
    const uint32_t slot = cache_.Assign(specs);
    if (slot != ResponseCache::kNone) response.set_cache_slot(slot + 1);
  }
  if (metrics_) {
    const auto& spec = response.spec();
    uint64_t bytes = IsValidDType(spec.dtype()) ? ElementSize(static_cast<DType>(spec.dtype())) : 0;
    for (int64_t d : spec.shape()) bytes *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
    metrics_->Negotiated(spec.kind(), bytes,
                         std::chrono::duration<double>(Clock::now() - entry->second.first_announced)
                             .count());
  }
  if (budget_) --budget_->used;
  pending_order_.erase(entry->second.order);
  pending_.erase(entry);
  Release(std::move(response), ready);
}

void Negotiator::Release(wire::Response response, std::vector<wire::Response>* ready) {
  if (response.spec().group().empty()) {
    ready->push_back(std::move(response));
    return;
  }
  // A group leaves only whole, in index order; one failed tensor fails them all alike.
  const std::string name = response.spec().group();
  const int32_t size = response.spec().group_size();
  auto& group = groups_[name];
  group.push_back(std::move(response));
  if (static_cast<int32_t>(group.size()) < size) return;
  std::sort(group.begin(), group.end(), [](const wire::Response& a, const wire::Response& b) {
    return a.spec().group_index() < b.spec().group_index();
  });
  const wire::Response* failed = nullptr;
  for (const auto& r : group)
    if (wire::Failed(r) && !failed) failed = &r;
  const wire::Error error = failed ? failed->error() : wire::Error();
  for (auto& r : group) {
    if (failed) *r.mutable_error() = error;
    ready->push_back(std::move(r));
  }
  groups_.erase(name);
}

void Negotiator::FailPending(const Status& status, std::vector<wire::Response>* out) {
  for (const std::string& name : pending_order_) {
    if (timeline_) timeline_->End(track_, name, "NEGOTIATE", {{"error", status.message()}});
    wire::Response response;
    response.mutable_spec()->set_name(name);
    SetError(&response, status.code(),
             fmt::format("{} while '{}' was pending", status.message(), name));
    out->push_back(std::move(response));
  }
  if (budget_) budget_->used -= pending_.size();
  pending_.clear();
  pending_order_.clear();
  for (auto& [name, held] : groups_)
    for (auto& response : held) {
      SetError(&response, status.code(),
               fmt::format("{} while '{}' was pending", status.message(), response.spec().name()));
      out->push_back(std::move(response));
    }
  groups_.clear();
}

}  // namespace tutti::server
