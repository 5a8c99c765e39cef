// The process sets this rank knows of: the world, the static sets, and those it added (as a member
// or not). Answers the set queries of the C ABI and checks submissions. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "common/status.h"

namespace tutti::client {

class SetRegistry {
 public:
  explicit SetRegistry(int32_t self) : self_(self) {}
  // This rank's slot, once tuttid gave it (a rank added to an elastic job learns it then).
  void SetSelf(int32_t self);

  void Insert(int32_t set_id, std::vector<int32_t> sorted_ranks);
  void MarkRemoved(int32_t set_id);
  // The set re-formed (docs/elastic.md): its automatic names count from 0 again.
  void ResetAutoNames(int32_t set_id);

  // The set's sorted ranks, or kUnknownSet (never seen here, or removed).
  Status Ranks(int32_t set_id, std::vector<int32_t>* ranks) const;
  // Like Ranks, and kNotAMember if this rank is not in the set.
  Status CheckMember(int32_t set_id) const;
  // Next automatic tensor name on this set ("allreduce.<n>"), counted per set and rank.
  uint64_t NextAutoNameIndex(int32_t set_id);

 private:
  struct Entry {
    std::vector<int32_t> ranks;
    bool removed = false;
    uint64_t auto_names = 0;
  };
  Status Find(int32_t set_id, const Entry** entry) const;

  int32_t self_;
  mutable std::mutex mu_;
  std::map<int32_t, Entry> sets_;
};

}  // namespace tutti::client
