// The staged path of device collectives (client/exec/device_collectives.h): through pinned host
// memory and the CPU transports, for members that share a GPU or joined.
#include <algorithm>

#include "client/exec/collectives.h"
#include "client/exec/device_collectives.h"
#include "client/exec/device_work.h"
#include "client/exec/log.h"

namespace tutti::client {
namespace {

// A single allreduce of at least two pieces runs in pieces, so that the copies to the host, the
// host reduction and the copies back overlap (the H200 run staged 64 MiB in 25-29 ms, a good part
// of it copies that waited for each other). Every member cuts the same pieces: the size decides.
constexpr size_t kPieceBytes = size_t{4} << 20;

// The host collective's version of a device request: its buffers in staging memory, scaling and
// the average left to the device copies.
std::shared_ptr<Request> HostRequest(const Request& device, void* staging, size_t count, bool reduces) {
  Request::Operation op = device.operation();
  op.input = staging;
  if (op.output != nullptr) op.output = staging;  // allreduce and broadcast: in place
  op.count = count;
  op.ready.reset();
  if (reduces) {
    op.spec.set_prescale(1.0);
    op.spec.set_postscale(1.0);
    if (op.spec.reduce_op() == static_cast<int32_t>(ReduceOp::kAverage))
      op.spec.set_reduce_op(static_cast<int32_t>(ReduceOp::kSum));
  }
  return std::make_shared<Request>(std::move(op));
}

// One allreduce in pieces: every piece's copy to the host is queued at once, each with an event
// behind it; the lane reduces a piece as soon as its own copy landed, then queues its copy back
// (and the scaling) while it reduces the next. `source` holds the (prescaled) input on the device.
Status RunInPieces(const DeviceArgs& args, const RingArgs& ring, const FusedPart& part,
                   gpu::ProcessSetOnDevice* device, const void* source, void* staging,
                   const gpu::CopyTransform& scale_out, gpu::Deadline deadline) {
  const auto& op = part.request->operation();
  const auto dtype = static_cast<DType>(op.spec.dtype());
  const size_t element = ElementSize(dtype), per_piece = kPieceBytes / element;
  const size_t pieces = (op.count + per_piece - 1) / per_piece;
  std::vector<std::shared_ptr<gpu::Event>> landed(pieces);
  for (size_t k = 0; k < pieces; ++k) {
    const size_t first = k * per_piece, count = std::min(per_piece, op.count - first);
    TUTTI_RETURN_IF_ERROR(device->CopyBytes(At(staging, first * element), At(source, first * element),
                                            count * element));
    TUTTI_RETURN_IF_ERROR(device->Record(&landed[k]));
  }
  for (size_t k = 0; k < pieces; ++k) {
    const size_t first = k * per_piece, count = std::min(per_piece, op.count - first);
    void* at = At(staging, first * element);
    TUTTI_RETURN_IF_ERROR(device->Wait(*landed[k], deadline, args.interrupted));
    auto host = HostRequest(*part.request, at, count, true);
    TUTTI_RETURN_IF_ERROR(RunCollective(ring, *host, part.member_rows));
    void* out = At(op.output, first * element);
    TUTTI_RETURN_IF_ERROR(device->CopyBytes(out, at, count * element));
    if (!IsIdentity(scale_out)) TUTTI_RETURN_IF_ERROR(device->Copy({{out, out, count}}, dtype, scale_out));
  }
  // Staging memory must outlive the copies back: wait before the next collective reuses it.
  return Finish(args, device, {part}, deadline);
}

}  // namespace

Status RunStagedCollective(const DeviceArgs& args, const RingArgs& ring,
                           const std::vector<FusedPart>& parts, std::vector<char>* fusion_buffer,
                           const PhaseObserver& observe) {
  const auto& spec = parts.front().request->operation().spec;
  const int32_t index = DeviceOf(parts);
  const auto deadline = gpu::Clock::now() + args.timeout;
  if (!args.state->warned_staged) {
    args.state->warned_staged = true;
    Log().warn("process set {}: device tensors go through host memory and the CPU transports "
               "(members share a GPU, or one joined); tuttid's log says "
               "which",
               args.set_id);
  }
  gpu::ProcessSetOnDevice* device;
  TUTTI_RETURN_IF_ERROR(OpenDevice(&args.state->devices, index, &device));
  TUTTI_RETURN_IF_ERROR(OrderAfterProducers(device, parts));

  // Device tensors are scaled on the device, as the NCCL path scales them (float16 in float16,
  // gpu/module_api.h): the prescale on the way out, the average and postscale on the way back; the
  // host collective only sums, or takes the min, max or product.
  const auto dtype = static_cast<DType>(spec.dtype());
  const size_t element = ElementSize(dtype);
  const bool reduces =
      spec.kind() == wire::COLLECTIVE_ALLREDUCE || spec.kind() == wire::COLLECTIVE_REDUCESCATTER;
  const gpu::CopyTransform scale_in = reduces ? Prescale(spec.prescale()) : gpu::CopyTransform{};
  const gpu::CopyTransform scale_out =
      reduces && dtype != DType::kBool  // the host's bool reduction already wrote 0 or 1
          ? OutTransform(dtype, static_cast<ReduceOp>(spec.reduce_op()), spec.postscale(),
                         args.members->size())
          : gpu::CopyTransform{};

  const bool in_pieces = parts.size() == 1 && spec.kind() == wire::COLLECTIVE_ALLREDUCE &&
                         !parts.front().joined_member &&
                         parts.front().request->operation().count * element >= 2 * kPieceBytes;
  if (in_pieces) {
    const auto& op = parts.front().request->operation();
    void* staging;
    TUTTI_RETURN_IF_ERROR(device->StagingBuffer(op.count * element, &staging));
    const void* source = op.input;
    if (!IsIdentity(scale_in)) {
      void* scaled;
      TUTTI_RETURN_IF_ERROR(device->FusionBuffer(op.count * element, &scaled));
      TUTTI_RETURN_IF_ERROR(device->Copy({{op.input, scaled, op.count}}, dtype, scale_in));
      source = scaled;
    }
    return RunInPieces(args, ring, parts.front(), device, source, staging, scale_out, deadline);
  }

  // Device → pinned host, every input back to back (through the fusion buffer when scaled).
  size_t staged = 0;
  for (const auto& part : parts) staged += part.request->operation().count * element;
  void* staging;
  TUTTI_RETURN_IF_ERROR(device->StagingBuffer(std::max<size_t>(staged, 1), &staging));
  void* scaled = nullptr;
  if (!IsIdentity(scale_in)) TUTTI_RETURN_IF_ERROR(device->FusionBuffer(std::max<size_t>(staged, 1), &scaled));
  std::vector<gpu::CopySegment> scale_segments;
  std::vector<FusedPart> host_parts;
  size_t offset = 0;
  for (const auto& part : parts) {
    const auto& op = part.request->operation();
    const size_t bytes = op.count * element;
    if (scaled)
      scale_segments.push_back({op.input, At(scaled, offset), op.count});
    else
      TUTTI_RETURN_IF_ERROR(device->CopyBytes(At(staging, offset), op.input, bytes));
    FusedPart host_part = part;
    host_part.request = HostRequest(*part.request, At(staging, offset), op.count, reduces);
    host_parts.push_back(std::move(host_part));
    offset += bytes;
  }
  if (scaled) {
    TUTTI_RETURN_IF_ERROR(device->Copy(scale_segments, dtype, scale_in));
    TUTTI_RETURN_IF_ERROR(device->CopyBytes(staging, scaled, staged));
  }
  std::shared_ptr<gpu::Event> staged_in;
  TUTTI_RETURN_IF_ERROR(device->Record(&staged_in));
  TUTTI_RETURN_IF_ERROR(device->Wait(*staged_in, deadline, args.interrupted));

  TUTTI_RETURN_IF_ERROR(host_parts.size() == 1
                            ? RunCollective(ring, *host_parts.front().request, host_parts.front().member_rows)
                            : RunFused(ring, host_parts, fusion_buffer, observe));

  // Host → device: into the caller's output, or into a device result; then scaled in place.
  scale_segments.clear();
  for (size_t p = 0; p < parts.size(); ++p) {
    auto& request = *parts[p].request;
    auto& host = *host_parts[p].request;
    if (request.operation().output != nullptr) {
      TUTTI_RETURN_IF_ERROR(device->CopyBytes(request.operation().output, host.operation().output,
                                              request.operation().count * element));
      scale_segments.push_back({request.operation().output, request.operation().output,
                                request.operation().count});
      continue;
    }
    if (spec.kind() == wire::COLLECTIVE_BARRIER) continue;
    void* result;
    TUTTI_RETURN_IF_ERROR(DeviceResult(device, index, host.result().data.size(), request, &result));
    TUTTI_RETURN_IF_ERROR(device->CopyBytes(result, host.result().data.data(), host.result().data.size()));
    scale_segments.push_back({result, result, host.result().data.size() / element});
    request.result().shape = host.result().shape;
    request.result().received_splits = host.result().received_splits;
  }
  if (!IsIdentity(scale_out)) TUTTI_RETURN_IF_ERROR(device->Copy(scale_segments, dtype, scale_out));
  // The host results must outlive the copies: wait here, before host_parts goes.
  return Finish(args, device, parts, deadline);
}

}  // namespace tutti::client
