// The batched copy kernel against cudaMemcpyAsync device to device, on one GPU:
//  - one large tensor (bandwidth),
//  - a fused group of many small tensors: one launch against one cudaMemcpyAsync per tensor,
//  - the same with a scale folded in (float16, float32), which cudaMemcpy cannot do at all.
// Prints GB/s (bytes read + written per second, as cudaMemcpy bandwidth is usually quoted, over
// 2 x payload) and the ratio kernel / cudaMemcpy. Run by tests/gpu/device_check.sh.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <vector>

#include "common/dtype.h"
#include "gpu/copy_kernels.h"

namespace {

using tutti::DType;
using tutti::gpu::CopySegment;
using tutti::gpu::CopyTransform;

#define CHECK(call)                                                             \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));          \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

// Milliseconds per run of `work`, the median of `reps` timed with events after a warm-up.
double Time(cudaStream_t stream, int reps, const std::function<void()>& work) {
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  work();
  CHECK(cudaStreamSynchronize(stream));
  std::vector<float> times;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(start, stream));
    work();
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return times[times.size() / 2];
}

void Case(const char* name, size_t tensors, size_t bytes_each, DType dtype, double scale,
          cudaStream_t stream) {
  const size_t element = tutti::ElementSize(dtype), total = tensors * bytes_each;
  char *in, *out;
  CHECK(cudaMalloc(reinterpret_cast<void**>(&in), total));
  CHECK(cudaMalloc(reinterpret_cast<void**>(&out), total));
  CHECK(cudaMemset(in, 0, total));
  std::vector<CopySegment> segments;
  for (size_t t = 0; t < tensors; ++t)
    segments.push_back({in + t * bytes_each, out + t * bytes_each, bytes_each / element});
  CopyTransform transform;
  transform.scale = scale;
  const double kernel = Time(stream, 20, [&] {
    CHECK(tutti::gpu::LaunchBatchedCopy(segments.data(), segments.size(), dtype,
                                        transform, stream));
  });
  const double memcpy = Time(stream, 20, [&] {
    for (size_t t = 0; t < tensors; ++t)
      CHECK(cudaMemcpyAsync(out + t * bytes_each, in + t * bytes_each, bytes_each,
                            cudaMemcpyDeviceToDevice, stream));
  });
  const double gb = 2.0 * static_cast<double>(total) / 1e9;
  std::printf("%-44s %6zu x %9zu B  kernel %8.3f ms %7.1f GB/s   cudaMemcpy %8.3f ms %7.1f GB/s   "
              "kernel/memcpy time %.2f\n",
              name, tensors, bytes_each, kernel, gb / (kernel / 1e3), memcpy, gb / (memcpy / 1e3),
              kernel / memcpy);
  cudaFree(in);
  cudaFree(out);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("gpu_copy_bench: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp properties;
  CHECK(cudaGetDeviceProperties(&properties, 0));
  std::printf("device 0: %s\n", properties.name);
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Case("one tensor, plain copy", 1, 256 << 20, DType::kFloat32, 1.0, stream);
  Case("one tensor, float32 x 0.5 (memcpy: plain)", 1, 256 << 20, DType::kFloat32, 0.5, stream);
  Case("one tensor, float16 x 0.5 (memcpy: plain)", 1, 256 << 20, DType::kFloat16, 0.5, stream);
  Case("fused group, plain copy", 256, 256 << 10, DType::kFloat32, 1.0, stream);
  Case("fused group of small tensors, plain copy", 1024, 16 << 10, DType::kFloat32, 1.0, stream);
  Case("fused group of small tensors, bf16 x 0.5", 1024, 16 << 10, DType::kBFloat16, 0.5, stream);
  cudaStreamDestroy(stream);
  return 0;
}
