#include "client/exec/device_collectives.h"

#include <cstring>
#include <numeric>

#include "client/exec/collectives.h"
#include "client/exec/device_work.h"
#include "client/exec/gpu_module_loader.h"
#include "client/exec/log.h"

namespace tutti::client {
namespace {

using WallClock = Timeline::WallClock;

gpu::Chunks ToChunks(const ChunkLayout& layout) { return gpu::Chunks{layout.begin, layout.size}; }

// Creates the set's communicator for `group` on first use: the first member makes the unique id
// and tuttid relays it to the others.
Status EnsureComm(const DeviceArgs& args, gpu::ProcessSetOnDevice* device, int32_t group,
                  gpu::Deadline deadline) {
  if (device->HasComm(group)) return Status::Ok();
  std::string id;
  if (args.members->front() == args.self) {
    gpu::Module* module;
    TUTTI_RETURN_IF_ERROR(LoadGpuModule(&module));
    TUTTI_RETURN_IF_ERROR(module->UniqueId(&id));
    args.publish_comm_id(group, id);
  } else {
    TUTTI_RETURN_IF_ERROR(args.await_comm_id(group, deadline, args.interrupted, &id));
  }
  const auto rank = static_cast<int32_t>(args.members->IndexOf(args.self));
  return device->InitComm(group, id, static_cast<int32_t>(args.members->size()), rank, deadline,
                          args.interrupted);
}

// Ends a phase: with synchronous phases (timeline on) after the GPU finished it.
class Phases {
 public:
  Phases(const DeviceArgs& args, gpu::ProcessSetOnDevice* device, const PhaseObserver& observe,
         gpu::Deadline deadline)
      : args_(args), device_(device), observe_(observe), deadline_(deadline) {}

  Status End(const char* name, WallClock::time_point start) {
    if (args_.synchronous_phases) {
      std::shared_ptr<gpu::Event> done;
      TUTTI_RETURN_IF_ERROR(device_->Record(&done));
      TUTTI_RETURN_IF_ERROR(device_->Wait(*done, deadline_, args_.interrupted));
    }
    if (observe_) observe_(name, start);
    return Status::Ok();
  }

 private:
  const DeviceArgs& args_;
  gpu::ProcessSetOnDevice* device_;
  const PhaseObserver& observe_;
  gpu::Deadline deadline_;
};

Status NcclAllreduce(gpu::ProcessSetOnDevice* device, int32_t group, const std::vector<FusedPart>& parts,
                     size_t n, Phases& phases) {
  const auto& spec = parts.front().request->operation().spec;
  const auto dtype = static_cast<DType>(spec.dtype());
  const auto op = static_cast<ReduceOp>(spec.reduce_op());
  const size_t element = ElementSize(dtype);
  const gpu::CopyTransform in = Prescale(spec.prescale());
  const gpu::CopyTransform out = OutTransform(dtype, op, spec.postscale(), n);

  if (parts.size() == 1) {  // no fusion buffer: NCCL reads the input and writes the output
    const auto& o = parts.front().request->operation();
    const void* source = o.input;
    if (!IsIdentity(in)) {
      TUTTI_RETURN_IF_ERROR(device->Copy({{o.input, o.output, o.count}}, dtype, in));
      source = o.output;
    }
    TUTTI_RETURN_IF_ERROR(
        device->Allreduce(group, source, o.output, o.count, dtype, Reduction(op)));
    if (!IsIdentity(out))
      TUTTI_RETURN_IF_ERROR(device->Copy({{o.output, o.output, o.count}}, dtype, out));
    return Status::Ok();
  }

  size_t total = 0;
  for (const auto& part : parts) total += part.request->operation().count;
  void* buffer;
  TUTTI_RETURN_IF_ERROR(device->FusionBuffer(total * element, &buffer));
  std::vector<gpu::CopySegment> copy_in, copy_out;
  size_t offset = 0;
  for (const auto& part : parts) {
    const auto& o = part.request->operation();
    copy_in.push_back({o.input, At(buffer, offset), o.count});
    copy_out.push_back({At(buffer, offset), o.output, o.count});
    offset += o.count * element;
  }
  auto start = WallClock::now();
  TUTTI_RETURN_IF_ERROR(device->Copy(copy_in, dtype, in));
  TUTTI_RETURN_IF_ERROR(phases.End("COPY_IN", start));
  start = WallClock::now();
  TUTTI_RETURN_IF_ERROR(device->Allreduce(group, buffer, buffer, total, dtype, Reduction(op)));
  TUTTI_RETURN_IF_ERROR(phases.End("ALLREDUCE", start));
  start = WallClock::now();
  TUTTI_RETURN_IF_ERROR(device->Copy(copy_out, dtype, out));
  return phases.End("COPY_OUT", start);
}

Status NcclAllgather(gpu::ProcessSetOnDevice* device, int32_t index, int32_t group,
                     const std::vector<FusedPart>& parts, size_t n, size_t self, Phases& phases) {
  const auto& spec = parts.front().request->operation().spec;
  const auto dtype = static_cast<DType>(spec.dtype());
  const size_t element = ElementSize(dtype);
  const MemberMajor m = MemberMajorLayout(parts, n, false);
  const size_t total = m.chunks.begin.back() + m.chunks.size.back();
  auto shape_of = [&](size_t p) {
    const auto& own = parts[p].request->operation().spec.shape();
    std::vector<int64_t> shape(own.begin(), own.end());
    shape[0] = std::accumulate(m.rows[p].begin(), m.rows[p].end(), int64_t{0});
    return shape;
  };

  if (parts.size() == 1) {  // gathered straight into the result
    auto& request = *parts.front().request;
    void* result;
    TUTTI_RETURN_IF_ERROR(DeviceResult(device, index, total, request, &result));
    TUTTI_RETURN_IF_ERROR(device->CopyBytes(At(result, m.offset[0][self]), request.operation().input,
                                            static_cast<size_t>(m.rows[0][self]) * m.row_bytes[0]));
    TUTTI_RETURN_IF_ERROR(device->Allgather(group, result, ToChunks(m.chunks)));
    request.result().shape = shape_of(0);
    return Status::Ok();
  }

  void* buffer;
  TUTTI_RETURN_IF_ERROR(device->FusionBuffer(total, &buffer));
  std::vector<gpu::CopySegment> copy_in, copy_out;
  for (size_t p = 0; p < parts.size(); ++p) {
    const size_t bytes = static_cast<size_t>(m.rows[p][self]) * m.row_bytes[p];
    copy_in.push_back({parts[p].request->operation().input, At(buffer, m.offset[p][self]), bytes / element});
  }
  auto start = WallClock::now();
  TUTTI_RETURN_IF_ERROR(device->Copy(copy_in, dtype, {}));
  TUTTI_RETURN_IF_ERROR(phases.End("COPY_IN", start));
  start = WallClock::now();
  TUTTI_RETURN_IF_ERROR(device->Allgather(group, buffer, ToChunks(m.chunks)));
  TUTTI_RETURN_IF_ERROR(phases.End("ALLGATHER", start));
  start = WallClock::now();
  for (size_t p = 0; p < parts.size(); ++p) {
    auto& request = *parts[p].request;
    request.result().shape = shape_of(p);
    void* result;
    TUTTI_RETURN_IF_ERROR(DeviceResult(
        device, index, static_cast<size_t>(request.result().shape[0]) * m.row_bytes[p], request, &result));
    size_t at = 0;
    for (size_t j = 0; j < n; ++j) {
      const size_t bytes = static_cast<size_t>(m.rows[p][j]) * m.row_bytes[p];
      copy_out.push_back({At(buffer, m.offset[p][j]), At(result, at), bytes / element});
      at += bytes;
    }
  }
  TUTTI_RETURN_IF_ERROR(device->Copy(copy_out, dtype, {}));
  return phases.End("COPY_OUT", start);
}

Status NcclReducescatter(gpu::ProcessSetOnDevice* device, int32_t index, int32_t group,
                         const std::vector<FusedPart>& parts, size_t n, size_t self,
                         Phases& phases) {
  const auto& spec = parts.front().request->operation().spec;
  const auto dtype = static_cast<DType>(spec.dtype());
  const auto op = static_cast<ReduceOp>(spec.reduce_op());
  const size_t element = ElementSize(dtype);
  const MemberMajor m = MemberMajorLayout(parts, n, true);
  const size_t total = m.chunks.begin.back() + m.chunks.size.back();
  void* buffer;  // NCCL reduces in place: never in the caller's input
  TUTTI_RETURN_IF_ERROR(device->FusionBuffer(total, &buffer));
  std::vector<gpu::CopySegment> copy_in, copy_out;
  for (size_t p = 0; p < parts.size(); ++p) {
    size_t from = 0;
    for (size_t j = 0; j < n; ++j) {
      const size_t bytes = static_cast<size_t>(m.rows[p][j]) * m.row_bytes[p];
      copy_in.push_back({At(parts[p].request->operation().input, from), At(buffer, m.offset[p][j]),
                         bytes / element});
      from += bytes;
    }
  }
  auto start = WallClock::now();
  TUTTI_RETURN_IF_ERROR(device->Copy(copy_in, dtype, Prescale(spec.prescale())));
  TUTTI_RETURN_IF_ERROR(phases.End("COPY_IN", start));
  start = WallClock::now();
  TUTTI_RETURN_IF_ERROR(device->ReduceScatter(group, buffer, ToChunks(m.chunks),
                                              static_cast<int32_t>(self), dtype,
                                              Reduction(op)));
  TUTTI_RETURN_IF_ERROR(phases.End("REDUCESCATTER", start));
  start = WallClock::now();
  for (size_t p = 0; p < parts.size(); ++p) {
    auto& request = *parts[p].request;
    const size_t bytes = static_cast<size_t>(m.rows[p][self]) * m.row_bytes[p];
    void* result;
    TUTTI_RETURN_IF_ERROR(DeviceResult(device, index, bytes, request, &result));
    copy_out.push_back({At(buffer, m.offset[p][self]), result, bytes / element});
    const auto& own = request.operation().spec.shape();
    request.result().shape.assign(own.begin(), own.end());
    request.result().shape[0] = m.rows[p][self];
  }
  TUTTI_RETURN_IF_ERROR(device->Copy(
      copy_out, dtype, OutTransform(dtype, op, spec.postscale(), n)));
  return phases.End("COPY_OUT", start);
}

Status NcclAlltoall(gpu::ProcessSetOnDevice* device, int32_t index, int32_t group, const FusedPart& part,
                    size_t n, size_t self) {
  auto& request = *part.request;
  const auto& spec = request.operation().spec;
  const size_t row_bytes = RowBytes(spec);
  std::vector<int64_t> sent(n), received(n);
  for (size_t j = 0; j < n; ++j) {
    sent[j] = part.member_rows[self * n + j];
    received[j] = part.member_rows[j * n + self];
  }
  const ChunkLayout out = RowChunks(sent, row_bytes), in = RowChunks(received, row_bytes);
  void* result;
  TUTTI_RETURN_IF_ERROR(DeviceResult(device, index, in.begin.back() + in.size.back(), request, &result));
  auto& r = request.result();
  r.received_splits = received;
  r.shape.assign(spec.shape().begin(), spec.shape().end());
  r.shape[0] = std::accumulate(received.begin(), received.end(), int64_t{0});
  return device->AllToAll(group, request.operation().input, ToChunks(out), result, ToChunks(in));
}

}  // namespace

Status RunNcclCollective(const DeviceArgs& args, const std::vector<FusedPart>& parts,
                         const PhaseObserver& observe) {
  const auto& spec = parts.front().request->operation().spec;
  const int32_t index = DeviceOf(parts), group = parts.front().device_group;
  if (index < 0) return Status(Code::kInternal, "the NCCL path was chosen for host tensors");
  const auto deadline = gpu::Clock::now() + args.timeout;
  gpu::ProcessSetOnDevice* device;
  TUTTI_RETURN_IF_ERROR(OpenDevice(&args.state->devices, index, &device));
  device->Bound(deadline, args.interrupted);
  TUTTI_RETURN_IF_ERROR(EnsureComm(args, device, group, deadline));
  TUTTI_RETURN_IF_ERROR(OrderAfterProducers(device, parts));
  Phases phases(args, device, observe, deadline);
  const size_t n = args.members->size(), self = args.members->IndexOf(args.self);
  switch (spec.kind()) {
    case wire::COLLECTIVE_ALLREDUCE:
      TUTTI_RETURN_IF_ERROR(NcclAllreduce(device, group, parts, n, phases));
      break;
    case wire::COLLECTIVE_BROADCAST: {
      const auto& o = parts.front().request->operation();
      TUTTI_RETURN_IF_ERROR(device->Broadcast(
          group, o.output, o.count * ElementSize(static_cast<DType>(spec.dtype())),
          static_cast<int32_t>(args.members->IndexOf(spec.root()))));
      break;
    }
    case wire::COLLECTIVE_ALLGATHER:
      TUTTI_RETURN_IF_ERROR(NcclAllgather(device, index, group, parts, n, self, phases));
      break;
    case wire::COLLECTIVE_REDUCESCATTER:
      TUTTI_RETURN_IF_ERROR(NcclReducescatter(device, index, group, parts, n, self, phases));
      break;
    case wire::COLLECTIVE_ALLTOALL:
      TUTTI_RETURN_IF_ERROR(NcclAlltoall(device, index, group, parts.front(), n, self));
      break;
    default:
      return Status(Code::kInternal, std::string("no device path for ") + wire::KindName(spec.kind()));
  }
  return Finish(args, device, parts, deadline);
}

}  // namespace tutti::client
