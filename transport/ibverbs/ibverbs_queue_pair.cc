#include "transport/ibverbs/ibverbs_queue_pair.h"

#include <arpa/inet.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace tutti::transport::ibverbs {
namespace {

Status Failed(const std::string& what, int error) {
  return Status(Code::kInternal, "ibverbs: " + what + ": " + std::strerror(error));
}

// Events are acknowledged in batches: each acknowledgement takes the completion queue's lock.
constexpr unsigned kAckBatch = 64;

// RC timing (ibv_modify_qp(3)): a request is retransmitted after 4.096 us * 2^14 (67 ms) without
// an ack, up to 7 times, so a dead peer fails the queue pair within about half a second, well
// inside a collective's deadline. A receiver out of posted receives is retried without limit
// (rnr_retry 7): the channel posts one per write the credits allow, so that only means it is
// slow to poll.
constexpr uint8_t kTimeout = 14;
constexpr uint8_t kRetries = 7;
constexpr uint8_t kRnrRetries = 7;
constexpr uint8_t kMinRnrTimer = 12;  // 0.64 ms
constexpr uint8_t kHopLimit = 64;

}  // namespace

Status QueuePair::Create(IbvDevice* device, uint32_t send_depth, uint32_t recv_depth,
                         std::unique_ptr<QueuePair>* out) {
  std::unique_ptr<QueuePair> pair(new QueuePair(device));
  pair->channel_ = ibv_create_comp_channel(device->context());
  if (pair->channel_ == nullptr) return Failed("ibv_create_comp_channel", errno);
  const int flags = fcntl(pair->channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(pair->channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return Failed("making the completion channel non-blocking", errno);
  pair->cq_ = ibv_create_cq(device->context(), static_cast<int>(send_depth + recv_depth), nullptr,
                            pair->channel_, 0);
  if (pair->cq_ == nullptr) return Failed("ibv_create_cq", errno);

  ibv_qp_init_attr init{};
  init.send_cq = pair->cq_;
  init.recv_cq = pair->cq_;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 1;
  init.cap.max_send_wr = send_depth;
  init.cap.max_recv_wr = recv_depth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  pair->qp_ = ibv_create_qp(device->pd(), &init);
  if (pair->qp_ == nullptr) return Failed("ibv_create_qp", errno);

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = device->port().port;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  const int error = ibv_modify_qp(pair->qp_, &attr,
                                  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                      IBV_QP_ACCESS_FLAGS);
  if (error != 0) return Failed("moving the queue pair to INIT", error);
  *out = std::move(pair);
  return Status::Ok();
}

QueuePair::~QueuePair() {
  if (qp_ != nullptr) ibv_destroy_qp(qp_);
  if (cq_ != nullptr) {
    if (unacked_events_ > 0) ibv_ack_cq_events(cq_, unacked_events_);
    ibv_destroy_cq(cq_);
  }
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
}

Status QueuePair::ToRtr(const QpParams& peer) {
  const PortChoice& port = device_->port();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  // Both ports' active MTU bound the path's.
  attr.path_mtu = static_cast<ibv_mtu>(std::min<int>(port.active_mtu, peer.mtu));
  attr.dest_qp_num = peer.qpn;
  attr.rq_psn = peer.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.port_num = port.port;
  attr.ah_attr.dlid = peer.lid;
  // RoCE always routes by GID; InfiniBand by LID within a subnet, by GID where the peer has none.
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET || peer.lid == 0) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid, sizeof(peer.gid));
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
    attr.ah_attr.grh.hop_limit = kHopLimit;
  }
  const int error =
      ibv_modify_qp(qp_, &attr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (error != 0) return Failed("moving the queue pair to RTR", error);
  return Status::Ok();
}

Status QueuePair::ToRts(uint32_t psn) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn;
  attr.timeout = kTimeout;
  attr.retry_cnt = kRetries;
  attr.rnr_retry = kRnrRetries;
  attr.max_rd_atomic = 1;
  const int error = ibv_modify_qp(qp_, &attr,
                                  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                      IBV_QP_MAX_QP_RD_ATOMIC);
  if (error != 0) return Failed("moving the queue pair to RTS", error);
  return Status::Ok();
}

void QueuePair::ToError() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(qp_, &attr, IBV_QP_STATE);
}

Status QueuePair::PostWrite(uint64_t id, const void* source, uint32_t len, uint32_t lkey,
                            uint64_t remote, uint32_t rkey, uint32_t immediate) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(source), len, lkey};
  ibv_send_wr request{};
  request.wr_id = id;
  request.sg_list = len > 0 ? &sge : nullptr;
  request.num_sge = len > 0 ? 1 : 0;
  request.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  request.send_flags = IBV_SEND_SIGNALED;
  request.imm_data = htonl(immediate);
  request.wr.rdma.remote_addr = remote;
  request.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  const int error = ibv_post_send(qp_, &request, &bad);
  if (error != 0) return Failed("ibv_post_send", error);
  return Status::Ok();
}

Status QueuePair::PostReceive(uint64_t id) {
  ibv_recv_wr request{};
  request.wr_id = id;
  ibv_recv_wr* bad = nullptr;
  const int error = ibv_post_recv(qp_, &request, &bad);
  if (error != 0) return Failed("ibv_post_recv", error);
  return Status::Ok();
}

Status QueuePair::Arm() {
  const int error = ibv_req_notify_cq(cq_, 0);
  if (error != 0) return Failed("ibv_req_notify_cq", error);
  return Status::Ok();
}

void QueuePair::TakeEvents() {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  // Non-blocking: fails with EAGAIN once every event was read.
  while (ibv_get_cq_event(channel_, &cq, &context) == 0)
    if (++unacked_events_ >= kAckBatch) {
      ibv_ack_cq_events(cq_, unacked_events_);
      unacked_events_ = 0;
    }
}

}  // namespace tutti::transport::ibverbs
