// The element-wise loops of reduce.cc, included once per instruction set: reduce.cc compiles
// them for the baseline (SSE2 on x86-64), reduce_avx2.cc for AVX2, and ReduceInto picks at run
// time. Everything here has internal linkage, so that the two compilations never mix.
// A file including this after `#pragma GCC target` must include the standard headers and
// client/kernels/half.h first, so that their inline functions stay baseline code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "client/kernels/half.h"
#include "common/dtype.h"

namespace tutti {
namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "tutti: reduce kernel: %s\n", what);
  std::abort();
}

// A codec says how an element is stored and in which type it is computed. Keeping the
// conversion out of the loops lets one loop template serve both the plain types (where
// Load/Store vanish and GCC vectorizes) and the 16-bit floats (widened to float32).
template <typename T>
struct Plain {
  using Storage = T;
  static T Load(T v) { return v; }
  static T Store(T v) { return v; }
};

struct Half {
  using Storage = uint16_t;
  static float Load(uint16_t v) { return HalfToFloat(v); }
  static uint16_t Store(float v) { return FloatToHalf(v); }
};

struct BFloat16 {
  using Storage = uint16_t;
  static float Load(uint16_t v) { return BFloat16ToFloat(v); }
  static uint16_t Store(float v) { return FloatToBFloat16(v); }
};

struct Sum {
  template <typename T>
  T operator()(T a, T b) const { return static_cast<T>(a + b); }
};

struct Product {
  template <typename T>
  T operator()(T a, T b) const { return static_cast<T>(a * b); }
};

// NaN must win whichever side it is on (as torch does); for integers the NaN test folds away.
struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    T r = b < a ? b : a;
    return b != b ? b : r;
  }
};

struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    T r = a < b ? b : a;
    return b != b ? b : r;
  }
};

// GCC 12+ vectorizes at -O2 only under the "very cheap" cost model, which refuses loops whose
// trip count may leave a scalar remainder. Fixed-size inner blocks give it such loops at -O2;
// the tail is done one element at a time. (A lambda body would lose the restrict qualifiers.)
template <typename S>
constexpr size_t kBlock = 64 / sizeof(S);

template <typename C, typename Op>
void CombineLoop(typename C::Storage* __restrict acc, const typename C::Storage* __restrict in,
                 size_t n, Op op) {
  constexpr size_t kB = kBlock<typename C::Storage>;
  size_t i = 0;
  for (; i + kB <= n; i += kB) {
    for (size_t j = i; j < i + kB; ++j) acc[j] = C::Store(op(C::Load(acc[j]), C::Load(in[j])));
  }
  for (; i < n; ++i) acc[i] = C::Store(op(C::Load(acc[i]), C::Load(in[i])));
}

template <typename C, typename Op>
void Combine(void* acc, const void* in, size_t n, Op op) {
  using S = typename C::Storage;
  CombineLoop<C>(static_cast<S*>(acc), static_cast<const S*>(in), n, op);
}

// Sum and product go through `Arith` (unsigned for integers: wrap-around without signed-overflow
// UB); min and max need the signed order of `Order`.
template <typename Arith, typename Order>
void ReduceTyped(void* acc, const void* in, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return Combine<Arith>(acc, in, n, Sum{});
    case ReduceOp::kProduct: return Combine<Arith>(acc, in, n, Product{});
    case ReduceOp::kMin: return Combine<Order>(acc, in, n, Min{});
    case ReduceOp::kMax: return Combine<Order>(acc, in, n, Max{});
  }
  Die("invalid reduce op");
}

template <typename C, typename Fn>
void MapLoop(typename C::Storage* __restrict dst, const typename C::Storage* __restrict src,
             size_t n, Fn fn) {
  constexpr size_t kB = kBlock<typename C::Storage>;
  size_t i = 0;
  for (; i + kB <= n; i += kB) {
    for (size_t j = i; j < i + kB; ++j) dst[j] = C::Store(fn(C::Load(src[j])));
  }
  for (; i < n; ++i) dst[i] = C::Store(fn(C::Load(src[i])));
}

template <typename C, typename Fn>
void MapInPlaceLoop(typename C::Storage* buf, size_t n, Fn fn) {
  constexpr size_t kB = kBlock<typename C::Storage>;
  size_t i = 0;
  for (; i + kB <= n; i += kB) {
    for (size_t j = i; j < i + kB; ++j) buf[j] = C::Store(fn(C::Load(buf[j])));
  }
  for (; i < n; ++i) buf[i] = C::Store(fn(C::Load(buf[i])));
}

// dst == src would break MapLoop's restrict promise, so in place takes its own loop.
template <typename C, typename Fn>
void Map(void* dst, const void* src, size_t n, Fn fn) {
  using S = typename C::Storage;
  if (dst == src) return MapInPlaceLoop<C>(static_cast<S*>(dst), n, fn);
  MapLoop<C>(static_cast<S*>(dst), static_cast<const S*>(src), n, fn);
}

// The plain (not 16-bit floating) dtypes. Returns false for the others.
bool ReducePlain(void* acc, const void* in, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kFloat32: ReduceTyped<Plain<float>, Plain<float>>(acc, in, count, op); return true;
    case DType::kFloat64: ReduceTyped<Plain<double>, Plain<double>>(acc, in, count, op); return true;
    case DType::kInt8: ReduceTyped<Plain<uint8_t>, Plain<int8_t>>(acc, in, count, op); return true;
    case DType::kUInt8: ReduceTyped<Plain<uint8_t>, Plain<uint8_t>>(acc, in, count, op); return true;
    case DType::kInt32: ReduceTyped<Plain<uint32_t>, Plain<int32_t>>(acc, in, count, op); return true;
    case DType::kInt64: ReduceTyped<Plain<uint64_t>, Plain<int64_t>>(acc, in, count, op); return true;
    default: return false;
  }
}

// float32 and float64 scaling (float32 by the factor rounded to float32). False for the others.
bool ScalePlain(void* dst, const void* src, size_t n, DType dtype, double factor) {
  if (dtype == DType::kFloat32) {
    const float f32 = static_cast<float>(factor);
    Map<Plain<float>>(dst, src, n, [f32](float x) { return x * f32; });
    return true;
  }
  if (dtype == DType::kFloat64) {
    Map<Plain<double>>(dst, src, n, [factor](double x) { return x * factor; });
    return true;
  }
  return false;
}

}  // namespace
}  // namespace tutti
