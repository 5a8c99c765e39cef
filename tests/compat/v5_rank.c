/* The rank whose frames tests/compat/protocol5_job.frames holds: built once against the tutti.h
 * and libtutti.so of commit 58e2465~1 (protocol 5), see README.md. Not built by CMake: it needs
 * the old library, which CI does not build. Every collective is waited for before the next is
 * submitted, so that the order tuttid sees frames in does not depend on timing and a replay
 * against CoordinatorCore meets the same negotiation. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tutti/tutti.h"

#define CHECK(call)                                                              \
  do {                                                                           \
    tutti_status_t s_ = (call);                                                  \
    if (s_ != TUTTI_OK) {                                                        \
      fprintf(stderr, "%s: %d %s\n", #call, (int)s_, tutti_last_error());        \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

static void Wait(tutti_request_t request) {
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
}

int main(void) {
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  tutti_runtime_t rt;
  CHECK(tutti_init(&options, &rt));
  int32_t rank, size;
  CHECK(tutti_rank(rt, &rank));
  CHECK(tutti_size(rt, &size));
  /* Steps of two named allreduces: the first step negotiates them in full, later ones go as
   * response-cache bits, and the steady state earns the set its members' fast path. */
  for (int step = 0; step < 8; ++step) {
    float w[4];
    int64_t shape_w[1] = {4};
    for (int i = 0; i < 4; ++i) w[i] = (float)(rank + step + i);
    tutti_tensor_t tw = TUTTI_TENSOR_INIT;
    tw.data = w;
    tw.dtype = TUTTI_DTYPE_FLOAT32;
    tw.ndim = 1;
    tw.shape = shape_w;
    tutti_request_t request;
    CHECK(tutti_allreduce(rt, "grad.w", 0, &tw, &tw, NULL, &request));
    Wait(request);
    for (int i = 0; i < 4; ++i) {
      const float expected = (float)(size * (size - 1) / 2 + size * (step + i));
      if (w[i] != expected) {
        fprintf(stderr, "step %d: grad.w[%d] = %g, expected %g\n", step, i, w[i], expected);
        return 1;
      }
    }
    int32_t b[2] = {rank * 10 + step, -rank};
    int64_t shape_b[1] = {2};
    tutti_tensor_t tb = TUTTI_TENSOR_INIT;
    tb.data = b;
    tb.dtype = TUTTI_DTYPE_INT32;
    tb.ndim = 1;
    tb.shape = shape_b;
    tutti_allreduce_options_t max = TUTTI_ALLREDUCE_OPTIONS_INIT;
    max.reduce_op = TUTTI_OP_MAX;
    CHECK(tutti_allreduce(rt, "grad.b", 0, &tb, &tb, &max, &request));
    Wait(request);
    if (b[0] != (size - 1) * 10 + step || b[1] != 0) {
      fprintf(stderr, "step %d: grad.b = {%d, %d}\n", step, b[0], b[1]);
      return 1;
    }
  }
  CHECK(tutti_finalize(rt));
  printf("rank %d: 8 steps of grad.w (sum) and grad.b (max) correct\n", rank);
  return 0;
}
