// A peer pair whose bytes travel as messages through a MessagePipe (MPI point-to-point, from
// libtutti_mpi), beside the device's authenticated TCP connection, which carries nothing after
// the handshake and is kept so that a peer's death shows as the socket closing (MPI reports no
// faults). Owned and used by one thread (a lane, or a point-to-point stream's).
//
// Byte stream over messages: the sender cuts what it is given into messages of at most kChunk
// bytes, copied into buffers the channel owns, with at most kInFlight posted. Bytes count as
// moved only once their message's send completed, so a finished SendRecv leaves nothing in
// flight that a lane would have to progress later, and a send cut short by an abort never reads
// the caller's buffer afterwards. The receiver probes for the next message and receives it
// straight into the caller's buffer when it fits (both sides see the same message boundaries,
// so it does), else into a staging buffer it hands out from.
//
// No file descriptor tells when a message arrives, so the channel spins: it asks not to sleep
// for kBusyWindow after it last moved bytes, yielding the CPU each time, and afterwards sleeps
// in kNap steps on a timerfd (and the peer's socket), so that a lane idle on its set's fast path
// costs next to nothing. The context's abort, shutdown and deadline bound both.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "transport/channel.h"
#include "transport/fd_io.h"
#include "transport/message_pipe.h"

namespace tutti::transport {

class PipeChannel : public Channel {
 public:
  // Bytes per message: large enough that MPI reaches its bandwidth, small enough that a ring
  // step's reduction overlaps the rest of the transfer.
  static constexpr size_t kChunk = 1 << 20;
  static constexpr size_t kInFlight = 4;
  static constexpr auto kBusyWindow = std::chrono::microseconds(200);
  static constexpr auto kNap = std::chrono::microseconds(50);

  PipeChannel(UniqueFd socket, std::unique_ptr<MessagePipe> pipe);

  Link link() const override { return Link::kMpi; }
  Status TrySend(const char* data, size_t len, size_t* moved) override;
  Status TryRecv(char* data, size_t len, size_t* moved) override;
  bool spins() const override { return true; }
  bool PrepareWait(bool send, bool recv, size_t need, std::vector<pollfd>* fds) override;
  void FinishWait(const pollfd* fds) override;
  bool ReadableNow() override;
  bool peer_gone() const override { return closed_; }

 private:
  struct InFlight {
    std::unique_ptr<PendingSend> pending;
    size_t len;
  };
  // Marks the peer gone once its socket reads end-of-file (or fails).
  void CheckSocket();
  std::unique_ptr<char[]> Buffer();

  UniqueFd socket_;
  std::unique_ptr<MessagePipe> pipe_;
  UniqueFd timer_;  // timerfd for the naps
  bool closed_ = false;
  Clock::time_point last_progress_;

  std::deque<InFlight> in_flight_;  // in the order posted
  size_t posted_ = 0;               // bytes posted and not reported moved yet
  std::vector<std::unique_ptr<char[]>> spare_;  // buffers of completed sends, kChunk each

  std::unique_ptr<char[]> staged_;  // a message larger than the caller's room
  size_t staged_capacity_ = 0, staged_len_ = 0, staged_at_ = 0;
};

}  // namespace tutti::transport
