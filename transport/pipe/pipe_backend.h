// MPI: every pair's bytes as MPI point-to-point messages, through the MessageCarrier that
// libtutti_mpi provides in MPI mode (transport/pipe/message_pipe.h, docs/transports.md). Chosen
// only by name (TUTTI_TRANSPORT=mpi), never under auto: TCP reaches every pair too, and a cluster
// picks its tuned MPI deliberately.
#pragma once

#include <memory>
#include <string>

#include "transport/backend.h"

namespace tutti::transport {

std::unique_ptr<Backend> MakePipeBackend();

// The runtime's carrier if `transport` names a backend that needs one (null otherwise): asks the
// libtutti_mpi loaded in this process for the MPI-mode runtime being made on this thread.
// kInvalidArgument where there is none ("TUTTI_TRANSPORT=mpi needs MPI mode (tutti_mpi_init)") or
// MPI lacks MPI_THREAD_MULTIPLE.
Status OpenCarrier(const std::string& transport, std::unique_ptr<MessageCarrier>* carrier);

}  // namespace tutti::transport
