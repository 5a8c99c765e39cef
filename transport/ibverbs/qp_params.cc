#include "transport/ibverbs/qp_params.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "transport/fd_io.h"
#include "transport/socket_device.h"

namespace tutti::transport::ibverbs {
namespace {

Status Invalid(const std::string& what) { return Status(Code::kInternal, "ibverbs: " + what); }

const char* LinkLayerName(uint8_t link_layer) {
  return link_layer == kLinkLayerInfiniband ? "InfiniBand"
         : link_layer == kLinkLayerEthernet ? "Ethernet (RoCE)"
                                            : "of an unknown link layer";
}

bool Zero(const uint8_t* bytes, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (bytes[i] != 0) return false;
  return true;
}

std::string Who(const Bootstrap& bootstrap) { return "rank " + std::to_string(bootstrap.peer); }

// Socket failures read like the rest of the data plane's: ours (finalize, abort) and the
// deadline keep their words, the peer's are "peer lost: rank K: ..." (fd_io names the peer).
Status Lost(const Status& status) {
  if (status.ok() || status.code() == Code::kShutDown || status.code() == Code::kAborted ||
      status.code() == Code::kTimeout)
    return status;
  return Status(Code::kPeerLost, "peer lost: " + status.message());
}

}  // namespace

void SetReason(QpParams* params, const std::string& text) {
  std::memset(params->reason, 0, sizeof(params->reason));
  std::memcpy(params->reason, text.data(), std::min(text.size(), sizeof(params->reason) - 1));
}

std::string Reason(const QpParams& params) {
  return std::string(params.reason, strnlen(params.reason, sizeof(params.reason)));
}

Status CheckKind(const QpParams& peer, QpAnswer expected) {
  if (peer.magic != kQpParamsMagic) return Invalid("the peer's queue-pair parameters are not tutti's");
  if (peer.version != kQpParamsVersion)
    return Status(Code::kVersionMismatch,
                  "ibverbs: the peer speaks queue-pair parameters version " +
                      std::to_string(peer.version) + ", this rank " +
                      std::to_string(kQpParamsVersion) + " (mixed tutti versions?)");
  const auto answer = static_cast<QpAnswer>(peer.answer);
  const bool answering = expected == QpAnswer::kAccept;
  if (!(answer == expected ||
        (answering && (answer == QpAnswer::kRefuse || answer == QpAnswer::kFailed))))
    return Invalid(std::string("expected ") + (answering ? "an answer" : "an offer") +
                   ", the peer sent kind " + std::to_string(peer.answer));
  return Status::Ok();
}

Status CheckPeerParams(const QpParams& peer, const QpParams& mine, QpAnswer expected) {
  TUTTI_RETURN_IF_ERROR(CheckKind(peer, expected));
  const auto answer = static_cast<QpAnswer>(peer.answer);
  if (answer == QpAnswer::kRefuse || answer == QpAnswer::kFailed) return Status::Ok();
  if (peer.qpn == 0 || peer.qpn > 0xffffff)
    return Invalid("the peer sent queue pair number " + std::to_string(peer.qpn) +
                   ", not a 24-bit QPN");
  if (peer.psn > 0xffffff)
    return Invalid("the peer sent packet sequence number " + std::to_string(peer.psn) +
                   ", not 24 bits");
  if (peer.mtu < 1 || peer.mtu > 5)
    return Invalid("the peer's path MTU code " + std::to_string(peer.mtu) + " is not one of 1-5");
  if (peer.link_layer != mine.link_layer)
    return Invalid(std::string("the peer's port is ") + LinkLayerName(peer.link_layer) +
                   ", this rank's " + LinkLayerName(mine.link_layer) +
                   ": they cannot reach each other");
  if (peer.link_layer == kLinkLayerEthernet && Zero(peer.gid, sizeof(peer.gid)))
    return Invalid("the peer's RoCE port sent no GID");
  if (peer.link_layer == kLinkLayerInfiniband && peer.lid == 0 && Zero(peer.gid, sizeof(peer.gid)))
    return Invalid("the peer's InfiniBand port has neither a LID nor a GID");
  if (peer.slots != mine.slots || peer.slot_bytes != mine.slot_bytes)
    return Invalid("the peer's ring has " + std::to_string(peer.slots) + " slots of " +
                   std::to_string(peer.slot_bytes) + " bytes, this rank's " +
                   std::to_string(mine.slots) + " of " + std::to_string(mine.slot_bytes) +
                   " (mixed tutti versions?)");
  if (peer.ring_addr == 0) return Invalid("the peer sent no ring address");
  return Status::Ok();
}

Status SendParams(const Bootstrap& bootstrap, QpParams* params) {
  bootstrap.device->SignParams(bootstrap.challenge, bootstrap.self, bootstrap.peer, params,
                               offsetof(QpParams, mac), params->mac);
  return Lost(WriteFully(bootstrap.socket, params, sizeof(*params), bootstrap.deadline,
                                    bootstrap.device->cancel_fd(), Who(bootstrap)));
}

Status ReceiveParams(const Bootstrap& bootstrap, QpParams* params) {
  TUTTI_RETURN_IF_ERROR(Lost(ReadFully(bootstrap.socket, params, sizeof(*params),
                                                  bootstrap.deadline, bootstrap.device->cancel_fd(),
                                                  bootstrap.abort_fd, Who(bootstrap))));
  if (!bootstrap.device->VerifyParams(bootstrap.challenge, bootstrap.peer, bootstrap.self, params,
                                      offsetof(QpParams, mac), params->mac))
    return Status(Code::kAuthFailed,
                  "authentication failed: the ibverbs queue-pair parameters from " +
                      Who(bootstrap) + " do not verify under the job's secret");
  return Status::Ok();
}

Status SendReady(const Bootstrap& bootstrap) {
  const uint32_t ready = kReadyMagic;
  return Lost(WriteFully(bootstrap.socket, &ready, sizeof(ready), bootstrap.deadline,
                                    bootstrap.device->cancel_fd(), Who(bootstrap)));
}

Status ReceiveReady(const Bootstrap& bootstrap) {
  uint32_t ready = 0;
  TUTTI_RETURN_IF_ERROR(Lost(ReadFully(bootstrap.socket, &ready, sizeof(ready),
                                                  bootstrap.deadline, bootstrap.device->cancel_fd(),
                                                  bootstrap.abort_fd, Who(bootstrap))));
  if (ready != kReadyMagic) return Invalid("the peer did not say it was ready");
  return Status::Ok();
}

}  // namespace tutti::transport::ibverbs
