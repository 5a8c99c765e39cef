// TCP: reaches every rank, between hosts and on one; the fallback every pair can use.
#pragma once

#include <memory>

#include "transport/backend.h"

namespace tutti::transport {

std::unique_ptr<Backend> MakeTcpBackend();

}  // namespace tutti::transport
