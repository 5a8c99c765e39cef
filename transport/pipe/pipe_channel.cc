#include "transport/pipe/pipe_channel.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tutti::transport {

PipeChannel::PipeChannel(UniqueFd socket, std::unique_ptr<MessagePipe> pipe)
    : socket_(std::move(socket)),
      pipe_(std::move(pipe)),
      timer_(timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)),
      last_progress_(Clock::now()) {}

std::unique_ptr<char[]> PipeChannel::Buffer() {
  if (spare_.empty()) return std::unique_ptr<char[]>(new char[kChunk]);
  std::unique_ptr<char[]> buffer = std::move(spare_.back());
  spare_.pop_back();
  return buffer;
}

Status PipeChannel::TrySend(const char* data, size_t len, size_t* moved) {
  if (closed_) return Status(Code::kPeerLost, "connection closed");
  // `data` starts at the first byte not reported moved: the posted ones come first.
  size_t completed = 0;
  while (!in_flight_.empty()) {
    bool done = false;
    TUTTI_RETURN_IF_ERROR(in_flight_.front().pending->Test(&done));
    if (!done) break;
    completed += in_flight_.front().len;
    spare_.push_back(in_flight_.front().pending->Reclaim());
    in_flight_.pop_front();
  }
  posted_ -= completed;
  while (in_flight_.size() < kInFlight && completed + posted_ < len) {
    const size_t n = std::min(kChunk, len - completed - posted_);
    std::unique_ptr<char[]> buffer = Buffer();
    std::memcpy(buffer.get(), data + completed + posted_, n);
    std::unique_ptr<PendingSend> pending;
    TUTTI_RETURN_IF_ERROR(pipe_->Send(std::move(buffer), n, &pending));
    in_flight_.push_back({std::move(pending), n});
    posted_ += n;
  }
  if (completed > 0) {
    *moved += completed;
    last_progress_ = Clock::now();
  }
  return Status::Ok();
}

Status PipeChannel::TryRecv(char* data, size_t len, size_t* moved) {
  size_t got = 0;
  while (got < len) {
    if (staged_at_ < staged_len_) {
      const size_t n = std::min(len - got, staged_len_ - staged_at_);
      std::memcpy(data + got, staged_.get() + staged_at_, n);
      staged_at_ += n;
      got += n;
      continue;
    }
    bool arrived = false;
    size_t size = 0;
    TUTTI_RETURN_IF_ERROR(pipe_->Probe(&arrived, &size));
    if (!arrived) break;
    if (size <= len - got) {
      TUTTI_RETURN_IF_ERROR(pipe_->Receive(data + got));
      got += size;
      continue;
    }
    if (staged_capacity_ < size) {
      staged_.reset(new char[size]);
      staged_capacity_ = size;
    }
    TUTTI_RETURN_IF_ERROR(pipe_->Receive(staged_.get()));
    staged_len_ = size;
    staged_at_ = 0;
  }
  if (got > 0) {
    *moved += got;
    last_progress_ = Clock::now();
    return Status::Ok();
  }
  // What the peer sent before it went is received first.
  if (closed_) return Status(Code::kPeerLost, "connection closed");
  return Status::Ok();
}

void PipeChannel::CheckSocket() {
  pollfd fd{socket_.get(), POLLIN, 0};
  if (closed_ || poll(&fd, 1, 0) <= 0) return;
  // Nothing is ever written after the handshake: readable means closed (or reset).
  char byte;
  const ssize_t n = recv(socket_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
    closed_ = true;
}

bool PipeChannel::ReadableNow() {
  if (staged_at_ < staged_len_) return true;
  bool arrived = false;
  size_t size = 0;
  if (pipe_->Probe(&arrived, &size).ok() && arrived) return true;
  CheckSocket();
  return false;
}

bool PipeChannel::PrepareWait(bool /*send*/, bool /*recv*/, size_t /*need*/,
                              std::vector<pollfd>* fds) {
  CheckSocket();
  if (closed_) return false;  // the next TrySend or TryRecv reports it
  if (Clock::now() - last_progress_ < kBusyWindow) {
    // Ranks may outnumber cores: let the peer that owes us bytes run.
    sched_yield();
    return false;
  }
  itimerspec nap{};
  nap.it_value.tv_nsec = std::chrono::duration_cast<std::chrono::nanoseconds>(kNap).count();
  timerfd_settime(timer_.get(), 0, &nap, nullptr);
  fds->push_back({timer_.get(), POLLIN, 0});
  fds->push_back({socket_.get(), POLLIN, 0});
  return true;
}

void PipeChannel::FinishWait(const pollfd* fds) {
  uint64_t expirations;
  [[maybe_unused]] ssize_t n = read(timer_.get(), &expirations, sizeof(expirations));
  if (fds != nullptr && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) CheckSocket();
}

}  // namespace tutti::transport
