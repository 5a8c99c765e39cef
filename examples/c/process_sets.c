/* Process sets in C: the even and the odd ranks each allreduce in a set of their own while the
 * whole world allreduces at the same time. Run it with: tuttirun -np 4 ./example_process_sets */
#include <stdio.h>
#include <stdlib.h>

#include <tutti/tutti.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    tutti_status_t status_ = (call);                                                 \
    if (status_ != TUTTI_OK) {                                                       \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, tutti_status_string(status_),   \
              tutti_last_error());                                                   \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

enum { kCount = 1024 };

int main(void) {
  tutti_runtime_t rt;
  CHECK(tutti_init(NULL, &rt)); /* coordinator, job, rank and size come from tuttirun */
  int32_t rank, size;
  CHECK(tutti_rank(rt, &rank));
  CHECK(tutti_size(rt, &size));

  /* Every rank calls add for both sets (as Horovod scripts do); members wait for each other,
   * non-members learn the id at once. */
  int32_t evens[64], odds[64], n_even = 0, n_odd = 0;
  for (int32_t r = 0; r < size && r < 128; ++r) {
    if (r % 2 == 0) evens[n_even++] = r;
    else odds[n_odd++] = r;
  }
  int32_t even_set, odd_set = -1;
  CHECK(tutti_process_set_add(rt, evens, n_even, 0, &even_set));
  if (n_odd > 0) CHECK(tutti_process_set_add(rt, odds, n_odd, 0, &odd_set));
  const int32_t my_set = rank % 2 == 0 ? even_set : odd_set;
  const int32_t my_set_size = rank % 2 == 0 ? n_even : n_odd;

  static float mine[kCount], world[kCount];
  for (int i = 0; i < kCount; ++i) {
    mine[i] = (float)(rank + i);
    world[i] = 1.0f;
  }
  int64_t shape[1] = {kCount};
  tutti_tensor_t mine_t = TUTTI_TENSOR_INIT, world_t = TUTTI_TENSOR_INIT;
  mine_t.data = mine;
  mine_t.dtype = TUTTI_DTYPE_FLOAT32;
  mine_t.ndim = 1;
  mine_t.shape = shape;
  world_t = mine_t;
  world_t.data = world;

  /* Both requests are in flight together: the set's and the world's streams run independently. */
  tutti_request_t in_set, in_world;
  CHECK(tutti_allreduce(rt, "mine", my_set, &mine_t, &mine_t, NULL, &in_set));
  CHECK(tutti_allreduce(rt, "world", TUTTI_WORLD, &world_t, &world_t, NULL, &in_world));
  CHECK(tutti_request_wait(in_set, -1));
  CHECK(tutti_request_wait(in_world, -1));
  CHECK(tutti_request_free(in_set));
  CHECK(tutti_request_free(in_world));

  /* Expected: sum over the set's ranks r of (r + i), and size everywhere for the world. */
  int32_t rank_sum = 0;
  for (int32_t r = rank % 2; r < size; r += 2) rank_sum += r;
  int errors = 0;
  for (int i = 0; i < kCount; ++i) {
    if (mine[i] != (float)(rank_sum + my_set_size * i)) ++errors;
    if (world[i] != (float)size) ++errors;
  }
  printf("rank %d: %s set %d (%s ranks) sum verified, world sum = %.0f verified: %s\n", rank,
         rank % 2 == 0 ? "even" : "odd", my_set, rank % 2 == 0 ? "even" : "odd", world[0],
         errors == 0 ? "ok" : "WRONG");
  CHECK(tutti_finalize(rt));
  return errors == 0 ? 0 : 1;
}
