// The coordinator's half of one process set's response cache (docs/response-cache.md). A slot
// holds the spec each member announced for one tensor; a member that submits the same tensor
// again announces the slot as one bit, and the coordinator expands the bit back into that
// member's spec before negotiating as usual, so agreement is checked exactly as for a full
// announcement and a changed tensor can never run with a stale description.
//
// Slot lifecycle: free -> live (assigned to a name) -> retiring (evicted: members are told, bits
// they sent before hearing it still expand correctly) -> free once every member acknowledged the
// eviction. A slot is never reassigned while a member may still mean its old tensor.
// Single-threaded, like the negotiator that owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "proto/protocol.h"

namespace tutti::server {

class ResponseCache {
 public:
  ResponseCache(size_t members, uint32_t capacity);

  uint32_t capacity() const { return capacity_; }

  // The spec member `index` meant by announcing `slot`, or null if the slot holds none for it.
  // Counts as a use for the least-recently-used order.
  const wire::TensorSpec* Expand(size_t index, uint32_t slot);

  // Member `index` announced `spec` in full. If its name holds a live slot whose spec for that
  // member differs (a changed shape, say), the slot is evicted.
  void Observe(size_t index, const wire::TensorSpec& spec);

  // `by_member[i]` is what member i announced for a tensor that resolved without error. Returns
  // the slot that holds it (assigning a free one if the name has none), or kNone when the cache is
  // disabled or full; a full cache evicts its least recently used slot for later.
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t Assign(const std::vector<const wire::TensorSpec*>& by_member);

  // Whether every member has been sent the slot's assignment, so responses may refer to it.
  bool Published(uint32_t slot) const;
  void MarkPublished(uint32_t slot);

  // Slots evicted since the last call, in eviction order, to tell every member.
  std::vector<uint32_t> TakeEvicted();

  // Member `index` applied its first `seen` evictions; slots retired before every member did so
  // become free.
  void Acknowledge(size_t index, uint64_t seen);

  uint64_t evictions() const { return evictions_; }
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
    std::vector<std::shared_ptr<const std::string>> specs;  // serialized, by member
    std::vector<std::shared_ptr<const wire::TensorSpec>> parsed;
    bool published = false;
    bool priorities_differ = false;
    uint64_t retired_at = 0;  // eviction number
    std::list<uint32_t>::iterator lru;
  };

  void Evict(uint32_t slot);

  const size_t members_;
  const uint32_t capacity_;
  std::vector<Slot> slots_;  // grows up to capacity_
  std::vector<uint32_t> free_;
  std::unordered_map<std::string, uint32_t> by_name_;  // live slots only
  std::list<uint32_t> lru_;                            // live slots, least recent first
  std::deque<uint32_t> retiring_;                      // in eviction order
  std::vector<uint32_t> evicted_;                      // not yet told to members
  std::vector<uint64_t> seen_;                         // by member
  uint64_t evictions_ = 0;
  uint32_t priorities_differ_ = 0;  // live slots whose members' priorities differ
};

}  // namespace tutti::server
