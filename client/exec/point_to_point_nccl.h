// The NCCL path of device send and recv (docs/gpu.md, "Send and recv"): between ranks on different
// GPUs a device tensor goes by ncclSend/ncclRecv on a communicator of the pair, not through host
// memory.
//
// Point-to-point is not negotiated, so each message's path is agreed by the pair itself:
//  - the sender of a device tensor writes an offer (its host, GPU UUID and index) where a host
//    message has its bytes;
//  - the receiver's channel thread answers at once, on a stream of its own back to the sender:
//    NCCL when the recv posted for the message is a device tensor on another GPU (the
//    negotiator's rule for sharing a GPU: one host, and one UUID, or one index where a UUID is
//    missing) and both modules have NCCL point-to-point; staged otherwise, and when no recv is
//    posted yet (so a send never waits for its recv, only for its receiver to read), after which
//    the bytes follow the offer as a host message's do;
//  - on NCCL both queue their call on the pair's communicator in the channel's message order,
//    which is the order NCCL pairs them in.
//
// Communicators: one per (channel, this rank's device, the peer's device), made on the first NCCL
// message between those devices from the unique id the receiver sends in its answer (the receiver
// is the communicator's rank 0). Kept for the channel's life; a failed wait (a lost peer
// interrupts it, finalize, the timeout) aborts them, and the channel fails with it.
//
// Ownership and threads: one per point-to-point channel, used by that channel's thread alone.
#pragma once

#include <chrono>
#include <string>

#include "client/exec/device_collectives.h"
#include "client/exec/request.h"
#include "gpu/module_api.h"
#include "transport/transport.h"

namespace tutti::client {

// Where a device tensor lives, as the sender offers it and the receiver compares it.
struct DeviceOffer {
  int32_t device_index = -1;
  std::string uuid;
  std::string host;  // the rank's host identity (TUTTI_HOST_ID or the machine's)
};

// The receiver's answer to an offer.
struct OfferAnswer {
  bool nccl = false;
  int32_t device_index = -1;  // the receiver's device, on NCCL
  std::string comm_id;        // a new communicator's unique id; empty: the pair has one
};

// Offers and answers on the wire, after the message header (offers) or alone (answers).
Status WriteOffer(transport::Stream& stream, const DeviceOffer& offer, transport::Deadline deadline);
Status ReadOffer(transport::Stream& stream, DeviceOffer* offer, transport::Deadline deadline);
Status WriteAnswer(transport::Stream& stream, const OfferAnswer& answer, transport::Deadline deadline);
Status ReadAnswer(transport::Stream& stream, OfferAnswer* answer, transport::Deadline deadline);

class PointToPointNccl {
 public:
  PointToPointNccl(std::string host, std::chrono::milliseconds timeout)
      : host_(std::move(host)), timeout_(timeout) {}

  // Whether `request` (a send's or a recv's) could go over NCCL: a device tensor of `bytes` > 0,
  // and a module with NCCL point-to-point.
  static bool Usable(const Request& request, size_t bytes);
  DeviceOffer Offer(const Request& request) const;
  // The receiver's decision for `offer`, whose recv is `matched` (null: none posted yet).
  OfferAnswer Answer(const DeviceOffer& offer, const Request* matched, size_t bytes);

  // The NCCL transfer agreed in `answer`, with a communicator made first if it carries an id:
  // queued after the tensor's producer, published to the request, waited for on the host.
  Status Send(Request& request, size_t bytes, const OfferAnswer& answer,
              const gpu::Interrupt& interrupted);
  Status Recv(Request& request, size_t bytes, const DeviceOffer& offer, const OfferAnswer& answer,
              const gpu::Interrupt& interrupted);

 private:
  Status Transfer(Request& request, bool sending, size_t bytes, int32_t peer_device,
                  const std::string& comm_id, const gpu::Interrupt& interrupted);

  const std::string host_;
  const std::chrono::milliseconds timeout_;
  DevicesInUse devices_;  // this rank's devices; each keeps its pair communicators by peer device
};

}  // namespace tutti::client
