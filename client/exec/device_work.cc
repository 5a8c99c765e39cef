#include "client/exec/device_work.h"

#include "client/exec/gpu_module_loader.h"

namespace tutti::client {

gpu::CopyTransform OutTransform(DType dtype, ReduceOp op, double postscale, size_t n) {
  gpu::CopyTransform transform;
  if (dtype == DType::kBool) {
    transform.normalize_bool = true;
    return transform;
  }
  transform.scale = postscale;
  if (op == ReduceOp::kAverage) {
    if (IsFloating(dtype))
      transform.scale /= static_cast<double>(n);
    else
      transform.divisor = static_cast<int64_t>(n);
  }
  return transform;
}

bool IsIdentity(const gpu::CopyTransform& transform) {
  return transform.scale == 1.0 && transform.divisor == 1 && !transform.normalize_bool;
}

gpu::CopyTransform Prescale(double prescale) {
  gpu::CopyTransform transform;
  transform.scale = prescale;
  return transform;
}

Status OpenDevice(DevicesInUse* devices, int32_t index, gpu::ProcessSetOnDevice** device) {
  auto& slot = (*devices)[index];
  if (!slot) {
    gpu::Module* module;
    TUTTI_RETURN_IF_ERROR(LoadGpuModule(&module));
    TUTTI_RETURN_IF_ERROR(module->OpenProcessSet(index, &slot));
  }
  *device = slot.get();
  return Status::Ok();
}

namespace {

void FreeDeviceResult(void* pointer, size_t /*bytes*/, void* device) {
  gpu::Module* module;
  if (LoadGpuModule(&module).ok())
    module->Free(static_cast<int32_t>(reinterpret_cast<intptr_t>(device)), pointer);
}

}  // namespace

Status DeviceResult(gpu::ProcessSetOnDevice* device, int32_t index, size_t bytes, Request& request,
                    void** data) {
  TUTTI_RETURN_IF_ERROR(device->AllocateResult(bytes, data));
  request.result().data.Adopt(*data, bytes,
                              Allocator{nullptr, FreeDeviceResult,
                                        reinterpret_cast<void*>(static_cast<intptr_t>(index))});
  return Status::Ok();
}

// Publishes the completion event to the requests, then waits for it on the host.
Status Finish(const DeviceArgs& args, gpu::ProcessSetOnDevice* device, const std::vector<FusedPart>& parts,
              gpu::Deadline deadline) {
  std::shared_ptr<gpu::Event> done;
  TUTTI_RETURN_IF_ERROR(device->Record(&done));
  for (const auto& part : parts) part.request->SetDeviceWork(done);
  return device->Wait(*done, deadline, args.interrupted);
}

// The device every device tensor of `parts` is on (the coordinator fuses only tensors of one
// device combination, so there is one), or -1 if all are host tensors.
int32_t DeviceOf(const std::vector<FusedPart>& parts) {
  for (const auto& part : parts) {
    const auto& spec = part.request->operation().spec;
    if (spec.device_type() != 0) return spec.device_index();
  }
  return -1;
}

Status OrderAfterProducers(gpu::ProcessSetOnDevice* device, const std::vector<FusedPart>& parts) {
  for (const auto& part : parts)
    if (const auto& ready = part.request->operation().ready) TUTTI_RETURN_IF_ERROR(device->After(*ready));
  return Status::Ok();
}

}  // namespace tutti::client
