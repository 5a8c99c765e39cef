// OpenCarrier (transport/message_pipe.h): libtutti links no MPI, so the MPI backend's
// carrier comes from the libtutti_mpi that an MPI-mode program has loaded already. Looking it up
// without loading it (RTLD_NOLOAD) keeps a program outside MPI mode from pulling MPI in.
#include <dlfcn.h>

#include "transport/backend.h"
#include "transport/message_pipe.h"

namespace tutti::transport {
namespace {
constexpr const char* kMpiLibrary = "libtutti_mpi.so.0";
}  // namespace

Status OpenCarrier(const std::string& transport, std::unique_ptr<MessageCarrier>* carrier) {
  carrier->reset();
  const Backend* backend = FindBackend(transport);
  if (backend == nullptr || !backend->needs_carrier()) return Status::Ok();
  const Status outside(Code::kInvalidArgument,
                       "TUTTI_TRANSPORT=" + transport + " needs MPI mode (tutti_mpi_init)");
  void* library = dlopen(kMpiLibrary, RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return outside;
  using Open = int (*)(int, MessageCarrier**, char*, size_t);
  auto open = reinterpret_cast<Open>(dlsym(library, "tutti_mpi_transport_open"));
  // The program holds the library (it called tutti_mpi_init): our reference is not needed.
  dlclose(library);
  if (open == nullptr)
    return Status(Code::kVersionMismatch,
                  std::string(kMpiLibrary) + " has no tutti_mpi_transport_open: it is older than "
                  "this libtutti; use the two from one build");
  char error[512] = "";
  MessageCarrier* opened = nullptr;
  const int code = open(kMessagePipeApi, &opened, error, sizeof error);
  if (code != 0) return Status(static_cast<Code>(code), error);
  carrier->reset(opened);
  return Status::Ok();
}

}  // namespace tutti::transport
