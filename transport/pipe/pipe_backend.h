// MPI: every pair's bytes as MPI point-to-point messages, through the MessageCarrier that
// libtutti_mpi provides in MPI mode (transport/message_pipe.h, docs/transports.md). Chosen
// only by name (TUTTI_TRANSPORT=mpi), never under auto: TCP reaches every pair too, and a cluster
// picks its tuned MPI deliberately.
#pragma once

#include <memory>

#include "transport/backend.h"

namespace tutti::transport {

std::unique_ptr<Backend> MakePipeBackend();

}  // namespace tutti::transport
