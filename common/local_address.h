// Which address of this machine another host reaches it at: the source address of the kernel's
// route toward that host. Used by a rank for its data-plane address (toward its coordinator) and
// by tuttirun for the coordinator address it gives remote ranks (toward a remote host).
#pragma once

#include <string>

namespace tutti {

// The local IPv4 address the kernel would use to reach the host of a ZeroMQ endpoint such as
// "tcp://10.1.2.3:5555": the address peers on that network can reach us at. 127.0.0.1 when the
// endpoint is local, not TCP or not resolvable. Sends nothing.
std::string LocalAddressToward(const std::string& zmq_endpoint);

}  // namespace tutti
