#include "client/request.h"

namespace tutti::client {

void Request::Complete(Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    status_ = std::move(status);
  }
  done_cv_.notify_all();
}

std::optional<Status> Request::Test() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) return std::nullopt;
  return status_;
}

std::optional<Status> Request::WaitUntil(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_cv_.wait_until(lock, deadline, [this] { return done_; })) return std::nullopt;
  return status_;
}

}  // namespace tutti::client
