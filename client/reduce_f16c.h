// float16 kernels on the F16C instructions (x86-64 with AVX): eight elements widened to float32
// per instruction, combined, and rounded back to nearest-even, the same values the scalar
// kernels in reduce.cc produce (NaN payloads aside, which no caller relies on). Chosen at run
// time: Available() says whether this CPU has the instructions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace tutti::f16c {

bool Available();

// acc[i] = acc[i] (op) in[i] over the largest multiple of 8 elements of n; returns how many
// were done (the caller finishes the tail). kAverage combines like kSum.
size_t Combine(uint16_t* acc, const uint16_t* in, size_t n, ReduceOp op);

// dst[i] = src[i] * factor over the largest multiple of 8 elements; dst may equal src.
size_t Scale(uint16_t* dst, const uint16_t* src, size_t n, float factor);

}  // namespace tutti::f16c
