// The response cache's bits on the wire (docs/response-cache.md): a rank announces a tensor whose
// spec tuttid already holds in cache slot s as one bit of `SetTensors.cached`, bit i of byte j
// naming slot `cached_base + 8 * j + i`. The one encoder (the rank's announce cache) and the one
// decoder (tuttid's announce handling) of that format: compaction (the base is the lowest slot
// rounded down to a byte, the bitmap ends at the highest slot) is decided here and nowhere else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tutti.pb.h"

namespace tutti::wire {

// Sets `out`'s cached bits to exactly `slots` (any order, no duplicates needed); none: cleared.
inline void EncodeCacheBits(const std::vector<uint32_t>& slots, SetTensors* out) {
  if (slots.empty()) {
    out->clear_cached();
    out->clear_cached_base();
    return;
  }
  const auto [low, high] = std::minmax_element(slots.begin(), slots.end());
  const uint32_t base = *low / 8 * 8;
  std::string bitmap((*high - base) / 8 + 1, '\0');
  for (uint32_t slot : slots) {
    char& byte = bitmap[(slot - base) / 8];
    byte = static_cast<char>(byte | (1 << ((slot - base) % 8)));
  }
  out->set_cached_base(base);
  out->set_cached(std::move(bitmap));
}

// Calls `fn(slot)` for every slot whose bit is set, in ascending order.
template <typename Fn>
void ForEachCachedSlot(const SetTensors& set, Fn&& fn) {
  const std::string& bits = set.cached();
  for (size_t byte = 0; byte < bits.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit)
      if (static_cast<unsigned char>(bits[byte]) & (1u << bit))
        fn(set.cached_base() + static_cast<uint32_t>(8 * byte + bit));
}

}  // namespace tutti::wire
