// The receiving side of an ibverbs channel's ring, with no verbs in it (unit-tested without a
// device): which slots the peer's RDMA writes filled, in the order they landed, and how far each
// has been copied out. A reliable-connected queue pair delivers writes in order, so the k-th
// write that carried bytes always went to slot k mod `slots`; only its length travels, in the
// immediate (transport/ibverbs/credit_window.h).
//
// Owned and used by one channel, on its thread. The ring's memory is the channel's; this class
// only reads it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace tutti::transport::ibverbs {

class InboundSlots {
 public:
  // `base`: `slots` slots of `slot_bytes` each, where the peer writes.
  InboundSlots(const char* base, uint32_t slots, uint32_t slot_bytes)
      : base_(base), slots_(slots), slot_bytes_(slot_bytes) {}

  // The next slot received a write of `bytes` (1..slot_bytes). A write with no free slot, or
  // longer than a slot, means the peer ignored its credits: kPeerLost naming it.
  Status Arrived(uint32_t bytes);

  // Copies up to `len` bytes out, oldest first, across slots; returns how many. `*freed`: the
  // slots it emptied, whose credits are now owed to the peer.
  size_t Read(char* out, size_t len, uint32_t* freed);

  // Bytes that arrived and were not read yet.
  size_t readable() const { return readable_; }
  // Slots holding bytes not read yet.
  uint32_t filled() const { return filled_; }

 private:
  const char* base_;
  const uint32_t slots_;
  const uint32_t slot_bytes_;
  uint32_t lengths_[256] = {};  // bytes in each filled slot (slots <= 255, the immediate's limit)
  uint32_t head_ = 0;           // the oldest filled slot
  uint32_t filled_ = 0;
  uint32_t offset_ = 0;         // bytes of the oldest slot already read
  size_t readable_ = 0;
};

}  // namespace tutti::transport::ibverbs
