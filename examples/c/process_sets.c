/* Process sets in C: the even and the odd ranks each allreduce in a set of their own while the
 * whole world allreduces at the same time; then each set broadcasts weights from its first
 * member and exchanges shards with alltoall, the world gathers variable-sized batches, and
 * pairs of ranks pass activations and gradients with send/recv.
 * Run it with: tuttirun -np 4 ./example_process_sets (up to 64 ranks) */
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

/* A descriptor for caller-owned memory; `shape` must outlive the requests that use it. */
static tutti_tensor_t describe(void* data, int32_t dtype, int32_t ndim, const int64_t* shape) {
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = data;
  t.dtype = dtype;
  t.ndim = ndim;
  t.shape = shape;
  return t;
}

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
  tutti_tensor_t mine_t = describe(mine, TUTTI_DTYPE_FLOAT32, 1, shape);
  tutti_tensor_t world_t = describe(world, TUTTI_DTYPE_FLOAT32, 1, shape);

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
  /* Broadcast in the set from its first member (a global rank), e.g. initial weights. */
  int32_t root = rank % 2;
  float weights[4] = {0, 0, 0, 0};
  if (rank == root)
    for (int i = 0; i < 4; ++i) weights[i] = 100.0f + (float)i;
  int64_t four[1] = {4};
  tutti_tensor_t weights_t = describe(weights, TUTTI_DTYPE_FLOAT32, 1, four);
  tutti_request_t req;
  CHECK(tutti_broadcast(rt, "weights", my_set, &weights_t, root, &req));
  CHECK(tutti_request_wait(req, -1));
  CHECK(tutti_request_free(req));
  for (int i = 0; i < 4; ++i)
    if (weights[i] != 100.0f + (float)i) ++errors;

  /* Allgather on the world: rank r contributes r + 1 rows of 2 values (variable batch sizes). */
  int32_t rows_mine = rank + 1;
  int32_t batch[2 * 64];
  for (int i = 0; i < 2 * rows_mine; ++i) batch[i] = rank;
  int64_t batch_shape[2] = {rows_mine, 2};
  tutti_tensor_t batch_t = describe(batch, TUTTI_DTYPE_INT32, 2, batch_shape);
  CHECK(tutti_allgather(rt, "batches", TUTTI_WORLD, &batch_t, &req));
  CHECK(tutti_request_wait(req, -1));
  tutti_tensor_t gathered = TUTTI_TENSOR_INIT; /* owned by the request until it is freed */
  CHECK(tutti_request_output(req, &gathered));
  int64_t row = 0;
  for (int32_t r = 0; r < size; ++r)
    for (int32_t k = 0; k <= r; ++k, ++row)
      if (((const int32_t*)gathered.data)[2 * row] != r) ++errors;
  if (gathered.shape[0] != row) ++errors;
  CHECK(tutti_request_free(req));

  /* Alltoall in the set: send one row to each member, receive one from each (set order). */
  float shard[64], *received;
  for (int32_t j = 0; j < my_set_size; ++j) shard[j] = (float)(rank * 1000 + j);
  int64_t shard_shape[1] = {my_set_size};
  tutti_tensor_t shard_t = describe(shard, TUTTI_DTYPE_FLOAT32, 1, shard_shape);
  CHECK(tutti_alltoall(rt, "experts", my_set, &shard_t, NULL, 0, &req));
  CHECK(tutti_request_wait(req, -1));
  tutti_tensor_t exchanged = TUTTI_TENSOR_INIT;
  CHECK(tutti_request_output(req, &exchanged));
  received = (float*)exchanged.data;
  int32_t my_index;
  CHECK(tutti_process_set_rank(rt, my_set, &my_index));
  for (int32_t j = 0; j < my_set_size; ++j) /* member j of my set is global rank 2j + rank % 2 */
    if (received[j] != (float)((2 * j + rank % 2) * 1000 + my_index)) ++errors;
  CHECK(tutti_request_free(req));

  /* Send/recv between pipeline stages: each even rank passes an activation to the odd rank
   * after it, which answers with a gradient (world set, global ranks, tags 1 and 2). */
  float activation[8], gradient[8];
  int64_t eight[1] = {8};
  tutti_tensor_t act_t = describe(activation, TUTTI_DTYPE_FLOAT32, 1, eight);
  tutti_tensor_t grad_t = describe(gradient, TUTTI_DTYPE_FLOAT32, 1, eight);
  int32_t partner = rank % 2 == 0 ? rank + 1 : rank - 1;
  if (partner < size) {
    tutti_request_t out, in;
    if (rank % 2 == 0) {
      for (int i = 0; i < 8; ++i) activation[i] = (float)(rank * 10 + i);
      CHECK(tutti_send(rt, TUTTI_WORLD, &act_t, partner, 1, &out));
      CHECK(tutti_recv(rt, TUTTI_WORLD, &grad_t, partner, 2, &in));
    } else {
      CHECK(tutti_recv(rt, TUTTI_WORLD, &act_t, partner, 1, &in));
      CHECK(tutti_request_wait(in, -1));
      for (int i = 0; i < 8; ++i) gradient[i] = -activation[i];
      CHECK(tutti_request_free(in));
      CHECK(tutti_send(rt, TUTTI_WORLD, &grad_t, partner, 2, &out));
      in = NULL;
    }
    CHECK(tutti_request_wait(out, -1));
    CHECK(tutti_request_free(out));
    if (in != NULL) {
      CHECK(tutti_request_wait(in, -1));
      CHECK(tutti_request_free(in));
      for (int i = 0; i < 8; ++i)
        if (gradient[i] != -(float)(rank * 10 + i)) ++errors;
    }
  }

  printf("rank %d: %s set %d (%s ranks) sum verified, world sum = %.0f verified, broadcast, "
         "allgather of %lld rows, alltoall and send/recv verified: %s\n",
         rank, rank % 2 == 0 ? "even" : "odd", my_set, rank % 2 == 0 ? "even" : "odd", world[0],
         (long long)row, errors == 0 ? "ok" : "WRONG");
  CHECK(tutti_finalize(rt));
  return errors == 0 ? 0 : 1;
}
