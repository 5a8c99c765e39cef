// A stand-in for the GPU module on machines without a GPU (tests only): "device" memory is host
// memory, streams complete at once, and NCCL is absent. It lets the CPU machines run everything
// of a device collective that is not CUDA or NCCL itself: the loader, producer events, tuttid's
// path decision, the staged path with device results, stream waits, and the NCCL unique-id relay
// up to the point where a communicator would be created (InitComm reports the id it got, so a
// test can check that every member received the first member's). The real module is
// gpu/cuda_module.cc; tests/gpu runs it on a GPU.
//
// Environment: TUTTI_SIM_GPUS, the number of devices (default 2). Device i's UUID is
// "tutti-sim-gpu-<i>" padded to 16 bytes, so two ranks on one host and index share a GPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "client/kernels/reduce.h"
#include "gpu/module_api.h"

namespace tutti::gpu {
namespace {

class SimEvent final : public Event {};

// FNV-1a: a short, stable name for an id in messages.
std::string Fingerprint(const std::string& id) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : id) hash = (hash ^ c) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

Status NoNccl() {
  return Status(Code::kUnsupported, "gpu sim: no NCCL in the simulated GPU module");
}

class SimSetDevice final : public SetDevice {
 public:
  Status After(const Event&) override { return Status::Ok(); }
  Status Copy(const std::vector<CopySegment>& segments, int32_t dtype,
              const CopyTransform& transform) override {
    // As the copy kernels (gpu/copy_kernels.cu) transform: integers divide before they scale.
    const auto type = static_cast<DType>(dtype);
    for (const auto& s : segments) {
      ScaleCopy(s.destination, s.source, s.count, type, 1.0);
      if (transform.divisor != 1) DivideInPlace(s.destination, s.count, type, transform.divisor);
      ScaleInPlace(s.destination, s.count, type, transform.scale);
      if (transform.normalize_bool) NormalizeBool(s.destination, s.count);
    }
    return Status::Ok();
  }
  Status CopyBytes(void* destination, const void* source, size_t bytes) override {
    if (bytes) std::memmove(destination, source, bytes);
    return Status::Ok();
  }
  Status FusionBuffer(size_t bytes, void** buffer) override { return Grow(&fusion_, bytes, buffer); }
  Status StagingBuffer(size_t bytes, void** buffer) override { return Grow(&staging_, bytes, buffer); }
  Status AllocateResult(size_t bytes, void** buffer) override {
    *buffer = bytes ? std::malloc(bytes) : nullptr;
    return bytes && !*buffer ? Status(Code::kInternal, "gpu sim: out of memory") : Status::Ok();
  }
  bool HasComm(int32_t) const override { return false; }
  Status InitComm(int32_t comm, const std::string& unique_id, int32_t nranks, int32_t rank,
                  Deadline, const Interrupt&) override {
    return Status(Code::kUnsupported,
                  "gpu sim: NCCL communicator " + std::to_string(comm) + " with id " +
                      Fingerprint(unique_id) + " as rank " + std::to_string(rank) + " of " +
                      std::to_string(nranks) + " cannot be created without NCCL");
  }
  void Bound(Deadline, Interrupt) override {}
  Status Allreduce(int32_t, const void*, void*, size_t, int32_t, int32_t) override { return NoNccl(); }
  Status Broadcast(int32_t, void*, size_t, int32_t) override { return NoNccl(); }
  Status Allgather(int32_t, void*, const Chunks&) override { return NoNccl(); }
  Status ReduceScatter(int32_t, void*, const Chunks&, int32_t, int32_t, int32_t) override { return NoNccl(); }
  Status AllToAll(int32_t, const void*, const Chunks&, void*, const Chunks&) override { return NoNccl(); }
  Status Record(std::shared_ptr<Event>* done) override {
    *done = std::make_shared<SimEvent>();
    return Status::Ok();
  }
  Status Wait(const Event&, Deadline, const Interrupt& interrupted) override {
    return interrupted ? interrupted() : Status::Ok();
  }

 private:
  static Status Grow(std::vector<char>* memory, size_t bytes, void** buffer) {
    if (memory->size() < bytes) memory->resize(bytes);
    *buffer = memory->data();
    return Status::Ok();
  }
  std::vector<char> fusion_, staging_;
};

class SimModule final : public Module {
 public:
  std::string Describe() override { return "gpu sim, " + std::to_string(Devices()) + " device(s)"; }
  int32_t NcclVersion() override { return 0; }  // the simulator runs without NCCL
  Status CheckDevice(int32_t index) override {
    if (index < 0 || index >= Devices())
      return Status(Code::kDeviceUnavailable, "gpu sim: no device " + std::to_string(index));
    return Status::Ok();
  }
  Status DeviceUuid(int32_t index, std::string* uuid) override {
    char text[17] = {};
    std::snprintf(text, sizeof text, "tutti-sim-gpu-%d", index);
    uuid->assign(text, 16);
    return Status::Ok();
  }
  Status RecordEvent(int32_t, void*, std::shared_ptr<Event>* event) override {
    *event = std::make_shared<SimEvent>();
    return Status::Ok();
  }
  Status StreamWait(void*, const Event&) override { return Status::Ok(); }
  Status UniqueId(std::string* id) override {
    std::random_device random;
    id->resize(128);
    for (auto& c : *id) c = static_cast<char>(random());
    return Status::Ok();
  }
  Status OpenSetDevice(int32_t, std::unique_ptr<SetDevice>* set_device) override {
    *set_device = std::make_unique<SimSetDevice>();
    return Status::Ok();
  }
  void Free(int32_t, void* buffer) override { std::free(buffer); }

 private:
  static int Devices() {
    const char* given = std::getenv("TUTTI_SIM_GPUS");
    return given ? std::atoi(given) : 2;
  }
};

}  // namespace
}  // namespace tutti::gpu

extern "C" __attribute__((visibility("default"))) int tutti_gpu_module_open(
    int api, tutti::gpu::Module** module, char* error, size_t error_size) {
  if (api != tutti::gpu::kModuleApi) {
    std::snprintf(error, error_size, "gpu sim speaks module API %d, not %d", tutti::gpu::kModuleApi, api);
    return 1;
  }
  static tutti::gpu::SimModule instance;
  *module = &instance;
  return 0;
}
