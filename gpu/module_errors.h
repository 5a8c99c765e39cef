// The GPU module's statuses that the rest of tutti (and its users) see, in one place: the real
// module (gpu/cuda_module.cc, gpu/process_set_on_device.cc) and the simulator (tests/gpu_sim)
// both build them here, so that their words cannot drift apart; tests/gpu_conformance checks them
// against both. Header-only and free of CUDA types.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"
#include "gpu/module_api.h"

namespace tutti::gpu::errors {

inline Status NoDeviceVisible(const std::string& why = "") {
  return Status(Code::kDeviceUnavailable,
                "no CUDA device is visible to this process" + (why.empty() ? "" : " (" + why + ")"));
}

// `index` outside the `count` devices this process sees; ok otherwise.
inline Status CheckIndex(int index, int count) {
  if (count == 0) return NoDeviceVisible();
  if (index >= 0 && index < count) return Status::Ok();
  return Status(Code::kDeviceUnavailable,
                "CUDA device " + std::to_string(index) + " does not exist: this process sees " +
                    std::to_string(count) + " (CUDA_VISIBLE_DEVICES renumbers them from 0)");
}

inline Status WorkPastDeadline() {
  return Status(Code::kTimeout, "the device work did not finish before the deadline");
}

inline Status CommunicatorNotReady(int nranks) {
  return Status(Code::kTimeout, "the NCCL communicator of " + std::to_string(nranks) +
                                    " ranks was not ready before the deadline: a member never "
                                    "joined it");
}

inline Status NoCommunicator(int key) {
  return Status(Code::kInternal, "no NCCL communicator for device group " + std::to_string(key));
}

inline Status UniqueIdSize(size_t got, size_t needed) {
  return Status(Code::kInternal, "an NCCL unique id of " + std::to_string(got) +
                                     " bytes arrived; NCCL needs " + std::to_string(needed));
}

inline Status Int16NotReducible() {
  return Status(Code::kUnsupported, "NCCL cannot reduce int16 (it has no 16-bit integer type)");
}

// Why a host wait on unfinished device work stops, in the order both modules check: the device's
// own error (`device`: a failed stream or communicator), then the interrupt, then the deadline;
// ok to go on waiting.
inline Status WaitStops(Status device, const Interrupt& interrupted, Deadline deadline) {
  if (device.ok() && interrupted) device = interrupted();
  if (device.ok() && Clock::now() >= deadline) device = WorkPastDeadline();
  return device;
}

// A communicator's asynchronous error (ncclCommGetAsyncError): a member failed or went away.
inline Status AsyncError(const std::string& what) {
  return Status(Code::kPeerLost, "NCCL reported an asynchronous error: " + what +
                                     " (a member of the set failed or is unreachable)");
}

}  // namespace tutti::gpu::errors
