/* Allreduce latency and bandwidth of tutti, float32 sum on the world, one size per line:
 *   tuttirun -np N build/bench/allreduce_bench [BYTES...]
 * Rank 0 prints: bytes, iterations, median and p90 time per allreduce (us), algbw and busbw
 * (GB/s, as nccl-tests define them). Uses tutti.h only. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

int main(int argc, char** argv) {
  static const long defaults[] = {4, 4096, 65536, 1 << 20, 16 << 20};
  int nsizes = argc > 1 ? argc - 1 : (int)(sizeof(defaults) / sizeof(defaults[0]));
  tutti_runtime_t rt;
  CHECK(tutti_init(NULL, &rt));
  int32_t rank, size;
  CHECK(tutti_rank(rt, &rank));
  CHECK(tutti_size(rt, &size));
  if (rank == 0) printf("ranks %d\n%12s %6s %12s %12s %10s %10s\n", size, "bytes", "iters", "median_us", "p90_us", "algbw", "busbw");
  for (int s = 0; s < nsizes; ++s) {
    long bytes = argc > 1 ? atol(argv[s + 1]) : defaults[s];
    int64_t count = bytes / 4 > 0 ? bytes / 4 : 1;
    int iters = bytes <= 65536 ? 2000 : bytes <= (1 << 20) ? 200 : 20;
    float* data = malloc((size_t)count * 4);
    double* times = malloc(sizeof(double) * (size_t)iters);
    for (int64_t i = 0; i < count; ++i) data[i] = 1.0f;
    tutti_tensor_t t = TUTTI_TENSOR_INIT;
    t.data = data;
    t.dtype = TUTTI_DTYPE_FLOAT32;
    t.ndim = 1;
    t.shape = &count;
    for (int i = -iters / 10 - 1; i < iters; ++i) { /* the first tenth warms up */
      tutti_request_t req;
      double start = bench_now_us();
      CHECK(tutti_allreduce(rt, "bench", TUTTI_WORLD, &t, &t, NULL, &req));
      CHECK(tutti_request_wait(req, -1));
      CHECK(tutti_request_free(req));
      if (i >= 0) times[i] = bench_now_us() - start;
    }
    qsort(times, (size_t)iters, sizeof(double), bench_compare_doubles);
    double median = times[iters / 2], p90 = times[iters * 9 / 10];
    double algbw = (double)count * 4 / median / 1e3;
    if (rank == 0)
      printf("%12ld %6d %12.1f %12.1f %10.3f %10.3f\n", (long)count * 4, iters, median, p90, algbw,
             algbw * 2.0 * (size - 1) / size);
    free(data);
    free(times);
  }
  CHECK(tutti_finalize(rt));
  return 0;
}
