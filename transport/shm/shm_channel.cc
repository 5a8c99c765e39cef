#include "transport/shm/shm_channel.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace tutti::transport {

Status ShmChannel::Create(size_t capacity, std::unique_ptr<ShmChannel>* channel,
                          std::vector<int>* to_pass) {
  std::unique_ptr<ShmChannel> created(new ShmChannel(0));
  TUTTI_RETURN_IF_ERROR(ShmSegment::Create(capacity, &created->segment_, &created->memfd_));
  for (auto& wake : created->wake_) {
    wake = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake) return Status(Code::kInternal, std::string("eventfd: ") + std::strerror(errno));
  }
  *to_pass = {created->memfd_.get(), created->wake_[0].get(), created->wake_[1].get()};
  *channel = std::move(created);
  return Status::Ok();
}

Status ShmChannel::Adopt(UniqueFd socket, std::vector<UniqueFd> passed,
                         std::unique_ptr<ShmChannel>* channel) {
  if (passed.size() != 3)
    return Status(Code::kInternal, "shared memory: the hello carried " +
                                       std::to_string(passed.size()) + " descriptors, not 3");
  std::unique_ptr<ShmChannel> adopted(new ShmChannel(1));
  TUTTI_RETURN_IF_ERROR(ShmSegment::Map(passed[0].get(), &adopted->segment_));
  // The relay's slices must fit twice in every FIFO of the ring, so both sides must agree.
  if (adopted->segment_.capacity() != kShmFifoBytes)
    return Status(Code::kInternal, "shared memory: the peer's FIFOs hold " +
                                       std::to_string(adopted->segment_.capacity()) +
                                       " bytes, this rank's " + std::to_string(kShmFifoBytes) +
                                       " (mixed tutti versions?)");
  adopted->wake_[0] = std::move(passed[1]);
  adopted->wake_[1] = std::move(passed[2]);
  adopted->socket_ = std::move(socket);
  *channel = std::move(adopted);
  return Status::Ok();
}

void ShmChannel::Ring() const {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_[1 - side_].get(), &one, sizeof(one));
}

namespace {
size_t PadTo(uint64_t position) { return (kShmAlign - position % kShmAlign) % kShmAlign; }
}  // namespace

void ShmChannel::BeginSend() { send_pad_ = PadTo(out().head.load(std::memory_order_relaxed)); }

void ShmChannel::BeginRecv() { recv_skip_ = PadTo(in().tail.load(std::memory_order_relaxed)); }

size_t ShmChannel::ReadWindow(const char** window, size_t* total) {
  ShmFifo& fifo = in();
  const uint64_t capacity = segment_.capacity();
  const uint64_t start = fifo.tail.load(std::memory_order_relaxed) + recv_skip_;
  const uint64_t head = fifo.head.load(std::memory_order_acquire);
  // Until the sender padded and wrote this message, head stays short of its start.
  // Clamped, so that a corrupt peer cannot make a copy run past the ring.
  *total = head > start ? std::min<uint64_t>(head - start, capacity) : 0;
  const size_t at = start & (capacity - 1);
  *window = segment_.data(1 - side_) + at;
  return std::min<size_t>(*total, capacity - at);
}

void ShmChannel::Advance(std::atomic<uint64_t>& cursor, uint64_t by,
                         const std::atomic<uint32_t>& sleeping) const {
  cursor.store(cursor.load(std::memory_order_relaxed) + by, std::memory_order_release);
  // Pairs with the other side raising its flag and then re-reading the cursor (PrepareWait).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping.load(std::memory_order_relaxed)) Ring();
}

void ShmChannel::Consume(size_t n) {
  Advance(in().tail, recv_skip_ + n, in().sender_sleeping);
  recv_skip_ = 0;
}

size_t ShmChannel::WriteWindow(char** window, size_t* total) {
  ShmFifo& fifo = out();
  const uint64_t capacity = segment_.capacity();
  const uint64_t start = fifo.head.load(std::memory_order_relaxed) + send_pad_;
  const uint64_t used = start - fifo.tail.load(std::memory_order_acquire);
  *total = used < capacity ? capacity - used : 0;
  const size_t at = start & (capacity - 1);
  *window = segment_.data(side_) + at;
  return std::min<size_t>(*total, capacity - at);
}

void ShmChannel::Produce(size_t n) {
  Advance(out().head, send_pad_ + n, out().receiver_sleeping);
  send_pad_ = 0;
}

Status ShmChannel::TrySend(const char* data, size_t len, size_t* moved) {
  if (peer_gone_) return Status(Code::kPeerLost, "connection closed");
  char* window;
  size_t total;
  const size_t first = std::min(len, WriteWindow(&window, &total));
  const size_t n = std::min(len, total);
  if (n == 0) return Status::Ok();
  std::memcpy(window, data, first);
  std::memcpy(segment_.data(side_), data + first, n - first);  // wrapped around
  Produce(n);
  *moved += n;
  return Status::Ok();
}

Status ShmChannel::TryRecv(char* data, size_t len, size_t* moved) {
  const char* window;
  size_t total;
  const size_t first = std::min(len, ReadWindow(&window, &total));
  const size_t n = std::min(len, total);
  if (n == 0) return peer_gone_ ? Status(Code::kPeerLost, "connection closed") : Status::Ok();
  std::memcpy(data, window, first);
  std::memcpy(data + first, segment_.data(1 - side_), n - first);
  Consume(n);
  *moved += n;
  return Status::Ok();
}

bool ShmChannel::PrepareWait(bool send, bool recv, size_t need, std::vector<pollfd>* fds) {
  const uint64_t capacity = segment_.capacity();
  if (send) out().sender_sleeping.store(1, std::memory_order_relaxed);
  if (recv) in().receiver_sleeping.store(1, std::memory_order_relaxed);
  waiting_send_ = send;
  waiting_recv_ = recv;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const bool can_send = send && out().head.load(std::memory_order_relaxed) + send_pad_ + need -
                                        out().tail.load(std::memory_order_relaxed) <=
                                    capacity;
  const bool can_recv = recv && in().head.load(std::memory_order_relaxed) >=
                                    in().tail.load(std::memory_order_relaxed) + recv_skip_ + need;
  if (can_send || can_recv || peer_gone_) {
    FinishWait(nullptr);
    return false;
  }
  fds->push_back({wake_[side_].get(), POLLIN, 0});
  fds->push_back({socket_.get(), POLLIN, 0});
  return true;
}

bool ShmChannel::ReadableNow() {
  return in().head.load(std::memory_order_acquire) > in().tail.load(std::memory_order_relaxed) + recv_skip_;
}

void ShmChannel::FinishWait(const pollfd* fds) {
  if (waiting_send_) out().sender_sleeping.store(0, std::memory_order_relaxed);
  if (waiting_recv_) in().receiver_sleeping.store(0, std::memory_order_relaxed);
  waiting_send_ = waiting_recv_ = false;
  if (fds == nullptr) return;
  if (fds[0].revents & POLLIN) {
    uint64_t count;
    [[maybe_unused]] ssize_t n = read(wake_[side_].get(), &count, sizeof(count));
  }
  // Nothing is ever written on the handshake socket after the hello: readable means closed.
  if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
    char byte;
    ssize_t n = recv(socket_.get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      peer_gone_ = true;
  }
}

}  // namespace tutti::transport
