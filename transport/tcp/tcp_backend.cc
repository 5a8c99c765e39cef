#include "transport/tcp/tcp_backend.h"

#include "transport/socket_device.h"
#include "transport/tcp/tcp_channel.h"
#include "transport/tcp/tcp_stream.h"

namespace tutti::transport {
namespace {

class TcpBackend : public Backend {
 public:
  Link link() const override { return Link::kTcp; }
  const char* name() const override { return "tcp"; }
  int preference() const override { return 10; }
  bool CanReach(const PeerAddress&, const PeerAddress&, std::string*) const override { return true; }

  Status Connect(SocketDevice* device, const Dial& dial,
                 std::unique_ptr<Channel>* channel) const override {
    UniqueFd fd;
    TUTTI_RETURN_IF_ERROR(device->ConnectTcp(dial.channel, dial.self, dial.peer, dial.endpoint,
                                             dial.deadline, dial.abort_fd, &fd));
    *channel = std::make_unique<TcpChannel>(std::move(fd));
    return Status::Ok();
  }
  Status Adopt(SocketDevice*, Accepted accepted,
               std::unique_ptr<Channel>* channel) const override {
    *channel = std::make_unique<TcpChannel>(std::move(accepted.fd));
    return Status::Ok();
  }
  Status OpenStream(SocketDevice* device, const Dial& dial, const std::string& who,
                    std::unique_ptr<Stream>* stream) const override {
    UniqueFd fd;
    TUTTI_RETURN_IF_ERROR(device->ConnectTcp(dial.channel, dial.self, dial.peer, dial.endpoint,
                                             dial.deadline, dial.abort_fd, &fd));
    *stream = std::make_unique<TcpStream>(std::move(fd), who);
    return Status::Ok();
  }
  Status AdoptStream(SocketDevice*, Accepted accepted, const std::string& who,
                     std::unique_ptr<Stream>* stream) const override {
    *stream = std::make_unique<TcpStream>(std::move(accepted.fd), who);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Backend> MakeTcpBackend() { return std::make_unique<TcpBackend>(); }

}  // namespace tutti::transport
