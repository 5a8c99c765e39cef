#include "client/reduce.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "client/half.h"
#include "client/reduce_narrow_simd.h"

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

void Scale(void* dst, const void* src, size_t n, DType dtype, double factor) {
  const float f32 = static_cast<float>(factor);
  auto by_f32 = [f32](float x) { return x * f32; };
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: {
      // The scalar 16-bit conversions are far below memory speed: eight at a time where the
      // CPU can, the tail below.
      auto* d = static_cast<uint16_t*>(dst);
      const auto* s = static_cast<const uint16_t*>(src);
      const size_t done = narrow_simd::Scale(dtype, d, s, n, f32);
      if (dtype == DType::kFloat16) return Map<Half>(d + done, s + done, n - done, by_f32);
      return Map<BFloat16>(d + done, s + done, n - done, by_f32);
    }
    case DType::kFloat32: return Map<Plain<float>>(dst, src, n, by_f32);
    case DType::kFloat64:
      return Map<Plain<double>>(dst, src, n, [factor](double x) { return x * factor; });
    default: Die("only floating buffers can be scaled by a factor other than 1");
  }
}

template <typename T>
void DivideInt(void* buf, size_t n, int64_t divisor) {
  if (divisor == -1) {
    // INT64_MIN / -1 overflows; negating in unsigned wraps like every other integer result.
    return Map<Plain<T>>(buf, buf, n,
                         [](T x) { return static_cast<T>(0 - static_cast<uint64_t>(x)); });
  }
  Map<Plain<T>>(buf, buf, n,
                [divisor](T x) { return static_cast<T>(static_cast<int64_t>(x) / divisor); });
}

}  // namespace

void ReduceInto(void* acc, const void* in, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: {
      // The scalar 16-bit conversions run at a fraction of memory speed: eight elements at a
      // time where the CPU can, the tail below.
      auto* a = static_cast<uint16_t*>(acc);
      const auto* b = static_cast<const uint16_t*>(in);
      const size_t done = narrow_simd::Combine(dtype, a, b, count, op);
      if (dtype == DType::kFloat16) return ReduceTyped<Half, Half>(a + done, b + done, count - done, op);
      return ReduceTyped<BFloat16, BFloat16>(a + done, b + done, count - done, op);
    }
    case DType::kFloat32: return ReduceTyped<Plain<float>, Plain<float>>(acc, in, count, op);
    case DType::kFloat64: return ReduceTyped<Plain<double>, Plain<double>>(acc, in, count, op);
    case DType::kInt8: return ReduceTyped<Plain<uint8_t>, Plain<int8_t>>(acc, in, count, op);
    case DType::kUInt8: return ReduceTyped<Plain<uint8_t>, Plain<uint8_t>>(acc, in, count, op);
    case DType::kInt32: return ReduceTyped<Plain<uint32_t>, Plain<int32_t>>(acc, in, count, op);
    case DType::kInt64: return ReduceTyped<Plain<uint64_t>, Plain<int64_t>>(acc, in, count, op);
  }
  Die("invalid dtype");
}

void ScaleInPlace(void* buf, size_t count, DType dtype, double factor) {
  if (factor == 1.0) return;
  Scale(buf, buf, count, dtype, factor);
}

void ScaleCopy(void* dst, const void* src, size_t count, DType dtype, double factor) {
  if (factor != 1.0) return Scale(dst, src, count, dtype, factor);
  if (dst != src && count != 0) std::memmove(dst, src, count * ElementSize(dtype));
}

void DivideInPlace(void* buf, size_t count, DType dtype, int64_t divisor) {
  if (divisor == 0) Die("division by zero");
  if (divisor == 1) return;
  const auto by = [divisor](auto x) { return x / static_cast<decltype(x)>(divisor); };
  switch (dtype) {
    case DType::kFloat16: return Map<Half>(buf, buf, count, by);
    case DType::kBFloat16: return Map<BFloat16>(buf, buf, count, by);
    case DType::kFloat32: return Map<Plain<float>>(buf, buf, count, by);
    case DType::kFloat64: return Map<Plain<double>>(buf, buf, count, by);
    case DType::kInt8: return DivideInt<int8_t>(buf, count, divisor);
    case DType::kUInt8: return DivideInt<uint8_t>(buf, count, divisor);
    case DType::kInt32: return DivideInt<int32_t>(buf, count, divisor);
    case DType::kInt64: return DivideInt<int64_t>(buf, count, divisor);
  }
  Die("invalid dtype");
}

namespace {

template <typename T>
void Fill(void* buf, size_t count, T value) {
  std::fill_n(static_cast<T*>(buf), count, value);
}

// The identity of `op` for an arithmetic type T.
template <typename T>
T Identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::kProduct: return T(1);
    case ReduceOp::kMin:
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::max();
    case ReduceOp::kMax:
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                  : std::numeric_limits<T>::lowest();
    default: return T(0);
  }
}

}  // namespace

void FillIdentity(void* buf, size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kFloat16: return Fill<uint16_t>(buf, count, FloatToHalf(Identity<float>(op)));
    case DType::kBFloat16: return Fill<uint16_t>(buf, count, FloatToBFloat16(Identity<float>(op)));
    case DType::kFloat32: return Fill<float>(buf, count, Identity<float>(op));
    case DType::kFloat64: return Fill<double>(buf, count, Identity<double>(op));
    case DType::kInt8: return Fill<int8_t>(buf, count, Identity<int8_t>(op));
    case DType::kUInt8: return Fill<uint8_t>(buf, count, Identity<uint8_t>(op));
    case DType::kInt32: return Fill<int32_t>(buf, count, Identity<int32_t>(op));
    case DType::kInt64: return Fill<int64_t>(buf, count, Identity<int64_t>(op));
  }
}

}  // namespace tutti
