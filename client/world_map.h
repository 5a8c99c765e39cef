// The world as the application numbers it, over the slots the runtime works in (docs/elastic.md).
// A rank's slot is its rank in the job's first membership epoch and never changes: routes, lanes,
// point-to-point streams, the set registry and every frame to and from tuttid use slots. When an
// elastic job re-forms, the live slots are renumbered 0..n-1 in their order, and this map is the
// one place that translates between the two. Outside elastic jobs it stays the identity.
// Thread-safe: the I/O thread replaces the map while application threads translate.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "common/status.h"

namespace tutti::client {

class WorldMap {
 public:
  // Horovod's local and cross ranks of this rank.
  struct Placement {
    int32_t local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  };

  WorldMap(int32_t size, uint64_t membership_epoch, Placement placement);

  // The job re-formed: `live_slots` (ascending) are ranks 0..n-1 of `membership_epoch`.
  void Reform(std::vector<int32_t> live_slots, uint64_t membership_epoch, Placement placement);

  int32_t size() const;
  uint64_t membership_epoch() const;
  Placement placement() const;
  // The rank of `slot` now; -1 for a slot that left.
  int32_t RankOf(int32_t slot) const;
  // The slot of rank `rank` now; -1 outside [0, size()).
  int32_t SlotOf(int32_t rank) const;
  // Slots -> ranks, in order (slots that left are dropped).
  std::vector<int32_t> ToRanks(const std::vector<int32_t>& slots) const;
  // Ranks -> slots; kInvalidArgument naming the ranks outside the world, as tuttid would.
  Status ToSlots(const std::vector<int32_t>& ranks, std::vector<int32_t>* slots) const;

 private:
  mutable std::mutex mu_;
  std::vector<int32_t> slots_;  // by rank
  uint64_t membership_epoch_;
  Placement placement_;
};

}  // namespace tutti::client
