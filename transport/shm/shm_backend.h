// Shared memory: reaches the ranks of this host (same host identity), and wins over TCP there.
#pragma once

#include <memory>

#include "transport/backend.h"

namespace tutti::transport {

std::unique_ptr<Backend> MakeShmBackend();

}  // namespace tutti::transport
