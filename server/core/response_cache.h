// The coordinator's half of one process set's response cache (docs/response-cache.md). A slot
// holds the spec each member announced for one tensor; a member that submits the same tensor
// again announces the slot as one bit, and the coordinator expands the bit back into that
// member's spec before negotiating as usual, so agreement is checked exactly as for a full
// announcement and a changed tensor can never run with a stale description.
//
// Slot lifecycle: free -> live (assigned to a name) -> retiring (evicted: members are told, bits
// they sent before hearing it still expand correctly) -> free once every member acknowledged the
// eviction. A slot is never reassigned while a member may still mean its old tensor.
//
// Cost: members of a set nearly always announce a tensor alike, so a slot keeps each distinct
// spec once (a variant) and a per-member index only when the members differ: a slot costs the
// same for 4 members as for 4,096, and expanding a bit touches the slot alone (docs/scale.md).
// Single-threaded, like the negotiator that owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "proto/protocol.h"

namespace tutti::server {

// One spec as a member announced it, with its encoding: two announcements are the same spec when
// their encodings are byte-equal. Immutable; shared by the members that announced it alike, by
// the tensor pending in the negotiator and by the cache slot that keeps it, so none of them
// outlives the others' use of it.
struct AnnouncedSpec {
  explicit AnnouncedSpec(const wire::TensorSpec& announced)
      : spec(announced), bytes(announced.SerializeAsString()) {}
  wire::TensorSpec spec;
  std::string bytes;
};
using SpecRef = std::shared_ptr<const AnnouncedSpec>;

class ResponseCache {
 public:
  ResponseCache(size_t members, uint32_t capacity);

  uint32_t capacity() const { return capacity_; }

  // The spec member `index` meant by announcing `slot`, or null (an empty reference) if the slot
  // holds none for it. Counts as a use for the least-recently-used order, which is kept per round
  // (the slots used between two assignments), so that a step's thousands of bits for one slot
  // move it once.
  inline const SpecRef& ExpandRef(size_t index, uint32_t slot);  // below: on every bit's path
  const wire::TensorSpec* Expand(size_t index, uint32_t slot) {
    const SpecRef& spec = ExpandRef(index, slot);
    return spec ? &spec->spec : nullptr;
  }

  // Member `index` announced `spec` in full. If its name holds a live slot whose spec for that
  // member differs (a changed shape, say), the slot is evicted.
  void Observe(size_t index, const AnnouncedSpec& spec);
  void Observe(size_t index, const wire::TensorSpec& spec) { Observe(index, AnnouncedSpec(spec)); }

  // What the members announced for a tensor that resolved without error: member i announced
  // `variants[variant_of[i]]`, or `variants[0]` for every member if `variant_of` is empty.
  // Returns the slot that holds it (assigning a free one if the name has none), or kNone when the
  // cache is disabled or full; a full cache evicts its least recently used slot for later.
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t Assign(const std::vector<SpecRef>& variants, const std::vector<uint32_t>& variant_of);
  // The same with one spec per member (consecutive equal ones shared).
  uint32_t Assign(const std::vector<const wire::TensorSpec*>& by_member);

  // A job resumed under a new HA leader (docs/high-availability.md): member `index` holds `slot`
  // as `spec` (its own announcement of the slot's tensor). The slot becomes live and published,
  // like one assigned and told; a member that never reports it means the first reporter's spec.
  // Fails if the slot is outside the capacity or holds another tensor's name. Evictions count
  // from zero again, as the members' do once resumed.
  Status Restore(size_t index, uint32_t slot, const wire::TensorSpec& spec);

  // Whether every member has been sent the slot's assignment, so responses may refer to it.
  bool Published(uint32_t slot) const;
  void MarkPublished(uint32_t slot);

  // Slots evicted since the last call, in eviction order, to tell every member.
  std::vector<uint32_t> TakeEvicted();

  // Member `index` applied its first `seen` evictions; slots retired before every member did so
  // become free.
  void Acknowledge(size_t index, uint64_t seen);

  uint64_t evictions() const { return evictions_; }
  // Slots freed so far (each may then hold another tensor).
  uint64_t frees() const { return frees_; }
  // Whether `slot` holds one spec for every member (it holds a tensor, and members announced it
  // byte for byte alike).
  bool uniform(uint32_t slot) const {
    return slot < slots_.size() && slots_[slot].state != State::kFree &&
           slots_[slot].variant_of.empty();
  }
  // Slot numbers in use so far (live, retiring or free): 0 .. slot_count()-1.
  uint32_t slot_count() const { return static_cast<uint32_t>(slots_.size()); }
  // Whether every live slot's members announced the same priority: the members' fast path
  // orders by their own priorities, so it needs them equal (docs/steady-state.md).
  bool priorities_agree() const { return priorities_differ_ == 0; }

 private:
  enum class State { kFree, kLive, kRetiring };
  struct Slot {
    State state = State::kFree;
    std::string name;
    // Member i announced variants[variant_of[i]]; every member variants[0] if variant_of is empty.
    std::vector<SpecRef> variants;
    std::vector<uint32_t> variant_of;
    bool published = false;
    bool priorities_differ = false;
    uint64_t retired_at = 0;  // eviction number
    std::list<uint32_t>::iterator lru;
    uint64_t used_in_round = 0;  // the LRU round it last moved to the back in
  };

  const SpecRef& SpecOf(const Slot& slot, size_t index) const {
    return slot.variants[slot.variant_of.empty() ? 0 : slot.variant_of[index]];
  }
  // Moves `slot` to the most recently used end.
  void Touch(uint32_t slot);
  void Evict(uint32_t slot);
  // Frees the retired slots every member has acknowledged.
  void FreeAcknowledged();

  const size_t members_;
  const uint32_t capacity_;
  std::vector<Slot> slots_;  // grows up to capacity_
  std::vector<uint32_t> free_;
  std::unordered_map<std::string, uint32_t> by_name_;  // live slots only
  std::list<uint32_t> lru_;                            // live slots, least recent first
  std::deque<uint32_t> retiring_;                      // in eviction order
  std::vector<uint32_t> evicted_;                      // not yet told to members
  std::vector<uint64_t> seen_;                         // by member
  // The smallest of seen_ and how many members are at it: an acknowledgement costs O(1), and the
  // minimum is searched again only once the last member at it moved on.
  uint64_t min_seen_ = 0;
  size_t at_min_seen_;
  uint64_t round_ = 1;  // LRU rounds: one per assignment
  uint64_t evictions_ = 0;
  uint64_t frees_ = 0;
  uint32_t priorities_differ_ = 0;  // live slots whose members' priorities differ
  static const SpecRef kNoSpec;
};

const SpecRef& ResponseCache::ExpandRef(size_t index, uint32_t slot) {
  if (slot >= slots_.size() || index >= members_) return kNoSpec;
  Slot& s = slots_[slot];
  if (s.state == State::kFree) return kNoSpec;
  if (s.state == State::kLive && s.used_in_round != round_) Touch(slot);
  return SpecOf(s, index);
}

}  // namespace tutti::server
