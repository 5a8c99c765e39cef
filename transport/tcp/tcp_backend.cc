#include "transport/tcp/tcp_backend.h"

#include "transport/secure/sealed_channel.h"
#include "transport/secure/sealed_stream.h"
#include "transport/socket_device.h"
#include "transport/tcp/tcp_channel.h"
#include "transport/tcp/tcp_stream.h"

namespace tutti::transport {
namespace {

// The record cipher of one direction of a protected connection: `sending` from the side that
// `connector` says, with the key of that direction.
Status CipherFor(SocketDevice* device, const Session& session, bool connector, bool sending,
                 std::unique_ptr<RecordCipher>* cipher) {
  const SessionKeys keys = device->KeysOf(session);
  const bool connector_to_acceptor = connector == sending;
  return RecordCipher::Create(device->security(), session.aead,
                              connector_to_acceptor ? keys.connector_to_acceptor
                                                    : keys.acceptor_to_connector,
                              cipher);
}

bool Protected(const SocketDevice* device) { return device->security() != DataSecurity::kOff; }

// A stream sends one way: the side that opened it writes, the side that accepted it reads.
Status MakeTcpStream(SocketDevice* device, UniqueFd fd, const Session& session, bool connector,
                     const std::string& who, std::unique_ptr<Stream>* stream) {
  auto plain = std::make_unique<TcpStream>(std::move(fd), who);
  if (!Protected(device)) {
    *stream = std::move(plain);
    return Status::Ok();
  }
  std::unique_ptr<RecordCipher> cipher;
  TUTTI_RETURN_IF_ERROR(CipherFor(device, session, connector, /*sending=*/connector, &cipher));
  *stream = std::make_unique<SealedStream>(std::move(plain), std::move(cipher), who);
  return Status::Ok();
}

class TcpBackend : public Backend {
 public:
  Link link() const override { return Link::kTcp; }
  const char* name() const override { return "tcp"; }
  int preference() const override { return 10; }
  bool CanReach(const PeerAddress&, const PeerAddress&, std::string*) const override { return true; }

  Status Connect(SocketDevice* device, const Dial& dial,
                 std::unique_ptr<Channel>* channel) const override {
    UniqueFd fd;
    Session session;
    TUTTI_RETURN_IF_ERROR(device->ConnectTcp(dial.channel, dial.self, dial.peer, dial.endpoint,
                                             dial.deadline, dial.abort_fd, &fd, kHelloMagic,
                                             &session));
    return MakeTcpChannel(device, std::move(fd), session, /*connector=*/true, channel);
  }
  Status Adopt(SocketDevice* device, Accepted accepted,
               std::unique_ptr<Channel>* channel) const override {
    return MakeTcpChannel(device, std::move(accepted.fd), accepted.session, /*connector=*/false,
                          channel);
  }
  Status OpenStream(SocketDevice* device, const Dial& dial, const std::string& who,
                    std::unique_ptr<Stream>* stream) const override {
    UniqueFd fd;
    Session session;
    TUTTI_RETURN_IF_ERROR(device->ConnectTcp(dial.channel, dial.self, dial.peer, dial.endpoint,
                                             dial.deadline, dial.abort_fd, &fd, kHelloMagic,
                                             &session));
    return MakeTcpStream(device, std::move(fd), session, /*connector=*/true, who, stream);
  }
  Status AdoptStream(SocketDevice* device, Accepted accepted, const std::string& who,
                     std::unique_ptr<Stream>* stream) const override {
    return MakeTcpStream(device, std::move(accepted.fd), accepted.session, /*connector=*/false,
                         who, stream);
  }
};

}  // namespace

Status MakeTcpChannel(SocketDevice* device, UniqueFd fd, const Session& session, bool connector,
                      std::unique_ptr<Channel>* channel) {
  if (!Protected(device)) {
    *channel = std::make_unique<TcpChannel>(std::move(fd));
    return Status::Ok();
  }
  std::unique_ptr<RecordCipher> sealer, opener;
  TUTTI_RETURN_IF_ERROR(CipherFor(device, session, connector, /*sending=*/true, &sealer));
  TUTTI_RETURN_IF_ERROR(CipherFor(device, session, connector, /*sending=*/false, &opener));
  *channel = std::make_unique<SealedChannel>(std::move(fd), std::move(sealer), std::move(opener));
  return Status::Ok();
}

std::unique_ptr<Backend> MakeTcpBackend() { return std::make_unique<TcpBackend>(); }

}  // namespace tutti::transport
