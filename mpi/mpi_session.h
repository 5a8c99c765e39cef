// What MPI mode keeps per runtime it initialised: the communicator the job was made of (a
// duplicate, so that tutti's own collectives never match the application's) and, on rank 0, the
// tuttid it started. Entries are made by tutti_mpi_init and dropped by tutti_mpi_finalize; the
// functions of tutti_mpi.h run on the application's threads, one per process at a time, as MPI
// collectives do, and the registry's mutex only keeps concurrent runtimes apart.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>

#include "bootstrap/tuttid_child.h"
#include "common/status.h"
#include "tutti/tutti.h"

namespace tutti::mpi {

struct Session {
  MPI_Comm comm = MPI_COMM_NULL;  // the job's ranks, ranked as tutti ranks them
  int rank = 0;
  int size = 0;
  bootstrap::TuttidChild coordinator;  // rank 0's, when it started one
};

// The Session whose tutti_init runs on this thread (inside tutti_mpi_init), else null: the MPI
// transport's carrier (mpi/transport/) is made from it while the runtime is.
Session* Joining();
class JoiningScope {
 public:
  explicit JoiningScope(Session* session);
  ~JoiningScope();
  JoiningScope(const JoiningScope&) = delete;
  JoiningScope& operator=(const JoiningScope&) = delete;
};

void Register(tutti_runtime_t runtime, std::unique_ptr<Session> session);
Session* Find(tutti_runtime_t runtime);
std::unique_ptr<Session> Take(tutti_runtime_t runtime);

// Every rank's local `status` made one: the first failing rank's (lowest rank), prefixed with
// "rank R: " when more than one rank takes part, returned on all of `comm`. Collective.
Status Agree(MPI_Comm comm, const Status& status);

// `value` from `root` on every rank of `comm`. Collective.
void Broadcast(MPI_Comm comm, int root, std::string* value);

// A tutti status for the C ABI, with its message as the calling thread's tutti_last_error.
tutti_status_t Report(const Status& status);

}  // namespace tutti::mpi
