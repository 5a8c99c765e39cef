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
#include <limits>

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

// int16 sums and products in unsigned 32-bit arithmetic, stored back as their low 16 bits: plain
// uint16_t operands would be promoted to (signed) int, where 65535 * 65535 overflows.
struct WrappedUInt16 {
  using Storage = uint16_t;
  static uint32_t Load(uint16_t v) { return v; }
  static uint16_t Store(uint32_t v) { return static_cast<uint16_t>(v); }
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

// bool as logic on bytes: any nonzero byte is true, and the result is always 0 or 1, so that an
// "and" of 2 and 1 is true (a bitwise and would make it false).
struct Or {
  uint8_t operator()(uint8_t a, uint8_t b) const { return static_cast<uint8_t>((a != 0) | (b != 0)); }
};

struct And {
  uint8_t operator()(uint8_t a, uint8_t b) const { return static_cast<uint8_t>((a != 0) & (b != 0)); }
};

// An integer scaled as Horovod scales it, (T)(x * factor) in double, truncating toward zero. C++
// leaves out-of-range and NaN conversions undefined; here they saturate to T's limits and give 0,
// as CUDA's conversions do. gpu/copy_kernels.cu spells out the same rule.
template <typename T>
T ScaleInteger(T x, double factor) {
  constexpr double kLow = static_cast<double>(std::numeric_limits<T>::min());  // 0 or -2^k: exact
  constexpr double kPastHigh = (static_cast<double>(std::numeric_limits<T>::max() / 2) + 1) * 2;
  const double y = static_cast<double>(x) * factor;
  if (y != y) return T(0);
  if (y >= kPastHigh) return std::numeric_limits<T>::max();
  if (y <= kLow) return std::numeric_limits<T>::min();
  return static_cast<T>(y);
}

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

// Sum and max are "or"; min and product "and" (average is refused before it gets here, and
// would be "or").
void ReduceBool(void* acc, const void* in, size_t n, ReduceOp op) {
  if (op == ReduceOp::kMin || op == ReduceOp::kProduct) return Combine<Plain<uint8_t>>(acc, in, n, And{});
  Combine<Plain<uint8_t>>(acc, in, n, Or{});
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
    case DType::kInt16: ReduceTyped<WrappedUInt16, Plain<int16_t>>(acc, in, count, op); return true;
    case DType::kBool: ReduceBool(acc, in, count, op); return true;
    default: return false;
  }
}

template <typename T>
void ScaleIntegers(void* dst, const void* src, size_t n, double factor) {
  Map<Plain<T>>(dst, src, n, [factor](T x) { return ScaleInteger(x, factor); });
}

// float32 and float64 scaling (float32 by the factor rounded to float32), and the integers'
// (ScaleInteger). False for the others: the 16-bit floats and bool.
bool ScalePlain(void* dst, const void* src, size_t n, DType dtype, double factor) {
  switch (dtype) {
    case DType::kFloat32: {
      const float f32 = static_cast<float>(factor);
      Map<Plain<float>>(dst, src, n, [f32](float x) { return x * f32; });
      return true;
    }
    case DType::kFloat64:
      Map<Plain<double>>(dst, src, n, [factor](double x) { return x * factor; });
      return true;
    case DType::kInt8: ScaleIntegers<int8_t>(dst, src, n, factor); return true;
    case DType::kUInt8: ScaleIntegers<uint8_t>(dst, src, n, factor); return true;
    case DType::kInt16: ScaleIntegers<int16_t>(dst, src, n, factor); return true;
    case DType::kInt32: ScaleIntegers<int32_t>(dst, src, n, factor); return true;
    case DType::kInt64: ScaleIntegers<int64_t>(dst, src, n, factor); return true;
    default: return false;
  }
}

}  // namespace
}  // namespace tutti
