// What one rank's runtime did, for tutti_get_counters: written by the I/O thread and the lanes,
// read by any thread. Relaxed atomics: each counter is monotonic on its own; a reader comparing
// two counters may see one of them a few events ahead.
#pragma once

#include <atomic>
#include <cstdint>

namespace tutti::client {

struct Counters {
  std::atomic<uint64_t> announce_messages{0}, announce_bytes{0};
  std::atomic<uint64_t> tensors_announced{0}, tensors_announced_cached{0};
  std::atomic<uint64_t> execute_messages{0}, execute_bytes{0};
  std::atomic<uint64_t> collectives{0}, tensors_executed{0}, tensors_fused{0};
  // The members' fast path (docs/steady-state.md): rounds run, tensors they agreed on.
  std::atomic<uint64_t> fast_path_rounds{0}, fast_path_tensors{0};

  static void Add(std::atomic<uint64_t>& counter, uint64_t n) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
};

}  // namespace tutti::client
