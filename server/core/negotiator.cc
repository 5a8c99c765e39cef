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
#include "proto/cache_bits.h"
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

bool Negotiator::Join(int32_t rank, std::vector<wire::Response>* ready, int32_t* last_joined) {
  const size_t index = IndexOf(rank);
  if (!joined_[index]) {
    joined_[index] = true;
    ++joined_count_;
    for (auto& [name, pending] : pending_)
      if (!Announced(pending, index)) ++pending.covered;
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
  // Everything pending was complete and went above: nothing is left to recount.
  for (auto& [name, pending] : pending_) pending.covered = pending.announced_count;
  return true;
}

void Negotiator::Unjoin(int32_t rank) {
  const size_t index = IndexOf(rank);
  if (index < members_.size() && joined_[index]) {
    joined_[index] = false;
    --joined_count_;
    for (auto& [name, pending] : pending_)
      if (!Announced(pending, index)) --pending.covered;
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
  return AnnounceCachedAt(IndexOf(rank), rank, slot, ready, now, name);
}

size_t Negotiator::AnnounceCachedBits(int32_t rank, const wire::SetTensors& set,
                                      std::vector<wire::Response>* ready, Clock::time_point now,
                                      const RefusedBit& refused) {
  size_t bits = 0;
  const bool member = broken_.ok() && contains(rank);
  const size_t index = member ? IndexOf(rank) : 0;
  const size_t word = index / 64;
  const uint64_t bit = uint64_t{1} << (index % 64);
  const bool covers = member && !joined_[index];
  wire::ForEachCachedSlot(set, [&](uint32_t slot) {
    ++bits;
    // The steady state, inline: the slot's entry of this step is pending (a hint is set), every
    // member announced the slot's one spec so far, and this member had not: a bit, two counts.
    // The slot's use for the LRU order is counted when the tensor completes (Assign).
    if (member && !timeline_ && slot < hints_.size()) {
      const SlotHint& hint = hints_[slot];
      if (hint.pending && !(hint.announced[word] & bit) && hint.pending->variant_of.empty()) {
        Pending& pending = *hint.pending;
        hint.announced[word] |= bit;
        ++pending.announced_count;
        if (timed() && pending.announced_count + 1 == members_.size()) pending.all_but_one = now;
        if (covers) ++pending.covered;
        if (Complete(pending))
          ReleaseIfComplete(pending_.find(pending.variants.front()->spec.name()), rank, ready);
        return;
      }
    }
    std::string name;
    const Status status = member ? AnnounceCachedAt(index, rank, slot, ready, now, &name)
                                 : AnnounceCached(rank, slot, ready, now, &name);
    if (!status.ok()) refused(slot, name, status);
  });
  return bits;
}

Status Negotiator::AnnounceCachedAt(size_t index, int32_t rank, uint32_t slot,
                                    std::vector<wire::Response>* ready, Clock::time_point now,
                                    std::string* name) {
  const SpecRef& spec = cache_.ExpandRef(index, slot);
  if (!spec)
    return Status(Code::kInvalidArgument,
                  fmt::format("rank {} announced response-cache slot {} of process set {}, which "
                              "holds no tensor of it",
                              rank, slot, set_id_));
  Status status = Record(index, rank, spec, /*cached=*/true, ready, now);
  // The first bit of a step for this slot: later ones find the entry by the slot's hint.
  auto entry = status.ok() ? pending_.find(spec->spec.name()) : pending_.end();
  if (entry != pending_.end() && entry->second.slot == kNoSlot &&
      entry->second.variants.front() == spec && cache_.uniform(slot)) {
    if (hints_.size() <= slot) hints_.resize(slot + 1);
    hints_[slot] = SlotHint{&entry->second, entry->second.announced.data()};
    entry->second.slot = slot;
  }
  if (!status.ok() && name) *name = spec->spec.name();
  return status;
}

void Negotiator::AcknowledgeEvictions(int32_t rank, uint64_t seen) {
  if (!contains(rank)) return;
  cache_.Acknowledge(IndexOf(rank), seen);
  // A freed slot may be given to another tensor: no hint may lead its bits to this one's entry.
  if (cache_.frees() != cache_frees_seen_) {
    cache_frees_seen_ = cache_.frees();
    ClearHints();
  }
}

void Negotiator::ClearHints() {
  hints_.clear();
  for (auto& [name, pending] : pending_) pending.slot = kNoSlot;
}

Status Negotiator::Announce(int32_t rank, const wire::TensorSpec& spec,
                            std::vector<wire::Response>* ready, Clock::time_point now) {
  if (!broken_.ok()) return broken_;
  auto it = std::lower_bound(members_.begin(), members_.end(), rank);
  if (it == members_.end() || *it != rank)
    return Status(Code::kNotAMember,
                  fmt::format("rank {} is not a member of process set {}", rank, set_id_));
  const size_t index = static_cast<size_t>(it - members_.begin());
  auto announced = std::make_shared<const AnnouncedSpec>(spec);
  cache_.Observe(index, *announced);
  return Record(index, rank, announced, /*cached=*/false, ready, now);
}

Status Negotiator::Record(size_t index, int32_t rank, const SpecRef& spec, bool cached,
                          std::vector<wire::Response>* ready, Clock::time_point now) {
  const std::string& name = spec->spec.name();
  auto entry = pending_.find(name);
  if (entry == pending_.end()) {
    if (pending_.size() >= kMaxPending)
      return Status(Code::kLimitExceeded,
                    fmt::format("limit exceeded: process set {} already has {} tensors waiting for "
                                "members",
                                set_id_, kMaxPending));
    if (budget_ && budget_->used >= budget_->limit)
      return Status(Code::kLimitExceeded,
                    fmt::format("limit exceeded: job '{}' already has {} tensors announced by some "
                                "members only (tuttid --max-pending-tensors); '{}' was refused",
                                budget_->job, budget_->limit, name));
    entry = pending_.try_emplace(name).first;
    Pending& pending = entry->second;
    if (budget_) ++budget_->used;
    pending.announced.assign((members_.size() + 63) / 64, 0);
    pending.covered = joined_count_;  // joined members are waited for by no one
    pending.order = pending_order_.insert(pending_order_.end(), name);
    pending.first_announced = now;
    if (timeline_) timeline_->Begin(track_, name, "NEGOTIATE", {{"first_rank", rank}});
  }
  return RecordInto(entry->second, index, rank, spec, cached, ready);
}

Status Negotiator::RecordInto(Pending& pending, size_t index, int32_t rank, const SpecRef& spec,
                              bool cached, std::vector<wire::Response>* ready) {
  const std::string& name = spec->spec.name();
  if (timeline_) timeline_->Instant(track_, "ANNOUNCED", {{"tensor", name}, {"rank", rank}});
  if (Announced(pending, index))
    return Status(Code::kDuplicateName,
                  fmt::format("rank {} announced '{}' twice on process set {}", rank, name,
                              set_id_));
  pending.announced[index / 64] |= uint64_t{1} << (index % 64);
  ++pending.announced_count;
  if (timed() && pending.announced_count + 1 == members_.size()) pending.all_but_one = Clock::now();
  if (!joined_[index]) ++pending.covered;
  // Members announce alike: the same object (a cache slot's) or the same bytes as the last
  // variant is that variant; anything else is one more, and members get their own indices.
  if (pending.variants.empty()) {
    pending.variants.push_back(spec);
  } else if (pending.variants.back() != spec && pending.variants.back()->bytes != spec->bytes) {
    pending.variants.push_back(spec);
  }
  const uint32_t variant = static_cast<uint32_t>(pending.variants.size() - 1);
  if (variant != 0 && pending.variant_of.empty()) pending.variant_of.assign(members_.size(), 0);
  if (!pending.variant_of.empty()) pending.variant_of[index] = variant;
  if (!cached) pending.all_cached = false;
  // Found by name once per tensor, when it completes, not once per member.
  if (Complete(pending)) ReleaseIfComplete(pending_.find(name), rank, ready);
  return Status::Ok();
}

void Negotiator::Forget(PendingMap::iterator entry) {
  Pending& pending = entry->second;
  if (pending.slot < hints_.size() && hints_[pending.slot].pending == &pending)
    hints_[pending.slot] = SlotHint{};
  if (budget_) --budget_->used;
  pending_order_.erase(pending.order);
  pending_.erase(entry);
}

void Negotiator::ReleaseIfComplete(PendingMap::iterator entry, int32_t last_rank,
                                   std::vector<wire::Response>* ready) {
  const Pending& pending = entry->second;
  if (!Complete(pending)) return;
  wire::Response response = Resolve(entry->first, pending);
  response.set_last_rank(last_rank);
  if (timeline_)
    timeline_->End(track_, entry->first, "NEGOTIATE",
                   {{"last_rank", last_rank},
                    {"error", wire::StatusOf(response).message()}});
  const bool everyone = pending.announced_count == members_.size();
  const bool steady = everyone && pending.all_cached && !wire::Failed(response);
  ++(steady ? released_cached_ : released_other_);
  if (!everyone) {
    response.set_partial(true);
  } else if (!wire::Failed(response)) {
    const uint32_t slot = cache_.Assign(pending.variants, pending.variant_of);
    if (slot != ResponseCache::kNone) response.set_cache_slot(slot + 1);
  }
  if (timed()) {
    const auto& spec = response.spec();
    uint64_t bytes = IsValidDType(spec.dtype()) ? ElementSize(static_cast<DType>(spec.dtype())) : 0;
    for (int64_t d : spec.shape()) bytes *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
    const Clock::time_point now = Clock::now();
    const double negotiation_s =
        std::chrono::duration<double>(now - pending.first_announced).count();
    const bool straggled = pending.all_but_one != Clock::time_point{};
    const double straggler_s =
        straggled ? std::chrono::duration<double>(now - pending.all_but_one).count() : 0.0;
    if (metrics_) {
      metrics_->Negotiated(spec.kind(), bytes, negotiation_s);
      if (set_series_ == nullptr) set_series_ = metrics_->sets().For(job_, set_id_);
      SetMetrics::Observe(set_series_, bytes, negotiation_s, straggler_s, steady);
    }
    if (stats_) {
      stats_->Negotiated(spec.kind(), bytes, negotiation_s, steady);
      // A straggler only where every member announced: a member that joined announced nothing,
      // and a set of one keeps nobody waiting.
      if (everyone && straggled && members_.size() > 1) stats_->Straggled(last_rank, straggler_s);
    }
  }
  Forget(entry);
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
  hints_.clear();
  for (auto& [name, held] : groups_)
    for (auto& response : held) {
      SetError(&response, status.code(),
               fmt::format("{} while '{}' was pending", status.message(), response.spec().name()));
      out->push_back(std::move(response));
    }
  groups_.clear();
}

}  // namespace tutti::server
