// Tensors of the C ABI in the simulated GPU's memory, for the gpu_sim tests: the simulator's device
// memory is host memory, so a "device" tensor is bytes this process owns, described as CUDA memory
// of a chosen device (or as host memory with device < 0).
#pragma once

#include <tutti/tutti.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tutti::testing {

// Bytes per element of a tutti dtype.
inline size_t SizeOf(int32_t dtype) {
  switch (dtype) {
    case TUTTI_DTYPE_FLOAT64: case TUTTI_DTYPE_INT64: return 8;
    case TUTTI_DTYPE_FLOAT32: case TUTTI_DTYPE_INT32: return 4;
    case TUTTI_DTYPE_FLOAT16: case TUTTI_DTYPE_BFLOAT16: case TUTTI_DTYPE_INT16: return 2;
    default: return 1;
  }
}

// A zeroed tensor of `dtype` and `dims` on (simulated) cuda:`device`, or on the host with
// device < 0; `desc` points into it, so it must not be copied once described to the library.
struct DeviceTensor {
  DeviceTensor(int32_t dtype, std::vector<int64_t> dims, int device = 0) : shape(std::move(dims)) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    bytes.assign(static_cast<size_t>(count) * SizeOf(dtype), 0);
    desc.data = bytes.data();
    desc.dtype = dtype;
    desc.ndim = static_cast<int32_t>(shape.size());
    desc.shape = shape.data();
    if (device >= 0) {
      desc.device_type = TUTTI_DEVICE_CUDA;
      desc.device_index = device;
    }
  }
  int64_t rows() const { return shape[0]; }
  std::vector<char> bytes;
  std::vector<int64_t> shape;
  tutti_tensor_t desc = TUTTI_TENSOR_INIT;
};

}  // namespace tutti::testing
