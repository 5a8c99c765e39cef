/* MPI mode (tutti/tutti_mpi.h): a program mpirun starts, with no tuttid started by hand. tutti
 * takes its ranks from MPI_COMM_WORLD (rank 0 starts the job's coordinator), the even and the odd
 * ranks of one MPI_Comm_split become two process sets, and each set averages a gradient on its
 * own while the world sums a counter.
 * Run it with: mpirun -np 4 ./example_mpi_sets   (as root: add --allow-run-as-root --oversubscribe) */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>
#include <tutti/tutti_mpi.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    tutti_status_t status_ = (call);                                                 \
    if (status_ != TUTTI_OK) {                                                       \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, tutti_status_string(status_),   \
              tutti_last_error());                                                   \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                  \
    }                                                                                \
  } while (0)

static void allreduce(tutti_runtime_t rt, const char* name, int32_t set, float* data,
                      int64_t count, int32_t op) {
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = data;
  t.dtype = TUTTI_DTYPE_FLOAT32;
  t.ndim = 1;
  t.shape = &count;
  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.reduce_op = op;
  tutti_request_t request;
  CHECK(tutti_allreduce(rt, name, set, &t, &t, &options, &request));
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
}

int main(int argc, char** argv) {
  int provided, rank;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  tutti_runtime_t rt;
  CHECK(tutti_mpi_init(MPI_COMM_WORLD, NULL, &rt));

  MPI_Comm parity;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &parity);
  int32_t set;
  CHECK(tutti_process_set_from_comm(rt, parity, 0, &set));

  float gradient[4] = {(float)rank, (float)rank, (float)rank, (float)rank};
  allreduce(rt, "gradient", set, gradient, 4, TUTTI_OP_AVERAGE);
  float counter = 1;
  allreduce(rt, "counter", TUTTI_WORLD, &counter, 1, TUTTI_OP_SUM);
  printf("rank %d: %s set %d averaged %g, world counted %g ranks\n", rank,
         rank % 2 ? "odd" : "even", set, gradient[0], counter);

  MPI_Comm_free(&parity);
  CHECK(tutti_mpi_finalize(rt));
  MPI_Finalize();
  return 0;
}
