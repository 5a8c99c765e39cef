// A status that any thread may set once, and an eventfd that becomes readable when it is, so
// that a thread blocked in poll() on that fd wakes and reads why. Contexts and streams hold one.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <mutex>

#include "common/status.h"
#include "transport/fd_io.h"

namespace tutti::transport {

class AbortLatch {
 public:
  AbortLatch() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  // Records `status` and wakes the fd; false (and nothing changes) if already set.
  bool Set(const Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!status_.ok()) return false;
      status_ = status;
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(fd_.get(), &one, sizeof(one));
    return true;
  }

  // The status once set, else ok.
  Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

  int fd() const { return fd_.get(); }

 private:
  UniqueFd fd_;
  mutable std::mutex mu_;
  Status status_;
};

}  // namespace tutti::transport
