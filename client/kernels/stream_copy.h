// A copy that writes its destination with non-temporal (streaming) stores, for results that are
// large and not read back soon: an out-of-place allreduce's output, which nothing has touched
// yet. An ordinary store to a line that is not in cache reads the line first (read for
// ownership) only to overwrite it; a streaming store does not, and writes past the caches.
// An in-place result was just read, so its lines are in cache, and ordinary stores are right.
#pragma once

#include <cstddef>

namespace tutti {

// Results at least this large are written by StreamCopy where a kernel writes them without
// reading them back (RelayAllreduce out of place). allreduce_bench out of place, 2 and 4 ranks
// over shared memory (AMD EPYC, 2 MiB L2, 32 MiB L3): 8 MiB and above gain 15-30%, 4 MiB and
// below gain nothing, and a smaller result is likelier to be read from cache soon after.
constexpr size_t kStreamingStoreMinBytes = size_t{8} << 20;

// dst[0, bytes) = src[0, bytes), bit for bit memcpy's result. On x86-64 the whole 64-byte lines
// of dst are written with streaming stores (SSE2, which every x86-64 has, so nothing to dispatch;
// the stores' width matters little at memory speed), the partial lines at either end with ordinary ones, so that no line is
// written partly each way by one call. Elsewhere it is memcpy. dst and src must not overlap; any
// alignment. Streaming stores are weakly ordered: call StreamFence before anything publishes
// dst to another thread or process (a fence per call costs more than the copy for small spans).
void StreamCopy(void* dst, const void* src, size_t bytes);

// Orders every earlier streaming store before any later store (sfence; nothing elsewhere).
void StreamFence();

}  // namespace tutti
