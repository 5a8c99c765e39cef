#include "client/exec/gpu_module_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "client/exec/log.h"

namespace tutti::client {
namespace {

std::string DirectoryOf(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::vector<std::string> Candidates() {
  std::vector<std::string> paths;
  if (const char* given = std::getenv("TUTTI_GPU_MODULE"); given && *given) {
    paths.push_back(given);  // the operator's choice is the only one
    return paths;
  }
  Dl_info self;
  if (dladdr(reinterpret_cast<void*>(&LoadGpuModule), &self) && self.dli_fname)
    paths.push_back(DirectoryOf(self.dli_fname) + "/" TUTTI_GPU_MODULE_FILE);
  paths.push_back(TUTTI_GPU_MODULE_BUILD_DIR "/" TUTTI_GPU_MODULE_FILE);
  paths.push_back(TUTTI_GPU_MODULE_INSTALL_DIR "/" TUTTI_GPU_MODULE_FILE);
  return paths;
}

Status Load(gpu::Module** module) {
  if (!TUTTI_GPU_MODULE_BUILT && !std::getenv("TUTTI_GPU_MODULE"))
    return Status(Code::kDeviceUnavailable,
                  "this libtutti was built without GPU support (TUTTI_GPU=OFF or no CUDA toolkit "
                  "at build time): device tensors cannot be used");
  std::string tried;
  for (const auto& path : Candidates()) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(why ? why : path.c_str());
      continue;
    }
    using Open = int (*)(int, gpu::Module**, char*, size_t);
    auto open = reinterpret_cast<Open>(dlsym(handle, "tutti_gpu_module_open"));
    if (open == nullptr)
      return Status(Code::kDeviceUnavailable,
                    "cannot load the GPU module: " + path + " has no tutti_gpu_module_open");
    char error[256] = "";
    if (open(gpu::kModuleApi, module, error, sizeof error) != 0)
      return Status(Code::kDeviceUnavailable, "cannot load the GPU module " + path + ": " + error);
    Log().info("GPU module {} loaded: {}", path, (*module)->Describe());
    return Status::Ok();  // the handle stays open for the life of the process
  }
  return Status(Code::kDeviceUnavailable, "cannot load the GPU module: " + tried);
}

}  // namespace

Status LoadGpuModule(gpu::Module** module) {
  static std::once_flag once;
  static gpu::Module* loaded = nullptr;
  static Status failure;
  std::call_once(once, [] { failure = Load(&loaded); });
  if (!failure.ok()) return failure;
  *module = loaded;
  return Status::Ok();
}

Status CheckCudaDevice(int32_t index) {
  gpu::Module* module;
  TUTTI_RETURN_IF_ERROR(LoadGpuModule(&module));
  return module->CheckDevice(index);
}

Status NcclVersion(int32_t* version) {
  gpu::Module* module;
  TUTTI_RETURN_IF_ERROR(LoadGpuModule(&module));
  *version = module->NcclVersion();
  return Status::Ok();
}

}  // namespace tutti::client
