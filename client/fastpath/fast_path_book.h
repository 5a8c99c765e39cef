// The rank's side of its sets' fast paths (docs/steady-state.md): for each set tuttid put on its
// members' fast path, the tensors this rank submitted since and has not run yet. A submitted
// tensor whose spec the response cache holds unchanged waits as its cache slot, for the members'
// next round to agree on; anything else (a new or changed tensor) makes this rank ask its
// members to leave the fast path at that round, and then goes to tuttid.
//
// Not thread-safe: the coordinator link guards it with its mutex, together with the response
// cache and the queue of announcements, so that a submission goes either to tuttid or to the
// fast path, never both and never neither, however it races the grant and the exit.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "proto/protocol.h"

namespace tutti::client {

using FastPathClock = std::chrono::steady_clock;

// What this rank brings to its set's next round.
struct FastPathInput {
  uint64_t generation = 0;      // 0: the set is not on the fast path
  uint32_t slots = 0;           // the round's bitmaps cover slots 0 .. slots-1
  std::vector<uint8_t> bitmap;  // bit s: the tensor of slot s was submitted here
  bool slow = false;            // this rank needs tuttid: the members leave after this round
  std::optional<FastPathClock::time_point> oldest;  // when the oldest waiting tensor came
  uint64_t changes = 0;         // grows with every submission and request to leave
};

class FastPathBook {
 public:
  struct Submitted {
    wire::TensorSpec spec;
    std::optional<uint32_t> slot;  // none: announced in full once the set leaves
    FastPathClock::time_point at;
  };

  bool on(int32_t set_id) const { return sets_.count(set_id) > 0; }
  uint64_t generation(int32_t set_id) const;

  // The set's Execute put it on the fast path (`slots`: Execute.fast_path_slots).
  void Enter(int32_t set_id, uint64_t generation, uint32_t slots);
  // A tensor submitted while the set is on it; ignored if one of that name waits already (a
  // request taken back at the grant may also be resubmitted by the race it lost).
  void Add(int32_t set_id, wire::TensorSpec spec, std::optional<uint32_t> slot,
           FastPathClock::time_point now);
  // This rank needs tuttid for the set (a join, a removal): the next round leaves.
  void WantSlow(int32_t set_id);

  FastPathInput Input(int32_t set_id) const;
  // The round agreed on `slots`: their tensors, removed from the book, in the order of `slots`.
  std::vector<Submitted> Take(int32_t set_id, const std::vector<uint32_t>& slots);
  // The set leaves the fast path: everything still waiting, in submission order.
  std::vector<Submitted> Leave(int32_t set_id);

 private:
  struct SetState {
    uint64_t generation = 0;
    uint32_t slots = 0;
    std::map<uint32_t, Submitted> cached;   // by slot
    std::vector<Submitted> full;            // in submission order
    uint64_t changes = 0;
    uint64_t next_order = 0;
    std::map<std::string, uint64_t> names;  // waiting tensors -> submission order
    bool slow = false;
  };
  std::map<int32_t, SetState> sets_;
};

}  // namespace tutti::client
