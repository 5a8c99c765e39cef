// A recorded cudaEvent_t, owned.
#pragma once

#include <cuda_runtime_api.h>

#include "gpu/cuda_status.h"
#include "gpu/device_guard.h"
#include "gpu/module_api.h"

namespace tutti::gpu {

class CudaEvent final : public Event {
 public:
  CudaEvent(int device, cudaEvent_t event) : device_(device), event_(event) {}
  ~CudaEvent() override {
    DeviceGuard guard(device_);
    cudaEventDestroy(event_);
  }
  int device() const { return device_; }
  cudaEvent_t get() const { return event_; }

  // Records a fresh event on `stream` of `device`.
  static Status Record(int device, cudaStream_t stream, std::shared_ptr<Event>* out) {
    DeviceGuard guard(device);
    cudaEvent_t event;
    cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (error != cudaSuccess) return FromCuda(error, "cudaEventCreateWithFlags");
    error = cudaEventRecord(event, stream);
    if (error != cudaSuccess) {
      cudaEventDestroy(event);
      return FromCuda(error, "cudaEventRecord");
    }
    *out = std::make_shared<CudaEvent>(device, event);
    return Status::Ok();
  }

 private:
  const int device_;
  const cudaEvent_t event_;
};

}  // namespace tutti::gpu
