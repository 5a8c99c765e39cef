#include "server/core/response_cache.h"

#include <algorithm>

namespace tutti::server {

ResponseCache::ResponseCache(size_t members, uint32_t capacity)
    : members_(members), capacity_(capacity), seen_(members, 0) {}

const wire::TensorSpec* ResponseCache::Expand(size_t index, uint32_t slot) {
  if (slot >= slots_.size()) return nullptr;
  Slot& s = slots_[slot];
  if (s.state == State::kFree || !s.parsed[index]) return nullptr;
  if (s.state == State::kLive) lru_.splice(lru_.end(), lru_, s.lru);
  return s.parsed[index].get();
}

void ResponseCache::Observe(size_t index, const wire::TensorSpec& spec) {
  auto it = by_name_.find(spec.name());
  if (it == by_name_.end()) return;
  const Slot& s = slots_[it->second];
  if (s.specs[index] && *s.specs[index] == spec.SerializeAsString()) return;
  Evict(it->second);
}

uint32_t ResponseCache::Assign(const std::vector<const wire::TensorSpec*>& by_member) {
  if (capacity_ == 0) return kNone;
  const std::string& name = by_member.front()->name();
  auto known = by_name_.find(name);
  if (known != by_name_.end()) {
    lru_.splice(lru_.end(), lru_, slots_[known->second].lru);
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
  s.specs.assign(members_, nullptr);
  s.parsed.assign(members_, nullptr);
  // Members usually announce identical specs: share one copy between them.
  for (size_t i = 0; i < members_; ++i) {
    std::string bytes = by_member[i]->SerializeAsString();
    if (i > 0 && *s.specs[i - 1] == bytes) {
      s.specs[i] = s.specs[i - 1];
      s.parsed[i] = s.parsed[i - 1];
    } else {
      s.specs[i] = std::make_shared<const std::string>(std::move(bytes));
      s.parsed[i] = std::make_shared<const wire::TensorSpec>(*by_member[i]);
    }
  }
  s.priorities_differ = std::any_of(by_member.begin(), by_member.end(), [&](const auto* spec) {
    return spec->priority() != by_member.front()->priority();
  });
  if (s.priorities_differ) ++priorities_differ_;
  s.lru = lru_.insert(lru_.end(), slot);
  by_name_[name] = slot;
  return slot;
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
  // A member cannot have applied evictions it was never sent; clamp a bogus count.
  const uint64_t told = evictions_ - evicted_.size();
  seen_[index] = std::max(seen_[index], std::min(seen, told));
  const uint64_t everyone = *std::min_element(seen_.begin(), seen_.end());
  while (!retiring_.empty() && slots_[retiring_.front()].retired_at <= everyone) {
    Slot& s = slots_[retiring_.front()];
    s.state = State::kFree;
    s.specs.clear();
    s.parsed.clear();
    free_.push_back(retiring_.front());
    retiring_.pop_front();
  }
}

}  // namespace tutti::server
