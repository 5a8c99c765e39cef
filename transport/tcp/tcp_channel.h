// A peer pair over one TCP connection (TCP_NODELAY, non-blocking).
#pragma once

#include "transport/channel.h"
#include "transport/fd_io.h"

namespace tutti::transport {

class TcpChannel : public Channel {
 public:
  explicit TcpChannel(UniqueFd fd) : fd_(std::move(fd)) {}

  Link link() const override { return Link::kTcp; }
  Status TrySend(const char* data, size_t len, size_t* moved) override;
  Status TryRecv(char* data, size_t len, size_t* moved) override;
  bool PrepareWait(bool send, bool recv, size_t need, std::vector<pollfd>* fds) override;
  void FinishWait(const pollfd*) override {}
  bool ReadableNow() override;
  bool peer_gone() const override { return closed_; }

 private:
  UniqueFd fd_;
  bool closed_ = false;  // seen by ReadableNow
};

}  // namespace tutti::transport
