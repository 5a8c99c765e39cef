#include "gpu/process_set_on_device.h"

#include <cstring>
#include <thread>

#include "common/dtype.h"
#include "gpu/copy_kernels.h"
#include "gpu/cuda_event.h"
#include "gpu/cuda_status.h"
#include "gpu/device_guard.h"
#include "gpu/module_errors.h"

namespace tutti::gpu {
namespace {

// NCCL has no bool and no 16-bit integer. bool reduces as bytes, its logic made of max and min
// (NcclOp); int16 reductions are refused at submission (client/submission_checks.cc) and here
// (Reducible). What does not reduce (broadcast, allgather, alltoall) moves as bytes anyway.
ncclDataType_t NcclType(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kInt8: return ncclInt8;
    case DType::kUInt8: return ncclUint8;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kBool: return ncclUint8;
    case DType::kInt16: break;  // never reduced: Reducible()
  }
  return ncclUint8;
}

Status Reducible(DType dtype) {
  if (dtype != DType::kInt16) return Status::Ok();
  return errors::Int16NotReducible();
}

// Average never reaches NCCL: client/ sums and folds the division into the copy out, exactly as
// the CPU path does, so both paths give the same integer results. bool: "or" (sum, max) is the
// bytes' max and "and" (min, product) their min, for any nonzero bytes; the copy out makes the
// result 0 or 1 (CopyTransform::normalize_bool).
ncclRedOp_t NcclOp(DType dtype, ReduceOp op) {
  if (dtype == DType::kBool) return op == ReduceOp::kMin || op == ReduceOp::kProduct ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
    default: return ncclSum;
  }
}

bool EvenAndContiguous(const Chunks& chunks) {
  for (size_t j = 0; j < chunks.size.size(); ++j)
    if (chunks.size[j] != chunks.size[0] || chunks.begin[j] != chunks.begin[0] + j * chunks.size[0])
      return false;
  return true;
}

char* At(void* buffer, size_t offset) { return static_cast<char*>(buffer) + offset; }

// Polling cadence of host waits on the device: short enough to add little latency to a
// collective, long enough not to burn a core that the application's own threads need.
constexpr auto kPoll = std::chrono::microseconds(20);

}  // namespace

Status CudaProcessSetOnDevice::Open(int device, std::unique_ptr<ProcessSetOnDevice>* out) {
  DeviceGuard guard(device);
  cudaStream_t stream;
  TUTTI_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  out->reset(new CudaProcessSetOnDevice(device, stream));
  return Status::Ok();
}

CudaProcessSetOnDevice::~CudaProcessSetOnDevice() {
  DeviceGuard guard(device_);
  cudaStreamSynchronize(stream_);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (auto& [key, comm] : comms_) {
    ncclResult_t state = ncclCommFinalize(comm);
    while (state == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(kPoll);
      ncclCommGetAsyncError(comm, &state);
    }
    if (state == ncclSuccess)
      ncclCommDestroy(comm);
    else
      ncclCommAbort(comm);
  }
  if (fusion_) cudaFree(fusion_);
  if (staging_) cudaFreeHost(staging_);
  cudaStreamDestroy(stream_);
}

Status CudaProcessSetOnDevice::After(const Event& producer) {
  DeviceGuard guard(device_);
  TUTTI_CUDA(cudaStreamWaitEvent(stream_, static_cast<const CudaEvent&>(producer).get(), 0));
  return Status::Ok();
}

Status CudaProcessSetOnDevice::Copy(const std::vector<CopySegment>& segments, DType dtype,
                           const CopyTransform& transform) {
  DeviceGuard guard(device_);
  return FromCuda(LaunchBatchedCopy(segments.data(), segments.size(), dtype, transform, stream_),
                  "the batched copy kernel");
}

Status CudaProcessSetOnDevice::CopyBytes(void* destination, const void* source, size_t bytes) {
  if (bytes == 0 || destination == source) return Status::Ok();
  DeviceGuard guard(device_);
  TUTTI_CUDA(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, stream_));
  return Status::Ok();
}

Status CudaProcessSetOnDevice::FusionBuffer(size_t bytes, void** buffer) {
  if (bytes > fusion_bytes_) {
    DeviceGuard guard(device_);
    if (fusion_) TUTTI_CUDA(cudaFree(fusion_));  // waits for the work still using it
    fusion_ = nullptr;
    fusion_bytes_ = 0;
    TUTTI_CUDA(cudaMalloc(&fusion_, bytes));
    fusion_bytes_ = bytes;
  }
  *buffer = fusion_;
  return Status::Ok();
}

Status CudaProcessSetOnDevice::StagingBuffer(size_t bytes, void** buffer) {
  if (bytes > staging_bytes_) {
    DeviceGuard guard(device_);
    if (staging_) {
      TUTTI_CUDA(cudaStreamSynchronize(stream_));
      TUTTI_CUDA(cudaFreeHost(staging_));
    }
    staging_ = nullptr;
    staging_bytes_ = 0;
    TUTTI_CUDA(cudaHostAlloc(&staging_, bytes, cudaHostAllocPortable));
    staging_bytes_ = bytes;
  }
  *buffer = staging_;
  return Status::Ok();
}

Status CudaProcessSetOnDevice::AllocateResult(size_t bytes, void** buffer) {
  DeviceGuard guard(device_);
  *buffer = nullptr;
  if (bytes == 0) return Status::Ok();
  TUTTI_CUDA(cudaMallocAsync(buffer, bytes, stream_));
  return Status::Ok();
}

Status CudaProcessSetOnDevice::InitComm(int32_t comm, const std::string& unique_id, int32_t nranks,
                               int32_t rank, Deadline deadline, const Interrupt& interrupted) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal))
    return errors::UniqueIdSize(unique_id.size(), sizeof(id.internal));
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  DeviceGuard guard(device_);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // a member that never arrives must not hang this thread
  ncclComm_t created;
  const ncclResult_t started = ncclCommInitRankConfig(&created, nranks, id, rank, &config);
  TUTTI_RETURN_IF_ERROR(FromNccl(started, "ncclCommInitRankConfig"));
  ncclResult_t state = ncclInProgress;
  while (true) {
    ncclCommGetAsyncError(created, &state);
    if (state != ncclInProgress) break;
    Status stop = interrupted ? interrupted() : Status::Ok();
    if (stop.ok() && Clock::now() >= deadline)
      stop = errors::CommunicatorNotReady(nranks);
    if (!stop.ok()) {
      ncclCommAbort(created);
      return stop;
    }
    std::this_thread::sleep_for(kPoll);
  }
  if (state != ncclSuccess) {
    ncclCommAbort(created);
    return FromNccl(state, "creating the NCCL communicator");
  }
  comms_[comm] = created;
  return Status::Ok();
}

void CudaProcessSetOnDevice::Bound(Deadline deadline, Interrupt interrupted) {
  bound_deadline_ = deadline;
  bound_interrupt_ = std::move(interrupted);
}

Status CudaProcessSetOnDevice::Comm(int32_t comm, ncclComm_t* out) const {
  auto found = comms_.find(comm);
  if (found == comms_.end())
    return errors::NoCommunicator(comm);
  *out = found->second;
  return Status::Ok();
}

Status CudaProcessSetOnDevice::Settle(ncclComm_t comm, const char* call) {
  while (true) {
    ncclResult_t state;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) state = queried;
    if (state == ncclSuccess) return Status::Ok();
    Status stop;
    if (state != ncclInProgress)
      stop = FromNccl(state, call);
    else if (bound_interrupt_)
      stop = bound_interrupt_();
    if (stop.ok() && Clock::now() >= bound_deadline_)
      stop = Status(Code::kTimeout, std::string(call) + " was still being queued at the deadline");
    if (!stop.ok()) {
      AbortComms();
      return stop;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

Status CudaProcessSetOnDevice::Allreduce(int32_t key, const void* send, void* receive, size_t count,
                                DType dtype, ReduceOp op) {
  TUTTI_RETURN_IF_ERROR(Reducible(dtype));
  ncclComm_t comm;
  TUTTI_RETURN_IF_ERROR(Comm(key, &comm));
  DeviceGuard guard(device_);
  TUTTI_NCCL(ncclAllReduce(send, receive, count, NcclType(dtype), NcclOp(dtype, op), comm, stream_));
  return Settle(comm, "ncclAllReduce");
}

Status CudaProcessSetOnDevice::Broadcast(int32_t key, void* buffer, size_t bytes, int32_t root) {
  ncclComm_t comm;
  TUTTI_RETURN_IF_ERROR(Comm(key, &comm));
  DeviceGuard guard(device_);
  TUTTI_NCCL(ncclBroadcast(buffer, buffer, bytes, ncclUint8, root, comm, stream_));
  return Settle(comm, "ncclBroadcast");
}

Status CudaProcessSetOnDevice::Allgather(int32_t key, void* buffer, const Chunks& chunks) {
  ncclComm_t comm;
  TUTTI_RETURN_IF_ERROR(Comm(key, &comm));
  DeviceGuard guard(device_);
  if (EvenAndContiguous(chunks)) {
    int rank;
    TUTTI_NCCL(ncclCommUserRank(comm, &rank));
    const size_t size = chunks.size[0];
    TUTTI_NCCL(ncclAllGather(At(buffer, chunks.begin[rank]), At(buffer, chunks.begin[0]), size,
                             ncclUint8, comm, stream_));
    return Settle(comm, "ncclAllGather");
  }
  // Members contribute different sizes: each member's chunk is broadcast from it, in one group.
  TUTTI_NCCL(ncclGroupStart());
  for (size_t j = 0; j < chunks.size.size(); ++j)
    if (chunks.size[j] > 0)
      ncclBroadcast(At(buffer, chunks.begin[j]), At(buffer, chunks.begin[j]), chunks.size[j],
                    ncclUint8, static_cast<int>(j), comm, stream_);
  TUTTI_NCCL(ncclGroupEnd());
  return Settle(comm, "ncclBroadcast (allgather of uneven chunks)");
}

Status CudaProcessSetOnDevice::ReduceScatter(int32_t key, void* buffer, const Chunks& chunks, int32_t self,
                                    DType dtype, ReduceOp op) {
  TUTTI_RETURN_IF_ERROR(Reducible(dtype));
  ncclComm_t comm;
  TUTTI_RETURN_IF_ERROR(Comm(key, &comm));
  DeviceGuard guard(device_);
  const size_t element = ElementSize(dtype);
  if (EvenAndContiguous(chunks)) {
    TUTTI_NCCL(ncclReduceScatter(At(buffer, chunks.begin[0]), At(buffer, chunks.begin[self]),
                                 chunks.size[0] / element, NcclType(dtype), NcclOp(dtype, op), comm,
                                 stream_));
    return Settle(comm, "ncclReduceScatter");
  }
  // Uneven chunks: member j reduces chunk j as the root of its own reduce, in one group.
  TUTTI_NCCL(ncclGroupStart());
  for (size_t j = 0; j < chunks.size.size(); ++j)
    if (chunks.size[j] > 0)
      ncclReduce(At(buffer, chunks.begin[j]), At(buffer, chunks.begin[j]), chunks.size[j] / element,
                 NcclType(dtype), NcclOp(dtype, op), static_cast<int>(j), comm, stream_);
  TUTTI_NCCL(ncclGroupEnd());
  return Settle(comm, "ncclReduce (reducescatter of uneven chunks)");
}

Status CudaProcessSetOnDevice::AllToAll(int32_t key, const void* send, const Chunks& send_chunks,
                               void* receive, const Chunks& recv_chunks) {
  ncclComm_t comm;
  TUTTI_RETURN_IF_ERROR(Comm(key, &comm));
  DeviceGuard guard(device_);
  TUTTI_NCCL(ncclGroupStart());
  for (size_t j = 0; j < send_chunks.size.size(); ++j) {
    if (send_chunks.size[j] > 0)
      ncclSend(At(const_cast<void*>(send), send_chunks.begin[j]), send_chunks.size[j], ncclUint8,
               static_cast<int>(j), comm, stream_);
    if (recv_chunks.size[j] > 0)
      ncclRecv(At(receive, recv_chunks.begin[j]), recv_chunks.size[j], ncclUint8,
               static_cast<int>(j), comm, stream_);
  }
  TUTTI_NCCL(ncclGroupEnd());
  return Settle(comm, "ncclSend/ncclRecv (alltoall)");
}

Status CudaProcessSetOnDevice::Send(int32_t key, const void* buffer, size_t bytes, int32_t peer) {
  ncclComm_t comm;
  TUTTI_RETURN_IF_ERROR(Comm(key, &comm));
  DeviceGuard guard(device_);
  TUTTI_NCCL(ncclSend(buffer, bytes, ncclUint8, peer, comm, stream_));
  return Settle(comm, "ncclSend");
}

Status CudaProcessSetOnDevice::Recv(int32_t key, void* buffer, size_t bytes, int32_t peer) {
  ncclComm_t comm;
  TUTTI_RETURN_IF_ERROR(Comm(key, &comm));
  DeviceGuard guard(device_);
  TUTTI_NCCL(ncclRecv(buffer, bytes, ncclUint8, peer, comm, stream_));
  return Settle(comm, "ncclRecv");
}

Status CudaProcessSetOnDevice::Record(std::shared_ptr<Event>* done) {
  return CudaEvent::Record(device_, stream_, done);
}

Status CudaProcessSetOnDevice::AsyncError() {
  for (auto& [key, comm] : comms_) {
    ncclResult_t state;
    const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
    if (queried != ncclSuccess) state = queried;
    if (state != ncclSuccess && state != ncclInProgress)
      return errors::AsyncError(ncclGetErrorString(state));
  }
  return Status::Ok();
}

Status CudaProcessSetOnDevice::Wait(const Event& done, Deadline deadline, const Interrupt& interrupted) {
  DeviceGuard guard(device_);
  const cudaEvent_t event = static_cast<const CudaEvent&>(done).get();
  while (true) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return Status::Ok();
    const Status stop = errors::WaitStops(
        state != cudaErrorNotReady ? FromCuda(state, "the set's device work") : AsyncError(),
        interrupted, deadline);
    if (!stop.ok()) {
      AbortComms();
      return stop;
    }
    std::this_thread::sleep_for(kPoll);
  }
}

void CudaProcessSetOnDevice::AbortComms() {
  // An aborted communicator is unusable; the lane reports the set broken and the next collective
  // on it, if any, fails before reaching NCCL.
  for (auto& [key, comm] : comms_) ncclCommAbort(comm);
  comms_.clear();
}

}  // namespace tutti::gpu
