// SIMD kernels for the 16-bit floats on x86-64: float16 through the F16C conversions, bfloat16
// through AVX2 integer shifts; eight elements widened to float32 per instruction, combined, and
// rounded back to nearest-even: the same values as the scalar kernels in reduce.cc (NaN
// payloads aside, which no caller relies on). Chosen at run time by CPU feature: Available()
// says whether this CPU runs the kernels of `dtype`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace tutti::narrow_simd {

// dtype: kFloat16 or kBFloat16.
bool Available(DType dtype);

// acc[i] = acc[i] (op) in[i] over the largest multiple of 8 elements of n; returns how many
// were done (the caller finishes the tail). kAverage combines like kSum.
size_t Combine(DType dtype, uint16_t* acc, const uint16_t* in, size_t n, ReduceOp op);

// dst[i] = src[i] * factor (in float32) over the largest multiple of 8 elements; dst may equal
// src. Returns how many were done.
size_t Scale(DType dtype, uint16_t* dst, const uint16_t* src, size_t n, float factor);

// Conversions for library compression (client/compress/codecs.h), over the largest multiple of
// 8 elements; each returns how many were done. Narrow: float32 -> 16 bits, nearest even.
// Widen: 16 bits -> float32, exact. WidenAdd: acc[i] += widened in[i], in float32.
size_t Narrow(DType dtype, const float* in, uint16_t* out, size_t n);
size_t Widen(DType dtype, const uint16_t* in, float* out, size_t n);
size_t WidenAdd(DType dtype, const uint16_t* in, float* acc, size_t n);

}  // namespace tutti::narrow_simd
