#include "client/exec/collectives.h"

#include <cstring>
#include <numeric>

#include "client/exec/hierarchical.h"
#include "client/kernels/reduce.h"

namespace tutti::client {

size_t RowBytes(const wire::TensorSpec& spec) {
  size_t bytes = ElementSize(static_cast<DType>(spec.dtype()));
  for (int d = 1; d < spec.shape_size(); ++d) bytes *= static_cast<size_t>(spec.shape(d));
  return bytes;
}

ChunkLayout RowChunks(const std::vector<int64_t>& rows, size_t row_bytes) {
  ChunkLayout layout;
  size_t offset = 0;
  for (int64_t r : rows) {
    layout.begin.push_back(offset);
    layout.size.push_back(static_cast<size_t>(r) * row_bytes);
    offset += layout.size.back();
  }
  return layout;
}

Status Allocate(ResultBuffer* buffer, size_t bytes) {
  if (buffer->Allocate(bytes)) return Status::Ok();
  return Status(Code::kInternal, "the result allocator returned no memory for " +
                                     std::to_string(bytes) + " bytes");
}

void Finish(void* data, size_t count, DType dtype, ReduceOp op, double postscale, size_t n) {
  if (dtype == DType::kBool) return NormalizeBool(data, count);
  if (op == ReduceOp::kAverage) {
    if (IsFloating(dtype))
      postscale /= static_cast<double>(n);
    else
      DivideInPlace(data, count, dtype, static_cast<int64_t>(n));
  }
  ScaleInPlace(data, count, dtype, postscale);
}

Status AllreduceInto(const RingArgs& ring, const void* input, void* output, size_t count,
                     DType dtype, ReduceOp op, double prescale, double postscale) {
  const size_t n = ring.members->size(), bytes = count * ElementSize(dtype);
  const auto* in = static_cast<const char*>(input);
  const auto* out = static_cast<const char*>(output);
  // Every member picks the same algorithm (sizes and hosts agree, in place or not), so results
  // stay identical everywhere.
  if (in < out + bytes && out < in + bytes) {
    // In place, or overlapping (memmove's job): scale where it lies, reduce in place.
    ScaleCopy(output, input, count, dtype, prescale);
    TUTTI_RETURN_IF_ERROR(ChosenAllreduce(ring, output, count, dtype, op));
  } else {
    // The algorithms read (and prescale) the input where it is, and write only the output.
    TUTTI_RETURN_IF_ERROR(ChosenAllreduce(ring, output, count, dtype, op, {input, prescale}));
    // Every combine leaves bool bytes 0 or 1 (reduce.h), and with more than one member every
    // byte went through one, so Finish's pass would change nothing.
    if (dtype == DType::kBool && n > 1) return Status::Ok();
  }
  // A no-op but for bool, average and a postscale other than 1.
  Finish(output, count, dtype, op, postscale, n);
  return Status::Ok();
}

namespace {

Status Allreduce(const RingArgs& ring, Request& request) {
  const auto& op = request.operation();
  return AllreduceInto(ring, op.input, op.output, op.count, static_cast<DType>(op.spec.dtype()),
                       static_cast<ReduceOp>(op.spec.reduce_op()), op.spec.prescale(),
                       op.spec.postscale());
}

// A tree, or the hierarchy across hosts for large buffers (hierarchical.h).
Status Broadcast(const RingArgs& ring, Request& request) {
  const auto& op = request.operation();
  const size_t bytes = op.count * ElementSize(static_cast<DType>(op.spec.dtype()));
  if (op.output != op.input) std::memmove(op.output, op.input, bytes);
  return ChosenBroadcast(ring, static_cast<char*>(op.output), bytes, op.spec.root());
}

Status Allgather(const RingArgs& ring, Request& request, const std::vector<int64_t>& rows) {
  const auto& op = request.operation();
  const size_t row_bytes = RowBytes(op.spec);
  const ChunkLayout chunks = RowChunks(rows, row_bytes);
  auto& result = request.result();
  TUTTI_RETURN_IF_ERROR(Allocate(&result.data, chunks.begin.back() + chunks.size.back()));
  result.shape.assign(op.spec.shape().begin(), op.spec.shape().end());
  result.shape[0] = std::accumulate(rows.begin(), rows.end(), int64_t{0});
  const size_t self = ring.members->IndexOf(ring.self);
  if (chunks.size[self] > 0)
    std::memcpy(result.data.data() + chunks.begin[self], op.input, chunks.size[self]);
  return ChosenAllgather(ring, result.data.data(), chunks);
}

Status Reducescatter(const RingArgs& ring, Request& request) {
  const auto& op = request.operation();
  const auto dtype = static_cast<DType>(op.spec.dtype());
  const auto reduce_op = static_cast<ReduceOp>(op.spec.reduce_op());
  const size_t n = ring.members->size(), self = ring.members->IndexOf(ring.self);
  const auto rows = ReducescatterRows(op.spec.shape(0), n);
  const ChunkLayout chunks = RowChunks(rows, RowBytes(op.spec));
  std::vector<char> work(op.count * ElementSize(dtype));
  ScaleCopy(work.data(), op.input, op.count, dtype, op.spec.prescale());
  // Afterwards member i holds chunk i.
  TUTTI_RETURN_IF_ERROR(ChosenReducescatter(ring, work.data(), chunks, dtype, reduce_op));
  auto& result = request.result();
  TUTTI_RETURN_IF_ERROR(Allocate(&result.data, chunks.size[self]));
  if (chunks.size[self] > 0)
    std::memcpy(result.data.data(), work.data() + chunks.begin[self], chunks.size[self]);
  result.shape.assign(op.spec.shape().begin(), op.spec.shape().end());
  result.shape[0] = rows[self];
  Finish(result.data.data(), chunks.size[self] / ElementSize(dtype), dtype, reduce_op,
         op.spec.postscale(), n);
  return Status::Ok();
}

// Pairwise exchange: in step s each rank sends to the member s places after it and receives from
// the one s places before, so every pair exchanges exactly once and no rank waits on two others.
Status Alltoall(const RingArgs& ring, Request& request, const std::vector<int64_t>& matrix) {
  const auto& op = request.operation();
  const auto& members = *ring.members;
  const size_t n = members.size(), self = members.IndexOf(ring.self), row_bytes = RowBytes(op.spec);
  std::vector<int64_t> sent(n), received(n);
  for (size_t j = 0; j < n; ++j) {
    sent[j] = matrix[self * n + j];
    received[j] = matrix[j * n + self];
  }
  const ChunkLayout out = RowChunks(sent, row_bytes), in = RowChunks(received, row_bytes);
  auto& result = request.result();
  result.received_splits = received;
  TUTTI_RETURN_IF_ERROR(Allocate(&result.data, in.begin.back() + in.size.back()));
  result.shape.assign(op.spec.shape().begin(), op.spec.shape().end());
  result.shape[0] = std::accumulate(received.begin(), received.end(), int64_t{0});
  const char* input = static_cast<const char*>(op.input);
  if (in.size[self] > 0) std::memcpy(result.data.data() + in.begin[self], input + out.begin[self], in.size[self]);
  for (size_t s = 1; s < n; ++s) {
    const size_t to = (self + s) % n, from = (self + n - s) % n;
    TUTTI_RETURN_IF_ERROR(ring.context->SendRecv(
        members[to], input + out.begin[to], out.size[to], members[from],
        result.data.data() + in.begin[from], in.size[from],
        transport::Clock::now() + ring.step_timeout));
  }
  return Status::Ok();
}

}  // namespace

std::vector<int64_t> ReducescatterRows(int64_t rows, size_t n) {
  std::vector<int64_t> out(n);
  const int64_t count = static_cast<int64_t>(n);
  for (int64_t i = 0; i < count; ++i) out[i] = rows / count + (i < rows % count ? 1 : 0);
  return out;
}

Status RunCollective(const RingArgs& ring, Request& request,
                     const std::vector<int64_t>& member_rows) {
  switch (request.operation().spec.kind()) {
    case wire::COLLECTIVE_ALLREDUCE: return Allreduce(ring, request);
    case wire::COLLECTIVE_BROADCAST: return Broadcast(ring, request);
    case wire::COLLECTIVE_ALLGATHER: return Allgather(ring, request, member_rows);
    case wire::COLLECTIVE_REDUCESCATTER: return Reducescatter(ring, request);
    case wire::COLLECTIVE_ALLTOALL: return Alltoall(ring, request, member_rows);
    case wire::COLLECTIVE_BARRIER: return Status::Ok();  // everyone arrived: that was the point
    default: return Status(Code::kInternal, "unknown collective kind");
  }
}

}  // namespace tutti::client
