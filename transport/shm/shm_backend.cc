#include "transport/shm/shm_backend.h"

#include "transport/channel_stream.h"
#include "transport/shm/shm_channel.h"
#include "transport/socket_device.h"

namespace tutti::transport {
namespace {

class ShmBackend : public Backend {
 public:
  Link link() const override { return Link::kShm; }
  const char* name() const override { return "shm"; }
  int preference() const override { return 20; }
  bool relays_in_place() const override { return true; }
  // Same host identity: the same machine, boot and network namespace, so the peer's abstract
  // Unix socket is reachable and memfds can pass.
  bool CanReach(const PeerAddress& self, const PeerAddress& peer, std::string* why) const override {
    if (self.host == peer.host) return true;
    *why = "rank " + std::to_string(peer.rank) + " is on another host (" + peer.host + ")";
    return false;
  }

  Status Connect(SocketDevice* device, const Dial& dial,
                 std::unique_ptr<Channel>* channel) const override {
    std::unique_ptr<ShmChannel> shm;
    TUTTI_RETURN_IF_ERROR(Create(device, dial, &shm));
    *channel = std::move(shm);
    return Status::Ok();
  }
  Status Adopt(SocketDevice*, Accepted accepted,
               std::unique_ptr<Channel>* channel) const override {
    std::unique_ptr<ShmChannel> shm;
    TUTTI_RETURN_IF_ERROR(ShmChannel::Adopt(std::move(accepted.fd), std::move(accepted.passed), &shm));
    *channel = std::move(shm);
    return Status::Ok();
  }
  Status OpenStream(SocketDevice* device, const Dial& dial, const std::string& who,
                    std::unique_ptr<Stream>* stream) const override {
    std::unique_ptr<ShmChannel> shm;
    TUTTI_RETURN_IF_ERROR(Create(device, dial, &shm));
    *stream = std::make_unique<ChannelStream>(std::move(shm), who);
    return Status::Ok();
  }
  Status AdoptStream(SocketDevice*, Accepted accepted, const std::string& who,
                     std::unique_ptr<Stream>* stream) const override {
    std::unique_ptr<ShmChannel> shm;
    TUTTI_RETURN_IF_ERROR(ShmChannel::Adopt(std::move(accepted.fd), std::move(accepted.passed), &shm));
    *stream = std::make_unique<ChannelStream>(std::move(shm), who);
    return Status::Ok();
  }

 private:
  // The connecting side makes the segment and its eventfds and passes them with the hello over
  // the peer device's Unix listener.
  static Status Create(SocketDevice* device, const Dial& dial, std::unique_ptr<ShmChannel>* shm) {
    std::vector<int> to_pass;
    TUTTI_RETURN_IF_ERROR(ShmChannel::Create(kShmFifoBytes, shm, &to_pass));
    UniqueFd socket;
    TUTTI_RETURN_IF_ERROR(device->ConnectUnix(dial.channel, dial.self, dial.peer, dial.endpoint,
                                              to_pass, dial.deadline, dial.abort_fd, &socket));
    (*shm)->Connected(std::move(socket));
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Backend> MakeShmBackend() { return std::make_unique<ShmBackend>(); }

}  // namespace tutti::transport
