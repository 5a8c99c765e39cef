// The simulated GPU's streams and events: work queued on a stream runs later, on the engine's
// one executor thread, in an order and with delays that a seed picks, as a GPU's would; an event
// completes when its stream has run everything queued before it. This is what lets races between
// the lane, the staging copies and a request's completion show on a machine without a GPU.
//
// Settings (read once): TUTTI_SIM_SEED (default 1) seeds the choice of which runnable stream goes
// next and of each operation's delay; TUTTI_SIM_MAX_DELAY_US (default 300) bounds that delay
// (half of the operations get none).
//
// Threads: every member is thread-safe. Operations run on the executor thread and must not call
// back into the engine. Ownership: streams are shared between their owner and the events recorded
// on them; the engine itself lives until the process exits.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "gpu/module_api.h"

namespace tutti::gpu::sim {

class Stream;

// A point in a stream's work.
class SimEvent final : public Event {
 public:
  SimEvent(std::shared_ptr<Stream> stream, uint64_t position)
      : stream_(std::move(stream)), position_(position) {}
  const std::shared_ptr<Stream>& stream() const { return stream_; }
  uint64_t position() const { return position_; }

 private:
  std::shared_ptr<Stream> stream_;
  uint64_t position_;  // complete once the stream has run this many operations
};

class Stream {
 public:
  explicit Stream(int32_t device) : device_(device) {}
  int32_t device() const { return device_; }

 private:
  friend class Engine;
  struct Operation {
    std::function<void()> run;             // null for a pure wait
    std::shared_ptr<const SimEvent> after;  // runnable once this completed (may be null)
    bool blocking = false;                 // runs on a thread of its own (see EnqueueBlocking)
  };
  const int32_t device_;
  std::deque<Operation> queue_;  // guarded by the engine's mutex
  uint64_t queued_ = 0, done_ = 0;
  bool busy_ = false;  // a blocking operation of this stream runs; guarded by the engine's mutex
};

class Engine {
 public:
  static Engine& Get();

  std::shared_ptr<Stream> NewStream(int32_t device);
  // Queues `run` at the end of `stream`.
  void Enqueue(const std::shared_ptr<Stream>& stream, std::function<void()> run);
  // Queues `run`, which may block on other processes (a simulated NCCL collective waiting for its
  // peers, as a NCCL kernel does): it runs on a thread of its own, and only its stream waits for
  // it, so that other streams go on as they do on a GPU.
  void EnqueueBlocking(const std::shared_ptr<Stream>& stream, std::function<void()> run);
  // Makes `stream`'s later work wait for `event` (no host wait).
  void EnqueueWait(const std::shared_ptr<Stream>& stream, const Event& event);
  // An event at the end of what `stream` has queued so far.
  std::shared_ptr<Event> Record(const std::shared_ptr<Stream>& stream);
  // Host waits: true once `event` completed, false at `until`.
  bool WaitFor(const Event& event, std::chrono::steady_clock::time_point until);
  void Synchronize(const std::shared_ptr<Stream>& stream);
  // Waits for every stream of `device` (what cudaFree implies).
  void SynchronizeDevice(int32_t device);
  // Stops (true) or resumes the executor: tests hold work to observe that it is asynchronous.
  void Pause(bool paused);
  uint64_t seed() const { return seed_; }

 private:
  Engine();
  void Run();
  bool Complete(const SimEvent& event) const;  // with mu_ held
  bool Runnable(const Stream& stream) const;   // with mu_ held

  const uint64_t seed_;
  const int64_t max_delay_us_;
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<std::shared_ptr<Stream>> streams_;  // guarded by mu_; pruned by the executor
  std::mt19937_64 random_;                      // executor thread only
  bool paused_ = false;                         // guarded by mu_
  std::thread executor_;
};

}  // namespace tutti::gpu::sim
