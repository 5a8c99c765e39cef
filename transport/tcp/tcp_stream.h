// One direction of a point-to-point stream over a TCP connection: the rank that opened it writes,
// the one that accepted it reads. Used by one thread; Abort() from any.
#pragma once

#include <string>

#include "transport/abort_latch.h"
#include "transport/fd_io.h"
#include "transport/transport.h"

namespace tutti::transport {

// A connected socket used in one direction, with its own abort latch.
class TcpStream : public Stream {
 public:
  TcpStream(UniqueFd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {}
  Status Write(const void* data, size_t len, Deadline deadline) override {
    return Checked(WriteFully(fd_.get(), data, len, deadline, abort_.fd(), peer_));
  }
  Status Read(void* data, size_t len, Deadline deadline) override {
    return Checked(ReadFully(fd_.get(), data, len, deadline, abort_.fd(), peer_));
  }
  void Abort(const Status& status) override { abort_.Set(status); }

 private:
  // fd_io reports a readable cancel fd as kShutDown: say why it was aborted instead.
  Status Checked(Status status) {
    if (status.ok() || status.code() == Code::kTimeout) return status;
    Status aborted = abort_.status();
    if (!aborted.ok()) return aborted;
    if (status.code() == Code::kPeerLost) return Status(status.code(), "peer lost: " + status.message());
    return status;
  }

  UniqueFd fd_;
  std::string peer_;
  AbortLatch abort_;
};

}  // namespace tutti::transport
