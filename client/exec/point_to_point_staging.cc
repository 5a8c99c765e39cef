#include "client/exec/point_to_point_staging.h"

#include "client/exec/device_work.h"

namespace tutti::client {

namespace {

// One copy on `device`'s stream after the tensor's producer (`ready`), waited for on the host;
// its event is published to `publish` first when given.
Status CopyAndWait(gpu::ProcessSetOnDevice* device, const std::shared_ptr<gpu::Event>& ready,
                   void* destination, const void* source, size_t bytes, Request* publish,
                   gpu::Deadline deadline, const gpu::Interrupt& interrupted) {
  if (ready) TUTTI_RETURN_IF_ERROR(device->After(*ready));
  TUTTI_RETURN_IF_ERROR(device->CopyBytes(destination, source, bytes));
  std::shared_ptr<gpu::Event> copied;
  TUTTI_RETURN_IF_ERROR(device->Record(&copied));
  if (publish != nullptr) publish->SetDeviceWork(copied);
  return device->Wait(*copied, deadline, interrupted);
}

}  // namespace

Status PointToPointStaging::ToHost(const Request& request, size_t bytes,
                                   const gpu::Interrupt& interrupted, const void** host) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& op = request.operation();
  gpu::ProcessSetOnDevice* device;
  TUTTI_RETURN_IF_ERROR(OpenDevice(&devices_, op.spec.device_index(), &device));
  void* staging;
  TUTTI_RETURN_IF_ERROR(device->StagingBuffer(std::max<size_t>(bytes, 1), &staging));
  TUTTI_RETURN_IF_ERROR(CopyAndWait(device, op.ready, staging, op.input, bytes, nullptr,
                                    gpu::Clock::now() + timeout_, interrupted));
  *host = staging;
  return Status::Ok();
}

Status PointToPointStaging::HostBuffer(const Request& request, size_t bytes, void** host) {
  std::lock_guard<std::mutex> lock(mu_);
  gpu::ProcessSetOnDevice* device;
  TUTTI_RETURN_IF_ERROR(OpenDevice(&devices_, request.operation().spec.device_index(), &device));
  return device->StagingBuffer(std::max<size_t>(bytes, 1), host);
}

Status PointToPointStaging::ToDevice(Request& request, const void* host, size_t bytes,
                                     const gpu::Interrupt& interrupted) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& op = request.operation();
  gpu::ProcessSetOnDevice* device;
  TUTTI_RETURN_IF_ERROR(OpenDevice(&devices_, op.spec.device_index(), &device));
  // After the producer: the application may still read the tensor's old contents on its stream.
  // The wait: `host` may be the staging buffer, which the next message overwrites.
  return CopyAndWait(device, op.ready, op.output, host, bytes, &request,
                     gpu::Clock::now() + timeout_, interrupted);
}

}  // namespace tutti::client
