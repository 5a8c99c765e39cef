// The batched copy kernel of the device fusion buffer (docs/gpu.md): many tensors copied in or
// out in one launch, with the prescale, postscale or integer average folded into the copy so
// that no tensor is read or written twice.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "gpu/module_api.h"

namespace tutti::gpu {

// Segments one launch carries as its kernel parameter (24 bytes each: kernel parameters of up to
// 32 KiB need CUDA 12.1 and Volta or newer; this module targets Hopper).
constexpr int kSegmentsPerLaunch = 1024;

// Queues the copies of `segments[0..count)` (host array, read during the call) on `stream`:
// unscaled segments of 1 MiB or more as one cudaMemcpyAsync each, the others in
// ceil(n / kSegmentsPerLaunch) kernel launches. Segments must not overlap each other, except that
// a segment may copy onto itself (an in-place scale).
cudaError_t LaunchBatchedCopy(const CopySegment* segments, size_t count, DType dtype,
                              const CopyTransform& transform, cudaStream_t stream);

}  // namespace tutti::gpu
