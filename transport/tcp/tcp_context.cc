#include "transport/tcp/tcp_context.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tutti::transport {

TcpContext::TcpContext(TcpDevice* device, int32_t set_id, int32_t self,
                       std::vector<std::string> endpoints)
    : device_(device),
      set_id_(set_id),
      self_(self),
      endpoints_(std::move(endpoints)),
      abort_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

TcpContext::~TcpContext() { device_->Forget(set_id_); }

void TcpContext::Abort(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (!abort_status_.ok()) return;
    abort_status_ = status;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(abort_fd_.get(), &one, sizeof(one));
  device_->WakeAccepts();
}

Status TcpContext::Aborted() {
  std::lock_guard<std::mutex> lock(abort_mu_);
  return abort_status_;
}

Status TcpContext::Connection(int32_t peer, Deadline deadline, int* fd) {
  auto it = connections_.find(peer);
  if (it == connections_.end()) {
    UniqueFd connection;
    Status status = self_ < peer ? device_->Connect(set_id_, self_, peer, endpoints_.at(peer),
                                                    deadline, abort_fd_.get(), &connection)
                                 : device_->Accept(set_id_, peer, deadline, abort_fd_.get(), &connection);
    if (!status.ok() && !Aborted().ok()) return Aborted();
    if (!status.ok()) return status;
    it = connections_.emplace(peer, std::move(connection)).first;
  }
  *fd = it->second.get();
  return Status::Ok();
}

Status TcpContext::SendRecv(int32_t to, const void* send_buf, size_t send_len, int32_t from,
                            void* recv_buf, size_t recv_len, Deadline deadline,
                            const std::function<void(size_t)>& on_received) {
  if (!broken_.ok()) return broken_;
  if (!(broken_ = Aborted()).ok()) return broken_;
  int send_fd = -1, recv_fd = -1;
  if (send_len > 0) TUTTI_RETURN_IF_ERROR(broken_ = Connection(to, deadline, &send_fd));
  if (recv_len > 0) TUTTI_RETURN_IF_ERROR(broken_ = Connection(from, deadline, &recv_fd));

  const char* out = static_cast<const char*>(send_buf);
  char* in = static_cast<char*>(recv_buf);
  size_t sent = 0, received = 0;
  auto lost = [&](int32_t peer, const std::string& why) {
    return broken_ = Status(Code::kPeerLost, "peer lost: rank " + std::to_string(peer) + ": " + why);
  };
  while (sent < send_len || received < recv_len) {
    bool progress = false;
    if (sent < send_len) {
      ssize_t n = ::send(send_fd, out + sent, send_len - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        progress = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return lost(to, std::string("send: ") + std::strerror(errno));
      }
    }
    if (received < recv_len) {
      ssize_t n = ::recv(recv_fd, in + received, recv_len - received, MSG_DONTWAIT);
      if (n > 0) {
        received += static_cast<size_t>(n);
        progress = true;
        if (on_received) on_received(received);
      } else if (n == 0) {
        return lost(from, "connection closed");
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return lost(from, std::string("recv: ") + std::strerror(errno));
      }
    }
    if (progress) continue;

    pollfd fds[4];
    nfds_t count = 0;
    fds[count++] = {device_->cancel_fd(), POLLIN, 0};
    fds[count++] = {abort_fd_.get(), POLLIN, 0};
    if (sent < send_len) fds[count++] = {send_fd, POLLOUT, 0};
    if (received < recv_len) {
      if (count == 3 && fds[2].fd == recv_fd)
        fds[2].events |= POLLIN;
      else
        fds[count++] = {recv_fd, POLLIN, 0};
    }
    int ready = poll(fds, count, PollTimeoutMs(deadline));
    if (ready < 0 && errno != EINTR) return Status(Code::kInternal, std::strerror(errno));
    if (ready == 0)
      return broken_ = Status(Code::kTimeout,
                              "data plane: no progress exchanging with ranks " +
                                  std::to_string(to) + " and " + std::to_string(from) +
                                  " before the deadline");
    if (fds[0].revents & POLLIN) return Status(Code::kShutDown, "the runtime was finalized");
    if (fds[1].revents & POLLIN) return broken_ = Aborted();
  }
  return Status::Ok();
}

}  // namespace tutti::transport
