// How a batch of responses released together becomes the set's next collectives
// (docs/fusion.md): ordered by priority, then merged, where the rules allow, into fused responses
// of at most `threshold` bytes that the members run as one collective over one buffer. tuttid
// plans what it releases with it, and the members plan their fast path's rounds with it
// (docs/steady-state.md): one function, so the two can never fuse differently.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/protocol.h"

namespace tutti::wire {

// Allreduce, allgather and reducescatter fuse; broadcast, alltoall and barrier never do, nor do
// failed responses or those some member joined. Fused tensors share the kind, dtype, reduce op,
// scale factors, device path and device group. `threshold` 0 disables fusion; a tensor larger than it runs alone.
std::vector<Response> PlanCollectives(std::vector<Response> released,
                                            int64_t threshold);

// Bytes a response's tensor occupies in a fusion buffer: the whole tensor for reductions, every
// member's rows for allgather.
int64_t FusionBytes(const TensorSpec& spec, const google::protobuf::RepeatedField<int64_t>& member_rows);

}  // namespace tutti::wire
