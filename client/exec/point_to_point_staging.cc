#include "client/exec/point_to_point_staging.h"

#include "client/exec/gpu_module_loader.h"

namespace tutti::client {

Status PointToPointStaging::Open(int32_t device, gpu::ProcessSetOnDevice** on_device) {
  auto& slot = devices_[device];
  if (!slot) {
    gpu::Module* module;
    TUTTI_RETURN_IF_ERROR(LoadGpuModule(&module));
    TUTTI_RETURN_IF_ERROR(module->OpenProcessSet(device, &slot));
  }
  *on_device = slot.get();
  return Status::Ok();
}

Status PointToPointStaging::ToHost(const Request& request, size_t bytes,
                                   const gpu::Interrupt& interrupted, const void** host) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& op = request.operation();
  gpu::ProcessSetOnDevice* device;
  TUTTI_RETURN_IF_ERROR(Open(op.spec.device_index(), &device));
  void* staging;
  TUTTI_RETURN_IF_ERROR(device->StagingBuffer(std::max<size_t>(bytes, 1), &staging));
  if (op.ready) TUTTI_RETURN_IF_ERROR(device->After(*op.ready));
  TUTTI_RETURN_IF_ERROR(device->CopyBytes(staging, op.input, bytes));
  std::shared_ptr<gpu::Event> copied;
  TUTTI_RETURN_IF_ERROR(device->Record(&copied));
  TUTTI_RETURN_IF_ERROR(device->Wait(*copied, gpu::Clock::now() + timeout_, interrupted));
  *host = staging;
  return Status::Ok();
}

Status PointToPointStaging::HostBuffer(const Request& request, size_t bytes, void** host) {
  std::lock_guard<std::mutex> lock(mu_);
  gpu::ProcessSetOnDevice* device;
  TUTTI_RETURN_IF_ERROR(Open(request.operation().spec.device_index(), &device));
  return device->StagingBuffer(std::max<size_t>(bytes, 1), host);
}

Status PointToPointStaging::ToDevice(Request& request, const void* host, size_t bytes,
                                     const gpu::Interrupt& interrupted) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& op = request.operation();
  gpu::ProcessSetOnDevice* device;
  TUTTI_RETURN_IF_ERROR(Open(op.spec.device_index(), &device));
  // The application may still read the tensor's old contents on its stream.
  if (op.ready) TUTTI_RETURN_IF_ERROR(device->After(*op.ready));
  TUTTI_RETURN_IF_ERROR(device->CopyBytes(op.output, host, bytes));
  std::shared_ptr<gpu::Event> copied;
  TUTTI_RETURN_IF_ERROR(device->Record(&copied));
  request.SetDeviceWork(copied);
  // `host` may be the staging buffer, which the next message overwrites: wait here.
  return device->Wait(*copied, gpu::Clock::now() + timeout_, interrupted);
}

}  // namespace tutti::client
