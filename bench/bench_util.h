/* What the C benchmarks share: a checked call, a monotonic clock, a comparator for qsort, the
 * slowest rank's figure. */
#ifndef TUTTI_BENCH_UTIL_H
#define TUTTI_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tutti/tutti.h>

#define CHECK(call)                                                                         \
  do {                                                                                      \
    tutti_status_t s_ = (call);                                                             \
    if (s_ != TUTTI_OK) {                                                                   \
      fprintf(stderr, "%s: %s (%s)\n", #call, tutti_status_string(s_), tutti_last_error()); \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

static inline double bench_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline int bench_compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* values[i] becomes its largest value over the ranks of `rt`'s world (the slowest rank's time). */
static inline void bench_max_over_ranks(tutti_runtime_t rt, double* values, int64_t count) {
  int64_t shape = count; /* read at submission; the call waits for completion */
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = values;
  t.dtype = TUTTI_DTYPE_FLOAT64;
  t.ndim = 1;
  t.shape = &shape;
  tutti_allreduce_options_t options = TUTTI_ALLREDUCE_OPTIONS_INIT;
  options.reduce_op = TUTTI_OP_MAX;
  tutti_request_t request;
  CHECK(tutti_allreduce(rt, "bench.max", TUTTI_WORLD, &t, &t, &options, &request));
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
}

#endif /* TUTTI_BENCH_UTIL_H */
