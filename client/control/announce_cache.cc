#include "client/control/announce_cache.h"

#include <algorithm>

#include "proto/cache_bits.h"

namespace tutti::client {

void AnnounceCache::Add(int32_t set_id, wire::TensorSpec spec) {
  SetState& set = sets_[set_id];
  ++queued_;
  set.outstanding[spec.name()] = {set.next_order++, spec};
  std::string bytes = spec.SerializeAsString();
  auto known = set.by_name.find(spec.name());
  if (known != set.by_name.end()) {
    const Entry& entry = *set.slots[known->second];
    if (entry.spec && *entry.spec == bytes) {
      set.bits.push_back(known->second);
      return;
    }
  }
  // In full: the coordinator compares it with the slot's spec and evicts the slot if it changed.
  set.awaiting[spec.name()] = std::move(bytes);
  set.full.push_back(std::move(spec));
}

std::optional<uint32_t> AnnounceCache::Lookup(int32_t set_id, const wire::TensorSpec& spec) const {
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return std::nullopt;
  const SetState& set = it->second;
  auto known = set.by_name.find(spec.name());
  if (known == set.by_name.end()) return std::nullopt;
  const Entry& entry = *set.slots[known->second];
  if (!entry.spec || *entry.spec != spec.SerializeAsString()) return std::nullopt;
  return known->second;
}

const AnnounceCache::Template* AnnounceCache::TemplateOf(int32_t set_id, uint32_t slot) const {
  auto it = sets_.find(set_id);
  if (it == sets_.end() || slot >= it->second.slots.size() || !it->second.slots[slot]) return nullptr;
  return &it->second.slots[slot]->last;
}

std::vector<wire::TensorSpec> AnnounceCache::TakeOutstanding(int32_t set_id) {
  std::vector<wire::TensorSpec> taken;
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return taken;
  SetState& set = it->second;
  queued_ -= set.full.size() + set.bits.size();
  set.full.clear();
  set.bits.clear();
  std::vector<std::pair<uint64_t, wire::TensorSpec>> ordered;
  for (auto& [name, entry] : set.outstanding) ordered.push_back(std::move(entry));
  set.outstanding.clear();
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, spec] : ordered) taken.push_back(std::move(spec));
  return taken;
}

void AnnounceCache::MarkExit(int32_t set_id, uint64_t generation, uint64_t rounds) {
  SetState& set = sets_[set_id];
  if (set.exit_generation == 0) ++queued_;  // the exit leaves even with no tensor
  set.exit_generation = generation;
  set.exit_rounds = rounds;
}

void AnnounceCache::AskAutotune(int32_t set_id) {
  SetState& set = sets_[set_id];
  if (!set.autotune) ++queued_;  // the ask leaves even with no tensor
  set.autotune = true;
}

AnnounceCache::Drained AnnounceCache::Drain(wire::Announce* announce) {
  Drained drained;
  for (auto& [set_id, set] : sets_) {
    if (set.full.empty() && set.bits.empty() && set.exit_generation == 0 && !set.autotune)
      continue;
    auto* out = announce->add_sets();
    out->set_set_id(set_id);
    out->set_evictions_seen(set.evictions_seen);
    if (set.exit_generation != 0) {
      out->set_fast_path_exit(set.exit_generation);
      out->set_fast_path_rounds(set.exit_rounds);
      set.exit_generation = set.exit_rounds = 0;
    }
    if (set.autotune) out->set_autotune(true);
    set.autotune = false;
    drained.full += set.full.size();
    drained.cached += set.bits.size();
    for (auto& spec : set.full) *out->add_tensors() = std::move(spec);
    set.full.clear();
    wire::EncodeCacheBits(set.bits, out);
    set.bits.clear();
  }
  queued_ = 0;
  return drained;
}

Status AnnounceCache::Settle(SetState& set, int32_t set_id, std::string* name, uint32_t cache_slot,
                             bool full, Template how) {
  if (!full) {
    if (cache_slot == 0) return Status::Ok();  // an error response naming no tensor: nothing to do
    const uint32_t slot = cache_slot - 1;
    if (slot >= set.slots.size() || !set.slots[slot])
      return Status(Code::kInternal, "the coordinator referred to response-cache slot " +
                                         std::to_string(slot) + " of process set " +
                                         std::to_string(set_id) + ", which this rank does not hold");
    Entry& entry = *set.slots[slot];
    *name = entry.name;
    entry.last = std::move(how);
    // Announced in full although cached (it had joined before, say): its spec is now known.
    auto awaited = set.awaiting.find(entry.name);
    if (awaited != set.awaiting.end()) {
      if (!entry.spec) entry.spec = std::move(awaited->second);
      set.awaiting.erase(awaited);
    }
    return Status::Ok();
  }
  std::optional<std::string> spec;
  auto awaited = set.awaiting.find(*name);
  if (awaited != set.awaiting.end()) {
    spec = std::move(awaited->second);
    set.awaiting.erase(awaited);
  }
  if (cache_slot == 0) return Status::Ok();
  const uint32_t slot = cache_slot - 1;
  if (slot >= set.slots.size()) set.slots.resize(slot + 1);
  set.slots[slot] = Entry{*name, std::move(spec), std::move(how)};
  set.by_name[*name] = slot;
  return Status::Ok();
}

Status AnnounceCache::Apply(wire::Execute* execute) {
  SetState& set = sets_[execute->set_id()];
  for (auto& response : *execute->mutable_responses()) {
    const bool full = response.has_spec();
    auto how = [&](const google::protobuf::RepeatedField<int64_t>& rows) {
      return Template{{rows.begin(), rows.end()}, response.device_path(), response.device_group()};
    };
    TUTTI_RETURN_IF_ERROR(Settle(set, execute->set_id(), response.mutable_spec()->mutable_name(),
                                 response.cache_slot(), full, how(response.member_rows())));
    set.outstanding.erase(response.spec().name());
    for (auto& part : *response.mutable_fused()) {
      TUTTI_RETURN_IF_ERROR(Settle(set, execute->set_id(), part.mutable_name(), part.cache_slot(),
                                   !part.name().empty(), how(part.member_rows())));
      set.outstanding.erase(part.name());
    }
  }
  for (uint32_t slot : execute->cache_evicted()) {
    if (slot < set.slots.size() && set.slots[slot]) {
      // A changed spec evicts the name's old slot in the Execute that assigns its new one: the
      // name stays with the new slot, or it would be announced in full for ever after.
      auto named = set.by_name.find(set.slots[slot]->name);
      if (named != set.by_name.end() && named->second == slot) set.by_name.erase(named);
      set.slots[slot].reset();
    }
    ++set.evictions_seen;
  }
  return Status::Ok();
}

void AnnounceCache::Forget(int32_t set_id, const std::string& name) {
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return;
  it->second.awaiting.erase(name);
  it->second.outstanding.erase(name);
}

void AnnounceCache::DropSet(int32_t set_id) {
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return;
  const SetState& set = it->second;
  queued_ -= set.full.size() + set.bits.size() + (set.exit_generation != 0) + set.autotune;
  sets_.erase(it);
}

std::vector<int32_t> AnnounceCache::SetIds() const {
  std::vector<int32_t> ids;
  for (const auto& [id, set] : sets_) ids.push_back(id);
  return ids;
}

wire::CacheState AnnounceCache::Snapshot(int32_t set_id) const {
  wire::CacheState state;
  state.set_set_id(set_id);
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return state;
  const SetState& set = it->second;
  for (uint32_t slot = 0; slot < set.slots.size(); ++slot) {
    if (!set.slots[slot]) continue;
    const Entry& entry = *set.slots[slot];
    auto* cached = state.add_slots();
    cached->set_slot(slot);
    if (entry.spec) cached->mutable_spec()->ParseFromString(*entry.spec);
    else cached->set_joined(true);
    cached->mutable_spec()->set_name(entry.name);
  }
  return state;
}

void AnnounceCache::Requeue(int32_t set_id) {
  auto it = sets_.find(set_id);
  if (it == sets_.end()) return;
  SetState& set = it->second;
  queued_ -= set.full.size() + set.bits.size();
  set.full.clear();
  set.bits.clear();
  set.awaiting.clear();
  set.evictions_seen = 0;
  std::vector<std::pair<uint64_t, wire::TensorSpec>> ordered;
  for (auto& [name, entry] : set.outstanding) ordered.push_back(std::move(entry));
  set.outstanding.clear();
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, spec] : ordered) Add(set_id, std::move(spec));
}

}  // namespace tutti::client
