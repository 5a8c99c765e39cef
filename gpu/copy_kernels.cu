#include "gpu/copy_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <vector>

#include "common/dtype.h"

namespace tutti::gpu {
namespace {

constexpr int kThreads = 256;
// Blocks per segment at most: enough to saturate HBM with a grid-stride loop on one tensor.
constexpr unsigned kMaxBlocksPerSegment = 1024;
// An unscaled segment at least this large is one cudaMemcpyAsync instead: on the H200 the
// kernel's grid-stride copy of one 256 MiB tensor ran at 86% of cudaMemcpy's bandwidth, and a copy
// that large gains nothing from sharing a launch with others.
constexpr size_t kDirectCopyBytes = size_t{1} << 20;

struct Batch {
  CopySegment segment[kSegmentsPerLaunch];
  double scale;
  int64_t divisor;
};

// A bool element: a byte read as a byte (reading 2 through a C++ bool would be undefined).
struct BoolByte {
  unsigned char value;
};

// An integer type's range as host-evaluated constants that device code may read (calling the
// host's std::numeric_limits from device code is not allowed).
template <typename T>
struct Range {
  static constexpr T kMin = std::numeric_limits<T>::min();
  static constexpr T kMax = std::numeric_limits<T>::max();
  static constexpr double kLow = static_cast<double>(kMin);  // 0 or -2^k: exact
  static constexpr double kPastHigh = (static_cast<double>(kMax / 2) + 1) * 2;  // 2^k: exact
};

// Per-dtype element transform; the identity transform takes the vectorised path instead.
// Integers: the average's division (truncating, -1 wrapping as on the CPU), then the scale in
// double cast back as Horovod does, saturating at T's limits and 0 for NaN like the CPU kernels
// (client/kernels/reduce_loops.h ScaleInteger), spelled out rather than left to the conversion.
template <typename T>
struct Transform {
  __device__ static T Apply(T x, double scale, int64_t divisor) {
    if (divisor == -1)
      x = static_cast<T>(0 - static_cast<unsigned long long>(x));
    else if (divisor != 1)
      x = static_cast<T>(static_cast<int64_t>(x) / divisor);
    if (scale == 1.0) return x;
    const double y = static_cast<double>(x) * scale;
    if (y != y) return T(0);
    if (y >= Range<T>::kPastHigh) return Range<T>::kMax;
    if (y <= Range<T>::kLow) return Range<T>::kMin;
    return static_cast<T>(y);
  }
};
// bool is never scaled or divided (submission refuses it); its only transform is normalize_bool.
template <>
struct Transform<BoolByte> {
  __device__ static BoolByte Apply(BoolByte x, double, int64_t) {
    return BoolByte{static_cast<unsigned char>(x.value != 0)};
  }
};
template <>
struct Transform<float> {
  __device__ static float Apply(float x, double scale, int64_t) { return x * static_cast<float>(scale); }
};
template <>
struct Transform<double> {
  __device__ static double Apply(double x, double scale, int64_t) { return x * scale; }
};
// In float16, as Horovod's scale_buffer_half2_k: the scale made a half (through float, as
// __float2half(double) does), one correctly rounded half multiply.
template <>
struct Transform<__half> {
  __device__ static __half Apply(__half x, double scale, int64_t) {
    return __hmul(x, __float2half_rn(static_cast<float>(scale)));
  }
};
template <>
struct Transform<__nv_bfloat16> {
  __device__ static __nv_bfloat16 Apply(__nv_bfloat16 x, double scale, int64_t) {
    return __float2bfloat16_rn(__bfloat162float(x) * static_cast<float>(scale));
  }
};

// blockIdx.y picks the segment; the blocks along x stride over its elements.
template <typename T>
__global__ void ScaledCopyKernel(Batch batch) {
  const CopySegment s = batch.segment[blockIdx.y];
  const T* in = static_cast<const T*>(s.source);
  T* out = static_cast<T*>(s.destination);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < s.count; i += stride)
    out[i] = Transform<T>::Apply(in[i], batch.scale, batch.divisor);
}

// Identity: 16 bytes per thread where both ends are 16-byte aligned, bytes for the rest.
__global__ void PlainCopyKernel(Batch batch, size_t element) {
  const CopySegment s = batch.segment[blockIdx.y];
  const size_t bytes = s.count * element;
  const auto* in = static_cast<const unsigned char*>(s.source);
  auto* out = static_cast<unsigned char*>(s.destination);
  if (in == out) return;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  size_t vectorised = 0;
  if ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) % 16 == 0) {
    vectorised = bytes / 16;
    const auto* in16 = reinterpret_cast<const uint4*>(in);
    auto* out16 = reinterpret_cast<uint4*>(out);
    for (size_t i = first; i < vectorised; i += stride) out16[i] = in16[i];
    vectorised *= 16;
  }
  for (size_t i = vectorised + first; i < bytes; i += stride) out[i] = in[i];
}

template <typename T>
void LaunchScaled(const Batch& batch, dim3 grid, cudaStream_t stream) {
  ScaledCopyKernel<T><<<grid, kThreads, 0, stream>>>(batch);
}

}  // namespace

cudaError_t LaunchBatchedCopy(const CopySegment* segments, size_t count, DType type,
                              const CopyTransform& transform, cudaStream_t stream) {
  if (!IsValidDType(static_cast<int32_t>(type))) return cudaErrorInvalidValue;
  const size_t element = ElementSize(type);
  const bool identity = type == DType::kBool ? !transform.normalize_bool
                                             : transform.scale == 1.0 && transform.divisor == 1;
  static Batch batch;  // 24 KiB: not on the caller's stack; launches copy it, one thread at a time
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  // Large unscaled segments go to the copy engines; the others are batched below (a fused group
  // of small tensors, the common case, keeps its array as it is).
  std::vector<CopySegment> batched;
  const auto direct = [&](const CopySegment& s) { return identity && s.count * element >= kDirectCopyBytes; };
  if (std::any_of(segments, segments + count, direct)) {
    for (size_t i = 0; i < count; ++i) {
      const CopySegment& s = segments[i];
      if (!direct(s)) {
        batched.push_back(s);
      } else if (s.source != s.destination) {
        const cudaError_t copied =
            cudaMemcpyAsync(s.destination, s.source, s.count * element, cudaMemcpyDefault, stream);
        if (copied != cudaSuccess) return copied;
      }
    }
    segments = batched.data();
    count = batched.size();
  }
  for (size_t first = 0; first < count; first += kSegmentsPerLaunch) {
    const size_t n = std::min<size_t>(kSegmentsPerLaunch, count - first);
    size_t largest = 0;
    for (size_t i = 0; i < n; ++i) {
      batch.segment[i] = segments[first + i];
      largest = std::max(largest, segments[first + i].count * (identity ? element : 1));
    }
    if (largest == 0) continue;
    batch.scale = transform.scale;
    batch.divisor = transform.divisor;
    const size_t per_thread = identity ? 16 : 1;
    const size_t blocks = (largest / per_thread + kThreads - 1) / kThreads;
    const dim3 grid(static_cast<unsigned>(std::min<size_t>(std::max<size_t>(blocks, 1), kMaxBlocksPerSegment)),
                    static_cast<unsigned>(n));
    if (identity) {
      PlainCopyKernel<<<grid, kThreads, 0, stream>>>(batch, element);
    } else {
      switch (type) {
        case DType::kFloat16: LaunchScaled<__half>(batch, grid, stream); break;
        case DType::kBFloat16: LaunchScaled<__nv_bfloat16>(batch, grid, stream); break;
        case DType::kFloat32: LaunchScaled<float>(batch, grid, stream); break;
        case DType::kFloat64: LaunchScaled<double>(batch, grid, stream); break;
        case DType::kInt8: LaunchScaled<int8_t>(batch, grid, stream); break;
        case DType::kUInt8: LaunchScaled<uint8_t>(batch, grid, stream); break;
        case DType::kInt32: LaunchScaled<int32_t>(batch, grid, stream); break;
        case DType::kInt64: LaunchScaled<int64_t>(batch, grid, stream); break;
        case DType::kInt16: LaunchScaled<int16_t>(batch, grid, stream); break;
        case DType::kBool: LaunchScaled<BoolByte>(batch, grid, stream); break;
      }
    }
    const cudaError_t launched = cudaGetLastError();
    if (launched != cudaSuccess) return launched;
  }
  return cudaSuccess;
}

}  // namespace tutti::gpu
