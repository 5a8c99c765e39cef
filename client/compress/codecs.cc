#include "client/compress/codecs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "client/kernels/half.h"
#include "client/kernels/reduce_narrow_simd.h"
#include "common/dtype.h"

namespace tutti::client::compress {

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kNone: return "none";
    case Kind::kFp16: return "fp16";
    case Kind::kBf16: return "bf16";
    case Kind::kTopK: return "topk";
    case Kind::kAdaptive: return "adaptive";
  }
  return "unknown";
}

namespace {

DType Narrow(Kind kind) { return kind == Kind::kFp16 ? DType::kFloat16 : DType::kBFloat16; }

}  // namespace

// The SIMD kernels do the largest multiple of 8 elements where the CPU has AVX2 and F16C (the
// same bits as the scalar conversions: nearest even), the scalar loops the rest.
void Encode(Kind kind, const float* in, uint16_t* out, size_t n) {
  const size_t done = narrow_simd::Narrow(Narrow(kind), in, out, n);
  if (kind == Kind::kFp16)
    for (size_t i = done; i < n; ++i) out[i] = FloatToHalf(in[i]);
  else
    for (size_t i = done; i < n; ++i) out[i] = FloatToBFloat16(in[i]);
}

void Decode(Kind kind, const uint16_t* in, float* out, size_t n) {
  const size_t done = narrow_simd::Widen(Narrow(kind), in, out, n);
  if (kind == Kind::kFp16)
    for (size_t i = done; i < n; ++i) out[i] = HalfToFloat(in[i]);
  else
    for (size_t i = done; i < n; ++i) out[i] = BFloat16ToFloat(in[i]);
}

void DecodeAdd(Kind kind, const uint16_t* in, float* acc, size_t n) {
  const size_t done = narrow_simd::WidenAdd(Narrow(kind), in, acc, n);
  if (kind == Kind::kFp16)
    for (size_t i = done; i < n; ++i) acc[i] += HalfToFloat(in[i]);
  else
    for (size_t i = done; i < n; ++i) acc[i] += BFloat16ToFloat(in[i]);
}

size_t TopKCount(size_t n, double ratio) {
  if (n == 0) return 0;
  const double wanted = std::ceil(ratio * static_cast<double>(n));
  return std::clamp<size_t>(static_cast<size_t>(wanted), 1, n);
}

void SelectTopK(float* corrected, size_t n, size_t k, SparseEntry* out) {
  if (k == 0) return;
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  // Larger magnitude first; equal magnitudes by index, so that the pick is a pure function of
  // the values (a NaN compares as neither, and sorts after everything).
  auto before = [&](uint32_t a, uint32_t b) {
    const float x = std::fabs(corrected[a]), y = std::fabs(corrected[b]);
    if (x != y) return x > y || std::isnan(y);
    return a < b;
  };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k - 1), order.end(), before);
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  for (size_t i = 0; i < k; ++i) {
    out[i] = {order[i], corrected[order[i]]};
    corrected[order[i]] = 0.0f;
  }
}

void ScatterAdd(const SparseEntry* entries, size_t count, float* dense) {
  for (size_t i = 0; i < count; ++i) dense[entries[i].index] += entries[i].value;
}

}  // namespace tutti::client::compress
