#include "transport/ibverbs/ibverbs_backend.h"

#include "transport/channel_stream.h"
#include "transport/ibverbs/ibverbs_setup.h"
#include "transport/socket_device.h"
#include "transport/tcp/tcp_backend.h"

namespace tutti::transport {
namespace {

using ibverbs::Bootstrap;
using ibverbs::QpAnswer;
using ibverbs::QpParams;

class IbverbsBackend : public Backend {
 public:
  Link link() const override { return Link::kIbverbs; }
  const char* name() const override { return "ibverbs"; }
  // Over TCP's, under shared memory's: on one host, memory both processes map beats a trip
  // through the adapter.
  int preference() const override { return 15; }
  // Discovery, once per process: an ibverbs device with an active port and a GID.
  bool Viable(std::string* why) const override { return ibverbs::IbverbsViable(why); }
  // Whether the peer's port is on this one's fabric shows only when the queue pairs meet (link
  // layers, GIDs); whether the peer has a device at all, when it answers the offer.
  bool CanReach(const PeerAddress&, const PeerAddress&, std::string*) const override { return true; }

  Status Connect(SocketDevice* device, const Dial& dial,
                 std::unique_ptr<Channel>* channel) const override {
    return Open(device, dial, channel);
  }
  Status Adopt(SocketDevice* device, Accepted accepted,
               std::unique_ptr<Channel>* channel) const override {
    return Take(device, std::move(accepted), channel);
  }
  // Streams: one channel, used in one direction (a TCP one where the pair fell back).
  Status OpenStream(SocketDevice* device, const Dial& dial, const std::string& who,
                    std::unique_ptr<Stream>* stream) const override {
    std::unique_ptr<Channel> channel;
    TUTTI_RETURN_IF_ERROR(Open(device, dial, &channel));
    *stream = std::make_unique<ChannelStream>(std::move(channel), who);
    return Status::Ok();
  }
  Status AdoptStream(SocketDevice* device, Accepted accepted, const std::string& who,
                     std::unique_ptr<Stream>* stream) const override {
    std::unique_ptr<Channel> channel;
    TUTTI_RETURN_IF_ERROR(Take(device, std::move(accepted), &channel));
    *stream = std::make_unique<ChannelStream>(std::move(channel), who);
    return Status::Ok();
  }

 private:
  // The connection carries the pair as TCP after all: the TCP backend's channel over it.
  static Status AsTcp(SocketDevice* device, UniqueFd socket, const Session& session,
                      bool connector, std::unique_ptr<Channel>* channel) {
    return MakeTcpChannel(device, std::move(socket), session, connector, channel);
  }

  // The connecting side: the device's authenticated TCP connection with an ibverbs hello, then
  // the queue pairs over it.
  static Status Open(SocketDevice* device, const Dial& dial, std::unique_ptr<Channel>* channel) {
    UniqueFd socket;
    Session session;
    TUTTI_RETURN_IF_ERROR(device->ConnectTcp(dial.channel, dial.self, dial.peer, dial.endpoint,
                                             dial.deadline, dial.abort_fd, &socket,
                                             kIbverbsHelloMagic, &session));
    const Bootstrap bootstrap{device,    socket.get(), session.challenge,    dial.self,
                              dial.peer, dial.deadline, dial.abort_fd};
    bool refused = false;
    TUTTI_RETURN_IF_ERROR(ibverbs::ConnectQueuePair(bootstrap, &socket, channel, &refused));
    if (refused) return AsTcp(device, std::move(socket), session, /*connector=*/true, channel);
    return Status::Ok();
  }

  // The accepting side, on the lane's thread: the offer, then either the queue pair or, without
  // a device here, a signed refusal and TCP on the same connection.
  static Status Take(SocketDevice* device, Accepted accepted, std::unique_ptr<Channel>* channel) {
    const Bootstrap bootstrap{device,        accepted.fd.get(), accepted.session.challenge,
                              accepted.self, accepted.peer,     accepted.deadline,
                              accepted.abort_fd};
    QpParams offer;
    TUTTI_RETURN_IF_ERROR(ibverbs::ReceiveParams(bootstrap, &offer));
    TUTTI_RETURN_IF_ERROR(ibverbs::CheckKind(offer, QpAnswer::kOffer));
    std::string why;
    if (!ibverbs::IbverbsViable(&why)) {
      QpParams refusal;
      refusal.answer = static_cast<uint16_t>(QpAnswer::kRefuse);
      ibverbs::SetReason(&refusal, why);
      TUTTI_RETURN_IF_ERROR(ibverbs::SendParams(bootstrap, &refusal));
      return AsTcp(device, std::move(accepted.fd), accepted.session, /*connector=*/false, channel);
    }
    return ibverbs::AcceptQueuePair(bootstrap, offer, &accepted.fd, channel);
  }
};

}  // namespace

std::unique_ptr<Backend> MakeIbverbsBackend() { return std::make_unique<IbverbsBackend>(); }

}  // namespace tutti::transport
