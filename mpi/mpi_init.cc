// tutti_mpi_init and tutti_mpi_finalize (tutti_mpi.h): the job from an MPI communicator, and
// its coordinator started by rank 0 when none was named (docs/launchers.md, "MPI mode").
#include <cstdlib>
#include <cstring>

#include "bootstrap/tuttid_child.h"
#include "mpi/mpi_session.h"
#include "tutti/tutti_mpi.h"

namespace tutti::mpi {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Rank 0's side: where the coordinator is, which job, which token. Only rank 0 calls it.
Status Bootstrap(const tutti_init_options_t& options, bool one_host, Session* session,
                 std::string* coordinator, std::string* job, std::string* token) {
  *coordinator = options.coordinator != nullptr ? options.coordinator : Env("TUTTI_COORDINATOR");
  *job = options.job != nullptr ? options.job : Env("TUTTI_JOB");
  *token = options.token != nullptr ? options.token : Env("TUTTI_TOKEN");
  if (token->empty()) TUTTI_RETURN_IF_ERROR(bootstrap::RandomToken(token));
  if (job->empty()) {
    std::string id;
    TUTTI_RETURN_IF_ERROR(bootstrap::RandomToken(&id));
    *job = "mpi-" + id.substr(0, 16);
  }
  if (!coordinator->empty() && *coordinator != "auto") return Status::Ok();
  const int64_t timeout_ms = options.timeout_ms > 0 ? options.timeout_ms : 60000;
  return bootstrap::StartJobCoordinator(reinterpret_cast<const void*>(&tutti_init), one_host,
                                        timeout_ms, &session->coordinator, coordinator);
}

}  // namespace
}  // namespace tutti::mpi

using tutti::Code;
using tutti::Status;
using namespace tutti::mpi;

extern "C" {

TUTTI_API tutti_status_t tutti_mpi_init(MPI_Comm comm, const tutti_init_options_t* options,
                                        tutti_runtime_t* runtime) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return Report(Status(Code::kInvalidArgument,
                         "MPI is not initialised: call MPI_Init (or MPI_Init_thread) before "
                         "tutti_mpi_init"));
  if (runtime == nullptr) return Report(Status(Code::kInvalidArgument, "runtime is NULL"));
  auto session = std::make_unique<Session>();
  if (MPI_Comm_dup(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, &session->comm) != MPI_SUCCESS)
    return Report(Status(Code::kInvalidArgument, "MPI_Comm_dup of the communicator failed"));
  MPI_Comm_rank(session->comm, &session->rank);
  MPI_Comm_size(session->comm, &session->size);

  tutti_init_options_t opts = TUTTI_INIT_OPTIONS_INIT;
  Status local = Status::Ok();
  if (options != nullptr) {
    if (options->struct_size < sizeof(size_t) || options->struct_size > sizeof(opts))
      local = Status(Code::kInvalidArgument, "options->struct_size is " +
                                                 std::to_string(options->struct_size) +
                                                 "; initialise it with TUTTI_INIT_OPTIONS_INIT");
    else
      std::memcpy(&opts, options, options->struct_size);
    if (local.ok() && (opts.rank != -1 || opts.size != -1))
      local = Status(Code::kInvalidArgument,
                     "options->rank and options->size must be -1 in MPI mode: they come from the "
                     "communicator");
  }
  // Ranks of one node: MPI's view of the host topology.
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(session->comm, MPI_COMM_TYPE_SHARED, session->rank, MPI_INFO_NULL, &node);
  int node_size = 1;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  int all_local = node_size == session->size ? 1 : 0, one_host = 0;
  MPI_Allreduce(&all_local, &one_host, 1, MPI_INT, MPI_LAND, session->comm);

  Status agreed = Agree(session->comm, local);
  std::string coordinator, job, token;
  Status boot = Status::Ok();
  if (agreed.ok() && session->rank == 0)
    boot = Bootstrap(opts, one_host != 0, session.get(), &coordinator, &job, &token);
  if (agreed.ok()) agreed = Agree(session->comm, boot);
  if (!agreed.ok()) {
    MPI_Comm_free(&session->comm);
    return Report(agreed);
  }
  Broadcast(session->comm, 0, &coordinator);
  Broadcast(session->comm, 0, &job);
  Broadcast(session->comm, 0, &token);
  opts.coordinator = coordinator.c_str();
  opts.job = job.c_str();
  opts.token = token.c_str();
  opts.rank = session->rank;
  opts.size = session->size;
  tutti_runtime_t rt = nullptr;
  tutti_status_t status;
  {
    JoiningScope joining(session.get());  // TUTTI_TRANSPORT=mpi's carrier is this Session's
    status = tutti_init(&opts, &rt);
  }
  const Status joined = status == TUTTI_OK ? Status::Ok()
                                           : Status(static_cast<Code>(status), tutti_last_error());
  agreed = Agree(session->comm, joined);
  if (!agreed.ok()) {
    if (rt != nullptr) tutti_finalize(rt);
    MPI_Comm_free(&session->comm);
    return Report(agreed);
  }
  Register(rt, std::move(session));
  *runtime = rt;
  return TUTTI_OK;
}

TUTTI_API tutti_status_t tutti_mpi_finalize(tutti_runtime_t runtime) {
  std::unique_ptr<Session> session = Take(runtime);
  if (session == nullptr)
    return Report(Status(Code::kInvalidArgument,
                         "runtime was not made by tutti_mpi_init (finalize it with tutti_finalize)"));
  const tutti_status_t status = tutti_finalize(runtime);
  const std::string error = status == TUTTI_OK ? "" : tutti_last_error();
  int finalized = 0;
  MPI_Finalized(&finalized);
  // Every rank has left before rank 0 stops the coordinator they all talk to.
  if (!finalized) {
    MPI_Barrier(session->comm);
    MPI_Comm_free(&session->comm);
  }
  session->coordinator.Stop();
  return tutti_set_last_error(status, error.c_str());
}

}  // extern "C"
