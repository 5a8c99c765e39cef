// ibverbs (rdma-core's libibverbs): reaches every rank whose host has an RDMA port on the same
// fabric, between hosts or through the device's loopback on one. Wins over TCP under auto where
// both sides of a pair have a usable device; never over shared memory (docs/transports.md).
#pragma once

#include <memory>

#include "transport/backend.h"

namespace tutti::transport {

std::unique_ptr<Backend> MakeIbverbsBackend();

}  // namespace tutti::transport
