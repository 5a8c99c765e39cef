#include "transport/socket_context.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "transport/backend.h"

namespace tutti::transport {
namespace {

// Tries of a shared-memory exchange before sleeping: a few microseconds, less than a sleep and
// wake-up cost, so a peer that is running answers without either side entering the kernel.
constexpr int kSpins = 256;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

SocketContext::SocketContext(SocketDevice* device, int32_t set_id, int32_t self,
                             std::vector<PeerRoute> routes)
    : device_(device),
      set_id_(set_id),
      self_(self),
      routes_(std::move(routes)),
      peers_(routes_.size()) {
  for (size_t r = 0; r < routes_.size(); ++r)
    peers_[r].link.store(static_cast<int32_t>(routes_[r].link));
}

SocketContext::~SocketContext() { device_->Forget(set_id_); }

void SocketContext::Abort(const Status& status) {
  if (abort_.Set(status)) device_->WakeAccepts();
}

PeerStats SocketContext::Stats(int32_t peer) const {
  PeerStats stats;
  if (peer < 0 || static_cast<size_t>(peer) >= peers_.size()) return stats;
  const Peer& p = peers_[peer];
  stats.link = static_cast<Link>(p.link.load());
  stats.connected = p.connected.load();
  stats.bytes_sent = p.sent.load(std::memory_order_relaxed);
  stats.bytes_received = p.received.load(std::memory_order_relaxed);
  return stats;
}

Status SocketContext::Connect(int32_t peer, Deadline deadline, std::unique_ptr<Channel>* channel) {
  if (self_ > peer) {  // the lower rank chose the backend
    Accepted accepted;
    TUTTI_RETURN_IF_ERROR(device_->Accept(set_id_, peer, deadline, abort_.fd(), &accepted));
    const Backend* backend = FindBackend(accepted.link);
    if (!backend) return Status(Code::kInternal, "no data-plane backend for an accepted connection");
    return backend->Adopt(device_, std::move(accepted), channel);
  }
  const PeerRoute& route = routes_.at(peer);
  const Backend* backend = FindBackend(route.link);
  if (!backend) return Status(Code::kInternal, "no data-plane backend for this route");
  return backend->Connect(device_, Dial{set_id_, self_, peer, route.endpoint, deadline, abort_.fd()},
                          channel);
}

Status SocketContext::ChannelTo(int32_t peer, Deadline deadline, Channel** channel) {
  Peer& p = peers_.at(peer);
  if (!p.channel) {
    Status status = Connect(peer, deadline, &p.channel);
    if (!status.ok() && !Aborted().ok()) return Aborted();
    if (!status.ok()) return status;
    p.link.store(static_cast<int32_t>(p.channel->link()));
    p.connected.store(true);
  }
  *channel = p.channel.get();
  return Status::Ok();
}

Status SocketContext::SendRecv(int32_t to, const void* send_buf, size_t send_len, int32_t from,
                               void* recv_buf, size_t recv_len, Deadline deadline,
                               const std::function<void(size_t)>& on_received) {
  if (!broken_.ok()) return broken_;
  if (!(broken_ = Aborted()).ok()) return broken_;
  Channel *out = nullptr, *in = nullptr;
  if (send_len > 0) TUTTI_RETURN_IF_ERROR(broken_ = ChannelTo(to, deadline, &out));
  if (recv_len > 0) TUTTI_RETURN_IF_ERROR(broken_ = ChannelTo(from, deadline, &in));

  const char* send_bytes = static_cast<const char*>(send_buf);
  char* recv_bytes = static_cast<char*>(recv_buf);
  size_t sent = 0, received = 0;
  auto lost = [&](int32_t peer, const Status& why) {
    closed_peer_ = peer;
    // A record that failed authentication (transport/secure/) is not a lost peer: say so.
    if (why.code() == Code::kAuthFailed)
      return broken_ = Status(Code::kAuthFailed, "data-plane integrity: rank " +
                                                     std::to_string(peer) + ": " + why.message());
    return broken_ = Status(Code::kPeerLost,
                            "peer lost: rank " + std::to_string(peer) + ": " + why.message());
  };
  // Retrying a TCP channel costs a system call each time: spin only over shared memory alone.
  const int spins = (!out || out->spins()) && (!in || in->spins()) ? kSpins : 0;
  if (out) out->BeginSend();
  if (in) in->BeginRecv();
  while (sent < send_len || received < recv_len) {
    bool progress = false;
    for (int attempt = 0; !progress; ++attempt) {
      if (sent < send_len) {
        const size_t before = sent;
        Status status = out->TrySend(send_bytes + sent, send_len - sent, &sent);
        if (!status.ok()) return lost(to, status);
        progress = sent > before;
      }
      if (received < recv_len) {
        const size_t before = received;
        Status status = in->TryRecv(recv_bytes + received, recv_len - received, &received);
        if (!status.ok()) return lost(from, status);
        if (received > before) {
          progress = true;
          if (on_received) on_received(received);
        }
      }
      if (attempt >= spins) break;
      if (!progress) CpuRelax();
    }
    if (progress) continue;
    TUTTI_RETURN_IF_ERROR(Wait(to, sent < send_len ? out : nullptr, from,
                               received < recv_len ? in : nullptr, 1, deadline));
  }
  if (send_len > 0) peers_[to].sent.fetch_add(sent, std::memory_order_relaxed);
  if (recv_len > 0) peers_[from].received.fetch_add(received, std::memory_order_relaxed);
  return Status::Ok();
}

Status SocketContext::AwaitIncoming(int32_t from, int wake_fd, Deadline deadline, bool* incoming) {
  *incoming = false;
  if (!broken_.ok()) return broken_;
  if (!(broken_ = Aborted()).ok()) return broken_;
  Channel* in = nullptr;
  TUTTI_RETURN_IF_ERROR(broken_ = ChannelTo(from, deadline, &in));
  if (in->ReadableNow()) {
    *incoming = true;
    return Status::Ok();
  }
  poll_fds_.assign({{device_->cancel_fd(), POLLIN, 0}, {abort_.fd(), POLLIN, 0}, {wake_fd, POLLIN, 0}});
  // Sleeps only if nothing arrived since: PrepareWait raises the shared-memory sleeping flag
  // first, so a peer writing after the check above rings the channel's eventfd.
  if (in->PrepareWait(false, true, 1, &poll_fds_)) {
    const int ready = poll(poll_fds_.data(), poll_fds_.size(), PollTimeoutMs(deadline));
    in->FinishWait(&poll_fds_[3]);
    if (ready < 0 && errno != EINTR) return broken_ = Status(Code::kInternal, std::strerror(errno));
    if (poll_fds_[0].revents & POLLIN)
      return broken_ = Status(Code::kShutDown, "the runtime was finalized");
    if (poll_fds_[1].revents & POLLIN) return broken_ = Aborted();
  }
  // A channel's eventfd may ring for bytes consumed already: only bytes there now count.
  *incoming = in->ReadableNow();
  // Closed with nothing left to read: the peer's end of this incarnation of the set is gone.
  // Not a broken stream (nothing was exchanged), so later calls are not failed by it.
  if (!*incoming && in->peer_gone())
    return Status(Code::kPeerLost, "peer lost: rank " + std::to_string(from) + ": connection closed");
  return Status::Ok();
}

bool SocketContext::CanRelayInPlace(const std::vector<int32_t>& ranks) const {
  for (int32_t r : ranks)
    if (r != self_ && !FindBackend(routes_.at(r).link)->relays_in_place()) return false;
  return true;
}

Status SocketContext::Relay(int32_t to, int32_t from, size_t len, size_t granule, Deadline deadline,
                            const RelayFn& fn) {
  if (!broken_.ok()) return broken_;
  if (!(broken_ = Aborted()).ok()) return broken_;
  if (len == 0) return Status::Ok();
  Channel *out = nullptr, *in = nullptr;
  if (to >= 0) TUTTI_RETURN_IF_ERROR(broken_ = ChannelTo(to, deadline, &out));
  if (from >= 0) TUTTI_RETURN_IF_ERROR(broken_ = ChannelTo(from, deadline, &in));
  if ((out && !out->has_windows()) || (in && !in->has_windows()))
    return Status(Code::kInternal, "relay over a channel without shared memory");
  auto lost = [&](int32_t peer) {
    closed_peer_ = peer;
    return broken_ = Status(Code::kPeerLost,
                            "peer lost: rank " + std::to_string(peer) + ": connection closed");
  };
  if (out) out->BeginSend();
  if (in) in->BeginRecv();
  size_t done = 0;
  while (done < len) {
    size_t readable = SIZE_MAX, writable = SIZE_MAX;
    bool moved = false;
    for (int attempt = 0; !moved && attempt <= kSpins; ++attempt) {
      if (attempt > 0) CpuRelax();
      const char* in_window = nullptr;
      char* out_window = nullptr;
      size_t n = len - done;
      if (in) n = std::min(n, in->ReadWindow(&in_window, &readable));
      if (out) n = std::min(n, out->WriteWindow(&out_window, &writable));
      // Messages start aligned and the FIFO size is a multiple of every granule, so a window
      // cut short by the wrap-around still ends on a whole element.
      n -= n % granule;
      if (n == 0) continue;
      fn(in_window, out_window, done, n);
      if (in) in->Consume(n);
      if (out) out->Produce(n);
      done += n;
      moved = true;
    }
    const bool starved = in && readable < granule, full = out && writable < granule;
    if (moved || (!starved && !full)) continue;
    if (starved && in->peer_gone()) return lost(from);
    if (out && out->peer_gone()) return lost(to);
    TUTTI_RETURN_IF_ERROR(
        Wait(to, full ? out : nullptr, from, starved ? in : nullptr, granule, deadline));
  }
  if (out) peers_[to].sent.fetch_add(len, std::memory_order_relaxed);
  if (in) peers_[from].received.fetch_add(len, std::memory_order_relaxed);
  return Status::Ok();
}

Status SocketContext::Wait(int32_t to, Channel* out, int32_t from, Channel* in, size_t need,
                           Deadline deadline) {
  poll_fds_.assign({{device_->cancel_fd(), POLLIN, 0}, {abort_.fd(), POLLIN, 0}});
  // Each channel's entries, so that it can read its own revents.
  struct Prepared {
    Channel* channel;
    size_t first;
  } prepared[2];
  size_t count = 0;
  bool sleep = true;
  auto prepare = [&](Channel* channel, bool send, bool recv) {
    const size_t first = poll_fds_.size();
    if (channel->PrepareWait(send, recv, need, &poll_fds_))
      prepared[count++] = {channel, first};
    else
      sleep = false;
  };
  if (out != nullptr && out == in) {
    prepare(out, true, true);
  } else {
    if (out != nullptr) prepare(out, true, false);
    if (in != nullptr && sleep) prepare(in, false, true);
  }
  // Not sleeping still looks at the fds (without waiting), so that a caller that keeps finding
  // progress possible still sees an abort, a shutdown or the deadline.
  const int ready = sleep ? poll(poll_fds_.data(), poll_fds_.size(), PollTimeoutMs(deadline))
                          : poll(poll_fds_.data(), 2, 0);
  for (size_t i = 0; i < count; ++i)
    prepared[i].channel->FinishWait(sleep ? &poll_fds_[prepared[i].first] : nullptr);
  if (!sleep && ready == 0 && PollTimeoutMs(deadline) > 0) return Status::Ok();
  if (ready < 0 && errno != EINTR) return broken_ = Status(Code::kInternal, std::strerror(errno));
  if (ready == 0)
    return broken_ = Status(Code::kTimeout, "data plane: no progress exchanging with ranks " +
                                                std::to_string(to) + " and " +
                                                std::to_string(from) + " before the deadline");
  if (poll_fds_[0].revents & POLLIN)
    return broken_ = Status(Code::kShutDown, "the runtime was finalized");
  if (poll_fds_[1].revents & POLLIN) return broken_ = Aborted();
  return Status::Ok();
}

}  // namespace tutti::transport
