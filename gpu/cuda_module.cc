// The GPU module's entry point and its Module: device checks, producer events and NCCL ids.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

#include "gpu/cuda_event.h"
#include "gpu/cuda_status.h"
#include "gpu/device_guard.h"
#include "gpu/module_api.h"
#include "gpu/module_errors.h"
#include "gpu/process_set_on_device.h"

namespace tutti::gpu {
namespace {

class CudaModule final : public Module {
 public:
  std::string Describe() override {
    int runtime = 0, driver = 0, nccl = 0, devices = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    ncclGetVersion(&nccl);
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    char text[160];
    std::snprintf(text, sizeof text, "CUDA runtime %d.%d, driver %d.%d, NCCL %d.%d.%d, %d device(s)",
                  runtime / 1000, runtime % 1000 / 10, driver / 1000, driver % 1000 / 10,
                  nccl / 10000, nccl % 10000 / 100, nccl % 100, devices);
    return text;
  }

  int32_t NcclVersion() override {
    int nccl = 0;
    if (ncclGetVersion(&nccl) != ncclSuccess) return 0;
    return nccl;
  }

  // ncclSend and ncclRecv came with NCCL 2.7.
  bool PointToPointOnNccl() override { return NcclVersion() >= 20700; }

  // Called for every submitted device tensor: the device count is read once (it cannot change
  // while the process runs).
  Status CheckDevice(int32_t index) override {
    std::call_once(counted_, [this] { count_error_ = cudaGetDeviceCount(&devices_); });
    const cudaError_t error = count_error_;
    const int devices = devices_;
    if (error != cudaSuccess)
      return errors::NoDeviceVisible(std::string("cudaGetDeviceCount: ") + cudaGetErrorString(error));
    return errors::CheckIndex(index, devices);
  }

  // Asked for every submitted tensor: cudaGetDeviceProperties is far too slow for that, so each
  // device's UUID is read once.
  Status DeviceUuid(int32_t index, std::string* uuid) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto known = uuids_.find(index);
    if (known == uuids_.end()) {
      cudaDeviceProp properties;
      TUTTI_CUDA(cudaGetDeviceProperties(&properties, index));
      known = uuids_.emplace(index, std::string(properties.uuid.bytes, sizeof(properties.uuid.bytes)))
                  .first;
    }
    *uuid = known->second;
    return Status::Ok();
  }

  Status RecordEvent(int32_t index, void* stream, std::shared_ptr<Event>* event) override {
    return CudaEvent::Record(index, static_cast<cudaStream_t>(stream), event);
  }

  Status StreamWait(void* stream, const Event& event) override {
    const auto& cuda_event = static_cast<const CudaEvent&>(event);
    DeviceGuard guard(cuda_event.device());
    TUTTI_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), cuda_event.get(), 0));
    return Status::Ok();
  }

  Status UniqueId(std::string* id) override {
    ncclUniqueId unique;
    TUTTI_NCCL(ncclGetUniqueId(&unique));
    id->assign(unique.internal, sizeof(unique.internal));
    return Status::Ok();
  }

  Status OpenProcessSet(int32_t index, std::unique_ptr<ProcessSetOnDevice>* on_device) override {
    return CudaProcessSetOnDevice::Open(index, on_device);
  }

  void Free(int32_t index, void* buffer) override {
    if (buffer == nullptr) return;
    DeviceGuard guard(index);
    cudaFree(buffer);  // synchronizes: the application may still read it on a stream of its own
  }

 private:
  std::once_flag counted_;
  cudaError_t count_error_ = cudaSuccess;
  int devices_ = 0;
  std::mutex mu_;
  std::map<int32_t, std::string> uuids_;  // guarded by mu_
};

}  // namespace
}  // namespace tutti::gpu

extern "C" __attribute__((visibility("default"))) int tutti_gpu_module_open(
    int api, tutti::gpu::Module** module, char* error, size_t error_size) {
  if (api != tutti::gpu::kModuleApi) {
    std::snprintf(error, error_size,
                  "the GPU module speaks module API %d, libtutti %d: it comes from another build",
                  tutti::gpu::kModuleApi, api);
    return 1;
  }
  static tutti::gpu::CudaModule instance;  // never destroyed before exit: handed-out events use it
  *module = &instance;
  return 0;
}
