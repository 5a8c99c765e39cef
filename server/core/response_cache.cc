#include "server/core/response_cache.h"

#include <algorithm>

#include <fmt/format.h>

namespace tutti::server {

ResponseCache::ResponseCache(size_t members, uint32_t capacity)
    : members_(members), capacity_(capacity), seen_(members, 0), at_min_seen_(members) {}

const SpecRef ResponseCache::kNoSpec;

void ResponseCache::Touch(uint32_t slot) {
  Slot& s = slots_[slot];
  lru_.splice(lru_.end(), lru_, s.lru);
  s.used_in_round = round_;
}

void ResponseCache::Observe(size_t index, const AnnouncedSpec& spec) {
  auto it = by_name_.find(spec.spec.name());
  if (it == by_name_.end()) return;
  if (SpecOf(slots_[it->second], index)->bytes == spec.bytes) return;
  Evict(it->second);
}

uint32_t ResponseCache::Assign(const std::vector<const wire::TensorSpec*>& by_member) {
  std::vector<SpecRef> variants;
  std::vector<uint32_t> variant_of;
  for (size_t i = 0; i < by_member.size(); ++i) {
    auto spec = std::make_shared<const AnnouncedSpec>(*by_member[i]);
    if (variants.empty() || variants.back()->bytes != spec->bytes) variants.push_back(std::move(spec));
    variant_of.push_back(static_cast<uint32_t>(variants.size() - 1));
  }
  if (variants.size() == 1) variant_of.clear();
  return Assign(variants, variant_of);
}

uint32_t ResponseCache::Assign(const std::vector<SpecRef>& variants,
                               const std::vector<uint32_t>& variant_of) {
  if (capacity_ == 0 || variants.empty()) return kNone;
  ++round_;  // a new LRU round: every slot used from now on moves again
  const std::string& name = variants.front()->spec.name();
  auto known = by_name_.find(name);
  if (known != by_name_.end()) {
    Touch(known->second);
    return known->second;
  }
  uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else if (slots_.size() < capacity_) {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    // Full: make room for a later tensor. This one goes uncached; the evicted slot is reusable
    // only once every member has heard of the eviction.
    if (!lru_.empty()) Evict(lru_.front());
    return kNone;
  }
  Slot& s = slots_[slot];
  s.state = State::kLive;
  s.name = name;
  s.published = false;
  s.variants = variants;
  s.variant_of = variant_of;
  s.priorities_differ = std::any_of(variants.begin(), variants.end(), [&](const SpecRef& spec) {
    return spec->spec.priority() != variants.front()->spec.priority();
  });
  if (s.priorities_differ) ++priorities_differ_;
  s.lru = lru_.insert(lru_.end(), slot);
  s.used_in_round = round_;
  by_name_[name] = slot;
  return slot;
}

Status ResponseCache::Restore(size_t index, uint32_t slot, const wire::TensorSpec& spec) {
  if (slot >= capacity_ || index >= members_)
    return Status(Code::kInvalidArgument,
                  fmt::format("cache state: slot {} outside the cache of {} slots", slot, capacity_));
  while (slots_.size() <= slot) {
    free_.push_back(static_cast<uint32_t>(slots_.size()));
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  auto announced = std::make_shared<const AnnouncedSpec>(spec);
  if (s.state == State::kFree) {
    free_.erase(std::find(free_.begin(), free_.end(), slot));
    s.state = State::kLive;
    s.name = spec.name();
    s.published = true;
    s.variants = {announced};
    s.variant_of.clear();
    s.lru = lru_.insert(lru_.end(), slot);
    s.used_in_round = round_;
    by_name_[s.name] = slot;
    return Status::Ok();
  }
  if (s.state != State::kLive || s.name != spec.name())
    return Status(Code::kMismatch,
                  fmt::format("cache state: members hold slot {} as different tensors ('{}' and "
                              "'{}')", slot, s.name, spec.name()));
  if (SpecOf(s, index)->bytes == announced->bytes) return Status::Ok();
  if (s.variant_of.empty()) s.variant_of.assign(members_, 0);
  s.variants.push_back(announced);
  s.variant_of[index] = static_cast<uint32_t>(s.variants.size() - 1);
  if (!s.priorities_differ && spec.priority() != s.variants.front()->spec.priority()) {
    s.priorities_differ = true;
    ++priorities_differ_;
  }
  return Status::Ok();
}

bool ResponseCache::Published(uint32_t slot) const {
  return slot < slots_.size() && slots_[slot].state == State::kLive && slots_[slot].published;
}

void ResponseCache::MarkPublished(uint32_t slot) {
  if (slot < slots_.size() && slots_[slot].state == State::kLive) slots_[slot].published = true;
}

void ResponseCache::Evict(uint32_t slot) {
  Slot& s = slots_[slot];
  if (s.state != State::kLive) return;
  by_name_.erase(s.name);
  lru_.erase(s.lru);
  if (s.priorities_differ) --priorities_differ_;
  s.priorities_differ = false;
  s.state = State::kRetiring;
  s.retired_at = ++evictions_;
  retiring_.push_back(slot);
  evicted_.push_back(slot);
}

std::vector<uint32_t> ResponseCache::TakeEvicted() {
  std::vector<uint32_t> evicted;
  evicted.swap(evicted_);
  return evicted;
}

void ResponseCache::Acknowledge(size_t index, uint64_t seen) {
  if (index >= members_) return;
  // A member cannot have applied evictions it was never sent; clamp a bogus count.
  const uint64_t told = evictions_ - evicted_.size();
  const uint64_t now_seen = std::max(seen_[index], std::min(seen, told));
  if (now_seen == seen_[index]) return;  // the steady state: nothing new
  if (seen_[index] == min_seen_ && --at_min_seen_ == 0) {
    seen_[index] = now_seen;
    min_seen_ = *std::min_element(seen_.begin(), seen_.end());
    at_min_seen_ = static_cast<size_t>(std::count(seen_.begin(), seen_.end(), min_seen_));
    FreeAcknowledged();
    return;
  }
  seen_[index] = now_seen;
}

void ResponseCache::FreeAcknowledged() {
  while (!retiring_.empty() && slots_[retiring_.front()].retired_at <= min_seen_) {
    Slot& s = slots_[retiring_.front()];
    s.state = State::kFree;
    s.variants.clear();
    s.variant_of.clear();
    free_.push_back(retiring_.front());
    retiring_.pop_front();
    ++frees_;
  }
}

}  // namespace tutti::server
