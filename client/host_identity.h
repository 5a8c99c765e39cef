// Which machine this rank runs on, for local_rank and same-host transports (the address its data
// plane listens on is common/local_address.h's).
#pragma once

#include <string>

namespace tutti::client {

// hostname, boot id and network-namespace inode: containers and network namespaces share a
// hostname, so the name alone would merge ranks that cannot reach each other's loopback.
std::string HostIdentity();

}  // namespace tutti::client
