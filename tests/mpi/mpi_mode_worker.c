/* One rank of an MPI-mode job (tutti_mpi.h) under a real mpirun, driven by tests/python/
 * test_mpi_mode.py. Each scenario prints "rank R: ..." lines that the test checks on every rank,
 * and exits 0 when every check held:
 *   world      tutti_mpi_init on MPI_COMM_WORLD, no coordinator named: rank 0 starts tuttid; rank,
 *              size and an allreduce agree with MPI's
 *   modes      the three ways to make sets in one program: static sets at init, a set added and
 *              removed at run time, sets from the colours of one MPI_Comm_split; collectives on
 *              each, checked against MPI_Allreduce on tutti_process_set_comm's communicator
 *   disagree   ranks 0 and 1 pass a communicator of {0, 1}, rank 2 one of {1, 2}: refused on
 *              every rank with the same message
 *   no_init    tutti_mpi_init before MPI_Init
 *   errors     options that name a rank, runtimes not made by tutti_mpi_init, a NULL set_id
 *   transport  TUTTI_TRANSPORT=mpi (set by the test): allreduce (sizes that take one MPI message
 *              and several), allgather, broadcast, alltoall and reducescatter on the world and on
 *              the colours of an MPI_Comm_split, each checked element by element against MPI's
 *              own collective; point-to-point send and recv around the world; the MPI link of
 *              every pair (tutti_get_peer_stats)
 *   serialized the same runtime asked for with MPI initialised MPI_THREAD_SERIALIZED
 *   outside    tutti_init (not tutti_mpi_init) under tuttirun with TUTTI_TRANSPORT=mpi; no MPI */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "tutti/tutti_mpi.h"

static int me = -1;

#define CHECK(call)                                                                         \
  do {                                                                                      \
    tutti_status_t s_ = (call);                                                             \
    if (s_ != TUTTI_OK) {                                                                   \
      printf("rank %d: %s failed: %d %s\n", me, #call, (int)s_, tutti_last_error());        \
      fflush(stdout);                                                                       \
      MPI_Abort(MPI_COMM_WORLD, 3);                                                         \
    }                                                                                       \
  } while (0)

/* Sum of `value` over set `set` through tutti, and over `comm` through MPI. */
static void allreduce_both(tutti_runtime_t rt, int32_t set, MPI_Comm comm, const char* name,
                           float value, float* by_tutti, float* by_mpi) {
  int64_t count = 1;
  float data = value;
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = &data;
  t.dtype = TUTTI_DTYPE_FLOAT32;
  t.ndim = 1;
  t.shape = &count;
  tutti_request_t request;
  CHECK(tutti_allreduce(rt, name, set, &t, &t, NULL, &request));
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
  *by_tutti = data;
  MPI_Allreduce(&value, by_mpi, 1, MPI_FLOAT, MPI_SUM, comm);
}

static int world(void) {
  tutti_runtime_t rt;
  CHECK(tutti_mpi_init(MPI_COMM_WORLD, NULL, &rt));
  int32_t rank, size;
  CHECK(tutti_rank(rt, &rank));
  CHECK(tutti_size(rt, &size));
  int mpi_size;
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  float by_tutti, by_mpi;
  allreduce_both(rt, TUTTI_WORLD, MPI_COMM_WORLD, "w", (float)(me + 1), &by_tutti, &by_mpi);
  printf("rank %d: tutti rank %d size %d, mpi size %d, sum %g mpi %g\n", me, rank, size, mpi_size,
         by_tutti, by_mpi);
  CHECK(tutti_mpi_finalize(rt));
  return rank == me && size == mpi_size && by_tutti == by_mpi ? 0 : 1;
}

static int modes(void) {
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* Static: the first half of the ranks, at init. */
  int32_t half = size / 2;
  int32_t* first = malloc(sizeof(int32_t) * (size_t)half);
  for (int32_t i = 0; i < half; ++i) first[i] = i;
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  options.num_static_sets = 1;
  options.static_set_sizes = &half;
  options.static_set_ranks = first;
  tutti_runtime_t rt;
  CHECK(tutti_mpi_init(MPI_COMM_WORLD, &options, &rt));
  int failures = 0;
  float by_tutti, by_mpi;
  MPI_Comm comm;
  CHECK(tutti_process_set_comm(rt, 1, &comm));
  if (me < half) {
    allreduce_both(rt, 1, comm, "static", (float)me, &by_tutti, &by_mpi);
    printf("rank %d: static set 1 sum %g mpi %g\n", me, by_tutti, by_mpi);
    failures += by_tutti != by_mpi;
    MPI_Comm_free(&comm);
  } else if (comm != MPI_COMM_NULL) {
    ++failures;
  }
  /* Dynamic: the last two ranks, added and removed. */
  int32_t pair[2] = {size - 2, size - 1};
  int32_t dynamic;
  CHECK(tutti_process_set_add(rt, pair, 2, 0, &dynamic));
  /* A non-member's add returns once tuttid answered it: after this barrier no add of the pair is
   * still on its way when its members remove it (a late one would add the pair again). */
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(tutti_process_set_comm(rt, dynamic, &comm));
  if (me >= size - 2) {
    allreduce_both(rt, dynamic, comm, "dynamic", 10.0f * (float)me, &by_tutti, &by_mpi);
    printf("rank %d: dynamic set %d sum %g mpi %g\n", me, dynamic, by_tutti, by_mpi);
    failures += by_tutti != by_mpi;
    MPI_Comm_free(&comm);
  }
  CHECK(tutti_process_set_remove(rt, dynamic, 0));
  /* From communicators: the colours of one split. */
  MPI_Comm colour;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &colour);
  int32_t mine;
  CHECK(tutti_process_set_from_comm(rt, colour, 0, &mine));
  int32_t again;
  CHECK(tutti_process_set_from_comm(rt, colour, 0, &again)); /* the same group: the same set */
  CHECK(tutti_process_set_comm(rt, mine, &comm));
  int colour_rank, set_rank_in_comm;
  MPI_Comm_rank(colour, &colour_rank);
  MPI_Comm_rank(comm, &set_rank_in_comm);
  allreduce_both(rt, mine, colour, "colour", (float)(me * me), &by_tutti, &by_mpi);
  int32_t set_size;
  CHECK(tutti_process_set_size(rt, mine, &set_size));
  printf("rank %d: colour %d set %d (again %d) size %d sum %g mpi %g, rank in set comm %d, in "
         "colour %d\n", me, me % 2, mine, again, set_size, by_tutti, by_mpi, set_rank_in_comm,
         colour_rank);
  failures += by_tutti != by_mpi || mine != again || set_rank_in_comm != colour_rank;
  MPI_Comm_free(&comm);
  MPI_Comm_free(&colour);
  CHECK(tutti_mpi_finalize(rt));
  free(first);
  return failures;
}

static int disagree(void) {
  tutti_runtime_t rt;
  CHECK(tutti_mpi_init(MPI_COMM_WORLD, NULL, &rt));
  MPI_Group world_group, g01, g12;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  const int r01[2] = {0, 1}, r12[2] = {1, 2};
  MPI_Group_incl(world_group, 2, r01, &g01);
  MPI_Group_incl(world_group, 2, r12, &g12);
  MPI_Comm c01 = MPI_COMM_NULL, c12 = MPI_COMM_NULL;
  if (me <= 1) MPI_Comm_create_group(MPI_COMM_WORLD, g01, 1, &c01);
  if (me == 1 || me == 2) MPI_Comm_create_group(MPI_COMM_WORLD, g12, 2, &c12);
  MPI_Comm passed = me <= 1 ? c01 : (me == 2 ? c12 : MPI_COMM_NULL);
  int32_t set = 99;
  const tutti_status_t status = tutti_process_set_from_comm(rt, passed, 0, &set);
  printf("rank %d: status %d: %s\n", me, (int)status, tutti_last_error());
  if (c01 != MPI_COMM_NULL) MPI_Comm_free(&c01);
  if (c12 != MPI_COMM_NULL) MPI_Comm_free(&c12);
  MPI_Group_free(&g01);
  MPI_Group_free(&g12);
  MPI_Group_free(&world_group);
  CHECK(tutti_mpi_finalize(rt));
  return status == TUTTI_ERR_INVALID_ARGUMENT && set == 99 ? 0 : 1;
}

static int errors(void) {
  int failures = 0;
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  options.rank = me;
  tutti_runtime_t rt = NULL;
  tutti_status_t status = tutti_mpi_init(MPI_COMM_WORLD, &options, &rt);
  printf("rank %d: named rank: %d %s\n", me, (int)status, tutti_last_error());
  failures += status != TUTTI_ERR_INVALID_ARGUMENT;
  status = tutti_mpi_finalize(NULL);
  printf("rank %d: finalize NULL: %d %s\n", me, (int)status, tutti_last_error());
  failures += status != TUTTI_ERR_INVALID_ARGUMENT;
  int32_t set = 0;
  status = tutti_process_set_from_comm(NULL, MPI_COMM_WORLD, 0, &set);
  printf("rank %d: from_comm NULL: %d %s\n", me, (int)status, tutti_last_error());
  failures += status != TUTTI_ERR_INVALID_ARGUMENT;
  CHECK(tutti_mpi_init(MPI_COMM_WORLD, NULL, &rt));
  status = tutti_process_set_from_comm(rt, MPI_COMM_WORLD, 0, NULL);
  printf("rank %d: set_id NULL: %d %s\n", me, (int)status, tutti_last_error());
  failures += status != TUTTI_ERR_INVALID_ARGUMENT;
  CHECK(tutti_mpi_finalize(rt));
  return failures;
}


/* ---- TUTTI_TRANSPORT=mpi ------------------------------------------------------------------ */

static void wait_free(tutti_request_t request) {
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
}

static tutti_tensor_t tensor_of(void* data, int32_t dtype, int32_t ndim, const int64_t* shape) {
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = data;
  t.dtype = dtype;
  t.ndim = ndim;
  t.shape = shape;
  return t;
}

/* Whole numbers, so that every summation order gives the same floats. */
static float value_at(int rank, int64_t i) { return (float)((rank + 1) * (i % 97) - 40); }

/* Each collective of tutti on `set` against MPI's on `comm` (the same members, in the same order).
 * Returns the number of mismatches and prints one line per collective. */
static int collectives_against_mpi(tutti_runtime_t rt, int32_t set, MPI_Comm comm,
                                   const char* where) {
  int failures = 0, n = 0, r = 0;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &r);
  /* Allreduce: one element, a few KiB, and more than several 1 MiB messages. */
  const int64_t counts[3] = {1, 1000, 3000001};
  for (int k = 0; k < 3; ++k) {
    const int64_t count = counts[k];
    float* ours = malloc(sizeof(float) * (size_t)count);
    float* input = malloc(sizeof(float) * (size_t)count);
    float* theirs = malloc(sizeof(float) * (size_t)count);
    for (int64_t i = 0; i < count; ++i) ours[i] = input[i] = value_at(me, i);
    tutti_tensor_t t = tensor_of(ours, TUTTI_DTYPE_FLOAT32, 1, &count);
    char name[64];
    snprintf(name, sizeof name, "%s.allreduce.%lld", where, (long long)count);
    tutti_request_t request;
    CHECK(tutti_allreduce(rt, name, set, &t, &t, NULL, &request));
    wait_free(request);
    MPI_Allreduce(input, theirs, (int)count, MPI_FLOAT, MPI_SUM, comm);
    const int same = memcmp(ours, theirs, sizeof(float) * (size_t)count) == 0;
    printf("rank %d: %s allreduce %lld %s\n", me, where, (long long)count, same ? "same" : "DIFFERENT");
    failures += !same;
    free(ours);
    free(input);
    free(theirs);
  }
  /* Allgather: member i contributes i + 1 rows of 3 int32. */
  {
    const int64_t shape[2] = {r + 1, 3};
    int32_t mine[64 * 3];
    for (int i = 0; i < (r + 1) * 3; ++i) mine[i] = me * 1000 + i;
    tutti_tensor_t t = tensor_of(mine, TUTTI_DTYPE_INT32, 2, shape);
    tutti_request_t request;
    char name[64];
    snprintf(name, sizeof name, "%s.allgather", where);
    CHECK(tutti_allgather(rt, name, set, &t, &request));
    CHECK(tutti_request_wait(request, -1));
    tutti_tensor_t out = TUTTI_TENSOR_INIT;
    CHECK(tutti_request_output(request, &out));
    int* counts_of = malloc(sizeof(int) * (size_t)n);
    int* offsets = malloc(sizeof(int) * (size_t)n);
    int total = 0;
    for (int i = 0; i < n; ++i) {
      counts_of[i] = (i + 1) * 3;
      offsets[i] = total;
      total += counts_of[i];
    }
    int32_t* theirs = malloc(sizeof(int32_t) * (size_t)total);
    MPI_Allgatherv(mine, (r + 1) * 3, MPI_INT32_T, theirs, counts_of, offsets, MPI_INT32_T, comm);
    const int same = out.shape[0] * 3 == total && memcmp(out.data, theirs, sizeof(int32_t) * (size_t)total) == 0;
    printf("rank %d: %s allgather %s\n", me, where, same ? "same" : "DIFFERENT");
    failures += !same;
    CHECK(tutti_request_free(request));
    free(counts_of);
    free(offsets);
    free(theirs);
  }
  /* Broadcast from the last member (tutti names it by global rank, MPI by its rank in comm). */
  {
    const int64_t count = 1500000;
    float* ours = malloc(sizeof(float) * (size_t)count);
    float* theirs = malloc(sizeof(float) * (size_t)count);
    for (int64_t i = 0; i < count; ++i) ours[i] = theirs[i] = value_at(me, i);
    int root_global = r == n - 1 ? me : 0;
    MPI_Bcast(&root_global, 1, MPI_INT, n - 1, comm);
    tutti_tensor_t t = tensor_of(ours, TUTTI_DTYPE_FLOAT32, 1, &count);
    tutti_request_t request;
    char name[64];
    snprintf(name, sizeof name, "%s.broadcast", where);
    CHECK(tutti_broadcast(rt, name, set, &t, root_global, &request));
    wait_free(request);
    MPI_Bcast(theirs, (int)count, MPI_FLOAT, n - 1, comm);
    const int same = memcmp(ours, theirs, sizeof(float) * (size_t)count) == 0;
    printf("rank %d: %s broadcast %s\n", me, where, same ? "same" : "DIFFERENT");
    failures += !same;
    free(ours);
    free(theirs);
  }
  /* Alltoall: two rows of 5 int32 to every member. */
  {
    const int64_t shape[2] = {2 * n, 5};
    const int cells = 2 * n * 5;
    int32_t* mine = malloc(sizeof(int32_t) * (size_t)cells);
    int32_t* theirs = malloc(sizeof(int32_t) * (size_t)cells);
    for (int i = 0; i < cells; ++i) mine[i] = me * 100000 + i;
    tutti_tensor_t t = tensor_of(mine, TUTTI_DTYPE_INT32, 2, shape);
    tutti_request_t request;
    char name[64];
    snprintf(name, sizeof name, "%s.alltoall", where);
    CHECK(tutti_alltoall(rt, name, set, &t, NULL, 0, &request));
    CHECK(tutti_request_wait(request, -1));
    tutti_tensor_t out = TUTTI_TENSOR_INIT;
    CHECK(tutti_request_output(request, &out));
    MPI_Alltoall(mine, 10, MPI_INT32_T, theirs, 10, MPI_INT32_T, comm);
    const int same = out.shape[0] == 2 * n && memcmp(out.data, theirs, sizeof(int32_t) * (size_t)cells) == 0;
    printf("rank %d: %s alltoall %s\n", me, where, same ? "same" : "DIFFERENT");
    failures += !same;
    CHECK(tutti_request_free(request));
    free(mine);
    free(theirs);
  }
  /* Reducescatter: 2n + 1 rows of 4 float32; member i gets (2n + 1) / n rows, one more if first. */
  {
    const int rows = 2 * n + 1;
    const int64_t shape[2] = {rows, 4};
    float* mine = malloc(sizeof(float) * (size_t)rows * 4);
    for (int i = 0; i < rows * 4; ++i) mine[i] = value_at(me, i);
    int* recv_counts = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; ++i) recv_counts[i] = (rows / n + (i < rows % n ? 1 : 0)) * 4;
    float* theirs = malloc(sizeof(float) * (size_t)recv_counts[r]);
    MPI_Reduce_scatter(mine, theirs, recv_counts, MPI_FLOAT, MPI_SUM, comm);
    tutti_tensor_t t = tensor_of(mine, TUTTI_DTYPE_FLOAT32, 2, shape);
    tutti_request_t request;
    char name[64];
    snprintf(name, sizeof name, "%s.reducescatter", where);
    CHECK(tutti_reducescatter(rt, name, set, &t, NULL, &request));
    CHECK(tutti_request_wait(request, -1));
    tutti_tensor_t out = TUTTI_TENSOR_INIT;
    CHECK(tutti_request_output(request, &out));
    const int same = out.shape[0] * 4 == recv_counts[r] &&
                     memcmp(out.data, theirs, sizeof(float) * (size_t)recv_counts[r]) == 0;
    printf("rank %d: %s reducescatter %s\n", me, where, same ? "same" : "DIFFERENT");
    failures += !same;
    CHECK(tutti_request_free(request));
    free(mine);
    free(recv_counts);
    free(theirs);
  }
  /* The link of every pair: "<peer>=mpi" for each other member, in set order. */
  {
    int32_t* ranks = malloc(sizeof(int32_t) * (size_t)n);
    int32_t listed = 0;
    CHECK(tutti_process_set_ranks(rt, set, ranks, n, &listed));
    char text[256] = "";
    for (int i = 0; i < n; ++i) {
      if (ranks[i] == me) continue;
      tutti_peer_stats_t stats = TUTTI_PEER_STATS_INIT;
      CHECK(tutti_get_peer_stats(rt, set, ranks[i], &stats));
      char one[64];
      snprintf(one, sizeof one, " %d=%s%s", ranks[i], tutti_transport_name(stats.transport),
               stats.connected ? "" : "(unconnected)");
      strncat(text, one, sizeof text - strlen(text) - 1);
      failures += stats.transport != TUTTI_TRANSPORT_MPI || !stats.connected;
    }
    printf("rank %d: %s links%s\n", me, where, text);
    free(ranks);
  }
  return failures;
}

static int transport(void) {
  tutti_runtime_t rt;
  CHECK(tutti_mpi_init(MPI_COMM_WORLD, NULL, &rt));
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int failures = collectives_against_mpi(rt, TUTTI_WORLD, MPI_COMM_WORLD, "world");
  MPI_Comm colour;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &colour);
  int32_t set;
  CHECK(tutti_process_set_from_comm(rt, colour, 0, &set));
  char where[32];
  snprintf(where, sizeof where, "colour %d", me % 2);
  failures += collectives_against_mpi(rt, set, colour, where);
  /* Point-to-point around the world: 5 MB to the next rank, from the previous one. */
  {
    const int64_t count = 1250001;
    int32_t* out = malloc(sizeof(int32_t) * (size_t)count);
    int32_t* in = malloc(sizeof(int32_t) * (size_t)count);
    for (int64_t i = 0; i < count; ++i) out[i] = (int32_t)(me * 7 + i);
    tutti_tensor_t sent = tensor_of(out, TUTTI_DTYPE_INT32, 1, &count);
    tutti_tensor_t received = tensor_of(in, TUTTI_DTYPE_INT32, 1, &count);
    const int next = (me + 1) % size, previous = (me + size - 1) % size;
    tutti_request_t send, recv;
    CHECK(tutti_send(rt, TUTTI_WORLD, &sent, next, 7, &send));
    CHECK(tutti_recv(rt, TUTTI_WORLD, &received, previous, 7, &recv));
    wait_free(send);
    wait_free(recv);
    int same = 1;
    for (int64_t i = 0; i < count; ++i) same &= in[i] == (int32_t)(previous * 7 + i);
    printf("rank %d: send to %d, recv from %d %s\n", me, next, previous, same ? "same" : "DIFFERENT");
    failures += !same;
    free(out);
    free(in);
  }
  MPI_Comm_free(&colour);
  CHECK(tutti_mpi_finalize(rt));
  return failures;
}

/* MPI initialised MPI_THREAD_SERIALIZED (main's doing): refused on every rank. */
static int serialized(void) {
  tutti_runtime_t rt = NULL;
  const tutti_status_t status = tutti_mpi_init(MPI_COMM_WORLD, NULL, &rt);
  printf("rank %d: status %d: %s\n", me, (int)status, tutti_last_error());
  return status == TUTTI_ERR_INVALID_ARGUMENT && rt == NULL ? 0 : 1;
}

/* Under tuttirun, without MPI: the library is loaded, but no runtime is MPI mode's. */
static int outside(void) {
  tutti_runtime_t rt = NULL;
  const tutti_status_t status = tutti_init(NULL, &rt);
  printf("outside: status %d: %s\n", (int)status, tutti_last_error());
  fflush(stdout);
  return status == TUTTI_ERR_INVALID_ARGUMENT && rt == NULL ? 0 : 1;
}

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "world";
  if (strcmp(scenario, "no_init") == 0) {
    tutti_runtime_t rt;
    const tutti_status_t status = tutti_mpi_init(MPI_COMM_WORLD, NULL, &rt);
    printf("status %d: %s\n", (int)status, tutti_last_error());
    return status == TUTTI_ERR_INVALID_ARGUMENT ? 0 : 1;
  }
  if (strcmp(scenario, "outside") == 0) return outside();
  int provided;
  MPI_Init_thread(&argc, &argv,
                  strcmp(scenario, "serialized") == 0 ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE,
                  &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int failures;
  if (strcmp(scenario, "world") == 0) failures = world();
  else if (strcmp(scenario, "modes") == 0) failures = modes();
  else if (strcmp(scenario, "disagree") == 0) failures = disagree();
  else if (strcmp(scenario, "errors") == 0) failures = errors();
  else if (strcmp(scenario, "transport") == 0) failures = transport();
  else if (strcmp(scenario, "serialized") == 0) failures = serialized();
  else {
    fprintf(stderr, "unknown scenario %s\n", scenario);
    failures = 1;
  }
  printf("rank %d: %s\n", me, failures == 0 ? "passed" : "FAILED");
  fflush(stdout);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
