/* tutti's allreduce over each data-plane backend beside MPI's own MPI_Allreduce, in one MPI-mode
 * run (docs/transports.md, "MPI"); bench/mpi_transport.sh runs it and makes the table:
 *   mpirun -np N build/bench/mpi_transport_bench [--transports mpi,shm,tcp] [--sizes B,B,...]
 * For each transport: tutti_mpi_init with options.transport set, then per size a correctness
 * check (sum of rank+1), warm-up calls, a barrier, then back-to-back calls, each submitted and
 * waited on, float32 sum on the world; the time is the per-call average of the slowest rank;
 * then tutti_mpi_finalize. Then the same sweep of MPI_Allreduce (in place) on MPI_COMM_WORLD.
 * Rank 0 prints, per method and size,
 *   RESULT,<method>,<np>,<bytes>,<iters>,<avg_us>,<algbw_GBps>,<busbw_GBps>
 * with <method> tutti-<transport> or mpi-allreduce. busbw = algbw * 2 (n - 1) / n, as NCCL's. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tutti/tutti_mpi.h"

#define CHECK(call)                                                                         \
  do {                                                                                      \
    tutti_status_t s_ = (call);                                                             \
    if (s_ != TUTTI_OK) {                                                                   \
      fprintf(stderr, "%s: %s (%s)\n", #call, tutti_status_string(s_), tutti_last_error()); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                         \
    }                                                                                       \
  } while (0)

static int rank, size;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Warm-up and timed calls per size: about a second of each at the speeds of a 2-core VM. */
static void iterations(long bytes, int* warmup, int* iters) {
  if (bytes <= 65536) *warmup = 10, *iters = 100;
  else if (bytes <= (1 << 20)) *warmup = 3, *iters = 30;
  else if (bytes <= (16 << 20)) *warmup = 2, *iters = 8;
  else *warmup = 1, *iters = 4;
}

static void tutti_sum(tutti_runtime_t rt, float* data, int64_t count) {
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = data;
  t.dtype = TUTTI_DTYPE_FLOAT32;
  t.ndim = 1;
  t.shape = &count;
  tutti_request_t request;
  CHECK(tutti_allreduce(rt, "sweep", TUTTI_WORLD, &t, &t, NULL, &request));
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
}

/* One allreduce of `count` floats by `method`: tutti on `rt`, or MPI when rt is NULL. */
static void sum(tutti_runtime_t rt, float* data, int64_t count) {
  if (rt != NULL) tutti_sum(rt, data, count);
  else MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static void sweep(const char* method, tutti_runtime_t rt, const long* sizes, int nsizes) {
  for (int s = 0; s < nsizes; ++s) {
    const int64_t count = sizes[s] / 4 > 0 ? sizes[s] / 4 : 1;
    const long bytes = (long)count * 4;
    float* data = malloc((size_t)bytes);
    for (int64_t i = 0; i < count; ++i) data[i] = (float)(rank + 1);
    sum(rt, data, count);
    const float expected = (float)size * (size + 1) / 2;
    for (int64_t i = 0; i < count; ++i)
      if (data[i] != expected) {
        fprintf(stderr, "rank %d: %s: element %lld of %ld bytes is %g, expected %g\n", rank,
                method, (long long)i, bytes, data[i], expected);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    memset(data, 0, (size_t)bytes); /* zeros stay finite however often they are summed */
    int warmup, iters;
    iterations(bytes, &warmup, &iters);
    for (int i = 0; i < warmup; ++i) sum(rt, data, count);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = now_us();
    for (int i = 0; i < iters; ++i) sum(rt, data, count);
    double avg_us = (now_us() - start) / iters, slowest = 0;
    MPI_Allreduce(&avg_us, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double algbw = bytes / slowest / 1e3;
    if (rank == 0)
      printf("RESULT,%s,%d,%ld,%d,%.2f,%.4f,%.4f\n", method, size, bytes, iters, slowest, algbw,
             algbw * 2.0 * (size - 1) / size);
    fflush(stdout);
    free(data);
  }
}

int main(int argc, char** argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char transports[256] = "mpi,shm,tcp";
  long sizes[32] = {4096, 65536, 1 << 20, 16 << 20, 64 << 20};
  int nsizes = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--transports") == 0) {
      snprintf(transports, sizeof transports, "%s", argv[i + 1]);
    } else if (strcmp(argv[i], "--sizes") == 0) {
      nsizes = 0;
      for (char* item = strtok(argv[i + 1], ","); item != NULL && nsizes < 32; item = strtok(NULL, ","))
        sizes[nsizes++] = atol(item);
    } else {
      if (rank == 0) fprintf(stderr, "unknown option %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  for (char* name = strtok(transports, ","); name != NULL; name = strtok(NULL, ",")) {
    tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
    options.transport = name;
    tutti_runtime_t rt;
    CHECK(tutti_mpi_init(MPI_COMM_WORLD, &options, &rt));
    char method[64];
    snprintf(method, sizeof method, "tutti-%s", name);
    sweep(method, rt, sizes, nsizes);
    CHECK(tutti_mpi_finalize(rt));
  }
  sweep("mpi-allreduce", NULL, sizes, nsizes);
  MPI_Finalize();
  return 0;
}
