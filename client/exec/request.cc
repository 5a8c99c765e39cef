#include "client/exec/request.h"

#include <algorithm>
#include <thread>

namespace tutti::client {

std::shared_ptr<Request> Request::Group(std::string name, wire::CollectiveKind kind,
                                        std::vector<std::shared_ptr<Request>> children) {
  Operation op;
  op.spec.set_name(std::move(name));
  op.spec.set_kind(kind);
  auto group = std::make_shared<Request>(op);
  group->children_left_ = children.size();
  for (auto& child : children) child->parent_ = group;
  group->children_ = std::move(children);
  return group;
}

void Request::ChildDone(const Status& status) {
  Status finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status.ok() && first_child_error_.ok()) first_child_error_ = status;
    if (--children_left_ > 0) return;
    finished = first_child_error_;
  }
  Complete(finished);
}

void Request::Complete(Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_ || completing_) return;
    completing_ = true;
  }
  // Before anyone can see the request done (and submit its name again).
  if (observer_) observer_(status);
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = status;
    done_flag_.store(true, std::memory_order_release);
  }
  done_cv_.notify_all();
  if (auto parent = parent_.lock()) parent->ChildDone(status);
}

void Request::SetDeviceWork(std::shared_ptr<gpu::Event> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    device_work_ = std::move(done);
  }
  done_cv_.notify_all();
}

std::optional<Status> Request::WaitQueued(std::chrono::steady_clock::time_point deadline,
                                          std::shared_ptr<gpu::Event>* done) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_cv_.wait_until(lock, deadline, [this] { return done_ || device_work_ != nullptr; }))
    return std::nullopt;
  *done = device_work_;
  return done_ ? status_ : Status::Ok();
}

std::optional<Status> Request::Test() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) return std::nullopt;
  return status_;
}

std::optional<Status> Request::Published() const {
  if (!children_.empty()) {
    if (auto status = Test()) return status;
    for (const auto& child : children_) {
      auto status = child->Published();
      if (!status || !status->ok()) return status;
    }
    return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (done_) return status_;
  if (device_work_) return Status::Ok();
  return std::nullopt;
}

std::optional<Status> Request::WaitUntil(std::chrono::steady_clock::time_point deadline,
                                         std::chrono::nanoseconds spin) const {
  if (spin.count() > 0 && !done_flag_.load(std::memory_order_acquire)) {
    // Yielding, not pausing: on a core shared with the thread that completes the request (a rank
    // bound to one core runs its lane there too) the yield hands it the core.
    const auto until = std::min(deadline, std::chrono::steady_clock::now() + spin);
    do {
      std::this_thread::yield();
    } while (!done_flag_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until);
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_cv_.wait_until(lock, deadline, [this] { return done_; })) return std::nullopt;
  return status_;
}

}  // namespace tutti::client
