/* tutti's MPI mode (docs/launchers.md, "MPI mode"): a job launched by mpirun that has MPI
 * initialised takes its ranks, its size and its coordinator's address from
 * an MPI communicator, and builds process sets from communicators. It lives in its own library,
 * libtutti_mpi.so (built where an MPI is found), so that libtutti.so links no MPI:
 *
 *   cc train.c -ltutti_mpi -ltutti $(mpicc --showme:link)
 *
 * Thread model: every function here is collective over the communicator it names and must be
 * called the way MPI collectives are (the same order on every process, from one thread per
 * process at a time). The rest of tutti.h is unchanged and may be used from any thread.
 *
 * The ABI follows tutti.h's (docs/abi-policy.md): these functions only ever gain siblings. */
#ifndef TUTTI_MPI_H_
#define TUTTI_MPI_H_

#include <mpi.h>

#include "tutti.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Joins the job made of `comm`'s processes (MPI_COMM_NULL: MPI_COMM_WORLD); collective over
 * `comm`, which must stay valid until tutti_mpi_finalize. The rank is the rank in `comm`, the
 * size its size; hosts (local rank, shared memory) are found as without MPI, and
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) only decides whether the job is on one host.
 * `options` may be NULL; its rank and size must be -1 (they come from `comm`).
 *
 * The coordinator: `options->coordinator`, else TUTTI_COORDINATOR, else (unset or "auto") rank 0
 * starts `tuttid` as its child (TUTTI_TUTTID, else the tuttid next to libtutti.so, else on PATH),
 * bound to 127.0.0.1 when every rank is on rank 0's host and to every interface otherwise,
 * advertising TUTTI_COORDINATOR_HOST or this host's first non-loopback IPv4 address; it ends with
 * rank 0 (tutti_mpi_finalize, or rank 0's death). Rank 0 makes a random job token and, unless
 * `options->job` or TUTTI_JOB names one, a fresh job id; both reach the others over `comm`.
 * Every rank returns the same status: a failure on one (tuttid cannot start, a rank cannot
 * register) is reported everywhere, naming the rank. */
TUTTI_API tutti_status_t tutti_mpi_init(MPI_Comm comm, const tutti_init_options_t* options,
                                        tutti_runtime_t* runtime);

/* Leaves the job (tutti_finalize) once every rank of the init communicator reached this call,
 * then, on rank 0, stops the coordinator it started. Collective over the init communicator. */
TUTTI_API tutti_status_t tutti_mpi_finalize(tutti_runtime_t runtime);

/* The process set of each process's `comm` (MPI_COMM_NULL: none), collective over the init
 * communicator: every process passes its own communicator, for example each its colour of one
 * MPI_Comm_split, and every distinct group of ranks becomes a set (added in the order of their
 * lowest rank, so every process numbers them alike). `*set_id` is the set of the caller's `comm`
 * (-1 for MPI_COMM_NULL). Communicators that overlap without being the same group are refused
 * on every process with TUTTI_ERR_INVALID_ARGUMENT naming two ranks that disagree. A group
 * added before returns the existing set. timeout_ms <= 0: the runtime's timeout. */
TUTTI_API tutti_status_t tutti_process_set_from_comm(tutti_runtime_t runtime, MPI_Comm comm,
                                                     int64_t timeout_ms, int32_t* set_id);

/* A new communicator of the set's members, ranked as the set ranks them (sorted global ranks);
 * collective over the members (MPI_Comm_create_group). A non-member gets MPI_COMM_NULL at once.
 * The caller frees it with MPI_Comm_free. */
TUTTI_API tutti_status_t tutti_process_set_comm(tutti_runtime_t runtime, int32_t set_id,
                                                MPI_Comm* comm);

#ifdef __cplusplus
}
#endif

#endif /* TUTTI_MPI_H_ */
