// A same-host peer pair over a shared-memory segment: the sender copies into the FIFO toward the
// peer, the receiver copies out, both at once on their own cores (the pipelining comes from the
// FIFO being smaller than a message). Sleeping sides are woken through eventfds that travelled
// with the segment; the Unix socket of the handshake stays open only to see the peer die.
#pragma once

#include "transport/channel.h"
#include "transport/shm/shm_segment.h"

namespace tutti::transport {

// FIFO bytes per direction: measured with the relay slice (docs/transports.md).
constexpr size_t kShmFifoBytes = 4 << 20;
static_assert(kShmFifoBytes >= kRelayRoomBytes, "shm relays in place: it keeps the relay room");

// Alignment of every message in a FIFO: the largest element size.
constexpr size_t kShmAlign = 16;

class ShmChannel : public Channel {
 public:
  // The connecting (lower) rank: creates the segment and the two eventfds; `*to_pass` are the
  // descriptors the hello must carry (owned by the channel, valid while it lives).
  static Status Create(size_t capacity, std::unique_ptr<ShmChannel>* channel,
                       std::vector<int>* to_pass);
  // The accepting rank, from the descriptors that came with the hello.
  static Status Adopt(UniqueFd socket, std::vector<UniqueFd> passed,
                      std::unique_ptr<ShmChannel>* channel);
  // The creator, once its hello went out on `socket`.
  void Connected(UniqueFd socket) {
    socket_ = std::move(socket);
    memfd_.Reset();  // the peer holds its own now
  }

  Link link() const override { return Link::kShm; }
  Status TrySend(const char* data, size_t len, size_t* moved) override;
  Status TryRecv(char* data, size_t len, size_t* moved) override;
  bool spins() const override { return true; }
  bool PrepareWait(bool send, bool recv, size_t need, std::vector<pollfd>* fds) override;
  void FinishWait(const pollfd* fds) override;
  void BeginSend() override;
  void BeginRecv() override;
  bool has_windows() const override { return true; }
  size_t ReadWindow(const char** window, size_t* total) override;
  void Consume(size_t n) override;
  size_t WriteWindow(char** window, size_t* total) override;
  void Produce(size_t n) override;
  bool peer_gone() const override { return peer_gone_; }
  bool ReadableNow() override;

 private:
  explicit ShmChannel(int side) : side_(side) {}
  ShmFifo& out() const { return segment_.header()->fifo[side_]; }
  ShmFifo& in() const { return segment_.header()->fifo[1 - side_]; }
  void Ring() const;
  // Moves this side's `cursor` on by `by` bytes, publishing them, and wakes the peer if it sleeps
  // on `sleeping`.
  void Advance(std::atomic<uint64_t>& cursor, uint64_t by,
               const std::atomic<uint32_t>& sleeping) const;

  const int side_;  // 0: created the segment; 1: adopted it
  ShmSegment segment_;
  UniqueFd memfd_;    // creator only, until passed
  UniqueFd wake_[2];  // wake_[s] is readable when side s should look again
  UniqueFd socket_;
  // Every message starts at a multiple of kShmAlign in the FIFO, so that windows hold aligned
  // elements: the padding still to skip before this message's first byte.
  size_t send_pad_ = 0, recv_skip_ = 0;
  bool peer_gone_ = false;
  bool waiting_send_ = false, waiting_recv_ = false;
};

}  // namespace tutti::transport
