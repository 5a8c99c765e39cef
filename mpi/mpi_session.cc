#include "mpi/mpi_session.h"

#include <map>
#include <mutex>
#include <vector>

namespace tutti::mpi {
namespace {

std::mutex g_mu;
std::map<tutti_runtime_t, std::unique_ptr<Session>>& Sessions() {
  static auto* sessions = new std::map<tutti_runtime_t, std::unique_ptr<Session>>();
  return *sessions;
}

thread_local Session* g_joining = nullptr;

}  // namespace

Session* Joining() { return g_joining; }
JoiningScope::JoiningScope(Session* session) { g_joining = session; }
JoiningScope::~JoiningScope() { g_joining = nullptr; }

void Register(tutti_runtime_t runtime, std::unique_ptr<Session> session) {
  std::lock_guard<std::mutex> lock(g_mu);
  Sessions()[runtime] = std::move(session);
}

Session* Find(tutti_runtime_t runtime) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Sessions().find(runtime);
  return it == Sessions().end() ? nullptr : it->second.get();
}

std::unique_ptr<Session> Take(tutti_runtime_t runtime) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Sessions().find(runtime);
  if (it == Sessions().end()) return nullptr;
  auto session = std::move(it->second);
  Sessions().erase(it);
  return session;
}

Status Agree(MPI_Comm comm, const Status& status) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // The lowest failing rank: MINLOC over (0 if failed, 1 if not; rank).
  struct {
    int ok;
    int rank;
  } mine{status.ok() ? 1 : 0, rank}, first{};
  MPI_Allreduce(&mine, &first, 1, MPI_2INT, MPI_MINLOC, comm);
  if (first.ok == 1) return Status::Ok();
  int code = static_cast<int>(status.code());
  MPI_Bcast(&code, 1, MPI_INT, first.rank, comm);
  std::string message = status.message();
  Broadcast(comm, first.rank, &message);
  return Status(static_cast<Code>(code),
                size > 1 ? "rank " + std::to_string(first.rank) + ": " + message : message);
}

void Broadcast(MPI_Comm comm, int root, std::string* value) {
  long long length = static_cast<long long>(value->size());
  MPI_Bcast(&length, 1, MPI_LONG_LONG, root, comm);
  value->resize(static_cast<size_t>(length));
  if (length > 0) MPI_Bcast(value->data(), static_cast<int>(length), MPI_CHAR, root, comm);
}

tutti_status_t Report(const Status& status) {
  return tutti_set_last_error(static_cast<tutti_status_t>(status.code()), status.message().c_str());
}

}  // namespace tutti::mpi
