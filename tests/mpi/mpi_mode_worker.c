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
 *   errors     options that name a rank, runtimes not made by tutti_mpi_init, a NULL set_id */
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

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "world";
  if (strcmp(scenario, "no_init") == 0) {
    tutti_runtime_t rt;
    const tutti_status_t status = tutti_mpi_init(MPI_COMM_WORLD, NULL, &rt);
    printf("status %d: %s\n", (int)status, tutti_last_error());
    return status == TUTTI_ERR_INVALID_ARGUMENT ? 0 : 1;
  }
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int failures;
  if (strcmp(scenario, "world") == 0) failures = world();
  else if (strcmp(scenario, "modes") == 0) failures = modes();
  else if (strcmp(scenario, "disagree") == 0) failures = disagree();
  else if (strcmp(scenario, "errors") == 0) failures = errors();
  else {
    fprintf(stderr, "unknown scenario %s\n", scenario);
    failures = 1;
  }
  printf("rank %d: %s\n", me, failures == 0 ? "passed" : "FAILED");
  fflush(stdout);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
