#include "transport/ibverbs/ibverbs_setup.h"

#include "transport/ibverbs/ibverbs_channel.h"

namespace tutti::transport::ibverbs {
namespace {

// This side's queue pair, on the process's device.
Status Open(Role role, std::unique_ptr<IbverbsChannel>* channel, QpParams* mine) {
  std::shared_ptr<IbvDevice> device;
  TUTTI_RETURN_IF_ERROR(IbvDevice::Acquire(&device));
  return IbverbsChannel::Create(std::move(device), role, channel, mine);
}

}  // namespace

bool IbverbsViable(std::string* why) {
  PortChoice port;
  return Discover(&port, why);
}

Status ConnectQueuePair(const Bootstrap& bootstrap, UniqueFd* socket,
                        std::unique_ptr<Channel>* channel, bool* refused) {
  *refused = false;
  std::unique_ptr<IbverbsChannel> pair;
  QpParams mine;
  TUTTI_RETURN_IF_ERROR(Open(Role::kConnector, &pair, &mine));
  mine.answer = static_cast<uint16_t>(QpAnswer::kOffer);
  TUTTI_RETURN_IF_ERROR(SendParams(bootstrap, &mine));
  TUTTI_RETURN_IF_ERROR(pair->state().Apply(ConnEvent::kOfferSent));
  QpParams answer;
  TUTTI_RETURN_IF_ERROR(ReceiveParams(bootstrap, &answer));
  TUTTI_RETURN_IF_ERROR(CheckPeerParams(answer, mine, QpAnswer::kAccept));
  switch (static_cast<QpAnswer>(answer.answer)) {
    case QpAnswer::kRefuse:
      // The queue pair goes with `pair`; the socket carries the pair as TCP.
      *refused = true;
      return pair->state().Apply(ConnEvent::kRefusalReceived);
    case QpAnswer::kFailed:
      return Status(Code::kInternal, "ibverbs: rank " + std::to_string(bootstrap.peer) +
                                         " could not set up its queue pair: " + Reason(answer));
    default:
      break;
  }
  TUTTI_RETURN_IF_ERROR(pair->state().Apply(ConnEvent::kAnswerReceived));
  TUTTI_RETURN_IF_ERROR(pair->Connect(answer));
  // The acceptor answered from RTS, so writes may start once this side is there too.
  TUTTI_RETURN_IF_ERROR(SendReady(bootstrap));
  TUTTI_RETURN_IF_ERROR(pair->state().Apply(ConnEvent::kReadySent));
  pair->Connected(std::move(*socket));
  *channel = std::move(pair);
  return Status::Ok();
}

Status AcceptQueuePair(const Bootstrap& bootstrap, const QpParams& offer, UniqueFd* socket,
                       std::unique_ptr<Channel>* channel) {
  // Until the answer went out, a failure here is told to the connector, which waits for it.
  auto failed = [&](const Status& status) {
    QpParams failure;
    failure.answer = static_cast<uint16_t>(QpAnswer::kFailed);
    SetReason(&failure, status.message());
    [[maybe_unused]] Status told = SendParams(bootstrap, &failure);
    return status;
  };
  std::unique_ptr<IbverbsChannel> pair;
  QpParams mine;
  Status status = Open(Role::kAcceptor, &pair, &mine);
  if (status.ok()) status = CheckPeerParams(offer, mine, QpAnswer::kOffer);
  if (status.ok()) status = pair->state().Apply(ConnEvent::kOfferReceived);
  // Ready to receive and to send before answering: the connector may write as soon as it has
  // the answer and its own queue pair is in RTS.
  if (status.ok()) status = pair->Connect(offer);
  if (!status.ok()) return failed(status);
  mine.answer = static_cast<uint16_t>(QpAnswer::kAccept);
  TUTTI_RETURN_IF_ERROR(SendParams(bootstrap, &mine));
  TUTTI_RETURN_IF_ERROR(pair->state().Apply(ConnEvent::kAnswerSent));
  // Nothing is posted toward a queue pair that may not be in RTR yet.
  TUTTI_RETURN_IF_ERROR(ReceiveReady(bootstrap));
  TUTTI_RETURN_IF_ERROR(pair->state().Apply(ConnEvent::kReadyReceived));
  pair->Connected(std::move(*socket));
  *channel = std::move(pair);
  return Status::Ok();
}

}  // namespace tutti::transport::ibverbs
