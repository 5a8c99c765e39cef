// Credit-based flow control of an ibverbs channel (docs/transports.md, "ibverbs"), with no verbs
// in it so that it is unit-tested without a device (tests/unit/ibverbs_logic_test.cc).
//
// Each side's receive ring holds `slots` slots. A sender's RDMA write with immediate fills one
// slot of the peer's ring, so it may have at most `slots` writes that the peer has not handed
// back: each write takes a credit, and the peer returns credits once it has copied the slots
// out. Without them a fast sender would overwrite bytes the receiver has not read, since RDMA
// writes land in memory with no receiver involvement.
//
// The receiver owes the credits of the slots it freed. It hands them back in the immediate of
// its own next write when it has one to make (free), and otherwise in a zero-byte write of their
// own once `batch` are owed, so that a stream in one direction costs one credit message per
// `batch` slots. Owing fewer than `batch` never deadlocks: a sender can be out of credits only
// while all `slots` slots are written and not handed back, and a receiver that wants bytes reads
// them, and so comes to owe `batch` of them.
//
// The immediate of every write (32 bits): bits 0-23 the bytes it put into its slot (0 for a
// credit message, which fills no slot), bits 24-31 the credits it returns.
//
// Owned and used by one channel, on its thread.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace tutti::transport::ibverbs {

constexpr uint32_t kImmediateBytesBits = 24;
constexpr uint32_t kMaxImmediateBytes = (1u << kImmediateBytesBits) - 1;
constexpr uint32_t kMaxImmediateCredits = 255;

struct Immediate {
  uint32_t bytes = 0;
  uint32_t credits = 0;
};

// `bytes` <= kMaxImmediateBytes and `credits` <= kMaxImmediateCredits (checked by the callers'
// constants: a slot is smaller, and so is the ring).
uint32_t EncodeImmediate(uint32_t bytes, uint32_t credits);
Immediate DecodeImmediate(uint32_t immediate);

class CreditWindow {
 public:
  // `slots`: of each ring (at most kMaxImmediateCredits); `batch`: the credits worth a message
  // of their own (1..slots).
  CreditWindow(uint32_t slots, uint32_t batch);

  // Sending: slots of the peer's ring this side may still fill.
  uint32_t credits() const { return credits_; }
  // Takes one for a write; false when none is left (wait for the peer to return some).
  bool Take();
  // The peer handed `n` back. More than are out means a peer that is not following the protocol
  // (or memory corruption): kPeerLost, naming the numbers.
  Status Returned(uint32_t n);

  // Receiving: `n` more slots of this side's ring were copied out and may be written again.
  void Freed(uint32_t n);
  uint32_t owed() const { return owed_; }
  // The credits to hand back now, cleared from what is owed: all of them when a write goes out
  // anyway (`piggyback`), or when at least `batch` are owed; else none.
  uint32_t TakeOwed(bool piggyback);

 private:
  const uint32_t slots_;
  const uint32_t batch_;
  uint32_t credits_;   // peer's slots this side may fill
  uint32_t owed_ = 0;  // own slots freed and not yet handed back
};

}  // namespace tutti::transport::ibverbs
