// A peer pair over one reliable-connected queue pair (docs/transports.md, "ibverbs").
//
// Bytes move by RDMA write with immediate into the peer's receive ring: kSlots slots of
// kSlotBytes each, registered once when the channel is made. The immediate tells the receiver
// how many bytes landed (a write fills one slot; the order of RC writes says which) and hands
// back the credits of the slots it has read (transport/ibverbs/credit_window.h), so that a writer
// never overwrites bytes not read yet. The receiver copies out of its ring into the caller's
// buffer. The sender writes straight from the caller's memory where the device has on-demand
// paging (through the IbvDevice's registration cache), and otherwise copies into a staging slot
// of its own first.
//
// Bytes count as sent only once their write completed, as for the MPI channel: a finished step
// leaves nothing in flight, and nothing reads the caller's buffer after TrySend said it moved.
//
// Waiting: completion polling costs no system call, so the channel spins like shared memory
// (spins()). To sleep, it arms its completion queue, looks once more (a completion that landed
// before the arming raises no event), and hands the context the completion channel's fd and the
// bootstrap socket. The context's poll also holds the abort latch, the device's shutdown fd and
// the deadline, so an abort, a finalize or the deadline ends the wait as for every channel.
//
// Peer loss: nothing is written on the bootstrap socket after setup, so its end closing means the
// peer's channel or process is gone; a failed completion (retries exhausted) means the same.
// Then the channel drains: bytes that landed can still be read, nothing more is posted, and the
// next call that needs the peer fails with kPeerLost ("connection closed" or the completion's
// status).
//
// Threads: owned and used by one thread (a lane, or a point-to-point stream's).
// Lifetime: teardown moves the queue pair to the error state so that every posted request
// completes flushed, waits (bounded) for those completions, since the device may still read a
// caller's buffer for a write in flight, then destroys the queue pair and completion queue,
// deregisters the rings and lets go of the shared device.
#pragma once

#include <deque>
#include <memory>

#include "transport/channel.h"
#include "transport/fd_io.h"
#include "transport/ibverbs/connection_state.h"
#include "transport/ibverbs/credit_window.h"
#include "transport/ibverbs/ibverbs_device.h"
#include "transport/ibverbs/ibverbs_queue_pair.h"
#include "transport/ibverbs/inbound_slots.h"
#include "transport/ibverbs/qp_params.h"

namespace tutti::transport::ibverbs {

class IbverbsChannel : public Channel {
 public:
  // The ring: 4 MiB per direction, as shared memory's FIFO (not tuned on hardware yet).
  static constexpr uint32_t kSlots = 16;
  static constexpr uint32_t kSlotBytes = 256 << 10;
  // Credits worth a message of their own.
  static constexpr uint32_t kCreditBatch = kSlots / 4;
  // Requests in flight: every data write the credits allow, plus credit messages; receives for
  // all of those.
  static constexpr uint32_t kSendDepth = 2 * kSlots;
  static constexpr uint32_t kRecvDepth = 2 * kSlots;
  // Below this a copy into staging costs less than a registration lookup.
  static constexpr size_t kZeroCopyMinBytes = 64 << 10;
  static_assert(kSlotBytes <= kMaxImmediateBytes && kSlots <= kMaxImmediateCredits);

  // This side of a pair: the queue pair in INIT, its rings registered and its receives posted.
  // `*mine` receives the parameters to offer or answer with (transport/ibverbs/qp_params.h).
  static Status Create(std::shared_ptr<IbvDevice> device, Role role,
                       std::unique_ptr<IbverbsChannel>* out, QpParams* mine);
  ~IbverbsChannel() override;

  // The setup's steps are taken here and by the setup code (transport/ibverbs/ibverbs_setup.cc).
  ConnectionState& state() { return state_; }
  // RTR toward the peer's queue pair, then RTS; remembers where its ring is.
  Status Connect(const QpParams& peer);
  // Setup is over: keeps the bootstrap socket, on which nothing more is written, to see the
  // peer go.
  void Connected(UniqueFd socket) { socket_ = std::move(socket); }

  Link link() const override { return Link::kIbverbs; }
  Status TrySend(const char* data, size_t len, size_t* moved) override;
  Status TryRecv(char* data, size_t len, size_t* moved) override;
  bool spins() const override { return true; }
  bool PrepareWait(bool send, bool recv, size_t need, std::vector<pollfd>* fds) override;
  void FinishWait(const pollfd* fds) override;
  bool ReadableNow() override;
  bool peer_gone() const override { return peer_gone_; }

 private:
  // A write this side posted and the device has not completed yet.
  struct Write {
    uint64_t id;
    uint32_t bytes;  // 0: a credit message
    RegistrationCache::Lease lease;
  };

  IbverbsChannel(std::shared_ptr<IbvDevice> device, Role role);
  // Takes every completion there is, then hands back owed credits if due.
  void Progress();
  void Complete(const ibv_wc& completion);
  // A zero-byte write carrying the credits owed, once `kCreditBatch` are.
  void FlushCredits();
  // The first failure wins; the channel drains from then on.
  void Lose(const Status& why);
  // Whether a call could move bytes now without waiting.
  bool CanProgress(bool send, bool recv) const;
  void Release(const Write& write);
  // Marks the peer gone if its end of the bootstrap socket closed.
  void CheckSocket();

  std::shared_ptr<IbvDevice> device_;  // first: goes last
  ConnectionState state_;
  std::unique_ptr<QueuePair> qp_;
  char* ring_ = nullptr;     // kSlots * kSlotBytes the peer writes into
  char* staging_ = nullptr;  // the same, for copies on their way out
  ibv_mr* ring_mr_ = nullptr;
  ibv_mr* staging_mr_ = nullptr;
  uint32_t psn_ = 0;
  uint64_t remote_ring_ = 0;
  uint32_t remote_rkey_ = 0;

  CreditWindow credits_{kSlots, kCreditBatch};
  InboundSlots inbound_;
  std::deque<Write> in_flight_;  // in the order posted, which is the order they complete
  uint32_t data_in_flight_ = 0;  // of which carry bytes (each holds its staging slot)
  uint32_t receives_posted_ = 0;
  uint64_t next_id_ = 1;
  uint32_t send_slot_ = 0;       // the peer's slot the next data write fills
  // The current send: bytes past the caller's `data` already posted, and of those completed
  // (reported as moved at the next TrySend).
  size_t posted_ = 0, completed_ = 0;
  bool more_to_post_ = false;

  UniqueFd socket_;
  bool peer_gone_ = false;
  Status failure_;
  bool armed_ = false;
};

}  // namespace tutti::transport::ibverbs
