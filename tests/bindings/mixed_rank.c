/* The C rank of the mixed-language job (tests/bindings/mixed_job.py): rank 1 of 5, in the set
 * {0, 1, 2, 3} with a Python, a Rust and a Go rank. The same steps in every language: add the
 * set, allreduce [rank + 1, (rank + 1) / 2, language] in it, allgather each member's language
 * code in set order, allreduce 1 on the world. Exits 1 on a wrong result. */
#include <stdio.h>
#include <stdlib.h>

#include <tutti/tutti.h>

enum { kLanguage = 2 }; /* python 1, c 2, rust 3, go 4 */

#define CHECK(call)                                                                          \
  do {                                                                                       \
    tutti_status_t status_ = (call);                                                         \
    if (status_ != TUTTI_OK) {                                                               \
      fprintf(stderr, "mixed (c): %s failed: %s (%s)\n", #call, tutti_status_string(status_), \
              tutti_last_error());                                                           \
      exit(2);                                                                               \
    }                                                                                        \
  } while (0)

static tutti_tensor_t describe(void* data, int32_t dtype, const int64_t* shape) {
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = data;
  t.dtype = dtype;
  t.ndim = 1;
  t.shape = shape;
  return t;
}

static void finish(tutti_request_t request) {
  CHECK(tutti_request_wait(request, -1));
  CHECK(tutti_request_free(request));
}

int main(void) {
  tutti_runtime_t rt;
  CHECK(tutti_init(NULL, &rt)); /* everything from TUTTI_* */
  int32_t rank, size, set;
  CHECK(tutti_rank(rt, &rank));
  CHECK(tutti_size(rt, &size));
  const int32_t members[] = {0, 1, 2, 3};
  CHECK(tutti_process_set_add(rt, members, 4, 0, &set));
  int failures = 0;
  tutti_request_t request;

  float values[3] = {(float)(rank + 1), 0.5f * (float)(rank + 1), (float)kLanguage};
  const int64_t three[1] = {3};
  tutti_tensor_t values_t = describe(values, TUTTI_DTYPE_FLOAT32, three);
  CHECK(tutti_allreduce(rt, "mixed.values", set, &values_t, &values_t, NULL, &request));
  finish(request);
  if (values[0] != 10.0f || values[1] != 5.0f || values[2] != 10.0f) {
    fprintf(stderr, "rank %d (c): set allreduce %g %g %g\n", rank, values[0], values[1], values[2]);
    ++failures;
  }

  int32_t language = kLanguage;
  const int64_t one[1] = {1};
  tutti_tensor_t language_t = describe(&language, TUTTI_DTYPE_INT32, one);
  CHECK(tutti_allgather(rt, "mixed.languages", set, &language_t, &request));
  CHECK(tutti_request_wait(request, -1));
  tutti_tensor_t gathered = TUTTI_TENSOR_INIT; /* owned by the request until it is freed */
  CHECK(tutti_request_output(request, &gathered));
  const int32_t* codes = (const int32_t*)gathered.data;
  if (gathered.ndim != 1 || gathered.shape[0] != 4 || codes[0] != 1 || codes[1] != 2 ||
      codes[2] != 3 || codes[3] != 4) {
    fprintf(stderr, "rank %d (c): set allgather wrong\n", rank);
    ++failures;
  }
  CHECK(tutti_request_free(request));

  int64_t world = 1;
  tutti_tensor_t world_t = describe(&world, TUTTI_DTYPE_INT64, one);
  CHECK(tutti_allreduce(rt, "mixed.world", TUTTI_WORLD, &world_t, &world_t, NULL, &request));
  finish(request);
  if (world != size) {
    fprintf(stderr, "rank %d (c): world allreduce %lld\n", rank, (long long)world);
    ++failures;
  }
  CHECK(tutti_finalize(rt));
  printf("rank %d (c): mixed %s\n", rank, failures == 0 ? "ok" : "WRONG");
  return failures == 0 ? 0 : 1;
}
