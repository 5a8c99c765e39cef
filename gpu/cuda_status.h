// CUDA and NCCL results as tutti::Status, naming the call that failed.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "common/status.h"

namespace tutti::gpu {

inline Status FromCuda(cudaError_t error, const char* call) {
  if (error == cudaSuccess) return Status::Ok();
  return Status(Code::kInternal, std::string(call) + " failed: " + cudaGetErrorString(error));
}

// NCCL errors that a lost or failing peer causes (system and remote errors) are kPeerLost; the
// others point at tutti or NCCL itself.
inline Status FromNccl(ncclResult_t result, const char* call) {
  if (result == ncclSuccess || result == ncclInProgress) return Status::Ok();
  const Code code = result == ncclSystemError || result == ncclRemoteError ? Code::kPeerLost
                                                                             : Code::kInternal;
  return Status(code, std::string(call) + " failed: " + ncclGetErrorString(result));
}

}  // namespace tutti::gpu

#define TUTTI_CUDA(call) TUTTI_RETURN_IF_ERROR(::tutti::gpu::FromCuda((call), #call))
#define TUTTI_NCCL(call) TUTTI_RETURN_IF_ERROR(::tutti::gpu::FromNccl((call), #call))
