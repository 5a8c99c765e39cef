// How a batch of responses released together becomes the set's next collectives
// (docs/fusion.md): ordered by priority, then merged, where the rules allow, into fused responses
// of at most `threshold` bytes that the members run as one collective over one buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "proto/protocol.h"

namespace tutti::server {

// Allreduce, allgather and reducescatter fuse; broadcast, alltoall and barrier never do, nor do
// failed responses or those some member joined. Fused tensors share the kind, dtype, reduce op,
// scale factors, device path and device group. `threshold` 0 disables fusion; a tensor larger than it runs alone.
std::vector<wire::Response> PlanCollectives(std::vector<wire::Response> released,
                                            int64_t threshold);

// Bytes a response's tensor occupies in a fusion buffer: the whole tensor for reductions, every
// member's rows for allgather.
int64_t FusionBytes(const wire::TensorSpec& spec, const google::protobuf::RepeatedField<int64_t>& member_rows);

}  // namespace tutti::server
