// A stand-in for the GPU module on machines without a GPU (tests only). "Device" memory is host
// memory; streams and events are asynchronous as a GPU's are: work runs later on the engine's
// executor in an order the seed picks (tests/gpu_sim/sim_streams.h), so code that reads a result
// before waiting for it, or lets two streams race, fails here as it would on a GPU. NCCL is
// simulated between the processes of one machine (tests/gpu_sim/sim_nccl.h): a communicator
// made from the relayed unique id, whose collectives block their stream until every rank came.
// What the simulator must reproduce of the real module (gpu/cuda_module.cc) is written in
// gpu/module_api.h and checked against both by tests/gpu_conformance.
//
// Environment: TUTTI_SIM_GPUS, the number of devices (default 2). Device i's UUID is
// "tutti-sim-gpu-<i>" padded to 16 bytes, so two ranks on one host and index share a GPU.
// TUTTI_SIM_SEED and TUTTI_SIM_MAX_DELAY_US: see sim_streams.h. TUTTI_SIM_NCCL_P2P=0: a module
// without NCCL point-to-point (device send and recv stay staged).
//
// Test hooks, exported beside tutti_gpu_module_open (tests/gpu_sim/sim_hooks.h declares them):
// user streams (what torch.cuda.Stream is to the real module), pausing the executor, the seed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "client/kernels/half.h"
#include "client/kernels/reduce.h"
#include "gpu/module_api.h"
#include "gpu/module_errors.h"
#include "tests/gpu_sim/sim_nccl.h"
#include "tests/gpu_sim/sim_streams.h"

namespace tutti::gpu {
namespace {

using sim::Engine;

// As the real module: NCCL has no 16-bit integer.
Status Reducible(DType dtype) {
  return dtype == DType::kInt16 ? errors::Int16NotReducible() : Status::Ok();
}

// Communicators created by this process (what a test counts: one per set and device group).
std::atomic<int64_t> communicators_created{0};

// One copy segment transformed as module_api.h's CopyTransform says (and copy_kernels.cu does).
void Transform(const CopySegment& s, DType dtype, const CopyTransform& transform) {
  const size_t bytes = s.count * ElementSize(dtype);
  if (bytes && s.destination != s.source) std::memmove(s.destination, s.source, bytes);
  if (dtype == DType::kBool) {
    if (transform.normalize_bool) NormalizeBool(s.destination, s.count);
    return;
  }
  if (transform.divisor != 1) DivideInPlace(s.destination, s.count, dtype, transform.divisor);
  double scale = transform.scale;
  // float16 in float16: the scale becomes a half (through float, as __float2half(double) does);
  // the CPU kernel's float32 product of two halves is exact and rounds once, as __hmul does.
  if (dtype == DType::kFloat16) scale = HalfToFloat(FloatToHalf(static_cast<float>(scale)));
  ScaleInPlace(s.destination, s.count, dtype, scale);
}

class SimProcessSetOnDevice final : public ProcessSetOnDevice {
 public:
  explicit SimProcessSetOnDevice(int32_t device) : stream_(Engine::Get().NewStream(device)) {}
  // The lane waited for its collectives; one still blocked here waits for a peer that will not
  // come: aborted, as the real module aborts what does not finalize.
  ~SimProcessSetOnDevice() override {
    for (auto& [key, comm] : comms_) comm->Abort();
    Engine::Get().Synchronize(stream_);
  }

  Status After(const Event& producer) override {
    Engine::Get().EnqueueWait(stream_, producer);
    return Status::Ok();
  }
  Status Copy(const std::vector<CopySegment>& segments, DType dtype,
              const CopyTransform& transform) override {
    Engine::Get().Enqueue(stream_, [segments, dtype, transform] {
      for (const auto& s : segments) Transform(s, dtype, transform);
    });
    return Status::Ok();
  }
  Status CopyBytes(void* destination, const void* source, size_t bytes) override {
    if (bytes == 0 || destination == source) return Status::Ok();
    Engine::Get().Enqueue(stream_, [=] { std::memmove(destination, source, bytes); });
    return Status::Ok();
  }
  Status FusionBuffer(size_t bytes, void** buffer) override { return Grow(&fusion_, bytes, buffer); }
  Status StagingBuffer(size_t bytes, void** buffer) override { return Grow(&staging_, bytes, buffer); }
  Status AllocateResult(size_t bytes, void** buffer) override {
    *buffer = bytes ? std::malloc(bytes) : nullptr;
    return bytes && !*buffer ? Status(Code::kInternal, "gpu sim: out of memory") : Status::Ok();
  }
  bool HasComm(int32_t comm) const override { return comms_.count(comm) != 0; }
  Status InitComm(int32_t comm, const std::string& unique_id, int32_t nranks, int32_t rank,
                  Deadline deadline, const Interrupt& interrupted) override {
    if (unique_id.size() != 128)  // as the real module refuses it, before NCCL
      return errors::UniqueIdSize(unique_id.size(), 128);
    std::shared_ptr<sim::Comm> joined;
    TUTTI_RETURN_IF_ERROR(sim::Comm::Join(unique_id, nranks, rank, deadline, interrupted, &joined));
    comms_[comm] = std::move(joined);
    ++communicators_created;
    return Status::Ok();
  }
  void Bound(Deadline, Interrupt) override {}  // the collectives are queued at once: nothing to bound
  Status Allreduce(int32_t key, const void* send, void* receive, size_t count, DType dtype,
                   ReduceOp op) override {
    TUTTI_RETURN_IF_ERROR(Reducible(dtype));
    return OnComm(key, [=](sim::Comm& comm) { comm.Allreduce(send, receive, count, dtype, op); });
  }
  Status Broadcast(int32_t key, void* buffer, size_t bytes, int32_t root) override {
    return OnComm(key, [=](sim::Comm& comm) { comm.Broadcast(buffer, bytes, root); });
  }
  Status Allgather(int32_t key, void* buffer, const Chunks& chunks) override {
    return OnComm(key, [=](sim::Comm& comm) { comm.Allgather(buffer, chunks); });
  }
  Status ReduceScatter(int32_t key, void* buffer, const Chunks& chunks, int32_t self, DType dtype,
                       ReduceOp op) override {
    TUTTI_RETURN_IF_ERROR(Reducible(dtype));
    return OnComm(key, [=](sim::Comm& comm) { comm.ReduceScatter(buffer, chunks, self, dtype, op); });
  }
  Status AllToAll(int32_t key, const void* send, const Chunks& send_chunks, void* receive,
                  const Chunks& recv_chunks) override {
    return OnComm(key, [=](sim::Comm& comm) { comm.AllToAll(send, send_chunks, receive, recv_chunks); });
  }
  Status Send(int32_t key, const void* buffer, size_t bytes, int32_t peer) override {
    return OnComm(key, [=](sim::Comm& comm) { (void)comm.Send(buffer, bytes, peer); });
  }
  Status Recv(int32_t key, void* buffer, size_t bytes, int32_t peer) override {
    return OnComm(key, [=](sim::Comm& comm) { (void)comm.Recv(buffer, bytes, peer); });
  }
  Status Record(std::shared_ptr<Event>* done) override {
    *done = Engine::Get().Record(stream_);
    return Status::Ok();
  }
  // As the real module's: the event first, then the communicators' errors, then the interrupt,
  // then the deadline; on any of these the communicators are aborted.
  Status Wait(const Event& done, Deadline deadline, const Interrupt& interrupted) override {
    while (true) {
      if (Engine::Get().WaitFor(done, std::min(deadline, Clock::now() + std::chrono::milliseconds(1))))
        return Status::Ok();
      const Status stop = errors::WaitStops(AsyncError(), interrupted, deadline);
      if (!stop.ok()) {
        AbortComms();
        return stop;
      }
    }
  }

 private:
  // As the real buffers: growing waits for the work that may still use the old memory.
  Status Grow(std::vector<char>* memory, size_t bytes, void** buffer) {
    if (memory->size() < bytes) {
      Engine::Get().Synchronize(stream_);
      std::vector<char>().swap(*memory);
      memory->resize(bytes);
    }
    *buffer = memory->data();
    return Status::Ok();
  }

  // Queues a collective of communicator `key`: it blocks its stream until every rank came.
  Status OnComm(int32_t key, std::function<void(sim::Comm&)> collective) {
    auto found = comms_.find(key);
    if (found == comms_.end())
      return errors::NoCommunicator(key);
    TUTTI_RETURN_IF_ERROR(AsyncError());
    std::shared_ptr<sim::Comm> comm = found->second;
    Engine::Get().EnqueueBlocking(stream_, [comm, collective] { collective(*comm); });
    return Status::Ok();
  }
  // What ncclCommGetAsyncError would say.
  Status AsyncError() const {
    for (const auto& [key, comm] : comms_) {
      Status error = comm->Error();
      if (!error.ok()) return errors::AsyncError(error.message());
    }
    return Status::Ok();
  }
  void AbortComms() {
    for (auto& [key, comm] : comms_) comm->Abort();
    comms_.clear();
  }

  const std::shared_ptr<sim::Stream> stream_;
  std::vector<char> fusion_, staging_;
  std::map<int32_t, std::shared_ptr<sim::Comm>> comms_;
};

class SimModule final : public Module {
 public:
  std::string Describe() override {
    return "gpu sim, " + std::to_string(Devices()) + " device(s), seed " +
           std::to_string(Engine::Get().seed());
  }
  int32_t NcclVersion() override { return 0; }  // the simulator runs without NCCL
  // Simulated point-to-point, unless a test asks for a module without it (TUTTI_SIM_NCCL_P2P=0).
  bool PointToPointOnNccl() override {
    const char* p2p = std::getenv("TUTTI_SIM_NCCL_P2P");
    return p2p == nullptr || std::strcmp(p2p, "0") != 0;
  }
  Status CheckDevice(int32_t index) override { return errors::CheckIndex(index, Devices()); }
  Status DeviceUuid(int32_t index, std::string* uuid) override {
    char text[17] = {};
    std::snprintf(text, sizeof text, "tutti-sim-gpu-%d", index);
    uuid->assign(text, 16);
    return Status::Ok();
  }
  Status RecordEvent(int32_t index, void* stream, std::shared_ptr<Event>* event) override {
    std::shared_ptr<sim::Stream> on;
    TUTTI_RETURN_IF_ERROR(Find(index, stream, &on));
    *event = Engine::Get().Record(on);
    return Status::Ok();
  }
  Status StreamWait(void* stream, const Event& event) override {
    std::shared_ptr<sim::Stream> on;
    const int32_t device = static_cast<const sim::SimEvent&>(event).stream()->device();
    TUTTI_RETURN_IF_ERROR(Find(device, stream, &on));
    Engine::Get().EnqueueWait(on, event);
    return Status::Ok();
  }
  Status UniqueId(std::string* id) override {
    std::random_device random;
    id->resize(128);
    for (auto& c : *id) c = static_cast<char>(random());
    return Status::Ok();
  }
  Status OpenProcessSet(int32_t index, std::unique_ptr<ProcessSetOnDevice>* on_device) override {
    *on_device = std::make_unique<SimProcessSetOnDevice>(index);
    return Status::Ok();
  }
  // cudaFree waits for the device's work: so does this.
  void Free(int32_t index, void* buffer) override {
    if (buffer == nullptr) return;
    Engine::Get().SynchronizeDevice(index);
    std::free(buffer);
  }

  // User streams, as the test hooks make them.
  void* CreateStream(int32_t device) {
    auto stream = Engine::Get().NewStream(device);
    std::lock_guard<std::mutex> lock(mu_);
    user_streams_[stream.get()] = stream;
    return stream.get();
  }
  void DestroyStream(void* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    user_streams_.erase(handle);  // its queued work still runs (the engine holds it until then)
  }
  std::shared_ptr<sim::Stream> UserStream(void* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = user_streams_.find(handle);
    return found == user_streams_.end() ? nullptr : found->second;
  }

 private:
  static int Devices() {
    const char* given = std::getenv("TUTTI_SIM_GPUS");
    return given ? std::atoi(given) : 2;
  }
  // NULL is the device's default stream; anything else must be a stream the hooks made.
  Status Find(int32_t device, void* handle, std::shared_ptr<sim::Stream>* out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (handle == nullptr) {
      auto& stream = default_streams_[device];
      if (!stream) stream = Engine::Get().NewStream(device);
      *out = stream;
      return Status::Ok();
    }
    auto found = user_streams_.find(handle);
    if (found == user_streams_.end())
      return Status(Code::kInvalidArgument, "gpu sim: not a stream of the simulator");
    *out = found->second;
    return Status::Ok();
  }

  std::mutex mu_;
  std::map<int32_t, std::shared_ptr<sim::Stream>> default_streams_;  // guarded by mu_
  std::map<void*, std::shared_ptr<sim::Stream>> user_streams_;       // guarded by mu_
};

SimModule& Instance() {
  static SimModule* instance = new SimModule();  // never destroyed: events outlive statics
  return *instance;
}

}  // namespace
}  // namespace tutti::gpu

#define TUTTI_SIM_EXPORT extern "C" __attribute__((visibility("default")))

TUTTI_SIM_EXPORT int tutti_gpu_module_open(int api, tutti::gpu::Module** module, char* error,
                                           size_t error_size) {
  if (api != tutti::gpu::kModuleApi) {
    std::snprintf(error, error_size, "gpu sim speaks module API %d, not %d", tutti::gpu::kModuleApi, api);
    return 1;
  }
  *module = &tutti::gpu::Instance();
  return 0;
}

TUTTI_SIM_EXPORT void* tutti_sim_stream_create(int32_t device) {
  return tutti::gpu::Instance().CreateStream(device);
}

TUTTI_SIM_EXPORT void tutti_sim_stream_destroy(void* stream) {
  tutti::gpu::Instance().DestroyStream(stream);
}

TUTTI_SIM_EXPORT int tutti_sim_stream_synchronize(void* stream) {
  auto found = tutti::gpu::Instance().UserStream(stream);
  if (!found) return 1;
  tutti::gpu::sim::Engine::Get().Synchronize(found);
  return 0;
}

TUTTI_SIM_EXPORT void tutti_sim_device_synchronize(int32_t device) {
  tutti::gpu::sim::Engine::Get().SynchronizeDevice(device);
}

TUTTI_SIM_EXPORT void tutti_sim_pause(int paused) { tutti::gpu::sim::Engine::Get().Pause(paused != 0); }

TUTTI_SIM_EXPORT uint64_t tutti_sim_seed() { return tutti::gpu::sim::Engine::Get().seed(); }

TUTTI_SIM_EXPORT int64_t tutti_sim_communicators_created() {
  return tutti::gpu::communicators_created.load();
}
