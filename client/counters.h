// What one rank's runtime did, for tutti_get_counters: written by the I/O thread and the lanes,
// read by any thread. Relaxed atomics: each counter is monotonic on its own; a reader comparing
// two counters may see one of them a few events ahead.
#pragma once

#include <atomic>
#include <cstdint>

#include "client/trial_times.h"

namespace tutti::client {

struct Counters {
  std::atomic<uint64_t> announce_messages{0}, announce_bytes{0};
  std::atomic<uint64_t> tensors_announced{0}, tensors_announced_cached{0};
  std::atomic<uint64_t> execute_messages{0}, execute_bytes{0};
  std::atomic<uint64_t> collectives{0}, tensors_executed{0}, tensors_fused{0};
  // The members' fast path (docs/steady-state.md): rounds run, tensors they agreed on.
  std::atomic<uint64_t> fast_path_rounds{0}, fast_path_tensors{0};
  // Autotuned sets: the lanes' execution time per measurement period, which the coordinator
  // link reports to tuttid with each set's announcements (not a counter of tutti_get_counters).
  TrialTimes trials;

  static void Add(std::atomic<uint64_t>& counter, uint64_t n) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
};

// One process set's share of this rank's work, for tutti_get_set_counters (since 0.11). The
// runtime keeps one per set for its whole life: a set's later incarnations (an elastic job
// re-formed) add to the same one. Written by the set's lane, read by any thread.
struct SetCounters {
  std::atomic<uint64_t> collectives{0}, tensors{0}, tensors_fused{0};
  std::atomic<uint64_t> bytes{0};        // this rank's input bytes of those tensors
  std::atomic<uint64_t> wait_ns{0};      // submission to the start of execution, summed per tensor
  std::atomic<uint64_t> execute_ns{0};   // on the data plane, summed per collective
  // Library compression (docs/compression.md, since 0.12): tensors that ran compressed, adaptive
  // revisits, and the revisits that chose to compress.
  std::atomic<uint64_t> tensors_compressed{0}, adaptive_revisits{0}, adaptive_compress_choices{0};
};

}  // namespace tutti::client
