// Which machine this rank runs on, for local_rank and same-host transports, and which local
// address the data plane should listen on.
#pragma once

#include <string>

namespace tutti::client {

// hostname, boot id and network-namespace inode: containers and network namespaces share a
// hostname, so the name alone would merge ranks that cannot reach each other's loopback.
std::string HostIdentity();

// The local IPv4 address the kernel would use to reach the host of a ZeroMQ endpoint such as
// "tcp://10.1.2.3:5555": the address peers on that network can reach us at. 127.0.0.1 when the
// endpoint is local, not TCP or not resolvable.
std::string LocalAddressToward(const std::string& zmq_endpoint);

}  // namespace tutti::client
