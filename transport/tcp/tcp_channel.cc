#include "transport/tcp/tcp_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace tutti::transport {

namespace {
bool Retry(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }
}  // namespace

Status TcpChannel::TrySend(const char* data, size_t len, size_t* moved) {
  ssize_t n = ::send(fd_.get(), data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) {
    *moved += static_cast<size_t>(n);
  } else if (!Retry(errno)) {
    return Status(Code::kPeerLost, std::string("send: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status TcpChannel::TryRecv(char* data, size_t len, size_t* moved) {
  ssize_t n = ::recv(fd_.get(), data, len, MSG_DONTWAIT);
  if (n > 0) {
    *moved += static_cast<size_t>(n);
  } else if (n == 0) {
    return Status(Code::kPeerLost, "connection closed");
  } else if (!Retry(errno)) {
    return Status(Code::kPeerLost, std::string("recv: ") + std::strerror(errno));
  }
  return Status::Ok();
}

bool TcpChannel::ReadableNow() { return SocketReadableNow(fd_.get(), &closed_); }

bool TcpChannel::PrepareWait(bool send, bool recv, size_t /*need*/, std::vector<pollfd>* fds) {
  fds->push_back({fd_.get(), static_cast<short>((send ? POLLOUT : 0) | (recv ? POLLIN : 0)), 0});
  return true;
}

}  // namespace tutti::transport
