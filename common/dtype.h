// Element types and reduce ops as the C ABI numbers them, with the facts every layer needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tutti {

enum class DType : int32_t {
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat32 = 3,
  kFloat64 = 4,
  kInt8 = 5,
  kUInt8 = 6,
  kInt32 = 7,
  kInt64 = 8,
  kInt16 = 9,
  kBool = 10,  // one byte: 0 is false, anything else true; reductions write 0 or 1
};

enum class ReduceOp : int32_t {
  kSum = 1,
  kAverage = 2,
  kMin = 3,
  kMax = 4,
  kProduct = 5,
};

bool IsValidDType(int32_t value);
bool IsValidReduceOp(int32_t value);
bool IsFloating(DType dtype);
size_t ElementSize(DType dtype);
const char* DTypeName(int32_t dtype);       // "float32"; "dtype(<n>)" style text for unknown values
const char* ReduceOpName(int32_t op);       // "sum"

}  // namespace tutti
