// Kernels the GPU tests use to produce and consume device tensors on a stream of their own.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace tutti::testing {

// Spins for about `milliseconds` on `stream`, then writes `value` to every one of the `count`
// floats at `data`: a slow producer.
void LaunchSlowFill(float* data, size_t count, float value, int milliseconds, cudaStream_t stream);

// out[i] = in[i] on `stream`: a consumer ordered after whatever `stream` waits for.
void LaunchCopy(const float* in, float* out, size_t count, cudaStream_t stream);

}  // namespace tutti::testing
