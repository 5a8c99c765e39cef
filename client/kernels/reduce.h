// Element-wise kernels for the data plane: combining a received chunk into an accumulator and
// applying the pre/post scale factors. Results depend only on the inputs (no threading, no
// reassociation), so every rank computes bit-identical values for the same chunk.
//
// float16/bfloat16 elements are widened to float32, combined and rounded back (nearest even)
// per element per call. Integer sum and product wrap around modulo 2^bits. Floating min/max
// return NaN when either operand is NaN. bool is logic on bytes: any nonzero byte is true, sum
// and max are "or", min and product "and", and combined bytes are 0 or 1.
//
// Preconditions, which the C API validates first, so that a violation here is a bug and aborts:
// dtype and op are valid enum values, bool buffers are only scaled by exactly 1.0 and never
// divided, and divisors are nonzero.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace tutti {

// acc[i] = acc[i] (op) in[i] for i < count. kAverage combines like kSum; the caller divides.
// acc and in must not overlap.
void ReduceInto(void* acc, const void* in, size_t count, DType dtype, ReduceOp op);

// buf[i] *= factor. float16/bfloat16/float32 multiply by factor rounded to float32; float64
// by factor itself. Integers as Horovod scales them: (T)(x * factor) computed in double,
// truncating toward zero; where C++ leaves the cast undefined, a product beyond T's range gives
// T's limit and NaN gives 0 (as CUDA's conversions do). factor == 1.0 leaves the buffer untouched
// (any dtype).
void ScaleInPlace(void* buf, size_t count, DType dtype, double factor);

// buf[i] /= divisor, truncating toward zero, for the integer dtypes' average (floating dtypes
// divide exactly and round).
void DivideInPlace(void* buf, size_t count, DType dtype, int64_t divisor);

// Fills `count` elements with the identity of `op` (0 for sum and average, 1 for product, the
// largest value for min and the lowest for max, infinities for floating types; bool: false for
// sum and max, true for min and product): what a member that joined contributes.
void FillIdentity(void* buf, size_t count, DType dtype, ReduceOp op);

// buf[i] = (buf[i] != 0) for a bool buffer. The end of every bool reduction, so that its result
// is 0 or 1 also where no combine ran (a set of one rank) or where the combine kept a byte as it
// was (NCCL's max and min on the GPU path).
void NormalizeBool(void* buf, size_t count);

// dst[i] = src[i] * factor with ScaleInPlace's rounding. With factor == 1.0 it is a plain copy
// for every dtype. src may equal dst; otherwise the ranges must not overlap.
void ScaleCopy(void* dst, const void* src, size_t count, DType dtype, double factor);

// dst[i] = (own[i] * factor) (op) in[i], bit for bit ScaleCopy then ReduceInto, but block by
// block, so that each block of dst is still in cache when the combine reads it back: an
// out-of-place allreduce reads its input and writes its output in one pass, with no copy of the
// input first. own may equal dst (then it is ReduceInto after ScaleInPlace); otherwise no two of
// the ranges may overlap.
void ScaleReduce(void* dst, const void* own, const void* in, size_t count, DType dtype, ReduceOp op,
                 double factor);

}  // namespace tutti
