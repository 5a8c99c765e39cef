#include "server/service/status_board.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <stdexcept>

namespace tutti::server {

StatusBoard::StatusBoard() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error("eventfd failed");
}

StatusBoard::~StatusBoard() { close(wake_fd_); }

std::string StatusBoard::Request(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = ++requested_;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  published_cv_.wait_for(lock, wait, [&] { return published_ >= ticket; });
  return snapshot_;
}

void StatusBoard::Publish(std::string snapshot) {
  uint64_t count;
  [[maybe_unused]] ssize_t n = read(wake_fd_, &count, sizeof(count));
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot_ = std::move(snapshot);
    // Every request made before this point is answered by this snapshot.
    published_ = requested_;
  }
  published_cv_.notify_all();
}

}  // namespace tutti::server
