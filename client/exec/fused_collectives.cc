#include "client/exec/fused_collectives.h"

#include <cstring>
#include <numeric>

#include "client/exec/collectives.h"
#include "client/exec/hierarchical.h"
#include "client/kernels/reduce.h"

namespace tutti::client {
namespace {

using WallClock = Timeline::WallClock;

// Allreduce: tensors back to back.
Status FusedAllreduce(const RingArgs& ring, const std::vector<FusedPart>& parts,
                      std::vector<char>* buffer, const PhaseObserver& observe) {
  const auto& first = parts.front().request->operation().spec;
  const auto dtype = static_cast<DType>(first.dtype());
  const auto op = static_cast<ReduceOp>(first.reduce_op());
  const size_t element = ElementSize(dtype);
  size_t total = 0;
  for (const auto& part : parts) total += part.request->operation().count;
  if (buffer->size() < total * element) buffer->resize(total * element);

  auto start = WallClock::now();
  size_t offset = 0;
  for (const auto& part : parts) {
    const auto& o = part.request->operation();
    ScaleCopy(buffer->data() + offset, o.input, o.count, dtype, first.prescale());
    offset += o.count * element;
  }
  observe("COPY_IN", start);

  start = WallClock::now();
  TUTTI_RETURN_IF_ERROR(ChosenAllreduce(ring, buffer->data(), total, dtype, op));
  observe("ALLREDUCE", start);

  start = WallClock::now();
  const size_t n = ring.members->size();
  double postscale = first.postscale();
  // As Finish() does: integers divide (truncating) before the postscale, floating types fold the
  // division into it, bool is made 0 or 1. The fusion buffer is scratch, so the division and the
  // normalisation run there and the copy out stays one pass.
  const bool divide_integers = op == ReduceOp::kAverage && !IsFloating(dtype);
  if (op == ReduceOp::kAverage && IsFloating(dtype)) postscale /= static_cast<double>(n);
  if (divide_integers) DivideInPlace(buffer->data(), total, dtype, static_cast<int64_t>(n));
  if (dtype == DType::kBool) NormalizeBool(buffer->data(), total);
  offset = 0;
  for (const auto& part : parts) {
    const auto& o = part.request->operation();
    ScaleCopy(o.output, buffer->data() + offset, o.count, dtype, postscale);
    offset += o.count * element;
  }
  observe("COPY_OUT", start);
  return Status::Ok();
}

Status FusedAllgather(const RingArgs& ring, const std::vector<FusedPart>& parts,
                      std::vector<char>* buffer, const PhaseObserver& observe) {
  const size_t n = ring.members->size(), self = ring.members->IndexOf(ring.self);
  const MemberMajor m = MemberMajorLayout(parts, n, false);
  const size_t total = m.chunks.begin.back() + m.chunks.size.back();
  if (buffer->size() < total) buffer->resize(total);

  auto start = WallClock::now();
  for (size_t p = 0; p < parts.size(); ++p) {
    const size_t bytes = static_cast<size_t>(m.rows[p][self]) * m.row_bytes[p];
    if (bytes > 0) std::memcpy(buffer->data() + m.offset[p][self], parts[p].request->operation().input, bytes);
  }
  observe("COPY_IN", start);

  start = WallClock::now();
  TUTTI_RETURN_IF_ERROR(ChosenAllgather(ring, buffer->data(), m.chunks));
  observe("ALLGATHER", start);

  start = WallClock::now();
  for (size_t p = 0; p < parts.size(); ++p) {
    auto& request = *parts[p].request;
    auto& result = request.result();
    const int64_t rows = std::accumulate(m.rows[p].begin(), m.rows[p].end(), int64_t{0});
    TUTTI_RETURN_IF_ERROR(Allocate(&result.data, static_cast<size_t>(rows) * m.row_bytes[p]));
    result.shape.assign(request.operation().spec.shape().begin(), request.operation().spec.shape().end());
    result.shape[0] = rows;
    size_t at = 0;
    for (size_t j = 0; j < n; ++j) {
      const size_t bytes = static_cast<size_t>(m.rows[p][j]) * m.row_bytes[p];
      if (bytes > 0) std::memcpy(result.data.data() + at, buffer->data() + m.offset[p][j], bytes);
      at += bytes;
    }
  }
  observe("COPY_OUT", start);
  return Status::Ok();
}

Status FusedReducescatter(const RingArgs& ring, const std::vector<FusedPart>& parts,
                          std::vector<char>* buffer, const PhaseObserver& observe) {
  const auto& first = parts.front().request->operation().spec;
  const auto dtype = static_cast<DType>(first.dtype());
  const auto op = static_cast<ReduceOp>(first.reduce_op());
  const size_t element = ElementSize(dtype);
  const size_t n = ring.members->size(), self = ring.members->IndexOf(ring.self);
  const MemberMajor m = MemberMajorLayout(parts, n, true);
  const size_t total = m.chunks.begin.back() + m.chunks.size.back();
  if (buffer->size() < total) buffer->resize(total);

  auto start = WallClock::now();
  for (size_t p = 0; p < parts.size(); ++p) {
    const char* input = static_cast<const char*>(parts[p].request->operation().input);
    size_t from = 0;
    for (size_t j = 0; j < n; ++j) {
      const size_t bytes = static_cast<size_t>(m.rows[p][j]) * m.row_bytes[p];
      ScaleCopy(buffer->data() + m.offset[p][j], input + from, bytes / element, dtype, first.prescale());
      from += bytes;
    }
  }
  observe("COPY_IN", start);

  start = WallClock::now();
  // Afterwards member i holds chunk i.
  TUTTI_RETURN_IF_ERROR(ChosenReducescatter(ring, buffer->data(), m.chunks, dtype, op));
  observe("REDUCESCATTER", start);

  start = WallClock::now();
  for (size_t p = 0; p < parts.size(); ++p) {
    auto& request = *parts[p].request;
    auto& result = request.result();
    const size_t bytes = static_cast<size_t>(m.rows[p][self]) * m.row_bytes[p];
    TUTTI_RETURN_IF_ERROR(Allocate(&result.data, bytes));
    if (bytes > 0) std::memcpy(result.data.data(), buffer->data() + m.offset[p][self], bytes);
    result.shape.assign(request.operation().spec.shape().begin(), request.operation().spec.shape().end());
    result.shape[0] = m.rows[p][self];
    Finish(result.data.data(), bytes / element, dtype, op, first.postscale(), n);
  }
  observe("COPY_OUT", start);
  return Status::Ok();
}

}  // namespace

MemberMajor MemberMajorLayout(const std::vector<FusedPart>& parts, size_t n, bool reducescatter) {
  MemberMajor m;
  for (const auto& part : parts) {
    const auto& spec = part.request->operation().spec;
    m.row_bytes.push_back(RowBytes(spec));
    m.rows.push_back(reducescatter ? ReducescatterRows(spec.shape(0), n) : part.member_rows);
  }
  m.offset.assign(parts.size(), std::vector<size_t>(n));
  size_t at = 0;
  for (size_t j = 0; j < n; ++j) {
    m.chunks.begin.push_back(at);
    for (size_t p = 0; p < parts.size(); ++p) {
      m.offset[p][j] = at;
      at += static_cast<size_t>(m.rows[p][j]) * m.row_bytes[p];
    }
    m.chunks.size.push_back(at - m.chunks.begin.back());
  }
  return m;
}

Status RunFused(const RingArgs& ring, const std::vector<FusedPart>& parts,
                std::vector<char>* buffer, const PhaseObserver& observe) {
  switch (parts.front().request->operation().spec.kind()) {
    case wire::COLLECTIVE_ALLREDUCE: return FusedAllreduce(ring, parts, buffer, observe);
    case wire::COLLECTIVE_ALLGATHER: return FusedAllgather(ring, parts, buffer, observe);
    case wire::COLLECTIVE_REDUCESCATTER: return FusedReducescatter(ring, parts, buffer, observe);
    default: return Status(Code::kInternal, "the coordinator fused a collective that never fuses");
  }
}

}  // namespace tutti::client
