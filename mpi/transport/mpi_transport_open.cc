// tutti_mpi_transport_open (transport/message_pipe.h): libtutti asks for the MPI backend's
// carrier while tutti_init runs under TUTTI_TRANSPORT=mpi. In MPI mode that tutti_init runs inside
// tutti_mpi_init, on the same thread, which marks its Session as the one joining (mpi_session.h).
#include <cstdio>

#include "mpi/mpi_session.h"
#include "mpi/transport/mpi_carrier.h"

namespace {

int Refuse(tutti::Code code, const char* message, char* error, size_t error_size) {
  if (error != nullptr && error_size > 0) std::snprintf(error, error_size, "%s", message);
  return static_cast<int>(code);
}

}  // namespace

extern "C" TUTTI_API int tutti_mpi_transport_open(int api,
                                                  tutti::transport::MessageCarrier** carrier,
                                                  char* error, size_t error_size) {
  using tutti::Code;
  if (api != tutti::transport::kMessagePipeApi)
    return Refuse(Code::kVersionMismatch,
                  "libtutti.so and libtutti_mpi.so come from different builds (message pipe "
                  "interface versions differ): use the two from one build",
                  error, error_size);
  tutti::mpi::Session* session = tutti::mpi::Joining();
  if (session == nullptr)
    return Refuse(Code::kInvalidArgument, "TUTTI_TRANSPORT=mpi needs MPI mode (tutti_mpi_init)",
                  error, error_size);
  // Lanes and point-to-point threads call MPI at once.
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    return Refuse(Code::kInvalidArgument,
                  "TUTTI_TRANSPORT=mpi needs MPI_THREAD_MULTIPLE: initialise MPI with "
                  "MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)",
                  error, error_size);
  *carrier = new tutti::mpi::MpiCarrier(session->comm, session->rank);
  return 0;
}
