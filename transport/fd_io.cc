#include "transport/fd_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

namespace tutti::transport {

void UniqueFd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

int PollTimeoutMs(Deadline deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

namespace {

// Moves bytes in one direction until done; `io` returns what send/recv returned.
template <typename Io>
Status Transfer(int fd, size_t len, short event, Deadline deadline, int cancel, int abort,
                const std::string& what, Io io) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = io(done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status(Code::kPeerLost, what + ": connection closed");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return Status(Code::kPeerLost, what + ": " + std::strerror(errno));
    // poll(2) skips negative descriptors: -1 for either means "none".
    pollfd fds[3] = {{fd, event, 0}, {cancel, POLLIN, 0}, {abort, POLLIN, 0}};
    int ready = poll(fds, 3, PollTimeoutMs(deadline));
    if (ready < 0 && errno != EINTR) return Status(Code::kInternal, std::strerror(errno));
    if (ready == 0) return Status(Code::kTimeout, "no progress from " + what + " before the deadline");
    if (fds[1].revents & POLLIN) return Status(Code::kShutDown, "the runtime was finalized");
    if (fds[2].revents & POLLIN) return Status(Code::kAborted, "aborted");
  }
  return Status::Ok();
}

}  // namespace

Status WriteFully(int fd, const void* data, size_t len, Deadline deadline, int cancel,
                  const std::string& what) {
  const char* bytes = static_cast<const char*>(data);
  return Transfer(fd, len, POLLOUT, deadline, cancel, -1, what, [&](size_t done) {
    return send(fd, bytes + done, len - done, MSG_NOSIGNAL);
  });
}

Status ReadFully(int fd, void* data, size_t len, Deadline deadline, int cancel,
                 const std::string& what) {
  return ReadFully(fd, data, len, deadline, cancel, -1, what);
}

Status ReadFully(int fd, void* data, size_t len, Deadline deadline, int cancel, int abort,
                 const std::string& what) {
  char* bytes = static_cast<char*>(data);
  return Transfer(fd, len, POLLIN, deadline, cancel, abort, what,
                  [&](size_t done) { return recv(fd, bytes + done, len - done, 0); });
}

namespace {
constexpr size_t kMaxPassedFds = 8;
}  // namespace

Status WriteWithFds(int fd, const void* data, size_t len, const std::vector<int>& fds) {
  if (fds.size() > kMaxPassedFds) return Status(Code::kInternal, "too many descriptors to pass");
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  iovec iov{const_cast<void*>(data), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* header = CMSG_FIRSTHDR(&msg);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do n = sendmsg(fd, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0) return Status(Code::kPeerLost, std::string("sendmsg: ") + std::strerror(errno));
  if (static_cast<size_t>(n) == len) return Status::Ok();
  // The descriptors went with the first byte; the rest is plain data.
  const char* rest = static_cast<const char*>(data) + n;
  for (size_t left = len - static_cast<size_t>(n); left > 0;) {
    ssize_t m = send(fd, rest, left, MSG_NOSIGNAL);
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) return Status(Code::kPeerLost, std::string("send: ") + std::strerror(errno));
    rest += m;
    left -= static_cast<size_t>(m);
  }
  return Status::Ok();
}

Status ReadWithFds(int fd, void* data, size_t len, Deadline deadline, int cancel,
                   std::vector<UniqueFd>* fds) {
  char* bytes = static_cast<char*>(data);
  size_t done = 0;
  while (done < len) {
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
    iovec iov{bytes + done, len - done};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n > 0) {
      for (cmsghdr* h = CMSG_FIRSTHDR(&msg); h != nullptr; h = CMSG_NXTHDR(&msg, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int passed;
          std::memcpy(&passed, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
          fds->emplace_back(passed);
        }
      }
      if (msg.msg_flags & MSG_CTRUNC) return Status(Code::kInternal, "passed descriptors were truncated");
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status(Code::kPeerLost, "connection closed");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return Status(Code::kPeerLost, std::string("recvmsg: ") + std::strerror(errno));
    pollfd p[2] = {{fd, POLLIN, 0}, {cancel, POLLIN, 0}};
    int ready = poll(p, cancel >= 0 ? 2 : 1, PollTimeoutMs(deadline));
    if (ready == 0) return Status(Code::kTimeout, "no hello before the deadline");
    if (cancel >= 0 && (p[1].revents & POLLIN)) return Status(Code::kShutDown, "the runtime was finalized");
  }
  return Status::Ok();
}

bool ParseHostPort(const std::string& endpoint, std::string* host, uint16_t* port) {
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  char* end = nullptr;
  unsigned long value = std::strtoul(endpoint.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || value == 0 || value > 65535) return false;
  *host = endpoint.substr(0, colon);
  *port = static_cast<uint16_t>(value);
  return true;
}

bool SocketReadableNow(int fd, bool* closed) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;
  if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) *closed = true;
  return false;
}

}  // namespace tutti::transport
