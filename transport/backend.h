// One way two ranks can talk, and the table of them (docs/transports.md). Each backend lives in
// its own folder (tcp/, shm/) and is listed once in transport/backend_table.cc; route planning
// (transport/route_planner.h) asks the table which backend carries each pair, and contexts and
// point-to-point streams ask it to connect and to adopt what arrived. Nothing outside transport/
// names a backend: algorithms ask their Context what it can do (CanRelayInPlace).
//
// The backends share the device's bootstrap (transport/socket_device.h): its TCP listener and
// its same-host Unix listener, both behind the job's HMAC handshake. A backend that needs its own
// hardware or library (ibverbs) says so in Viable() and may bootstrap over the TCP listener. The
// MPI backend (transport/pipe/) is listed here too but moves its bytes through the runtime's
// MessageCarrier, which libtutti_mpi provides in MPI mode (needs_carrier()).
//
// Threads: the table is read-only once a runtime exists. Viable and CanReach are pure; Connect and
// Adopt run on the thread that needs the channel (a lane, a point-to-point thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/channel.h"
#include "transport/transport.h"

namespace tutti::transport {

class SocketDevice;
struct Accepted;

// One rank as route planning sees it: where its device listens and which host it is on (the
// host identity: hostname, boot id and network namespace, or TUTTI_HOST_ID).
struct PeerAddress {
  int32_t rank = -1;
  std::string endpoint;
  std::string host;
};

// One connection attempt from `self` to `peer` for channel `channel` (a set id, or a negative
// point-to-point channel). An `abort_fd` of -1: none; readable ends the attempt early.
struct Dial {
  int32_t channel = 0;
  int32_t self = -1;
  int32_t peer = -1;
  std::string endpoint;
  Deadline deadline;
  int abort_fd = -1;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Link link() const = 0;
  // Its TUTTI_TRANSPORT name.
  virtual const char* name() const = 0;
  // Under TUTTI_TRANSPORT=auto a pair goes to the viable backend of highest preference that can
  // reach it.
  virtual int preference() const = 0;
  // Whether this process can use it at all (its device present, its library loadable); if not,
  // `*why` says so.
  virtual bool Viable(std::string* /*why*/) const { return true; }
  // Whether it can carry the pair (self, peer); if not, `*why` names the obstacle ("rank 3 is on
  // another host (h)").
  virtual bool CanReach(const PeerAddress& self, const PeerAddress& peer, std::string* why) const = 0;
  // Whether its channels expose the bytes in flight as windows both sides map, so that
  // Context::Relay can reduce straight between them.
  virtual bool relays_in_place() const { return false; }
  // Whether its channels move bytes through the runtime's MessageCarrier
  // (transport/message_pipe.h), which the runtime opens when TUTTI_TRANSPORT names it.
  virtual bool needs_carrier() const { return false; }

  // The lower rank of a pair opens the pair's channel; the higher adopts what arrived through the
  // device with this backend's link.
  virtual Status Connect(SocketDevice* device, const Dial& dial,
                         std::unique_ptr<Channel>* channel) const = 0;
  virtual Status Adopt(SocketDevice* device, Accepted accepted,
                       std::unique_ptr<Channel>* channel) const = 0;
  // Point-to-point streams, one direction each: the sender opens, the receiver adopts. `who`
  // names the other side in messages ("rank 3").
  virtual Status OpenStream(SocketDevice* device, const Dial& dial, const std::string& who,
                            std::unique_ptr<Stream>* stream) const = 0;
  virtual Status AdoptStream(SocketDevice* device, Accepted accepted, const std::string& who,
                             std::unique_ptr<Stream>* stream) const = 0;
};

// The table, in registration order (built-ins first).
const std::vector<const Backend*>& Backends();
// The backend of `link` or called `name`; null if none.
const Backend* FindBackend(Link link);
const Backend* FindBackend(const std::string& name);
// Adds a backend built elsewhere. Call before the first runtime is created; not thread-safe.
void RegisterBackend(std::unique_ptr<Backend> backend);

}  // namespace tutti::transport
