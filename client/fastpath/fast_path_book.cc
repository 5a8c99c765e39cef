#include "client/fastpath/fast_path_book.h"

#include <algorithm>

namespace tutti::client {

uint64_t FastPathBook::generation(int32_t set_id) const {
  auto it = sets_.find(set_id);
  return it == sets_.end() ? 0 : it->second.generation;
}

void FastPathBook::Enter(int32_t set_id, uint64_t generation, uint32_t slots) {
  SetState& set = sets_[set_id];
  set = SetState{};
  set.generation = generation;
  set.slots = slots;
}

void FastPathBook::Add(int32_t set_id, wire::TensorSpec spec, std::optional<uint32_t> slot,
                       FastPathClock::time_point now) {
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return;
  SetState& set = it->second;
  if (!set.names.emplace(spec.name(), set.next_order++).second) return;
  ++set.changes;
  // A slot the grant did not cover was assigned after it: impossible while tuttid releases
  // nothing for the set, but then the tensor goes to tuttid rather than into a round.
  if (slot && *slot >= set.slots) slot.reset();
  Submitted submitted{std::move(spec), slot, now};
  if (slot)
    set.cached.emplace(*slot, std::move(submitted));
  else
    set.full.push_back(std::move(submitted));
}

void FastPathBook::WantSlow(int32_t set_id) {
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return;
  it->second.slow = true;
  ++it->second.changes;
}

FastPathInput FastPathBook::Input(int32_t set_id) const {
  FastPathInput input;
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return input;
  const SetState& set = it->second;
  input.generation = set.generation;
  input.slots = set.slots;
  input.bitmap.assign((set.slots + 7) / 8, 0);
  for (const auto& [slot, submitted] : set.cached) {
    input.bitmap[slot / 8] |= static_cast<uint8_t>(1u << (slot % 8));
    if (!input.oldest || submitted.at < *input.oldest) input.oldest = submitted.at;
  }
  input.slow = set.slow || !set.full.empty();
  input.changes = set.changes;
  return input;
}

std::vector<FastPathBook::Submitted> FastPathBook::Take(int32_t set_id,
                                                        const std::vector<uint32_t>& slots) {
  std::vector<Submitted> taken;
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return taken;
  SetState& set = it->second;
  for (uint32_t slot : slots) {
    auto entry = set.cached.find(slot);
    if (entry == set.cached.end()) continue;  // the caller sees a tensor missing
    set.names.erase(entry->second.spec.name());
    taken.push_back(std::move(entry->second));
    set.cached.erase(entry);
  }
  return taken;
}

std::vector<FastPathBook::Submitted> FastPathBook::Leave(int32_t set_id) {
  std::vector<Submitted> left;
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return left;
  SetState& set = it->second;
  std::vector<std::pair<uint64_t, Submitted>> ordered;
  for (auto& [slot, submitted] : set.cached) {
    const uint64_t order = set.names[submitted.spec.name()];
    ordered.emplace_back(order, std::move(submitted));
  }
  for (auto& submitted : set.full) {
    const uint64_t order = set.names[submitted.spec.name()];
    ordered.emplace_back(order, std::move(submitted));
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, submitted] : ordered) left.push_back(std::move(submitted));
  sets_.erase(it);
  return left;
}

}  // namespace tutti::client
