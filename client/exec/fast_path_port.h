// What a lane on its set's fast path asks of the runtime (docs/steady-state.md). The runtime
// implements it over the coordinator link (which holds the book of submitted tensors) and its
// table of pending requests. Called on the set's lane thread only. `generation` is the lane's:
// a lane of a set's earlier incarnation (re-formed, still unwinding) never touches the book of a
// later one, which has another generation.
#pragma once

#include <cstdint>
#include <vector>

#include "client/exec/fused_collectives.h"
#include "client/fastpath/fast_path_book.h"
#include "common/status.h"

namespace tutti::client {

class FastPathPort {
 public:
  virtual ~FastPathPort() = default;
  // What this rank brings to the set's next round.
  virtual FastPathInput Input(int32_t set_id) = 0;
  // The round agreed on `slots` (ascending): their collectives, ordered by priority and fused as
  // tuttid would have (proto/fusion_plan.h), the same on every member.
  virtual std::vector<std::vector<FusedPart>> Take(int32_t set_id, uint64_t generation,
                                                   const std::vector<uint32_t>& slots) = 0;
  // The members left the fast path after `rounds` rounds: what is still submitted goes to tuttid,
  // with the exit.
  virtual void Leave(int32_t set_id, uint64_t generation, uint64_t rounds) = 0;
  // A round failed with `why`: the set is off the fast path here without telling tuttid (its
  // data plane is broken); the tensors waiting fail with `why` unless tuttid's verdict on a lost
  // peer will fail them.
  virtual void Abandon(int32_t set_id, uint64_t generation, const Status& why) = 0;
};

}  // namespace tutti::client
