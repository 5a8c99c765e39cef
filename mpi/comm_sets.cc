// Process sets from MPI communicators and back (tutti_mpi.h). Every process brings its own
// communicator; the groups they form are checked for agreement and added in one order that every
// process derives from the same allgathered lists, so that set ids agree without a leader.
#include <algorithm>
#include <vector>

#include "mpi/mpi_session.h"
#include "tutti/tutti_mpi.h"

namespace tutti::mpi {
namespace {

std::string List(const std::vector<int>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

// The job ranks of `comm`'s processes, sorted; empty for MPI_COMM_NULL.
Status JobRanks(const Session& session, MPI_Comm comm, std::vector<int>* ranks) {
  ranks->clear();
  if (comm == MPI_COMM_NULL) return Status::Ok();
  MPI_Group group, job;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(session.comm, &job);
  int n = 0;
  MPI_Group_size(group, &n);
  std::vector<int> local(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) local[static_cast<size_t>(i)] = i;
  ranks->resize(static_cast<size_t>(n));
  MPI_Group_translate_ranks(group, n, local.data(), job, ranks->data());
  MPI_Group_free(&group);
  MPI_Group_free(&job);
  if (std::find(ranks->begin(), ranks->end(), MPI_UNDEFINED) != ranks->end())
    return Status(Code::kInvalidArgument,
                  "the communicator holds processes outside the job's communicator");
  std::sort(ranks->begin(), ranks->end());
  return Status::Ok();
}

}  // namespace
}  // namespace tutti::mpi

using tutti::Code;
using tutti::Status;
using namespace tutti::mpi;

extern "C" {

TUTTI_API tutti_status_t tutti_process_set_from_comm(tutti_runtime_t runtime, MPI_Comm comm,
                                                     int64_t timeout_ms, int32_t* set_id) {
  Session* session = Find(runtime);
  if (session == nullptr)
    return Report(Status(Code::kInvalidArgument, "runtime was not made by tutti_mpi_init"));
  if (set_id == nullptr) return Report(Status(Code::kInvalidArgument, "set_id is NULL"));
  std::vector<int> mine;
  const Status agreed = Agree(session->comm, JobRanks(*session, comm, &mine));
  if (!agreed.ok()) return Report(agreed);

  // Every process's list: sizes, then the lists end to end.
  const int size = session->size;
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, session->comm);
  int total = 0;
  for (int r = 0; r < size; ++r) offsets[static_cast<size_t>(r)] = total, total += counts[static_cast<size_t>(r)];
  std::vector<int> all(static_cast<size_t>(std::max(total, 1)));
  MPI_Allgatherv(mine.data(), count, MPI_INT, all.data(), counts.data(), offsets.data(), MPI_INT,
                 session->comm);
  std::vector<std::vector<int>> lists(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < counts[static_cast<size_t>(r)]; ++i)
      lists[static_cast<size_t>(r)].push_back(all[static_cast<size_t>(offsets[static_cast<size_t>(r)] + i)]);

  // Each member of a group must name the same group: checked in rank order, so that every
  // process finds the same first disagreement.
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < size; ++r) {
    const std::vector<int>& group = lists[static_cast<size_t>(r)];
    if (group.empty()) continue;
    for (int q : group) {
      const std::vector<int>& theirs = lists[static_cast<size_t>(q)];
      if (theirs != group)
        return Report(Status(
            Code::kInvalidArgument,
            "communicators disagree: rank " + std::to_string(r) + "'s holds ranks " + List(group) +
                ", rank " + std::to_string(q) + "'s " +
                (theirs.empty() ? std::string("is MPI_COMM_NULL") : "holds ranks " + List(theirs))));
    }
    if (group.front() == r) groups.push_back(group);  // once, at its lowest rank
  }
  *set_id = -1;
  for (const auto& group : groups) {
    int32_t id = -1;
    const tutti_status_t status = tutti_process_set_add(
        runtime, group.data(), static_cast<int32_t>(group.size()), timeout_ms, &id);
    if (status != TUTTI_OK) return status;  // its message is the thread's last error already
    if (group == mine) *set_id = id;
  }
  return TUTTI_OK;
}

TUTTI_API tutti_status_t tutti_process_set_comm(tutti_runtime_t runtime, int32_t set_id,
                                                MPI_Comm* comm) {
  Session* session = Find(runtime);
  if (session == nullptr)
    return Report(Status(Code::kInvalidArgument, "runtime was not made by tutti_mpi_init"));
  if (comm == nullptr) return Report(Status(Code::kInvalidArgument, "comm is NULL"));
  *comm = MPI_COMM_NULL;
  int32_t count = 0;
  tutti_status_t status = tutti_process_set_ranks(runtime, set_id, nullptr, 0, &count);
  if (status != TUTTI_OK) return status;
  std::vector<int32_t> ranks(static_cast<size_t>(count));
  status = tutti_process_set_ranks(runtime, set_id, ranks.data(), count, &count);
  if (status != TUTTI_OK) return status;
  if (std::find(ranks.begin(), ranks.end(), session->rank) == ranks.end()) return TUTTI_OK;
  MPI_Group job, members;
  MPI_Comm_group(session->comm, &job);
  MPI_Group_incl(job, count, ranks.data(), &members);
  const int rc = MPI_Comm_create_group(session->comm, members, set_id, comm);
  MPI_Group_free(&members);
  MPI_Group_free(&job);
  if (rc != MPI_SUCCESS)
    return Report(Status(Code::kInternal, "MPI_Comm_create_group failed for process set " +
                                              std::to_string(set_id)));
  return TUTTI_OK;
}

}  // extern "C"
