#include "gpu/test_kernels.h"

namespace tutti::testing {
namespace {

__device__ unsigned long long Nanoseconds() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__global__ void SlowFill(float* data, size_t count, float value, unsigned long long nanoseconds) {
  if (threadIdx.x == 0) {
    const unsigned long long start = Nanoseconds();
    while (Nanoseconds() - start < nanoseconds) __nanosleep(1000);
  }
  __syncthreads();
  for (size_t i = threadIdx.x; i < count; i += blockDim.x) data[i] = value;
}

__global__ void Copy(const float* in, float* out, size_t count) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    out[i] = in[i];
}

}  // namespace

void LaunchSlowFill(float* data, size_t count, float value, int milliseconds, cudaStream_t stream) {
  SlowFill<<<1, 256, 0, stream>>>(data, count, value, 1000000ull * milliseconds);
}

void LaunchCopy(const float* in, float* out, size_t count, cudaStream_t stream) {
  Copy<<<64, 256, 0, stream>>>(in, out, count);
}

}  // namespace tutti::testing
