#include "common/dtype.h"

namespace tutti {

bool IsValidDType(int32_t value) { return value >= 1 && value <= 10; }
bool IsValidReduceOp(int32_t value) { return value >= 1 && value <= 5; }

bool IsFloating(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return true;
    default:
      return false;
  }
}

size_t ElementSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
      return 2;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return 1;
  }
  return 0;
}

const char* DTypeName(int32_t dtype) {
  switch (static_cast<DType>(dtype)) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kInt16: return "int16";
    case DType::kBool: return "bool";
  }
  return "unknown-dtype";
}

const char* ReduceOpName(int32_t op) {
  switch (static_cast<ReduceOp>(op)) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAverage: return "average";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kProduct: return "product";
  }
  return "unknown-op";
}

}  // namespace tutti
