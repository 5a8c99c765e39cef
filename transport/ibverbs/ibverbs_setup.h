// The verbs half of the ibverbs backend behind names that carry no verbs type, so that
// ibverbs_backend.cc builds whether or not libibverbs was found: CMake links ibverbs_setup.cc
// (with libibverbs) or ibverbs_unavailable.cc (without, saying so in IbverbsViable).
//
// Setting up a pair (transport/ibverbs/connection_state.h has the steps): the lower rank dials
// the peer's TCP listener with an ibverbs hello (transport/handshake.h), creates its queue pair
// and offers its parameters, signed; the peer, on its lane's thread (Backend::Adopt), creates its
// own, moves it to RTR and RTS and answers, signed; the connector moves to RTR and RTS and says
// it is ready. A peer with no usable device refuses instead, and both sides carry the pair over
// the same TCP connection: under TUTTI_TRANSPORT=auto that is how "both sides have a device" is
// decided, since route planning knows only this rank's device.
//
// Threads: the thread that needs the channel (a lane, a point-to-point thread).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "transport/channel.h"
#include "transport/fd_io.h"
#include "transport/ibverbs/qp_params.h"

namespace tutti::transport::ibverbs {

// Whether this process has a usable RDMA port (discovery runs once; transport/ibverbs/
// ibverbs_device.h); `*why` when not.
bool IbverbsViable(std::string* why);

// The connector, once its hello went out on `*socket`. On success `*channel` owns the socket.
// If the peer refused (no device there), `*refused` is set, nothing else is, and the socket stays
// the caller's, clean, for a TCP channel.
Status ConnectQueuePair(const Bootstrap& bootstrap, UniqueFd* socket,
                        std::unique_ptr<Channel>* channel, bool* refused);

// The acceptor, with a viable device, once the connector's `offer` arrived and verified. A
// failure of its own is also sent to the connector (kFailed, with the reason).
Status AcceptQueuePair(const Bootstrap& bootstrap, const QpParams& offer, UniqueFd* socket,
                       std::unique_ptr<Channel>* channel);

}  // namespace tutti::transport::ibverbs
