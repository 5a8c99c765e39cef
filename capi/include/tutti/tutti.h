/*
 * tutti.h: the stable C ABI of tutti, collective communication on process sets.
 *
 * ABI contract (docs/abi-policy.md):
 *  - numeric values of statuses, dtypes, ops and device types never change and are never reused;
 *  - option structs start with `struct_size` and are only ever appended to; the library reads
 *    what the caller's size covers and defaults the rest;
 *  - every function returns a tutti_status_t (except the two string getters); no C++ exception
 *    crosses this boundary;
 *  - handles are opaque; destroying one invalidates it.
 *
 * Threads: every function may be called from any thread. Requests of one runtime may be waited
 * on concurrently. Ranks passed to or returned by the API are global ranks.
 */
#ifndef TUTTI_TUTTI_H
#define TUTTI_TUTTI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TUTTI_BUILDING_LIBRARY)
#define TUTTI_API __attribute__((visibility("default")))
#else
#define TUTTI_API
#endif

/* ---- versions ------------------------------------------------------------------------------ */
#define TUTTI_VERSION_MAJOR 0
#define TUTTI_VERSION_MINOR 13
#define TUTTI_VERSION_PATCH 0
#define TUTTI_MAKE_VERSION(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define TUTTI_VERSION TUTTI_MAKE_VERSION(TUTTI_VERSION_MAJOR, TUTTI_VERSION_MINOR, TUTTI_VERSION_PATCH)

/* ---- statuses ------------------------------------------------------------------------------ */
typedef int32_t tutti_status_t;

#define TUTTI_OK 0
#define TUTTI_IN_PROGRESS 1 /* a request has not completed yet; not an error */
#define TUTTI_ERR_INVALID_ARGUMENT (-1)
#define TUTTI_ERR_UNKNOWN_SET (-2)
#define TUTTI_ERR_NOT_A_MEMBER (-3)
#define TUTTI_ERR_DUPLICATE_NAME (-4)
#define TUTTI_ERR_MISMATCH (-5)
#define TUTTI_ERR_PEER_LOST (-6)
#define TUTTI_ERR_COORDINATOR_LOST (-7)
#define TUTTI_ERR_TIMEOUT (-8)
#define TUTTI_ERR_ABORTED (-9)
#define TUTTI_ERR_STALLED (-10)
#define TUTTI_ERR_VERSION_MISMATCH (-11)
#define TUTTI_ERR_AUTH_FAILED (-12)
#define TUTTI_ERR_SHUT_DOWN (-13)
#define TUTTI_ERR_INTERNAL (-14)
#define TUTTI_ERR_SET_REMOVED (-15)
#define TUTTI_ERR_UNSUPPORTED (-16)
#define TUTTI_ERR_EVICTED (-17)
#define TUTTI_ERR_LIMIT_EXCEEDED (-18)
#define TUTTI_ERR_DEVICE_UNAVAILABLE (-19)
/* An elastic job re-formed (a rank was lost): the request belonged to the earlier membership
 * epoch on a set that lost a member. The runtime is already in the new epoch: re-sync and go on
 * (docs/elastic.md). Since 0.6. */
#define TUTTI_ERR_REFORMED (-20)

/* ---- data types, reduce ops, devices ------------------------------------------------------- */
#define TUTTI_DTYPE_FLOAT16 1
#define TUTTI_DTYPE_BFLOAT16 2
#define TUTTI_DTYPE_FLOAT32 3
#define TUTTI_DTYPE_FLOAT64 4
#define TUTTI_DTYPE_INT8 5
#define TUTTI_DTYPE_UINT8 6
#define TUTTI_DTYPE_INT32 7
#define TUTTI_DTYPE_INT64 8
/* since 0.5. Device (CUDA) int16 tensors are not reduced: NCCL has no 16-bit integer type, so
 * their allreduce and reducescatter fail with TUTTI_ERR_UNSUPPORTED; they move as any dtype. */
#define TUTTI_DTYPE_INT16 9
/* since 0.5: one byte, 0 false, anything else true. Reductions treat it as logic: sum and max
 * are "or", min and product "and", and every result byte is 0 or 1; average is refused
 * (TUTTI_ERR_INVALID_ARGUMENT), and so is a scale factor other than 1. */
#define TUTTI_DTYPE_BOOL 10

#define TUTTI_OP_SUM 1
#define TUTTI_OP_AVERAGE 2
#define TUTTI_OP_MIN 3
#define TUTTI_OP_MAX 4
#define TUTTI_OP_PRODUCT 5

/* Compression of an allreduce on the wire, done by the library (docs/compression.md); float32
 * host tensors, sum or average. Every member passes the same settings (else TUTTI_ERR_MISMATCH).
 * FP16, BF16: each member sends 16-bit values and adds what it receives to its own in float32;
 * the result is the sum rounded to 16 bits once per ring hop, the same bits on every member.
 * TOPK: each member sends its compression_ratio largest-magnitude elements (index and value) of
 * input + the error it kept from earlier allreduces of the same tensor name, and keeps the rest
 * as that error (error feedback); the result is the sum of what was sent, the same everywhere.
 * ADAPTIVE: per tensor, every adaptive_interval allreduces, compresses with adaptive_compressor
 * those of at least adaptive_min_bytes whose reduced gradient's norm spread by at most
 * adaptive_max_change ((max - min) / max) over the last interval; the others stay exact. Decided
 * from the reduced results, which every member holds bit for bit, so all decide alike. */
#define TUTTI_COMPRESSION_NONE 0
#define TUTTI_COMPRESSION_FP16 1
#define TUTTI_COMPRESSION_BF16 2
#define TUTTI_COMPRESSION_TOPK 3
#define TUTTI_COMPRESSION_ADAPTIVE 4

#define TUTTI_DEVICE_CPU 0
#define TUTTI_DEVICE_CUDA 1

#define TUTTI_WORLD 0 /* the process set of all ranks */
#define TUTTI_MAX_DIMS 16

/* ---- handles ------------------------------------------------------------------------------- */
typedef struct tutti_runtime* tutti_runtime_t;
typedef struct tutti_request* tutti_request_t;

/* ---- tensors ------------------------------------------------------------------------------- */
/* Describes caller-owned memory. The shape array is copied at submission. The data must stay
 * valid until the request completes.
 *
 * Device tensors (device_type TUTTI_DEVICE_CUDA, docs/gpu.md). `data` is device memory of CUDA
 * device `device_index` (as this process numbers its visible devices) and `stream` the
 * cudaStream_t that produces it (NULL: the legacy default stream). The rules:
 *  - Producer order: at submission the library records an event on `stream` and orders all its
 *    work on the tensor after it. The call does not wait for the GPU and does not synchronize the
 *    device: work queued on `stream` before the call is seen, work queued after it is not.
 *  - The output of an allreduce, a broadcast or a recv may be written until the request
 *    completes; do not touch it (from any stream) before then.
 *  - Completion: tutti_request_wait()/tutti_request_test() report completion once the device
 *    work finished (the host waits). tutti_request_stream_wait() instead makes a stream of the
 *    caller wait on the GPU: the host waits only for negotiation, not for the transfer.
 *  - Results the library allocates (allgather, reducescatter, alltoall) of a device tensor live
 *    in device memory of the same device, allocated and freed by the library (not by the
 *    init options' allocator).
 *  - All members must use device tensors for NCCL to carry a collective; a set whose members mix
 *    host and device tensors, or where two members share one GPU, is served through pinned host
 *    memory and the CPU transports instead (one warning per set).
 *  - A device tensor fails with TUTTI_ERR_DEVICE_UNAVAILABLE when the library was built without
 *    GPU support, its GPU module or the CUDA/NCCL libraries cannot be loaded, or the device does
 *    not exist; tutti_device_check() tells in advance.
 * `stream` is unused for CPU tensors. */
typedef struct tutti_tensor {
  size_t struct_size;
  void* data;
  int32_t dtype;
  int32_t ndim;
  const int64_t* shape;
  int32_t device_type;
  int32_t device_index;
  void* stream;
} tutti_tensor_t;

#define TUTTI_TENSOR_INIT {sizeof(tutti_tensor_t), NULL, 0, 0, NULL, TUTTI_DEVICE_CPU, 0, NULL}

/* ---- init ---------------------------------------------------------------------------------- */
/* Any field left at its initializer value is read from the environment (TUTTI_COORDINATOR,
 * TUTTI_JOB, TUTTI_TOKEN, TUTTI_RANK, TUTTI_SIZE, TUTTI_HOST_ID, TUTTI_DATA_ADDR, TUTTI_TIMEOUT_MS)
 * or defaulted. Static process sets: `num_static_sets` lists given back to back in
 * `static_set_ranks`, the i-th holding `static_set_sizes[i]` global ranks; every rank must pass the
 * same lists, and set i gets id i + 1. */
typedef struct tutti_init_options {
  size_t struct_size;
  int32_t header_version;     /* TUTTI_VERSION of the header the caller compiled against */
  const char* coordinator;    /* ZeroMQ endpoint of tuttid, e.g. "tcp://10.0.0.1:5555" */
  const char* job;            /* job id: ranks of one job share it */
  const char* token;          /* job token: the first rank to register sets it */
  int32_t rank;               /* -1: from the environment */
  int32_t size;               /* -1: from the environment */
  int32_t num_static_sets;
  const int32_t* static_set_sizes;
  const int32_t* static_set_ranks;
  int64_t timeout_ms;         /* rendezvous, set changes, data-plane progress; 0: default 60000 */
  /* Where results the library hands out (allgather, reducescatter, alltoall) live: both NULL
   * for malloc/free. Called from tutti's threads, so they must be thread-safe; `deallocate` may
   * run after tutti_finalize, when a request is freed. */
  void* (*allocate)(size_t bytes, void* user);
  void (*deallocate)(void* pointer, size_t bytes, void* user);
  void* allocator_user;
  /* Fusion (docs/fusion.md): tensors released together that may share one collective are
   * copied into one buffer of at most this many bytes. -1: TUTTI_FUSION_THRESHOLD or 1 MiB;
   * 0: never fuse. */
  int64_t fusion_threshold_bytes;
  /* How long the I/O thread may gather submissions before announcing them. < 0:
   * TUTTI_CYCLE_TIME_MS or 0 (announce whatever is queued whenever it wakes, so that a lone
   * tensor never waits for a timer). */
  double cycle_time_ms;
  /* Response cache slots per process set: tensors negotiated before are announced as one bit.
   * -1: TUTTI_CACHE_CAPACITY or 1024; 0: no cache. The job uses the smallest value of its ranks. */
  int32_t cache_capacity;
  /* Stall inspector, in seconds (tuttid's defaults when 0; the job uses rank 0's values): warn
   * about tensors some members submitted and others did not after `stall_warning_seconds`
   * (TUTTI_STALL_WARNING_SECONDS, default 60); fail them on every member with
   * TUTTI_ERR_STALLED after `stall_shutdown_seconds` (TUTTI_STALL_SHUTDOWN_SECONDS, default off).
   * Negative: off. */
  double stall_warning_seconds;
  double stall_shutdown_seconds;
  /* Timeline (docs/timeline.md): where this rank writes a Chrome-trace JSON from the start;
   * NULL: TUTTI_TIMELINE or none. "file.json" becomes "file.rank<R>.json". */
  const char* timeline_path;
  /* Data plane between ranks of one host (docs/transports.md): "auto" (shared memory within a
   * host, TCP across hosts), "tcp" (TCP for every pair), "shm" (shared memory for every pair;
   * tutti_init fails if a peer is on another host) or "mpi" (MPI point-to-point for every pair;
   * MPI mode only, with MPI_THREAD_MULTIPLE). NULL: TUTTI_TRANSPORT or "auto". */
  const char* transport;
} tutti_init_options_t;

#define TUTTI_INIT_OPTIONS_INIT                                                                 \
  {sizeof(tutti_init_options_t), TUTTI_VERSION, NULL, NULL, NULL, -1, -1, 0, NULL, NULL, 0, NULL, \
   NULL, NULL, -1, -1.0, -1, 0.0, 0.0, NULL, NULL}

/* Joins the job: returns once every rank of the world has registered (or with an error naming the
 * missing ranks after the timeout). `options` may be NULL: everything then comes from the
 * environment. A process may call it again after tutti_finalize: it then joins the job's next
 * generation, with set ids starting over, once every rank did the same (docs/lifecycle.md). */
TUTTI_API tutti_status_t tutti_init(const tutti_init_options_t* options, tutti_runtime_t* runtime);

/* Leaves the job and destroys the runtime. Pending requests fail with TUTTI_ERR_SHUT_DOWN; their
 * handles must still be freed. */
TUTTI_API tutti_status_t tutti_finalize(tutti_runtime_t runtime);

/* Aborts this rank: every pending request completes with TUTTI_ERR_ABORTED at once (also one
 * blocked in the data plane), later calls fail with it, and the members of this rank's sets get
 * TUTTI_ERR_ABORTED naming this rank. The runtime must still be finalized. */
TUTTI_API tutti_status_t tutti_abort(tutti_runtime_t runtime);

/* ---- versions and errors ------------------------------------------------------------------- */
TUTTI_API tutti_status_t tutti_get_version(int32_t* version);

/* A static sentence on what the status means and what to do next. Never NULL. */
TUTTI_API const char* tutti_status_string(tutti_status_t status);

/* Detail of the last error returned to the calling thread (empty if none). Valid until the next
 * tutti call on this thread. Never NULL. */
TUTTI_API const char* tutti_last_error(void);

/* Records `message` (NULL: empty) as the calling thread's last error and returns `status`; with
 * TUTTI_OK it clears the last error. For libraries built on tutti (libtutti_mpi, language
 * bindings), so that their failures read like tutti's own. Since 0.9. */
TUTTI_API tutti_status_t tutti_set_last_error(tutti_status_t status, const char* message);

/* ---- the world ----------------------------------------------------------------------------- */
TUTTI_API tutti_status_t tutti_rank(tutti_runtime_t runtime, int32_t* rank);
TUTTI_API tutti_status_t tutti_size(tutti_runtime_t runtime, int32_t* size);
TUTTI_API tutti_status_t tutti_local_rank(tutti_runtime_t runtime, int32_t* local_rank);
TUTTI_API tutti_status_t tutti_local_size(tutti_runtime_t runtime, int32_t* local_size);
TUTTI_API tutti_status_t tutti_cross_rank(tutti_runtime_t runtime, int32_t* cross_rank);
TUTTI_API tutti_status_t tutti_cross_size(tutti_runtime_t runtime, int32_t* cross_size);

/* ---- elastic jobs (docs/elastic.md; since 0.6) ---------------------------------------------- */
/* A job is elastic when its ranks set TUTTI_ELASTIC=1 (tuttirun --min-np does). When it loses a
 * rank it re-forms into its next membership epoch by itself: the survivors are renumbered
 * 0..n-1 in their old order, so tutti_rank, tutti_size and the process sets' ranks change at
 * that point; requests of the earlier epoch on the world and on every set that lost a member
 * fail with TUTTI_ERR_REFORMED, other sets go on untouched. */
/* The membership epoch this runtime is in: 1 for a job's first, growing with each re-formation
 * (and with each generation, docs/lifecycle.md). */
TUTTI_API tutti_status_t tutti_membership_epoch(tutti_runtime_t runtime, uint64_t* epoch);
/* Joins the next epoch: waits until this runtime is in a membership epoch later than `after`
 * (typically the epoch read before a request failed with TUTTI_ERR_PEER_LOST or
 * TUTTI_ERR_REFORMED), gives it, and acknowledges the re-formation. Until then every request on
 * a set the re-formation changed (the world, and each set that lost a member) fails with
 * TUTTI_ERR_REFORMED, so that each of its members sees the change once, whether it had a
 * request pending at that point or not; other sets are not affected. A re-formation not yet
 * acknowledged also ends the wait when the runtime is in epoch `after` itself (its mark came
 * after `after` was read; since 0.11). The re-formation itself
 * happens without any call; this is where a script waits for it before it re-syncs.
 * TUTTI_ERR_TIMEOUT after `timeout_ms` (<= 0: the runtime's timeout), or the runtime's failure
 * (TUTTI_ERR_EVICTED, TUTTI_ERR_COORDINATOR_LOST, the end of a job below its minimum size). */
TUTTI_API tutti_status_t tutti_await_membership_epoch(tutti_runtime_t runtime, uint64_t after,
                                                      int64_t timeout_ms, uint64_t* epoch);
/* How many ranks wait to join this running elastic job (a process that registered into it:
 * started by tuttirun for a host its discovery script added, or by a scheduler). They are
 * admitted at a boundary: when every live rank calls tutti_await_membership_epoch(runtime, e)
 * with e its current epoch, at a point where it can re-sync its state (a commit). That call then
 * returns in the next epoch, whose world has them after the others (tutti_rank, tutti_size);
 * no other set changes. It returns in epoch e if they stopped waiting. Since 0.7. */
TUTTI_API tutti_status_t tutti_ranks_waiting(tutti_runtime_t runtime, int32_t* count);

/* ---- process sets -------------------------------------------------------------------------- */
/* Adds the set of `nranks` global ranks (any order, no duplicates). Members wait until every
 * member has called it (or `timeout_ms` passes: TUTTI_ERR_TIMEOUT naming the missing ranks);
 * a non-member returns at once with the id. Adding an existing set returns its id.
 * timeout_ms <= 0 uses the runtime's timeout. */
TUTTI_API tutti_status_t tutti_process_set_add(tutti_runtime_t runtime, const int32_t* ranks,
                                               int32_t nranks, int64_t timeout_ms, int32_t* set_id);

/* Removes a set; collective over its members, like add. Requests in flight on it fail with
 * TUTTI_ERR_SET_REMOVED; later ones with TUTTI_ERR_UNKNOWN_SET. The id is never reused.
 * A non-member returns at once with TUTTI_OK, whether the members removed the set already or
 * not (so every rank may call it, as Horovod's contract has them do). */
TUTTI_API tutti_status_t tutti_process_set_remove(tutti_runtime_t runtime, int32_t set_id,
                                                  int64_t timeout_ms);

TUTTI_API tutti_status_t tutti_process_set_size(tutti_runtime_t runtime, int32_t set_id,
                                                int32_t* size);

/* Tunes this set's fusion threshold and algorithm cut-offs by the measured speed of its own
 * collectives (docs/autotune.md), as TUTTI_AUTOTUNE=1 does for every set of the job. One
 * member's call is enough (others may call it too); it returns at once, and tuttid applies each
 * trial's values at one sequence number on every member, from the set's next collectives on.
 * Values a rank pinned (TUTTI_FUSION_THRESHOLD, ...) are never varied. TUTTI_ERR_NOT_A_MEMBER
 * on a non-member, TUTTI_ERR_UNKNOWN_SET on a set this rank does not know. Since 0.13. */
TUTTI_API tutti_status_t tutti_process_set_autotune(tutti_runtime_t runtime, int32_t set_id);
/* Copies up to `capacity` sorted global ranks; `*count` is the set's size. */
TUTTI_API tutti_status_t tutti_process_set_ranks(tutti_runtime_t runtime, int32_t set_id,
                                                 int32_t* ranks, int32_t capacity, int32_t* count);
TUTTI_API tutti_status_t tutti_process_set_included(tutti_runtime_t runtime, int32_t set_id,
                                                    int32_t* included);
/* This rank's position in the set's sorted rank list; TUTTI_ERR_NOT_A_MEMBER if not in it. */
TUTTI_API tutti_status_t tutti_process_set_rank(tutti_runtime_t runtime, int32_t set_id,
                                                int32_t* rank_in_set);

/* ---- collectives --------------------------------------------------------------------------- */
typedef struct tutti_allreduce_options {
  size_t struct_size;
  int32_t reduce_op;        /* TUTTI_OP_* */
  /* Scale factors. Integer elements are scaled as Horovod does: multiplied in double and cast
   * back, truncating toward zero (out of range: the type's limit; NaN: 0); an integer average
   * divides first (truncating), then applies postscale_factor. bool takes only 1.0. */
  double prescale_factor;   /* applied to the input before reduction */
  double postscale_factor;  /* applied to the result */
  /* Among tensors of a set released together, higher priorities run first (then submission
   * order). Every member sees the same order; the coordinator uses the lowest-ranked member's
   * value. */
  int32_t priority;
  /* Since 0.12 (allreduce only; reducescatter refuses anything but NONE): TUTTI_COMPRESSION_*
   * and its parameters, see above. compression_ratio: TOPK's fraction in (0, 1] (default 0.01).
   * The adaptive_* fields apply to ADAPTIVE only (defaults: BF16, every 10 allreduces, 64 KiB,
   * 0.2). */
  int32_t compression;
  double compression_ratio;
  int32_t adaptive_compressor;
  int32_t adaptive_interval;
  int64_t adaptive_min_bytes;
  double adaptive_max_change;
} tutti_allreduce_options_t;

#define TUTTI_ALLREDUCE_OPTIONS_INIT                                                         \
  {sizeof(tutti_allreduce_options_t), TUTTI_OP_SUM, 1.0, 1.0, 0, TUTTI_COMPRESSION_NONE, 0.01, \
   TUTTI_COMPRESSION_BF16, 10, 65536, 0.2}

/* Starts an allreduce of `input` into `output` (same dtype and element count; they may alias) on
 * a process set the caller belongs to. `name` identifies the tensor across ranks and must be
 * unique among this rank's pending requests of the set; NULL picks "allreduce.<n>" from a per-set
 * counter (so all ranks must then submit in the same order). `options` may be NULL (sum).
 * Returns at once; the request completes asynchronously. */
TUTTI_API tutti_status_t tutti_allreduce(tutti_runtime_t runtime, const char* name, int32_t set_id,
                                         const tutti_tensor_t* input, const tutti_tensor_t* output,
                                         const tutti_allreduce_options_t* options,
                                         tutti_request_t* request);

/* Broadcasts `tensor` in place from `root` (a global rank in the set) to every member. All
 * members pass the same dtype, shape and root. */
TUTTI_API tutti_status_t tutti_broadcast(tutti_runtime_t runtime, const char* name, int32_t set_id,
                                         const tutti_tensor_t* tensor, int32_t root,
                                         tutti_request_t* request);

/* Gathers every member's `input` along the first dimension, in set order (sorted global ranks).
 * Members may contribute different first dimensions; the others must match. The result belongs
 * to the request: read it with tutti_request_output() once the request completed. */
TUTTI_API tutti_status_t tutti_allgather(tutti_runtime_t runtime, const char* name, int32_t set_id,
                                         const tutti_tensor_t* input, tutti_request_t* request);

/* Reduces every member's `input` (same shape everywhere) and leaves each member a block of rows:
 * with R rows among n members, member i (in set order) gets R / n rows, plus one if i < R % n,
 * taken in order. `options` as for allreduce (NULL: sum). The result belongs to the request. */
TUTTI_API tutti_status_t tutti_reducescatter(tutti_runtime_t runtime, const char* name,
                                             int32_t set_id, const tutti_tensor_t* input,
                                             const tutti_allreduce_options_t* options,
                                             tutti_request_t* request);

/* Sends splits[j] consecutive rows of `input` to the j-th member (set order) and receives what
 * each member sends this rank, concatenated in set order. `splits` NULL: equal splits (the rows
 * must divide by the set size); otherwise `nsplits` must be the set size and the splits must add
 * up to the rows. The result belongs to the request; tutti_request_received_splits() tells how
 * many rows came from each member. */
TUTTI_API tutti_status_t tutti_alltoall(tutti_runtime_t runtime, const char* name, int32_t set_id,
                                        const tutti_tensor_t* input, const int64_t* splits,
                                        int32_t nsplits, tutti_request_t* request);

/* Point-to-point between two members of a set, not negotiated by the coordinator and never
 * waiting behind the set's collectives. Messages from one rank to another on one set are matched
 * by tag in the order they were sent; a recv's tensor must have exactly the sent size
 * (TUTTI_ERR_MISMATCH otherwise). A send completes once its data left this process. Peers are
 * global ranks; a recv from a rank that is lost fails with TUTTI_ERR_PEER_LOST. Device tensors
 * travel through pinned host memory: a send reads its tensor after the work its stream queued
 * before the call, a recv writes its tensor after that work, and tutti_request_stream_wait()
 * orders a stream after the recv's copy to the device. Either side may be a host tensor. */
TUTTI_API tutti_status_t tutti_send(tutti_runtime_t runtime, int32_t set_id,
                                    const tutti_tensor_t* tensor, int32_t destination, int32_t tag,
                                    tutti_request_t* request);
TUTTI_API tutti_status_t tutti_recv(tutti_runtime_t runtime, int32_t set_id,
                                    const tutti_tensor_t* tensor, int32_t source, int32_t tag,
                                    tutti_request_t* request);

/* Grouped allreduce and allgather: `count` tensors (arrays of descriptors, all of the caller's
 * struct_size) negotiated as one unit and completed together by one request; if one tensor fails
 * (a mismatch, say), all fail with the same message. Each tensor follows the rules of its single
 * counterpart. Grouped allgather results: tutti_request_output_at(request, i, ...). */
TUTTI_API tutti_status_t tutti_grouped_allreduce(tutti_runtime_t runtime, const char* name,
                                                 int32_t set_id, int32_t count,
                                                 const tutti_tensor_t* inputs,
                                                 const tutti_tensor_t* outputs,
                                                 const tutti_allreduce_options_t* options,
                                                 tutti_request_t* request);
TUTTI_API tutti_status_t tutti_grouped_allgather(tutti_runtime_t runtime, const char* name,
                                                 int32_t set_id, int32_t count,
                                                 const tutti_tensor_t* inputs,
                                                 tutti_request_t* request);

/* Join: this rank has no more data for the set (uneven data at the end of an epoch). Blocks until
 * every member joined, or `timeout_ms` (<= 0: the runtime's timeout; TUTTI_ERR_TIMEOUT names the
 * ranks that never joined). Meanwhile the other members' collectives go on with this rank taking
 * part: allreduce with the identity of the op (0 for sum and average, 1 for product, the dtype's
 * largest or lowest value for min and max; average still divides by the full set size), allgather
 * with no rows from it, broadcast with it relaying (a joined root is an error). Reducescatter and
 * alltoall fail while a member is joined. `*last_rank` is the global rank that joined last. */
TUTTI_API tutti_status_t tutti_join(tutti_runtime_t runtime, int32_t set_id, int64_t timeout_ms,
                                    int32_t* last_rank);

/* Completes once every member of the set has entered the barrier. */
TUTTI_API tutti_status_t tutti_barrier(tutti_runtime_t runtime, int32_t set_id,
                                       tutti_request_t* request);

/* ---- requests ------------------------------------------------------------------------------ */
/* TUTTI_OK when done, TUTTI_IN_PROGRESS while pending, or the request's error. */
TUTTI_API tutti_status_t tutti_request_test(tutti_request_t request);

/* Waits up to `timeout_ms` (< 0: until the runtime's timeout). Returns the request's status, or
 * TUTTI_ERR_TIMEOUT if the wait expired; the request then stays pending. */
TUTTI_API tutti_status_t tutti_request_wait(tutti_request_t request, int64_t timeout_ms);

/* The result of a completed allgather, reducescatter or alltoall: fills `output` (whose
 * struct_size the caller sets) with a pointer to data and shape owned by the request, valid until
 * tutti_request_free(). A device request's result may be read as soon as
 * tutti_request_stream_wait() returned TUTTI_OK: its bytes are there for that stream's later
 * work. TUTTI_IN_PROGRESS (and `output` untouched) before that. */
TUTTI_API tutti_status_t tutti_request_output(tutti_request_t request, tutti_tensor_t* output);

/* The result of the index-th tensor of a completed grouped allgather. */
TUTTI_API tutti_status_t tutti_request_output_at(tutti_request_t request, int32_t index,
                                                 tutti_tensor_t* output);

/* For a completed alltoall: rows received from each member, in set order (`*count` of them). */
TUTTI_API tutti_status_t tutti_request_received_splits(tutti_request_t request, int64_t* splits,
                                                       int32_t capacity, int32_t* count);

/* Device requests: makes `stream` (a cudaStream_t of the request's device; NULL: the legacy
 * default stream) wait on the GPU for the request's device work. The host waits at most
 * `timeout_ms` (< 0: the runtime's timeout) for the work to be queued, i.e. for the collective to
 * be negotiated and launched, but not for the transfer itself. Returns TUTTI_OK once `stream` is
 * ordered after the work, the request's error if it failed first, or TUTTI_ERR_TIMEOUT. For a
 * CPU request it behaves as tutti_request_wait(). */
TUTTI_API tutti_status_t tutti_request_stream_wait(tutti_request_t request, void* stream,
                                                   int64_t timeout_ms);

/* Releases the handle. A pending request keeps running and still writes its output: buffers must
 * stay valid until it completes or the runtime is finalized. */
TUTTI_API tutti_status_t tutti_request_free(tutti_request_t request);

/* ---- devices ------------------------------------------------------------------------------- */
/* TUTTI_OK if tensors on (`device_type`, `device_index`) can be used by this process: always for
 * TUTTI_DEVICE_CPU; for TUTTI_DEVICE_CUDA it loads the GPU module (once) and checks the device.
 * Otherwise TUTTI_ERR_DEVICE_UNAVAILABLE, with the reason in tutti_last_error() (built without
 * GPU support, module or CUDA/NCCL libraries not loadable, no CUDA device, no such device), or
 * TUTTI_ERR_INVALID_ARGUMENT for an unknown device type or a negative index. Needs no runtime. */
TUTTI_API tutti_status_t tutti_device_check(int32_t device_type, int32_t device_index);

/* NCCL's version code (ncclGetVersion, e.g. 22809 for 2.28.9; 0: the GPU module runs without
 * NCCL) of the GPU module device tensors use. TUTTI_ERR_DEVICE_UNAVAILABLE, with the reason,
 * when the module cannot be loaded (as tutti_device_check). Needs no runtime. Since 0.5. */
TUTTI_API tutti_status_t tutti_nccl_version(int32_t* version);

/* ---- observability ------------------------------------------------------------------------- */
/* What this rank's runtime did since tutti_init. Monotonic counters; compare two readings. */
typedef struct tutti_counters {
  size_t struct_size;
  uint64_t announce_messages;        /* Announce frames sent to tuttid */
  uint64_t announce_bytes;           /* their encoded size */
  uint64_t tensors_announced;        /* tensors announced with their full description */
  uint64_t tensors_announced_cached; /* tensors announced as one bit of the response cache */
  uint64_t execute_messages;         /* Execute frames received from tuttid */
  uint64_t execute_bytes;            /* their encoded size */
  uint64_t collectives;              /* collectives run on the data plane (a fused one counts once) */
  uint64_t tensors_executed;         /* tensors those collectives completed */
  uint64_t tensors_fused;            /* of which in a collective of two tensors or more */
  /* Since 0.8: the members' fast path (docs/steady-state.md). */
  uint64_t fast_path_rounds;         /* rounds this rank ran with its sets' other members */
  uint64_t fast_path_tensors;        /* tensors those rounds agreed on, without tuttid */
} tutti_counters_t;

#define TUTTI_COUNTERS_INIT {sizeof(tutti_counters_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

TUTTI_API tutti_status_t tutti_get_counters(tutti_runtime_t runtime, tutti_counters_t* counters);

/* The backend carrying a pair of ranks. Values never change. */
typedef enum tutti_transport {
  TUTTI_TRANSPORT_TCP = 1,
  TUTTI_TRANSPORT_SHM = 2,
  TUTTI_TRANSPORT_MPI = 3 /* since 0.10: MPI point-to-point, in MPI mode (tutti_mpi.h) */
} tutti_transport_t;

/* "tcp", "shm", "mpi"; "unknown" for other values. */
TUTTI_API const char* tutti_transport_name(tutti_transport_t transport);

/* This rank's link with `peer` (a global rank) in process set `set_id`. */
typedef struct tutti_peer_stats {
  size_t struct_size;
  tutti_transport_t transport; /* chosen at init; once connected, the one in use */
  int32_t connected;           /* 1 once a collective needed the pair */
  uint64_t bytes_sent;         /* by collectives of this set, to the peer */
  uint64_t bytes_received;
} tutti_peer_stats_t;

#define TUTTI_PEER_STATS_INIT {sizeof(tutti_peer_stats_t), TUTTI_TRANSPORT_TCP, 0, 0, 0}

/* TUTTI_ERR_UNKNOWN_SET, TUTTI_ERR_NOT_A_MEMBER (this rank is not in the set), or
 * TUTTI_ERR_INVALID_ARGUMENT when `peer` is this rank or not a member. */
TUTTI_API tutti_status_t tutti_get_peer_stats(tutti_runtime_t runtime, int32_t set_id, int32_t peer,
                                              tutti_peer_stats_t* stats);

/* What this rank did in one of its process sets since tutti_init (no round trip). A set's later
 * incarnations (an elastic job re-formed) add to the same counters. Since 0.11. */
typedef struct tutti_set_counters {
  size_t struct_size;
  int32_t set_id;
  uint64_t collectives;   /* run on the data plane (a fused one counts once) */
  uint64_t tensors;       /* tensors those collectives completed */
  uint64_t tensors_fused; /* of which in a collective of two tensors or more */
  uint64_t bytes;         /* this rank's input bytes of those tensors */
  uint64_t wait_ns;       /* submission to the start of execution (negotiation, or the members'
                             fast path, and the set's queue), summed over tensors */
  uint64_t execute_ns;    /* on the data plane, summed over collectives */
  /* Since 0.12, library compression (TUTTI_COMPRESSION_*): tensors that ran compressed, the
   * adaptive policy's revisits, and those of its revisits that chose to compress. */
  uint64_t tensors_compressed;
  uint64_t adaptive_revisits;
  uint64_t adaptive_compress_choices;
} tutti_set_counters_t;

#define TUTTI_SET_COUNTERS_INIT {sizeof(tutti_set_counters_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* TUTTI_ERR_UNKNOWN_SET, or TUTTI_ERR_NOT_A_MEMBER when this rank is not in the set. */
TUTTI_API tutti_status_t tutti_get_set_counters(tutti_runtime_t runtime, int32_t set_id,
                                                tutti_set_counters_t* counters);

/* What tuttid did for this rank's job since the job started (asks tuttid: a round trip). */
typedef struct tutti_coordinator_counters {
  size_t struct_size;
  uint64_t announce_messages;        /* Announce frames received from the job's ranks */
  uint64_t announce_bytes;
  uint64_t tensors_announced;        /* in full */
  uint64_t tensors_announced_cached; /* as cache bits */
  uint64_t execute_messages;         /* Execute frames sent (one per member) */
  uint64_t collectives_released;     /* responses released (a fused one counts once) */
  uint64_t tensors_released;
  uint64_t tensors_fused;            /* released inside a fused response of two tensors or more */
  uint64_t cache_evictions;          /* cache slots dropped (capacity or a changed tensor) */
  uint64_t stall_warnings;           /* tensors reported as stalled */
  uint64_t stalls_failed;            /* tensors failed with TUTTI_ERR_STALLED */
} tutti_coordinator_counters_t;

#define TUTTI_COORDINATOR_COUNTERS_INIT \
  {sizeof(tutti_coordinator_counters_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

TUTTI_API tutti_status_t tutti_get_coordinator_counters(tutti_runtime_t runtime,
                                                        tutti_coordinator_counters_t* counters);

/* What tuttid did for one process set of this rank's job (asks tuttid: a round trip). Zeros for
 * a set tuttid never negotiated. Since 0.8. */
typedef struct tutti_coordinator_set_counters {
  size_t struct_size;
  int32_t set_id;
  uint64_t announcements;            /* announcements of the set received (one per rank and frame) */
  uint64_t tensors_announced;        /* in full */
  uint64_t tensors_announced_cached; /* as cache bits */
  uint64_t fast_path_grants;         /* times tuttid put the set on its members' fast path */
  uint64_t fast_path_exits;          /* members' exits from it */
  uint64_t announcements_dropped;    /* announcements a member sent before it heard of a grant */
  uint64_t fast_path_rounds;         /* the members' rounds, summed over their exits */
} tutti_coordinator_set_counters_t;

#define TUTTI_COORDINATOR_SET_COUNTERS_INIT \
  {sizeof(tutti_coordinator_set_counters_t), 0, 0, 0, 0, 0, 0, 0, 0}

TUTTI_API tutti_status_t tutti_get_coordinator_set_counters(
    tutti_runtime_t runtime, int32_t set_id, tutti_coordinator_set_counters_t* counters);

/* Starts writing this rank's timeline (Chrome trace JSON, one file per rank; see
 * docs/timeline.md) to `path`, replacing a timeline already being written. */
TUTTI_API tutti_status_t tutti_timeline_start(tutti_runtime_t runtime, const char* path);
/* Finishes the file; a no-op when no timeline is being written. */
TUTTI_API tutti_status_t tutti_timeline_stop(tutti_runtime_t runtime);

#ifdef __cplusplus
}
#endif

#endif /* TUTTI_TUTTI_H */
