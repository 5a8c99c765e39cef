// The memory two same-host ranks share: one anonymous memfd holding a FIFO in each direction.
// Nothing is ever named in /dev/shm, so nothing outlives the processes: the kernel frees the
// pages when the last mapping and descriptor go, however the ranks exit (kill -9 included).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "transport/fd_io.h"

namespace tutti::transport {

// One direction: a byte ring of `capacity` (a power of two). `head` and `tail` count bytes ever
// written and consumed; each is written by one side only. A side that is about to sleep raises
// its flag, then re-checks; the other side rings its eventfd only when it sees the flag, so a
// running exchange costs no system call.
struct ShmFifo {
  alignas(64) std::atomic<uint64_t> head{0};  // sender
  alignas(64) std::atomic<uint64_t> tail{0};  // receiver
  alignas(64) std::atomic<uint32_t> receiver_sleeping{0};
  alignas(64) std::atomic<uint32_t> sender_sleeping{0};
};

constexpr uint64_t kShmMagic = 0x74757474692d736dULL;  // "tutti-sm"

struct ShmHeader {
  uint64_t magic;
  uint64_t capacity;
  ShmFifo fifo[2];  // [0]: from the side that created the segment (the lower rank); [1]: back
};

// A mapped segment. The creator passes `fd()` to the peer, which maps it with Map().
class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // A new segment with two FIFOs of `capacity` bytes each.
  static Status Create(size_t capacity, ShmSegment* segment, UniqueFd* fd);
  // Maps a segment received from the peer; checks its header.
  static Status Map(int fd, ShmSegment* segment);

  ShmHeader* header() const { return header_; }
  // Each FIFO's size, as checked when mapped: the copy in shared memory is the peer's to write.
  size_t capacity() const { return capacity_; }
  char* data(int direction) const { return base_ + data_offset_ + direction * capacity_; }

 private:
  static Status MapFd(int fd, size_t bytes, ShmSegment* segment);

  char* base_ = nullptr;
  size_t bytes_ = 0;
  size_t data_offset_ = 0;
  size_t capacity_ = 0;
  ShmHeader* header_ = nullptr;
};

}  // namespace tutti::transport
