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
Status Transfer(int fd, size_t len, short event, Deadline deadline, int cancel,
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
    pollfd fds[2] = {{fd, event, 0}, {cancel, POLLIN, 0}};
    int ready = poll(fds, cancel >= 0 ? 2 : 1, PollTimeoutMs(deadline));
    if (ready < 0 && errno != EINTR) return Status(Code::kInternal, std::strerror(errno));
    if (ready == 0) return Status(Code::kTimeout, "no progress from " + what + " before the deadline");
    if (cancel >= 0 && (fds[1].revents & POLLIN)) return Status(Code::kShutDown, "the runtime was finalized");
  }
  return Status::Ok();
}

}  // namespace

Status WriteFully(int fd, const void* data, size_t len, Deadline deadline, int cancel,
                  const std::string& what) {
  const char* bytes = static_cast<const char*>(data);
  return Transfer(fd, len, POLLOUT, deadline, cancel, what, [&](size_t done) {
    return send(fd, bytes + done, len - done, MSG_NOSIGNAL);
  });
}

Status ReadFully(int fd, void* data, size_t len, Deadline deadline, int cancel,
                 const std::string& what) {
  char* bytes = static_cast<char*>(data);
  return Transfer(fd, len, POLLIN, deadline, cancel, what,
                  [&](size_t done) { return recv(fd, bytes + done, len - done, 0); });
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

}  // namespace tutti::transport
