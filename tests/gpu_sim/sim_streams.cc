#include "tests/gpu_sim/sim_streams.h"

#include <algorithm>
#include <cstdlib>

namespace tutti::gpu::sim {
namespace {

int64_t EnvOr(const char* name, int64_t fallback) {
  const char* given = std::getenv(name);
  return given && *given ? std::atoll(given) : fallback;
}

}  // namespace

Engine& Engine::Get() {
  // Never destroyed: events and streams handed out may outlive every static of the process.
  static Engine* engine = new Engine();
  return *engine;
}

Engine::Engine()
    : seed_(static_cast<uint64_t>(EnvOr("TUTTI_SIM_SEED", 1))),
      max_delay_us_(EnvOr("TUTTI_SIM_MAX_DELAY_US", 300)),
      random_(seed_) {
  executor_ = std::thread([this] { Run(); });
  executor_.detach();  // idles on work_cv_ at exit; the engine is never destroyed
}

std::shared_ptr<Stream> Engine::NewStream(int32_t device) {
  auto stream = std::make_shared<Stream>(device);
  std::lock_guard<std::mutex> lock(mu_);
  streams_.push_back(stream);
  return stream;
}

void Engine::Enqueue(const std::shared_ptr<Stream>& stream, std::function<void()> run) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream->queue_.push_back({std::move(run), nullptr});
    ++stream->queued_;
  }
  work_cv_.notify_one();
}

void Engine::EnqueueBlocking(const std::shared_ptr<Stream>& stream, std::function<void()> run) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream->queue_.push_back({std::move(run), nullptr, true});
    ++stream->queued_;
  }
  work_cv_.notify_one();
}

void Engine::EnqueueWait(const std::shared_ptr<Stream>& stream, const Event& event) {
  const auto& sim = static_cast<const SimEvent&>(event);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream->queue_.push_back(
        {nullptr, std::make_shared<SimEvent>(sim.stream(), sim.position())});
    ++stream->queued_;
  }
  work_cv_.notify_one();
}

std::shared_ptr<Event> Engine::Record(const std::shared_ptr<Stream>& stream) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::make_shared<SimEvent>(stream, stream->queued_);
}

bool Engine::Complete(const SimEvent& event) const { return event.stream()->done_ >= event.position(); }

bool Engine::Runnable(const Stream& stream) const {
  return !stream.busy_ && !stream.queue_.empty() &&
         (!stream.queue_.front().after || Complete(*stream.queue_.front().after));
}

bool Engine::WaitFor(const Event& event, std::chrono::steady_clock::time_point until) {
  const auto& sim = static_cast<const SimEvent&>(event);
  std::unique_lock<std::mutex> lock(mu_);
  return done_cv_.wait_until(lock, until, [&] { return Complete(sim); });
}

void Engine::Synchronize(const std::shared_ptr<Stream>& stream) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = stream->queued_;
  done_cv_.wait(lock, [&] { return stream->done_ >= target; });
}

void Engine::SynchronizeDevice(int32_t device) {
  std::vector<std::shared_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& stream : streams_)
      if (stream->device() == device) streams.push_back(stream);
  }
  for (const auto& stream : streams) Synchronize(stream);
}

void Engine::Pause(bool paused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = paused;
  }
  work_cv_.notify_all();
}

void Engine::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Stream>> runnable;
  while (true) {
    runnable.clear();
    // A stream nobody holds any more goes once its work ran (a destroyed CUDA stream finishes its
    // work too).
    streams_.erase(std::remove_if(streams_.begin(), streams_.end(),
                                  [](const std::shared_ptr<Stream>& s) {
                                    return s.use_count() == 1 && s->queue_.empty();
                                  }),
                   streams_.end());
    if (!paused_)
      for (const auto& stream : streams_)
        if (Runnable(*stream)) runnable.push_back(stream);
    if (runnable.empty()) {
      work_cv_.wait(lock);
      continue;
    }
    // The seed picks which stream moves next and how long its operation takes.
    const std::shared_ptr<Stream> stream = runnable[random_() % runnable.size()];
    Stream::Operation operation = std::move(stream->queue_.front());
    stream->queue_.pop_front();
    const int64_t delay_us =
        max_delay_us_ > 0 && random_() % 2 ? static_cast<int64_t>(random_() % (max_delay_us_ + 1)) : 0;
    if (operation.blocking) {
      stream->busy_ = true;
      std::thread([this, stream, run = std::move(operation.run), delay_us] {
        if (delay_us) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        run();
        {
          std::lock_guard<std::mutex> done(mu_);
          stream->busy_ = false;
          ++stream->done_;
        }
        done_cv_.notify_all();
        work_cv_.notify_all();
      }).detach();
      continue;
    }
    lock.unlock();
    if (delay_us) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    if (operation.run) operation.run();
    operation = {};
    lock.lock();
    ++stream->done_;
    done_cv_.notify_all();
  }
}

}  // namespace tutti::gpu::sim
