// Finds and loads the GPU module (gpu/module_api.h) the first time a device tensor needs it.
#pragma once

#include "common/status.h"
#include "gpu/module_api.h"

namespace tutti::client {

// The process's GPU module, loaded on the first call; a failure is remembered and returned again
// (kDeviceUnavailable, saying why). Thread-safe. Where it looks: $TUTTI_GPU_MODULE, then next to
// the library or program holding this code, then this build tree, then the install directory.
Status LoadGpuModule(gpu::Module** module);

// LoadGpuModule, then the device's own check: ok or kDeviceUnavailable.
Status CheckCudaDevice(int32_t index);
// The GPU module's NCCL version code (0: none), or why the module cannot be loaded.
Status NcclVersion(int32_t* version);

}  // namespace tutti::client
