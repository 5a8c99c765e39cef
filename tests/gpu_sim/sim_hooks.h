// The simulated GPU module's test hooks (tests/gpu_sim/sim_module.cc), looked up with dlsym in the
// module libtutti loaded (TUTTI_GPU_MODULE): dlopen of the same path returns that same instance.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tutti::testing {

struct SimHooks {
  void* (*stream_create)(int32_t device);
  void (*stream_destroy)(void* stream);
  int (*stream_synchronize)(void* stream);
  void (*device_synchronize)(int32_t device);
  void (*pause)(int paused);
  uint64_t (*seed)();
  int64_t (*communicators_created)();  // joined by this process's ranks, ever

  // The hooks of the module at `path`; throws if it is not the simulator.
  static SimHooks Of(const std::string& path) {
    void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!module) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    SimHooks hooks;
    Bind(module, "tutti_sim_stream_create", &hooks.stream_create);
    Bind(module, "tutti_sim_stream_destroy", &hooks.stream_destroy);
    Bind(module, "tutti_sim_stream_synchronize", &hooks.stream_synchronize);
    Bind(module, "tutti_sim_device_synchronize", &hooks.device_synchronize);
    Bind(module, "tutti_sim_pause", &hooks.pause);
    Bind(module, "tutti_sim_seed", &hooks.seed);
    Bind(module, "tutti_sim_communicators_created", &hooks.communicators_created);
    return hooks;
  }

 private:
  template <typename F>
  static void Bind(void* module, const char* name, F* out) {
    void* symbol = dlsym(module, name);
    if (!symbol) throw std::runtime_error(std::string(name) + " is not in the module: not the simulator");
    *out = reinterpret_cast<F>(symbol);
  }
};

}  // namespace tutti::testing
