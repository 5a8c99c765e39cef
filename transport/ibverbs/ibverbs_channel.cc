#include "transport/ibverbs/ibverbs_channel.h"

#include <arpa/inet.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <sodium.h>

namespace tutti::transport::ibverbs {
namespace {

constexpr size_t kRingBytes = size_t{IbverbsChannel::kSlots} * IbverbsChannel::kSlotBytes;
// Receive requests are told apart from writes by this bit of their id (a failed completion
// carries no opcode).
constexpr uint64_t kReceiveId = uint64_t{1} << 63;
constexpr int kPollBatch = 16;
// How long teardown waits for the device to flush what was posted.
constexpr auto kDrainBound = std::chrono::seconds(1);

// Page-aligned and zeroed; null if the memory is not there.
char* MapBuffer() {
  void* memory = mmap(nullptr, kRingBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return memory == MAP_FAILED ? nullptr : static_cast<char*>(memory);
}

Status RegisterBuffer(ibv_pd* pd, char* buffer, int access, ibv_mr** mr) {
  if (buffer == nullptr)
    return Status(Code::kInternal, "ibverbs: cannot map the channel's ring buffers");
  *mr = ibv_reg_mr(pd, buffer, kRingBytes, access);
  if (*mr == nullptr)
    return Status(Code::kInternal, std::string("ibverbs: ibv_reg_mr: ") + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

IbverbsChannel::IbverbsChannel(std::shared_ptr<IbvDevice> device, Role role)
    : device_(std::move(device)),
      state_(role),
      ring_(MapBuffer()),
      staging_(MapBuffer()),
      inbound_(ring_, kSlots, kSlotBytes) {}

Status IbverbsChannel::Create(std::shared_ptr<IbvDevice> device, Role role,
                              std::unique_ptr<IbverbsChannel>* out, QpParams* mine) {
  std::unique_ptr<IbverbsChannel> channel(new IbverbsChannel(std::move(device), role));
  IbvDevice& dev = *channel->device_;
  TUTTI_RETURN_IF_ERROR(RegisterBuffer(dev.pd(), channel->ring_,
                                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                       &channel->ring_mr_));
  TUTTI_RETURN_IF_ERROR(RegisterBuffer(dev.pd(), channel->staging_, IBV_ACCESS_LOCAL_WRITE,
                                       &channel->staging_mr_));
  TUTTI_RETURN_IF_ERROR(QueuePair::Create(&dev, kSendDepth, kRecvDepth, &channel->qp_));
  TUTTI_RETURN_IF_ERROR(channel->state_.Apply(ConnEvent::kQpCreated));
  for (uint32_t i = 0; i < kRecvDepth; ++i) {
    TUTTI_RETURN_IF_ERROR(channel->qp_->PostReceive(kReceiveId | i));
    ++channel->receives_posted_;
  }
  // A random first packet number, so that packets of an earlier queue pair with the same number
  // cannot pass as this one's.
  if (sodium_init() < 0) return Status(Code::kInternal, "libsodium cannot initialize");
  channel->psn_ = randombytes_uniform(1u << 24);
  const PortChoice& port = dev.port();
  *mine = QpParams{};
  mine->qpn = channel->qp_->qpn();
  mine->psn = channel->psn_;
  mine->lid = port.lid;
  mine->mtu = static_cast<uint8_t>(port.active_mtu);
  mine->link_layer = port.link_layer;
  std::memcpy(mine->gid, port.gid.raw, sizeof(mine->gid));
  mine->gid_index = port.gid_index;
  mine->ring_addr = reinterpret_cast<uintptr_t>(channel->ring_);
  mine->ring_rkey = channel->ring_mr_->rkey;
  mine->slots = kSlots;
  mine->slot_bytes = kSlotBytes;
  *out = std::move(channel);
  return Status::Ok();
}

IbverbsChannel::~IbverbsChannel() {
  if (qp_ && state_.holds_queue_pair()) {
    qp_->ToError();
    // The device may still read a caller's buffer for a write in flight: wait until it says it
    // is done with every request, within a bound, so that a broken device cannot hang finalize.
    const auto until = Clock::now() + kDrainBound;
    ibv_wc completions[kPollBatch];
    while ((!in_flight_.empty() || receives_posted_ > 0) && Clock::now() < until) {
      const int n = qp_->Poll(completions, kPollBatch);
      if (n < 0) break;
      for (int i = 0; i < n; ++i) {
        if (completions[i].wr_id & kReceiveId) {
          --receives_posted_;
        } else if (!in_flight_.empty()) {
          Release(in_flight_.front());
          in_flight_.pop_front();
        }
      }
      if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  for (const Write& write : in_flight_) Release(write);
  in_flight_.clear();
  qp_.reset();
  [[maybe_unused]] Status closed = state_.Apply(ConnEvent::kClose);  // allowed from every state
  if (ring_mr_ != nullptr) ibv_dereg_mr(ring_mr_);
  if (staging_mr_ != nullptr) ibv_dereg_mr(staging_mr_);
  if (ring_ != nullptr) munmap(ring_, kRingBytes);
  if (staging_ != nullptr) munmap(staging_, kRingBytes);
}

Status IbverbsChannel::Connect(const QpParams& peer) {
  remote_ring_ = peer.ring_addr;
  remote_rkey_ = peer.ring_rkey;
  TUTTI_RETURN_IF_ERROR(state_.Apply(ConnEvent::kToRtr));
  TUTTI_RETURN_IF_ERROR(qp_->ToRtr(peer));
  TUTTI_RETURN_IF_ERROR(state_.Apply(ConnEvent::kToRts));
  return qp_->ToRts(psn_);
}

void IbverbsChannel::Lose(const Status& why) {
  if (failure_.ok()) failure_ = why;
  peer_gone_ = true;
  if (state_.state() == ConnState::kReady) {
    [[maybe_unused]] Status draining = state_.Apply(ConnEvent::kLost);  // allowed from ready
  }
}

void IbverbsChannel::Release(const Write& write) {
  if (write.lease) device_->ReleaseMemory(write.lease);
}

void IbverbsChannel::Complete(const ibv_wc& completion) {
  const bool receive = completion.wr_id & kReceiveId;
  if (receive) --receives_posted_;
  if (completion.status != IBV_WC_SUCCESS) {
    // The first failure says why; the flushed requests after it say nothing new.
    if (completion.status != IBV_WC_WR_FLUSH_ERR)
      Lose(Status(Code::kPeerLost,
                  std::string("ibverbs: ") + ibv_wc_status_str(completion.status)));
    else
      Lose(Status(Code::kPeerLost, "connection closed"));
  }
  if (!receive) {
    // One queue pair's sends complete in the order they were posted.
    if (in_flight_.empty() || in_flight_.front().id != completion.wr_id) {
      Lose(Status(Code::kInternal, "ibverbs: a completion for a write not in flight"));
      return;
    }
    const Write write = in_flight_.front();
    in_flight_.pop_front();
    Release(write);
    if (write.bytes > 0) {
      --data_in_flight_;
      if (completion.status == IBV_WC_SUCCESS) completed_ += write.bytes;
    }
    return;
  }
  if (completion.status != IBV_WC_SUCCESS) return;
  const Immediate immediate = DecodeImmediate(ntohl(completion.imm_data));
  Status status = credits_.Returned(immediate.credits);
  if (status.ok() && immediate.bytes > 0) status = inbound_.Arrived(immediate.bytes);
  if (!status.ok()) return Lose(status);
  // One receive per write: give the next one its request back.
  if (!peer_gone_) {
    status = qp_->PostReceive(completion.wr_id);
    if (!status.ok()) return Lose(Status(Code::kPeerLost, status.message()));
    ++receives_posted_;
  }
}

void IbverbsChannel::Progress() {
  if (!qp_) return;
  ibv_wc completions[kPollBatch];
  for (;;) {
    const int n = qp_->Poll(completions, kPollBatch);
    if (n < 0) return Lose(Status(Code::kPeerLost, "ibverbs: polling the completion queue failed"));
    for (int i = 0; i < n; ++i) Complete(completions[i]);
    if (n < kPollBatch) break;
  }
  FlushCredits();
}

void IbverbsChannel::FlushCredits() {
  if (!state_.can_post() || in_flight_.size() >= kSendDepth) return;
  const uint32_t credits = credits_.TakeOwed(false);
  if (credits == 0) return;
  const uint64_t id = next_id_++;
  Status status = qp_->PostWrite(id, nullptr, 0, 0, 0, 0, EncodeImmediate(0, credits));
  if (!status.ok()) return Lose(Status(Code::kPeerLost, status.message()));
  in_flight_.push_back(Write{id, 0, {}});
}

Status IbverbsChannel::TrySend(const char* data, size_t len, size_t* moved) {
  Progress();
  // Completed writes count now, and the caller moves its pointer past them.
  const size_t done = std::min(completed_, len);
  *moved += done;
  data += done;
  len -= done;
  posted_ -= done;
  completed_ -= done;
  if (len == 0) return Status::Ok();  // all of it arrived, whatever happens next
  if (!failure_.ok()) return failure_;
  while (posted_ < len && state_.can_post() && data_in_flight_ < kSlots &&
         in_flight_.size() < kSendDepth && credits_.credits() > 0) {
    const uint32_t chunk = static_cast<uint32_t>(std::min<size_t>(len - posted_, kSlotBytes));
    const char* source = data + posted_;
    RegistrationCache::Lease lease;
    if (device_->zero_copy() && chunk >= kZeroCopyMinBytes) {
      // The rest of the message at once, so that its later chunks find it registered.
      if (!device_->AcquireMemory(source, len - posted_, &lease).ok()) lease = {};
    }
    uint32_t lkey = staging_mr_->lkey;
    if (lease) {
      lkey = lease.keys.lkey;
    } else {
      // Staging slot s is free: the write that used it, kSlots data writes ago, has completed
      // (data_in_flight_ < kSlots, and writes complete in order).
      char* staged = staging_ + size_t{send_slot_} * kSlotBytes;
      std::memcpy(staged, source, chunk);
      source = staged;
    }
    credits_.Take();
    const uint64_t id = next_id_++;
    Status status = qp_->PostWrite(id, source, chunk, lkey,
                                   remote_ring_ + uint64_t{send_slot_} * kSlotBytes, remote_rkey_,
                                   EncodeImmediate(chunk, credits_.TakeOwed(true)));
    if (!status.ok()) {
      if (lease) device_->ReleaseMemory(lease);
      Lose(Status(Code::kPeerLost, status.message()));
      return failure_;
    }
    in_flight_.push_back(Write{id, chunk, lease});
    ++data_in_flight_;
    send_slot_ = (send_slot_ + 1) % kSlots;
    posted_ += chunk;
  }
  more_to_post_ = posted_ < len;
  return Status::Ok();
}

Status IbverbsChannel::TryRecv(char* data, size_t len, size_t* moved) {
  Progress();
  uint32_t freed = 0;
  const size_t n = inbound_.Read(data, len, &freed);
  *moved += n;
  if (freed > 0) {
    credits_.Freed(freed);
    FlushCredits();
  }
  // What landed before the loss is delivered first, as TCP and shared memory do.
  if (n == 0 && !failure_.ok()) return failure_;
  return Status::Ok();
}

bool IbverbsChannel::CanProgress(bool send, bool recv) const {
  if (!failure_.ok()) return true;  // the next call reports it
  if (send && (completed_ > 0 || (more_to_post_ && data_in_flight_ < kSlots &&
                                  in_flight_.size() < kSendDepth && credits_.credits() > 0)))
    return true;
  return recv && inbound_.readable() > 0;
}

bool IbverbsChannel::PrepareWait(bool send, bool recv, size_t /*need*/, std::vector<pollfd>* fds) {
  Progress();
  if (CanProgress(send, recv)) return false;
  if (!armed_) {
    Status status = qp_->Arm();
    if (!status.ok()) {
      Lose(Status(Code::kPeerLost, status.message()));
      return false;
    }
    armed_ = true;
  }
  // A completion that landed before the arming raises no event: look once more.
  Progress();
  if (CanProgress(send, recv)) return false;
  fds->push_back({qp_->event_fd(), POLLIN, 0});
  fds->push_back({socket_.get(), POLLIN, 0});
  return true;
}

void IbverbsChannel::FinishWait(const pollfd* fds) {
  if (fds == nullptr) return;
  if (fds[0].revents & POLLIN) {
    qp_->TakeEvents();
    armed_ = false;  // an event is one-shot: the next sleep arms again
  }
  if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) CheckSocket();
}

void IbverbsChannel::CheckSocket() {
  // Nothing is written on the bootstrap socket after setup: readable means closed.
  char byte;
  const ssize_t n = recv(socket_.get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
    Lose(Status(Code::kPeerLost, "connection closed"));
}

bool IbverbsChannel::ReadableNow() {
  Progress();
  if (inbound_.readable() > 0) return true;
  CheckSocket();
  return false;
}

}  // namespace tutti::transport::ibverbs
