// Collectives of device tensors (docs/gpu.md), run by the set's lane like the host ones:
//  - NCCL: every member's tensor is on its own GPU. Tensors are copied into the set's device
//    fusion buffer by one batched-copy launch (prescale folded in), reduced or gathered by NCCL on
//    the set's stream, and copied out by one launch (average and postscale folded in). A single
//    allreduce skips the fusion buffer.
//  - Staged: members share a GPU, or one joined. Device tensors are copied to pinned host memory
//    (prescaled on the device first), the host collective runs over the CPU transports, and the
//    results go back to the device (averaged and postscaled there), so that both paths scale
//    alike (float16 in float16).
// Either way the work is ordered after each tensor's producer event, the requests get their
// completion event (for tutti_request_stream_wait) as soon as it is queued, and the lane then
// waits for it on the host, polling NCCL's asynchronous errors and the lane's interrupt.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/exec/fused_collectives.h"
#include "client/exec/ring_allreduce.h"
#include "gpu/module_api.h"

namespace tutti::client {

// A set's state on each device it used, by device index, opened lazily (OpenDevice).
using DevicesInUse = std::map<int32_t, std::unique_ptr<gpu::ProcessSetOnDevice>>;

// What a lane keeps for device work. Lane thread only.
struct DeviceLaneState {
  DevicesInUse devices;
  bool warned_staged = false;
};

struct DeviceArgs {
  int32_t set_id;
  const MemberList* members;
  int32_t self;                          // global rank
  std::chrono::milliseconds timeout;     // for each collective, and for a communicator's setup
  gpu::Interrupt interrupted;            // the lane was aborted or the runtime shuts down
  // The set's first member sends the id of a new communicator to the others through tuttid...
  std::function<void(int32_t group, const std::string& id)> publish_comm_id;
  // ...which they wait for.
  std::function<Status(int32_t group, gpu::Deadline deadline, const gpu::Interrupt& interrupted,
                       std::string* id)> await_comm_id;
  bool synchronous_phases = false;  // timeline on: wait after each phase so spans show GPU time
  DeviceLaneState* state;
};

// The collective of `parts` (one tensor, or several fused) on the NCCL path.
Status RunNcclCollective(const DeviceArgs& args, const std::vector<FusedPart>& parts,
                         const PhaseObserver& observe);

// The same through pinned host memory and the CPU transports of `ring`; `fusion_buffer` is the
// lane's host fusion buffer.
Status RunStagedCollective(const DeviceArgs& args, const RingArgs& ring,
                           const std::vector<FusedPart>& parts, std::vector<char>* fusion_buffer,
                           const PhaseObserver& observe);

}  // namespace tutti::client
