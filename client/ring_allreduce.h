// Ring allreduce (reduce-scatter, then allgather) over a transport context. Each chunk's sum is
// computed once, by one rank, in a fixed order, then copied to everyone: every member ends with
// bitwise-identical results whatever the timing.
#pragma once

#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "transport/transport.h"

namespace tutti::client {

// Reduces `count` elements of `buffer` in place across `members` (sorted global ranks; `self` is
// one of them). `scratch` is reused between calls to avoid an allocation per collective.
// `step_timeout` bounds each exchange with a neighbour.
Status RingAllreduce(transport::Context& context, const std::vector<int32_t>& members, int32_t self,
                     void* buffer, size_t count, DType dtype, ReduceOp op,
                     std::chrono::milliseconds step_timeout, std::vector<char>* scratch);

}  // namespace tutti::client
