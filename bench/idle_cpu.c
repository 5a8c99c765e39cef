/* CPU an idle runtime costs: each rank joins, synchronizes, sleeps, synchronizes again, and
 * reports the CPU time its whole process (every tutti thread) used during the sleep.
 *   tuttirun -np 2 build/bench/idle_cpu [SECONDS]
 * Prints "idle rank R: U ms user + S ms system over T s = P % of a core". Uses tutti.h only. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_util.h"

static double cpu_ms(int which) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  const struct timeval t = which == 0 ? usage.ru_utime : usage.ru_stime;
  return t.tv_sec * 1e3 + t.tv_usec / 1e3;
}

static void barrier(tutti_runtime_t rt) {
  tutti_request_t request;
  CHECK(tutti_barrier(rt, TUTTI_WORLD, &request));
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
}

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 10.0;
  tutti_runtime_t rt;
  CHECK(tutti_init(NULL, &rt));
  int32_t rank;
  CHECK(tutti_rank(rt, &rank));
  barrier(rt);
  const double user = cpu_ms(0), system = cpu_ms(1), start = bench_now_us();
  struct timespec pause = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
  while (nanosleep(&pause, &pause) != 0) {
  }
  const double wall_ms = (bench_now_us() - start) / 1e3;
  const double du = cpu_ms(0) - user, ds = cpu_ms(1) - system;
  printf("idle rank %d: %.1f ms user + %.1f ms system over %.1f s = %.3f %% of a core\n", rank, du,
         ds, wall_ms / 1e3, 100.0 * (du + ds) / wall_ms);
  barrier(rt);
  CHECK(tutti_finalize(rt));
  return 0;
}
