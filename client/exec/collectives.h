// The collectives a lane runs, each on the set's transport context. Every function leaves the
// same bytes on every member (reductions happen once per chunk, in a fixed order).
#pragma once

#include "client/exec/request.h"
#include "client/exec/ring_allreduce.h"

namespace tutti::client {

// Runs the agreed `response` for `request`, writing the caller's output or the request's result.
// `member_rows` comes from the coordinator (allgather: each member's first dimension; alltoall:
// the n x n split matrix).
Status RunCollective(const RingArgs& ring, Request& request,
                     const std::vector<int64_t>& member_rows);

// The allreduce of one tensor: `count` elements of `input` reduced over the members into
// `output`, each input scaled by `prescale`, the result by `postscale` (and averaged, for
// kAverage). Out of place (the two do not overlap), the algorithms read the input where it is
// and write the output once, instead of copying the input to the output and reducing there; the
// bits are the same either way.
Status AllreduceInto(const RingArgs& ring, const void* input, void* output, size_t count,
                     DType dtype, ReduceOp op, double prescale, double postscale);

// Shared with the fused collectives:
// Bytes of one row: everything after the first dimension.
size_t RowBytes(const wire::TensorSpec& spec);
// Consecutive chunks of rows[i] rows each.
ChunkLayout RowChunks(const std::vector<int64_t>& rows, size_t row_bytes);
// Allocates a request's result; an error if the application's allocator has no memory.
Status Allocate(ResultBuffer* buffer, size_t bytes);
// Average divides by the set size; then the caller's postscale. Integers divide exactly once
// (truncating) and are then scaled; floating types fold the division into the one scaling pass.
// bool (no average, no scale) is made 0 or 1 (NormalizeBool).
void Finish(void* data, size_t count, DType dtype, ReduceOp op, double postscale, size_t n);

// The rows of a `rows`-row tensor that reducescatter leaves on member i: the first rows % n members
// get one row more than the others, in set order.
std::vector<int64_t> ReducescatterRows(int64_t rows, size_t n);

}  // namespace tutti::client
