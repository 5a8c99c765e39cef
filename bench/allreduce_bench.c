/* Allreduce of tutti measured exactly as ../shared/bench-peers measures its peers (OpenMPI, Gloo,
 * torch.distributed), printing the same lines so that run_all.sh puts tutti in the same table:
 *   tuttirun --no-prefix -np N build/bench/allreduce_bench [--label tutti-tcp] [--sizes B,B,...]
 *            [--no-sweep] [--no-step] [--step-iters N] [--step-tensors N] [--out-of-place]
 * Sweep: float32 sum on the world; per size a correctness check (sum of rank+1), warm-up calls, a
 * barrier, then back-to-back calls, each submitted and waited on; the time is the per-call average
 * of the slowest rank. --out-of-place: the sweep reduces one buffer into another (allocated and
 * touched once, as a framework's pooled output), checking too that the input stays unchanged.
 * Rank 0 prints
 *   RESULT,<label>,<np>,<bytes>,<iters>,<avg_us>,<algbw_GBps>,<busbw_GBps>
 * Step: 200 distinct named 4 KiB allreduces submitted asynchronously and then waited on, through
 * full negotiation with default settings (fusion, cache); 3 warm-up steps, then timed steps each
 * starting with a barrier (slowest rank's time); `fused` is one allreduce of all 200 tensors' bytes:
 *   STEP,<label>,<np>,<ntensors>,<tensor_bytes>,<steps>,<median_us>,<mean_us>,<min_us>,<fused_us>
 * Uses tutti.h only. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static tutti_runtime_t rt;
static int32_t rank, size;
static int out_of_place;

typedef struct buffer {
  float* data;
  int64_t count;
  tutti_tensor_t tensor;
} buffer_t;

static void buffer_init(buffer_t* b, int64_t count) {
  b->count = count;
  b->data = calloc((size_t)count, sizeof(float));
  if (b->data == NULL) {
    fprintf(stderr, "out of memory for %lld floats\n", (long long)count);
    exit(1);
  }
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = b->data;
  t.dtype = TUTTI_DTYPE_FLOAT32;
  t.ndim = 1;
  t.shape = &b->count;
  b->tensor = t;
}

/* Into `out`, or in place where out is NULL. */
static void allreduce_into(const char* name, buffer_t* b, buffer_t* out, int32_t op) {
  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.reduce_op = op;
  tutti_request_t request;
  CHECK(tutti_allreduce(rt, name, TUTTI_WORLD, &b->tensor, out ? &out->tensor : &b->tensor,
                        &options, &request));
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
}

static void allreduce(const char* name, buffer_t* b, int32_t op) { allreduce_into(name, b, NULL, op); }

static void barrier(void) {
  tutti_request_t request;
  CHECK(tutti_barrier(rt, TUTTI_WORLD, &request));
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
}

/* The peers' table: warm-up calls and timed calls per size. */
static void iterations(long bytes, int* warmup, int* iters) {
  if (bytes <= 4096) *warmup = 20, *iters = 500;
  else if (bytes <= 65536) *warmup = 10, *iters = 200;
  else if (bytes <= (1 << 20)) *warmup = 5, *iters = 50;
  else if (bytes <= (16 << 20)) *warmup = 3, *iters = 20;
  else *warmup = 3, *iters = 10;
}

static void sweep(const char* label, const long* sizes, int nsizes) {
  for (int s = 0; s < nsizes; ++s) {
    buffer_t b, result;
    buffer_init(&b, sizes[s] / 4 > 0 ? sizes[s] / 4 : 1);
    buffer_init(&result, out_of_place ? b.count : 1);
    buffer_t* out = out_of_place ? &result : NULL;
    const float* got = out_of_place ? result.data : b.data;
    const long bytes = (long)b.count * 4;
    for (int64_t i = 0; i < b.count; ++i) b.data[i] = (float)(rank + 1);
    allreduce_into("sweep", &b, out, TUTTI_OP_SUM);
    const float expected = (float)size * (size + 1) / 2;
    for (int64_t i = 0; i < b.count; ++i)
      if (got[i] != expected || (out_of_place && b.data[i] != (float)(rank + 1))) {
        fprintf(stderr, "rank %d: element %lld of %ld bytes is %g (input %g), expected %g\n",
                rank, (long long)i, bytes, got[i], b.data[i], expected);
        exit(1);
      }
    memset(b.data, 0, (size_t)bytes); /* zeros stay finite however often they are summed */
    int warmup, iters;
    iterations(bytes, &warmup, &iters);
    for (int i = 0; i < warmup; ++i) allreduce_into("sweep", &b, out, TUTTI_OP_SUM);
    barrier();
    double start = bench_now_us();
    for (int i = 0; i < iters; ++i) allreduce_into("sweep", &b, out, TUTTI_OP_SUM);
    double avg_us = (bench_now_us() - start) / iters;
    bench_max_over_ranks(rt, &avg_us, 1);
    const double algbw = bytes / avg_us / 1e3;
    if (rank == 0)
      printf("RESULT,%s,%d,%ld,%d,%.2f,%.4f,%.4f\n", label, size, bytes, iters, avg_us, algbw,
             algbw * 2.0 * (size - 1) / size);
    fflush(stdout);
    free(b.data);
    free(result.data);
  }
}

static void step_test(const char* label, int ntensors, int steps) {
  const int64_t count = 1024; /* 4 KiB */
  buffer_t* grads = calloc((size_t)ntensors, sizeof(buffer_t));
  tutti_request_t* requests = calloc((size_t)ntensors, sizeof(tutti_request_t));
  char (*names)[32] = calloc((size_t)ntensors, sizeof(*names));
  double* times = calloc((size_t)steps, sizeof(double));
  for (int i = 0; i < ntensors; ++i) {
    buffer_init(&grads[i], count);
    snprintf(names[i], sizeof(names[i]), "grad.%d", i);
  }
  for (int step = -3; step < steps; ++step) {
    if (step >= 0) barrier();
    double start = bench_now_us();
    for (int i = 0; i < ntensors; ++i)
      CHECK(tutti_allreduce(rt, names[i], TUTTI_WORLD, &grads[i].tensor, &grads[i].tensor, NULL,
                            &requests[i]));
    for (int i = 0; i < ntensors; ++i) {
      CHECK(tutti_request_wait(requests[i], -1));
      CHECK(tutti_request_free(requests[i]));
    }
    if (step >= 0) times[step] = bench_now_us() - start;
  }
  bench_max_over_ranks(rt, times, steps);
  /* The bucketing reference: all the step's bytes in one allreduce. */
  buffer_t fused;
  buffer_init(&fused, count * ntensors);
  for (int i = 0; i < 3; ++i) allreduce("fused", &fused, TUTTI_OP_SUM);
  barrier();
  const int fused_iters = 10;
  double start = bench_now_us();
  for (int i = 0; i < fused_iters; ++i) allreduce("fused", &fused, TUTTI_OP_SUM);
  double fused_us = (bench_now_us() - start) / fused_iters;
  bench_max_over_ranks(rt, &fused_us, 1);
  double sum = 0;
  for (int i = 0; i < steps; ++i) sum += times[i];
  qsort(times, (size_t)steps, sizeof(double), bench_compare_doubles);
  if (rank == 0)
    printf("STEP,%s,%d,%d,%lld,%d,%.1f,%.1f,%.1f,%.1f\n", label, size, ntensors,
           (long long)count * 4, steps, times[steps / 2], sum / steps, times[0], fused_us);
  fflush(stdout);
  for (int i = 0; i < ntensors; ++i) free(grads[i].data);
  free(fused.data);
  free(grads);
  free(requests);
  free(names);
  free(times);
}

int main(int argc, char** argv) {
  static const struct option options[] = {
      {"label", required_argument, NULL, 'l'},      {"sizes", required_argument, NULL, 's'},
      {"no-sweep", no_argument, NULL, 'w'},         {"no-step", no_argument, NULL, 'p'},
      {"step-iters", required_argument, NULL, 'i'}, {"step-tensors", required_argument, NULL, 't'},
      {"out-of-place", no_argument, NULL, 'o'},     {NULL, 0, NULL, 0}};
  const char* label = "tutti";
  long sizes[64] = {4096, 65536, 1 << 20, 16 << 20, 64 << 20};
  int nsizes = 5, do_sweep = 1, do_step = 1, step_iters = 20, step_tensors = 200;
  for (int c; (c = getopt_long(argc, argv, "", options, NULL)) != -1;) {
    switch (c) {
      case 'l': label = optarg; break;
      case 's': {
        nsizes = 0;
        for (char* p = strtok(optarg, ","); p != NULL && nsizes < 64; p = strtok(NULL, ","))
          sizes[nsizes++] = atol(p);
        break;
      }
      case 'w': do_sweep = 0; break;
      case 'p': do_step = 0; break;
      case 'i': step_iters = atoi(optarg); break;
      case 't': step_tensors = atoi(optarg); break;
      case 'o': out_of_place = 1; break;
      default:
        fprintf(stderr, "usage: %s [--label L] [--sizes B,...] [--no-sweep] [--no-step] "
                        "[--step-iters N] [--step-tensors N] [--out-of-place]\n", argv[0]);
        return 2;
    }
  }
  if (step_iters < 1 || step_tensors < 1) {
    fprintf(stderr, "--step-iters and --step-tensors must be positive\n");
    return 2;
  }
  CHECK(tutti_init(NULL, &rt));
  CHECK(tutti_rank(rt, &rank));
  CHECK(tutti_size(rt, &size));
  if (do_sweep) sweep(label, sizes, nsizes);
  if (do_step) step_test(label, step_tensors, step_iters);
  CHECK(tutti_finalize(rt));
  return 0;
}
