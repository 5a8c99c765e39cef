// ProcessSetOnDevice on CUDA and NCCL: one process set's stream, buffers and communicators on one device.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <map>

#include "gpu/module_api.h"

namespace tutti::gpu {

class CudaProcessSetOnDevice final : public ProcessSetOnDevice {
 public:
  // Creates the set's non-blocking stream on `device`.
  static Status Open(int device, std::unique_ptr<ProcessSetOnDevice>* out);
  // Waits for the set's work, then finalizes and destroys its communicators (aborts those that
  // do not finish within a few seconds) and frees its buffers.
  ~CudaProcessSetOnDevice() override;

  Status After(const Event& producer) override;
  Status Copy(const std::vector<CopySegment>& segments, DType dtype,
              const CopyTransform& transform) override;
  Status CopyBytes(void* destination, const void* source, size_t bytes) override;
  Status FusionBuffer(size_t bytes, void** buffer) override;
  Status StagingBuffer(size_t bytes, void** buffer) override;
  Status AllocateResult(size_t bytes, void** buffer) override;

  bool HasComm(int32_t comm) const override { return comms_.count(comm) != 0; }
  Status InitComm(int32_t comm, const std::string& unique_id, int32_t nranks, int32_t rank,
                  Deadline deadline, const Interrupt& interrupted) override;
  void Bound(Deadline deadline, Interrupt interrupted) override;
  Status Allreduce(int32_t comm, const void* send, void* receive, size_t count, DType dtype,
                   ReduceOp op) override;
  Status Broadcast(int32_t comm, void* buffer, size_t bytes, int32_t root) override;
  Status Allgather(int32_t comm, void* buffer, const Chunks& chunks) override;
  Status ReduceScatter(int32_t comm, void* buffer, const Chunks& chunks, int32_t self,
                       DType dtype, ReduceOp op) override;
  Status AllToAll(int32_t comm, const void* send, const Chunks& send_chunks, void* receive,
                  const Chunks& recv_chunks) override;
  Status Send(int32_t comm, const void* buffer, size_t bytes, int32_t peer) override;
  Status Recv(int32_t comm, void* buffer, size_t bytes, int32_t peer) override;

  Status Record(std::shared_ptr<Event>* done) override;
  Status Wait(const Event& done, Deadline deadline, const Interrupt& interrupted) override;

 private:
  CudaProcessSetOnDevice(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  Status Comm(int32_t comm, ncclComm_t* out) const;
  // Polls a non-blocking communicator until the call just made on it left ncclInProgress, within
  // the bound; aborts every communicator on an error, the interrupt or the deadline.
  Status Settle(ncclComm_t comm, const char* call);
  // The first asynchronous error of any communicator, or ok.
  Status AsyncError();
  void AbortComms();

  const int device_;
  const cudaStream_t stream_;
  std::map<int32_t, ncclComm_t> comms_;
  void* fusion_ = nullptr;
  size_t fusion_bytes_ = 0;
  void* staging_ = nullptr;
  size_t staging_bytes_ = 0;
  Deadline bound_deadline_ = Deadline::max();
  Interrupt bound_interrupt_;
};

}  // namespace tutti::gpu
