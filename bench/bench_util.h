/* What the C benchmarks share: a checked call, a monotonic clock, a comparator for qsort. */
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

#endif /* TUTTI_BENCH_UTIL_H */
