// StatusBoard: how the HTTP thread gets a fresh view of the coordinator without sharing its state.
// The HTTP thread asks (Request), which wakes the coordinator's loop through an eventfd; the loop
// answers between two batches of frames (Publish), and the asker gets the answer or, if the loop
// is stuck, the last one after a bounded wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

namespace tutti::server {

class StatusBoard {
 public:
  StatusBoard();
  ~StatusBoard();
  StatusBoard(const StatusBoard&) = delete;
  StatusBoard& operator=(const StatusBoard&) = delete;

  // Any thread: wakes the loop and waits up to `wait` for its snapshot (JSON text).
  std::string Request(std::chrono::milliseconds wait);

  // The loop: polls this fd; when readable, calls Publish with a fresh snapshot.
  int wake_fd() const { return wake_fd_; }
  void Publish(std::string snapshot);

 private:
  int wake_fd_ = -1;
  std::mutex mu_;
  std::condition_variable published_cv_;
  uint64_t requested_ = 0, published_ = 0;  // request tickets
  std::string snapshot_ = "{}";
};

}  // namespace tutti::server
