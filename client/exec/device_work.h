// What the NCCL and the staged path of device collectives share (client/exec/device_collectives.h):
// the set's device, the transforms of the copies in and out, results in device memory, ordering
// after the producers, and publishing the completion. Lane thread only, like the paths.
#pragma once

#include <vector>

#include "client/exec/device_collectives.h"

namespace tutti::client {

inline char* At(void* base, size_t offset) { return static_cast<char*>(base) + offset; }
inline const char* At(const void* base, size_t offset) { return static_cast<const char*>(base) + offset; }

// What the copy out applies: average and postscale, folded like the host path's Finish():
// floating types fold the division into the scale, integers divide then scale, bool is made 0
// or 1 (it has neither average nor scale).
gpu::CopyTransform OutTransform(DType dtype, ReduceOp op, double postscale, size_t n);
gpu::CopyTransform Prescale(double prescale);
bool IsIdentity(const gpu::CopyTransform& transform);
// What NCCL reduces with: the average is a sum whose division the copy out applies.
inline ReduceOp Reduction(ReduceOp op) { return op == ReduceOp::kAverage ? ReduceOp::kSum : op; }

// The state on device `index` among `devices`, opened on first use.
Status OpenDevice(DevicesInUse* devices, int32_t index, gpu::ProcessSetOnDevice** device);
// A result in device memory that the request owns from now on.
Status DeviceResult(gpu::ProcessSetOnDevice* device, int32_t index, size_t bytes, Request& request,
                    void** data);
// The device every device tensor of `parts` is on (the coordinator fuses only tensors of one
// device combination, so there is one), or -1 if all are host tensors.
int32_t DeviceOf(const std::vector<FusedPart>& parts);
// The set's stream waits for every tensor's producer (no host wait).
Status OrderAfterProducers(gpu::ProcessSetOnDevice* device, const std::vector<FusedPart>& parts);
// Publishes the completion event to the requests, then waits for it on the host.
Status Finish(const DeviceArgs& args, gpu::ProcessSetOnDevice* device,
              const std::vector<FusedPart>& parts, gpu::Deadline deadline);

}  // namespace tutti::client
