// Small helpers over non-blocking file descriptors, shared by socket-based backends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace tutti::transport {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.Release();
    }
    return *this;
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset();

 private:
  int fd_ = -1;
};

void SetNonBlocking(int fd);

// Milliseconds left until `deadline` for poll(2): 0 if passed, capped to fit an int.
int PollTimeoutMs(Deadline deadline);

// Reads or writes exactly `len` bytes on a non-blocking fd before `deadline`. `cancel` (an eventfd,
// or -1) aborts the wait when readable. `what` names the other side in error messages.
Status WriteFully(int fd, const void* data, size_t len, Deadline deadline, int cancel,
                  const std::string& what);
Status ReadFully(int fd, void* data, size_t len, Deadline deadline, int cancel,
                 const std::string& what);
// The same with a second eventfd, `abort`, that ends the wait with kAborted.
Status ReadFully(int fd, void* data, size_t len, Deadline deadline, int cancel, int abort,
                 const std::string& what);

// Unix sockets: sends `len` bytes with `fds` attached (SCM_RIGHTS) on a blocking socket; reads
// exactly `len` bytes from a non-blocking one, collecting the descriptors attached to them.
Status WriteWithFds(int fd, const void* data, size_t len, const std::vector<int>& fds);
Status ReadWithFds(int fd, void* data, size_t len, Deadline deadline, int cancel,
                   std::vector<UniqueFd>* fds);

// Whether bytes can be received on socket `fd` now, without blocking; sets `*closed` when the
// peer's end is gone instead (then nothing more will arrive).
bool SocketReadableNow(int fd, bool* closed);

// Splits "a.b.c.d:port".
bool ParseHostPort(const std::string& endpoint, std::string* host, uint16_t* port);

}  // namespace tutti::transport
