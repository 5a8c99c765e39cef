// The boundary between libtutti.so and its GPU module, libtutti_cuda.so (docs/gpu.md).
//
// libtutti links neither CUDA nor NCCL: when the first device tensor arrives it dlopen()s the
// module and calls its one exported function, tutti_gpu_module_open(), which hands back a Module.
// Both sides are built from this tree by the same compiler in one build, so the interface is
// plain C++ (virtual classes, std types, tutti::Status); kModuleApi guards against a module from
// another build being picked up. Nothing here names a CUDA or NCCL type: streams and events are
// opaque pointers or objects, so client/ compiles without the toolkit.
//
// What this header promises is checked by one conformance suite (tests/gpu_conformance) run
// against the simulator (tests/gpu_sim, in CI) and against libtutti_cuda.so on a GPU
// (tests/gpu/device_check.sh): where a behaviour is not written here, neither may rely on it.
//
// Threads: Module is thread-safe. A ProcessSetOnDevice belongs to one set's lane thread; only its
// destructor and nothing else may run elsewhere, after the lane stopped.
//
// Asynchrony: every ProcessSetOnDevice call but Wait() and InitComm() only queues work on the
// set's stream, as CUDA does. Memory the work reads or writes, host memory included, may be
// touched by the host again only after an Event recorded behind that work completed (Wait), or
// when a stream ordered after it runs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"

namespace tutti::gpu {

// Bumped whenever anything in this header changes shape.
constexpr int kModuleApi = 5;

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// Why a wait on the device must stop early (a peer was lost, the runtime aborts), or ok. Polled.
using Interrupt = std::function<Status()>;

// A point in one stream's work (a recorded cudaEvent_t). Destroying it releases the event.
class Event {
 public:
  virtual ~Event() = default;
};

// One contiguous run of elements copied by the batched copy kernel.
struct CopySegment {
  const void* source;
  void* destination;
  size_t count;  // elements of the copy's dtype
};

// How a batched copy transforms each element, as Horovod scales device tensors:
//  - float32, bfloat16: x * float(scale), rounded once; float64: x * scale;
//  - float16: in float16, as Horovod's __hmul does: the scale is rounded to float16 first, then
//    the product (exact in float32) is rounded once. This differs from the CPU path, which keeps
//    the scale in float32 (docs/gpu.md, "Scaling");
//  - integers: divided by `divisor` first (> 1: an integer average, truncating; -1 negates with
//    wrap-around), then scaled in double and cast back (truncating, saturating at the type's
//    limits, NaN giving 0);
//  - bool: never scaled or divided; `normalize_bool` writes 1 for every nonzero byte (the end of
//    a bool reduction: NCCL's max and min keep the winning byte as it was).
struct CopyTransform {
  double scale = 1.0;
  int64_t divisor = 1;
  bool normalize_bool = false;
};

// Chunks of a buffer, one per member in set order (byte offsets and sizes).
struct Chunks {
  std::vector<size_t> begin, size;
};

// A process set's work on one device of this rank: its own stream, its persistent fusion buffer
// in device memory, its pinned host staging buffer and its NCCL communicators (one per device
// group, client/ keys them). Every call queues work on the set's stream and returns without
// waiting for the GPU, except Wait() and InitComm().
class ProcessSetOnDevice {
 public:
  virtual ~ProcessSetOnDevice() = default;

  // Orders the set's stream after `producer` (no host wait).
  virtual Status After(const Event& producer) = 0;
  // Copies every segment in one kernel launch (a launch per 1024 segments beyond that).
  virtual Status Copy(const std::vector<CopySegment>& segments, DType dtype,
                      const CopyTransform& transform) = 0;
  // Plain byte copy on the set's stream between any two of host, pinned and device memory.
  virtual Status CopyBytes(void* destination, const void* source, size_t bytes) = 0;
  // The persistent device fusion buffer, grown to at least `bytes` (contents not kept).
  virtual Status FusionBuffer(size_t bytes, void** buffer) = 0;
  // Pinned host memory for staging, grown to at least `bytes` (contents not kept).
  virtual Status StagingBuffer(size_t bytes, void** buffer) = 0;
  // Device memory for a result that outlives the collective: free with Module::Free.
  virtual Status AllocateResult(size_t bytes, void** buffer) = 0;

  // NCCL. `comm` is the caller's key. InitComm creates the communicator (non-blocking config)
  // and waits until it is ready, `deadline` or `interrupted`.
  virtual bool HasComm(int32_t comm) const = 0;
  virtual Status InitComm(int32_t comm, const std::string& unique_id, int32_t nranks, int32_t rank,
                          Deadline deadline, const Interrupt& interrupted) = 0;
  // Bounds the waits inside the following NCCL calls (a non-blocking communicator may still be
  // queueing a collective when the call returns). Set once per collective.
  virtual void Bound(Deadline deadline, Interrupt interrupted) = 0;
  // `send` may equal `receive`. `op` is never kAverage: client/ sums and folds the division into
  // the copy out.
  virtual Status Allreduce(int32_t comm, const void* send, void* receive, size_t count,
                           DType dtype, ReduceOp op) = 0;
  virtual Status Broadcast(int32_t comm, void* buffer, size_t bytes, int32_t root) = 0;
  // In place in `buffer`: afterwards every chunk holds its owner's bytes (chunk i from member i).
  virtual Status Allgather(int32_t comm, void* buffer, const Chunks& chunks) = 0;
  // In place: afterwards chunk `self` holds the reduction of every member's chunk `self`.
  virtual Status ReduceScatter(int32_t comm, void* buffer, const Chunks& chunks, int32_t self,
                               DType dtype, ReduceOp op) = 0;
  // Sends send_chunks[j] of `send` to member j and receives recv_chunks[j] of `receive` from it.
  virtual Status AllToAll(int32_t comm, const void* send, const Chunks& send_chunks, void* receive,
                          const Chunks& recv_chunks) = 0;
  // Point-to-point on a communicator of two ranks (client/ makes one per point-to-point channel
  // and pair of devices, docs/gpu.md "Send and recv"): `bytes` (> 0) of `buffer` to member `peer`,
  // or from it. The two members' calls pair up in the order each made them, as ncclSend and
  // ncclRecv do; each blocks only the set's stream until its partner came.
  virtual Status Send(int32_t comm, const void* buffer, size_t bytes, int32_t peer) = 0;
  virtual Status Recv(int32_t comm, void* buffer, size_t bytes, int32_t peer) = 0;

  // Records the end of everything queued so far.
  virtual Status Record(std::shared_ptr<Event>* done) = 0;
  // Host-waits for `done`, polling every communicator's asynchronous error and `interrupted`;
  // on either, or at `deadline`, aborts the communicators (they are unusable afterwards) and
  // returns kPeerLost (NCCL error), the interrupt's status, or kTimeout.
  virtual Status Wait(const Event& done, Deadline deadline, const Interrupt& interrupted) = 0;
};

class Module {
 public:
  virtual ~Module() = default;
  // "CUDA runtime 13.0, driver 13.0, NCCL 2.28.9, 1 device(s)": for logs.
  virtual std::string Describe() = 0;
  // ncclGetVersion's code of the NCCL the module runs on (e.g. 22809); 0 without NCCL.
  virtual int32_t NcclVersion() = 0;
  // ok if device `index` exists and can be used; else kDeviceUnavailable with the reason.
  virtual Status CheckDevice(int32_t index) = 0;
  // The device's 16-byte UUID.
  virtual Status DeviceUuid(int32_t index, std::string* uuid) = 0;
  // Records an event on `stream` (NULL: the legacy default stream) of device `index`.
  virtual Status RecordEvent(int32_t index, void* stream, std::shared_ptr<Event>* event) = 0;
  // Makes `stream` wait for `event` (no host wait).
  virtual Status StreamWait(void* stream, const Event& event) = 0;
  // Whether ProcessSetOnDevice::Send and Recv work here (NCCL 2.7 or later): where they do not,
  // device send and recv stay staged through host memory.
  virtual bool PointToPointOnNccl() = 0;
  // A fresh NCCL unique id (ncclGetUniqueId), as bytes.
  virtual Status UniqueId(std::string* id) = 0;
  virtual Status OpenProcessSet(int32_t index, std::unique_ptr<ProcessSetOnDevice>* on_device) = 0;
  // Releases memory from ProcessSetOnDevice::AllocateResult; waits for work using it.
  virtual void Free(int32_t index, void* buffer) = 0;
};

}  // namespace tutti::gpu

// The module's one exported symbol. Returns 0 and sets *module (owned by the module, valid for
// the life of the process) if `api` is kModuleApi; else fills `error`.
extern "C" int tutti_gpu_module_open(int api, tutti::gpu::Module** module, char* error,
                                     size_t error_size);
