// The connections of one process set from this rank: one channel per peer, made on first use,
// over TCP or shared memory as the route says. Used by one lane thread only, except Abort() and
// Stats().
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/abort_latch.h"
#include "transport/channel.h"
#include "transport/socket_device.h"

namespace tutti::transport {

class SocketContext : public Context {
 public:
  // `device` must outlive the context.
  SocketContext(SocketDevice* device, int32_t set_id, int32_t self, std::vector<PeerRoute> routes);
  ~SocketContext() override;

  Status SendRecv(int32_t to, const void* send, size_t send_len, int32_t from, void* recv,
                  size_t recv_len, Deadline deadline,
                  const std::function<void(size_t)>& on_received = nullptr) override;
  Status AwaitIncoming(int32_t from, int wake_fd, Deadline deadline, bool* incoming) override;
  void Abort(const Status& status) override;
  PeerStats Stats(int32_t peer) const override;
  int32_t closed_peer() const override { return closed_peer_; }
  bool CanRelayInPlace(const std::vector<int32_t>& ranks) const override;
  Status Relay(int32_t to, int32_t from, size_t len, size_t granule, Deadline deadline,
               const RelayFn& fn) override;

 private:
  struct Peer {
    std::unique_ptr<Channel> channel;
    std::atomic<int32_t> link{0};
    std::atomic<bool> connected{false};
    std::atomic<uint64_t> sent{0}, received{0};
  };

  // The abort status once Abort() was called, else ok.
  Status Aborted() const { return abort_.status(); }
  Status ChannelTo(int32_t peer, Deadline deadline, Channel** channel);
  Status Connect(int32_t peer, Deadline deadline, std::unique_ptr<Channel>* channel);
  // Sleeps until a channel may move `need` bytes, the deadline, an abort or shutdown.
  Status Wait(int32_t to, Channel* out, int32_t from, Channel* in, size_t need, Deadline deadline);

  SocketDevice* device_;
  int32_t set_id_;
  int32_t self_;
  std::vector<PeerRoute> routes_;
  std::vector<Peer> peers_;  // by global rank
  std::vector<pollfd> poll_fds_;
  // A failed connection leaves its stream in an unknown state: every later call fails the same way.
  Status broken_;
  int32_t closed_peer_ = -1;

  AbortLatch abort_;
};

}  // namespace tutti::transport
