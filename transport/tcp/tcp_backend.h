// TCP: reaches every rank, between hosts and on one; the fallback every pair can use. Under
// TUTTI_DATA_SECURITY=integrity or encrypt its channels and streams carry sealed records
// (transport/secure/).
#pragma once

#include <memory>

#include "transport/backend.h"
#include "transport/fd_io.h"
#include "transport/handshake.h"

namespace tutti::transport {

std::unique_ptr<Backend> MakeTcpBackend();

// A TCP channel over `fd`, a connection whose handshake was `session`, on the side that opened it
// (`connector`) or accepted it: sealed as the device's data security says. Also for the
// connection of an ibverbs bootstrap that falls back to TCP.
Status MakeTcpChannel(SocketDevice* device, UniqueFd fd, const Session& session, bool connector,
                      std::unique_ptr<Channel>* channel);

}  // namespace tutti::transport
