// The batched copy kernel alone (gpu/copy_kernels.cu): many segments in one launch, in place
// and across buffers, with the transforms the fusion buffer folds in: scaling of floating types
// (rounded like the host path) and the integer average's truncating division.
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype.h"
#include "gpu/copy_kernels.h"

namespace tutti::gpu {
namespace {

bool HaveGpu(std::string* why) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess) *why = cudaGetErrorString(error);
  else if (devices == 0) *why = "no devices";
  return error == cudaSuccess && devices > 0;
}

#define SKIP_WITHOUT_GPU()                                          \
  do {                                                              \
    std::string why;                                                \
    if (!HaveGpu(&why)) GTEST_SKIP() << "no CUDA device (" << why << ")"; \
  } while (0)

template <typename T>
std::vector<T> RunSegments(const std::vector<std::vector<T>>& inputs, int32_t dtype,
                           const CopyTransform& transform, std::vector<size_t>* offsets) {
  size_t total = 0;
  for (const auto& in : inputs) {
    offsets->push_back(total);
    total += in.size();
  }
  T* device_in;
  T* device_out;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device_in), total * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&device_out), total * sizeof(T)), cudaSuccess);
  std::vector<CopySegment> segments;
  for (size_t s = 0; s < inputs.size(); ++s) {
    EXPECT_EQ(cudaMemcpy(device_in + (*offsets)[s], inputs[s].data(), inputs[s].size() * sizeof(T),
                         cudaMemcpyHostToDevice), cudaSuccess);
    segments.push_back({device_in + (*offsets)[s], device_out + (*offsets)[s], inputs[s].size()});
  }
  EXPECT_EQ(LaunchBatchedCopy(segments.data(), segments.size(), dtype, transform, nullptr), cudaSuccess);
  std::vector<T> out(total);
  EXPECT_EQ(cudaMemcpy(out.data(), device_out, total * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(device_in);
  cudaFree(device_out);
  return out;
}

TEST(CopyKernel, ThousandsOfSegmentsAcrossLaunchesIdentity) {
  SKIP_WITHOUT_GPU();
  std::vector<std::vector<uint8_t>> inputs;
  for (int s = 0; s < 2500; ++s) {  // three launches of at most kSegmentsPerLaunch
    std::vector<uint8_t> in(1 + (s * 131) % 3000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(s + i);
    inputs.push_back(std::move(in));
  }
  std::vector<size_t> offsets;
  const auto out = RunSegments(inputs, static_cast<int32_t>(DType::kUInt8), {}, &offsets);
  for (size_t s = 0; s < inputs.size(); ++s)
    ASSERT_EQ(0, std::memcmp(out.data() + offsets[s], inputs[s].data(), inputs[s].size())) << s;
}

TEST(CopyKernel, ScalesFloatsAndDividesIntegersLikeTheHostPath) {
  SKIP_WITHOUT_GPU();
  std::vector<size_t> offsets;
  const auto floats = RunSegments<float>({{1, 2, 3}, {-4, 0.5f}}, static_cast<int32_t>(DType::kFloat32),
                                         {0.25, 1}, &offsets);
  EXPECT_EQ(floats, (std::vector<float>{0.25f, 0.5f, 0.75f, -1, 0.125f}));
  offsets.clear();
  CopyTransform average;
  average.divisor = 3;
  const auto ints = RunSegments<int32_t>({{7, -7, 9}, {2, -2}}, static_cast<int32_t>(DType::kInt32), average, &offsets);
  EXPECT_EQ(ints, (std::vector<int32_t>{2, -2, 3, 0, 0}));  // truncation toward zero, as in C
  offsets.clear();
  const auto bytes = RunSegments<uint8_t>({{255, 7}}, static_cast<int32_t>(DType::kUInt8), average, &offsets);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{85, 2}));
}

}  // namespace
}  // namespace tutti::gpu
