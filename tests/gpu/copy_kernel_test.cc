// The batched copy kernel alone (gpu/copy_kernels.cu): many segments in one launch, in place
// and across buffers, with the transforms the fusion buffer folds in: scaling of floating types
// (rounded like the host path), the integer average's truncating division, integer scaling
// (truncating and saturating like client/kernels/reduce.h) and the end of a bool reduction.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <limits>
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
std::vector<T> RunSegments(const std::vector<std::vector<T>>& inputs, DType dtype,
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
  const auto out = RunSegments(inputs, DType::kUInt8, {}, &offsets);
  for (size_t s = 0; s < inputs.size(); ++s)
    ASSERT_EQ(0, std::memcmp(out.data() + offsets[s], inputs[s].data(), inputs[s].size())) << s;
}

TEST(CopyKernel, ScalesFloatsAndDividesIntegersLikeTheHostPath) {
  SKIP_WITHOUT_GPU();
  std::vector<size_t> offsets;
  const auto floats = RunSegments<float>({{1, 2, 3}, {-4, 0.5f}}, DType::kFloat32,
                                         {0.25, 1}, &offsets);
  EXPECT_EQ(floats, (std::vector<float>{0.25f, 0.5f, 0.75f, -1, 0.125f}));
  offsets.clear();
  CopyTransform average;
  average.divisor = 3;
  const auto ints = RunSegments<int32_t>({{7, -7, 9}, {2, -2}}, DType::kInt32, average, &offsets);
  EXPECT_EQ(ints, (std::vector<int32_t>{2, -2, 3, 0, 0}));  // truncation toward zero, as in C
  offsets.clear();
  const auto bytes = RunSegments<uint8_t>({{255, 7}}, DType::kUInt8, average, &offsets);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{85, 2}));
}

// The host path's values (tests/unit/scale_test.cc checks the same rule on the CPU kernels).
TEST(CopyKernel, ScalesIntegersAfterTheAverageTruncatingAndSaturating) {
  SKIP_WITHOUT_GPU();
  std::vector<size_t> offsets;
  CopyTransform half;
  half.scale = 0.5;
  const int32_t big = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(RunSegments<int32_t>({{1, 2, 3}, {-3, big}}, DType::kInt32, half, &offsets),
            (std::vector<int32_t>{0, 1, 1, -1, big / 2}));
  offsets.clear();
  CopyTransform average_then_triple;
  average_then_triple.divisor = 2;
  average_then_triple.scale = 3;
  EXPECT_EQ(RunSegments<int64_t>({{7, -7}}, DType::kInt64, average_then_triple, &offsets),
            (std::vector<int64_t>{9, -9}));  // (7 / 2) * 3, not 7 * 3 / 2
  offsets.clear();
  CopyTransform thousand;
  thousand.scale = 1000;
  EXPECT_EQ(RunSegments<int16_t>({{100, -100, 3}}, DType::kInt16, thousand, &offsets),
            (std::vector<int16_t>{32767, -32768, 3000}));
  offsets.clear();
  CopyTransform negate;
  negate.scale = -1;
  EXPECT_EQ(RunSegments<uint8_t>({{5, 0}}, DType::kUInt8, negate, &offsets),
            (std::vector<uint8_t>{0, 0}));
  offsets.clear();
  CopyTransform nan;
  nan.scale = std::nan("");
  EXPECT_EQ(RunSegments<int8_t>({{5, -5}}, DType::kInt8, nan, &offsets),
            (std::vector<int8_t>{0, 0}));
}

TEST(CopyKernel, BoolIsCopiedAsBytesAndNormalizedAtTheEndOfAReduction) {
  SKIP_WITHOUT_GPU();
  std::vector<size_t> offsets;
  const DType dtype = DType::kBool;
  EXPECT_EQ(RunSegments<uint8_t>({{0, 1, 2, 255}}, dtype, {}, &offsets), (std::vector<uint8_t>{0, 1, 2, 255}));
  offsets.clear();
  CopyTransform normalize;
  normalize.normalize_bool = true;
  EXPECT_EQ(RunSegments<uint8_t>({{0, 1, 2}, {255, 0x80}}, dtype, normalize, &offsets),
            (std::vector<uint8_t>{0, 1, 1, 1, 1}));
}

}  // namespace
}  // namespace tutti::gpu
