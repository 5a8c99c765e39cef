#include "transport/pipe/pipe_backend.h"

#include "transport/channel_stream.h"
#include "transport/pipe/pipe_channel.h"
#include "transport/socket_device.h"

namespace tutti::transport {
namespace {

class PipeBackend : public Backend {
 public:
  Link link() const override { return Link::kMpi; }
  const char* name() const override { return "mpi"; }
  // Below TCP's, so that auto never picks it.
  int preference() const override { return 0; }
  bool needs_carrier() const override { return true; }
  // MPI reaches every rank of its communicator, which is the whole job in MPI mode.
  bool CanReach(const PeerAddress&, const PeerAddress&, std::string*) const override { return true; }

  Status Connect(SocketDevice* device, const Dial& dial,
                 std::unique_ptr<Channel>* channel) const override {
    std::unique_ptr<PipeChannel> pipe;
    TUTTI_RETURN_IF_ERROR(Create(device, dial, &pipe));
    *channel = std::move(pipe);
    return Status::Ok();
  }
  Status Adopt(SocketDevice* device, Accepted accepted,
               std::unique_ptr<Channel>* channel) const override {
    std::unique_ptr<PipeChannel> pipe;
    TUTTI_RETURN_IF_ERROR(Take(device, std::move(accepted), &pipe));
    *channel = std::move(pipe);
    return Status::Ok();
  }
  Status OpenStream(SocketDevice* device, const Dial& dial, const std::string& who,
                    std::unique_ptr<Stream>* stream) const override {
    std::unique_ptr<PipeChannel> pipe;
    TUTTI_RETURN_IF_ERROR(Create(device, dial, &pipe));
    *stream = std::make_unique<ChannelStream>(std::move(pipe), who);
    return Status::Ok();
  }
  Status AdoptStream(SocketDevice* device, Accepted accepted, const std::string& who,
                     std::unique_ptr<Stream>* stream) const override {
    std::unique_ptr<PipeChannel> pipe;
    TUTTI_RETURN_IF_ERROR(Take(device, std::move(accepted), &pipe));
    *stream = std::make_unique<ChannelStream>(std::move(pipe), who);
    return Status::Ok();
  }

 private:
  static Status Pipe(SocketDevice* device, int32_t channel, int32_t self, int32_t peer,
                     std::unique_ptr<MessagePipe>* pipe) {
    MessageCarrier* carrier = device->carrier();
    if (carrier == nullptr)
      return Status(Code::kInternal, "an MPI route on a runtime without MPI mode's carrier");
    // MPI addresses ranks of the communicator, the data plane tutti ranks: in MPI mode they are
    // the same numbers (tutti_mpi_init), and nothing else makes a carrier.
    if (carrier->rank() != self)
      return Status(Code::kInternal, "tutti rank " + std::to_string(self) + " is MPI rank " +
                                         std::to_string(carrier->rank()) +
                                         ": TUTTI_TRANSPORT=mpi needs them equal");
    return carrier->Open(channel, peer, pipe);
  }
  // The connecting side: the device's authenticated connection first (the peer proves it is of
  // this job, and its end closing later says it died), then the channel's pipe.
  static Status Create(SocketDevice* device, const Dial& dial, std::unique_ptr<PipeChannel>* out) {
    std::unique_ptr<MessagePipe> pipe;
    TUTTI_RETURN_IF_ERROR(Pipe(device, dial.channel, dial.self, dial.peer, &pipe));
    UniqueFd socket;
    TUTTI_RETURN_IF_ERROR(device->ConnectTcp(dial.channel, dial.self, dial.peer, dial.endpoint,
                                             dial.deadline, dial.abort_fd, &socket));
    *out = std::make_unique<PipeChannel>(std::move(socket), std::move(pipe));
    return Status::Ok();
  }
  static Status Take(SocketDevice* device, Accepted accepted, std::unique_ptr<PipeChannel>* out) {
    std::unique_ptr<MessagePipe> pipe;
    TUTTI_RETURN_IF_ERROR(
        Pipe(device, accepted.channel, device->carrier() ? device->carrier()->rank() : -1,
             accepted.peer, &pipe));
    *out = std::make_unique<PipeChannel>(std::move(accepted.fd), std::move(pipe));
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<Backend> MakePipeBackend() { return std::make_unique<PipeBackend>(); }

}  // namespace tutti::transport
