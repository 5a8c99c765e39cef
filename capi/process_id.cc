#include "capi/process_id.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace tutti::capi {
namespace {

std::atomic<pid_t> g_pid{0};

void AfterForkInChild() { g_pid.store(getpid(), std::memory_order_relaxed); }

// At load, before any entry point can run.
const bool g_registered = [] {
  g_pid.store(getpid(), std::memory_order_relaxed);
  return pthread_atfork(nullptr, nullptr, AfterForkInChild) == 0;
}();

}  // namespace

pid_t CurrentProcess() {
  const pid_t pid = g_pid.load(std::memory_order_relaxed);
  return pid != 0 && g_registered ? pid : getpid();
}

}  // namespace tutti::capi
