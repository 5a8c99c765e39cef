// ZapHandler: the ZeroMQ Authentication Protocol (RFC 27) endpoint that admits CURVE clients whose
// public key is on tuttid's list. It answers on a REP socket bound to inproc://zeromq.zap.01 in the
// coordinator's context; the coordinator's loop polls it beside the ROUTER socket, so there is no
// extra thread. An admitted connection's messages carry the key (Z85) as their User-Id.
#pragma once

#include <zmq.hpp>

#include "server/security/curve_keys.h"

namespace tutti::server {

class ZapHandler {
 public:
  // Binds the ZAP endpoint; must happen before the ROUTER socket accepts connections.
  ZapHandler(zmq::context_t& context, const CurveServerKeys& keys);

  zmq::socket_t& socket() { return socket_; }
  // Answers every request waiting on the socket.
  void HandleRequests();

 private:
  const CurveServerKeys& keys_;
  zmq::socket_t socket_;
};

}  // namespace tutti::server
