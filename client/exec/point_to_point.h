// Point-to-point send and recv between two members of a set. Not negotiated by tuttid and
// independent of the set's lane, so a pipeline stage never waits behind a collective.
//
// Each (set, sender, receiver) has its own one-way stream and a thread at each end: the sending
// thread writes queued messages in order, the receiving thread reads them in order and matches
// each to the oldest posted recv of its tag (or keeps it until one is posted). So messages between
// two ranks are matched by (set, source, destination, tag) in submission order. Device tensors go
// over NCCL between ranks on different GPUs and through host memory otherwise, as the pair agrees
// per message (client/exec/point_to_point_nccl.h).
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

#include "client/exec/request.h"
#include "transport/transport.h"

namespace tutti::client {

class PointToPoint {
 public:
  // `routes[r]`: how to reach rank r (shared memory within a host, else TCP). `host`: this rank's
  // host identity, which tells a pair of device tensors whether they share a GPU.
  PointToPoint(transport::Device* device, int32_t self, std::string host,
               std::vector<transport::PeerRoute> routes, std::chrono::milliseconds timeout);
  // Aborts every stream and joins every thread; pending requests fail with kShutDown.
  ~PointToPoint();

  // `request` carries the buffer (operation().input / output) and its size in bytes.
  void Send(int32_t set_id, int32_t peer, int32_t tag, std::shared_ptr<Request> request, size_t bytes);
  void Recv(int32_t set_id, int32_t peer, int32_t tag, std::shared_ptr<Request> request, size_t bytes);

  // Fails pending and later messages exchanged with `peer` (any set) with `status`.
  void AbortPeer(int32_t peer, const Status& status);
  // Fails everything with `status`.
  void AbortAll(const Status& status);
  // Ranks were added to the job (docs/elastic.md): `routes` covers them too.
  void SetRoutes(std::vector<transport::PeerRoute> routes);

 private:
  class Channel;
  Channel& ChannelFor(int32_t set_id, int32_t peer, bool sending);
  transport::PeerRoute RouteTo(int32_t peer);

  transport::Device* device_;
  const int32_t self_;
  const std::string host_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::vector<transport::PeerRoute> routes_;  // guarded by mu_
  std::map<std::tuple<int32_t, int32_t, bool>, std::unique_ptr<Channel>> channels_;
  Status aborted_;  // once AbortAll ran: new channels start failed
};

}  // namespace tutti::client
