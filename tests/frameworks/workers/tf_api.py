"""tutti.tensorflow's collectives on every rank, eagerly and inside tf.function, against
single-process references (values and gradients); misuse prints "error KEY Class message" lines
for the test to compare. Prints "tf api ok"."""
import os

import numpy as np
import tensorflow as tf

import tutti.tensorflow as hvd

launched = int(os.environ["TUTTI_SIZE"])
first_half = hvd.ProcessSet(range(launched // 2))
hvd.init(process_sets=[first_half])
rank, size = hvd.rank(), hvd.size()
second_half = hvd.add_process_set(list(range(size // 2, size)))


def contribution(r, shape=(3, 2), dtype=tf.float32):
    return tf.cast(tf.reshape(tf.range(np.prod(shape)), shape) % 5 + 1 + r, dtype)


def close(got, want, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol)


def both(function):
    """function() eagerly and inside tf.function, checking they agree; the eager result."""
    eager = function()
    traced = tf.function(function)()
    tf.nest.map_structure(lambda a, b: np.testing.assert_array_equal(np.asarray(a),
                                                                     np.asarray(b)),
                          eager, traced)
    return eager


def report(key, function):
    try:
        function()
    except Exception as error:  # noqa: BLE001 - the test compares class and message
        print(f"error {key} {type(error).__name__} {error}", flush=True)
    else:
        print(f"error {key} none", flush=True)


everyone = tf.stack([contribution(r) for r in range(size)])
mine = contribution(rank)
for op, want in ((hvd.Sum, tf.reduce_sum(everyone, 0)), (hvd.Average, tf.reduce_mean(everyone, 0)),
                 (hvd.Min, tf.reduce_min(everyone, 0)), (hvd.Max, tf.reduce_max(everyone, 0)),
                 (hvd.Product, tf.reduce_prod(everyone, 0))):
    close(both(lambda: hvd.allreduce(mine, op=op)), want)
close(both(lambda: hvd.allreduce(mine, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)),
      1.5 * tf.reduce_sum(everyone, 0))
as_variable = tf.Variable(mine)
close(both(lambda: hvd.allreduce(as_variable, op=hvd.Sum)), tf.reduce_sum(everyone, 0))
compressed = both(lambda: hvd.allreduce(mine, compression=hvd.Compression.fp16))
assert compressed.dtype == tf.float32
close(compressed, tf.reduce_mean(everyone, 0))
for dtype in (tf.int32, tf.float16, tf.bfloat16, tf.float64, tf.uint8):
    got = both(lambda: hvd.allreduce(contribution(rank, (4,), dtype), op=hvd.Sum))
    assert got.dtype == dtype, (got.dtype, dtype)
    close(tf.cast(got, tf.float64), sum(tf.cast(contribution(r, (4,), dtype), tf.float64)
                                        for r in range(size)))
grouped = both(lambda: hvd.grouped_allreduce([mine, mine[0], tf.constant(float(rank))],
                                             op=hvd.Sum, name="grouped"))
close(grouped[0], tf.reduce_sum(everyone, 0))
close(grouped[2], sum(range(size)))
for the_set in (first_half, second_half):
    if rank in the_set.ranks:
        close(both(lambda: hvd.allreduce(mine, process_set=the_set)),
              tf.reduce_mean(tf.gather(everyone, the_set.ranks), 0))

# IndexedSlices: allgathered, as Horovod; densified they are the reduction of the dense tensors.
rows = tf.IndexedSlices(tf.ones([2, 3]) * (rank + 1), tf.constant([rank, 3]), tf.constant([5, 3]))
sparse = hvd.allreduce(rows)
assert isinstance(sparse, tf.IndexedSlices) and sparse.values.shape == (2 * size, 3)
dense_reference = sum(tf.convert_to_tensor(tf.IndexedSlices(
    tf.ones([2, 3]) * (r + 1), tf.constant([r, 3]), tf.constant([5, 3]))) for r in range(size))
close(tf.convert_to_tensor(sparse), dense_reference / size)
close(tf.convert_to_tensor(tf.function(lambda: hvd.allreduce(rows, op=hvd.Sum))()),
      dense_reference)

# allgather with a different first dimension per rank, inside tf.function too.
ragged = contribution(rank, (rank + 1, 2))
close(both(lambda: hvd.allgather(ragged)),
      tf.concat([contribution(r, (r + 1, 2)) for r in range(size)], 0))
close(both(lambda: hvd.broadcast(mine, root_rank=size - 1)), contribution(size - 1))
scattered = both(lambda: hvd.reducescatter(contribution(rank, (2 * size, 2)), op=hvd.Sum))
close(scattered, tf.reduce_sum([contribution(r, (2 * size, 2)) for r in range(size)], 0)
      [2 * rank:2 * rank + 2])
splits = tf.constant([r + 1 for r in range(size)])  # rank r sends r+1 rows to member r
sent = contribution(rank, (sum(r + 1 for r in range(size)), 2))
received, received_splits = both(lambda: hvd.alltoall(sent, splits=splits))
assert received_splits.numpy().tolist() == [rank + 1] * size
offset = sum(r + 1 for r in range(rank))
close(received, tf.concat([contribution(r, (sent.shape[0], 2))[offset:offset + rank + 1]
                           for r in range(size)], 0))

# grouped allgather and reducescatter: one py_function each inside tf.function.
gathered = both(lambda: hvd.grouped_allgather([ragged, tf.cast(mine, tf.int32)],
                                              name="grouped.gather"))
close(gathered[0], tf.concat([contribution(r, (r + 1, 2)) for r in range(size)], 0))
assert gathered[1].dtype == tf.int32
close(gathered[1], tf.concat([contribution(r) for r in range(size)], 0))
odd_rows = size + 1  # the first member gets one more row
tall_and_odd = [contribution(rank, (2 * size, 2)), contribution(rank, (odd_rows, 3))]
scattered = both(lambda: hvd.grouped_reducescatter(tall_and_odd, op=hvd.Sum))
close(scattered[0], tf.reduce_sum([contribution(r, (2 * size, 2)) for r in range(size)], 0)
      [2 * rank:2 * rank + 2])
odd_start = rank + (1 if rank > 0 else 0)
close(scattered[1], tf.reduce_sum([contribution(r, (odd_rows, 3)) for r in range(size)], 0)
      [odd_start:odd_start + (2 if rank == 0 else 1)])
close(both(lambda: hvd.grouped_reducescatter(tall_and_odd, name="grouped.scatter",
                                             prescale_factor=2.0))[0],
      2.0 * tf.reduce_mean([contribution(r, (2 * size, 2)) for r in range(size)], 0)
      [2 * rank:2 * rank + 2])
assert hvd.grouped_allgather([]) == [] and hvd.grouped_reducescatter([]) == []
graph = tf.function(lambda: hvd.grouped_reducescatter(tall_and_odd)).get_concrete_function().graph
assert [op.type for op in graph.get_operations()].count("EagerPyFunc") == 1
graph = tf.function(lambda: hvd.grouped_allgather(tall_and_odd)).get_concrete_function().graph
assert [op.type for op in graph.get_operations()].count("EagerPyFunc") == 1
for the_set in (first_half, second_half):
    if rank in the_set.ranks:
        position = the_set.ranks.index(rank)
        close(both(lambda: hvd.grouped_allgather([mine], process_set=the_set))[0],
              tf.concat([contribution(r) for r in the_set.ranks], 0))
        close(both(lambda: hvd.grouped_reducescatter([tall_and_odd[0]], process_set=the_set,
                                                     op=hvd.Sum))[0],
              tf.reduce_sum([contribution(r, (2 * size, 2)) for r in the_set.ranks], 0)
              [position * 2 * size // len(the_set.ranks):
               (position + 1) * 2 * size // len(the_set.ranks)])

# ---- gradients against one process holding every rank's input -------------------------------
weights = tf.range(1.0, size + 1.0)
shaping = tf.reshape(tf.range(6.0), (3, 2))


def loss_of(r, reduced):
    return weights[r] * tf.reduce_sum(tf.sin(reduced) * (tf.reshape(
        tf.range(tf.cast(tf.size(reduced), tf.float32)), tf.shape(reduced)) + float(r)))


def reference_gradient(combine, inputs):
    stacked = tf.Variable(tf.stack(inputs))
    with tf.GradientTape() as tape:
        loss = tf.add_n([loss_of(r, combine(stacked, r)) for r in range(size)])
    return tape.gradient(loss, stacked)[rank]


def distributed_gradient(collective, value):
    def compute():
        x = tf.convert_to_tensor(value)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = loss_of(rank, collective(x))
        return tape.gradient(loss, x)
    return both(compute)


for op, combine, factors in ((hvd.Average, lambda xs, r: tf.reduce_mean(xs, 0), (1.0, 1.0)),
                             (hvd.Sum, lambda xs, r: 0.5 * 0.25 * tf.reduce_sum(xs, 0),
                              (0.5, 0.25))):
    close(distributed_gradient(lambda x: hvd.allreduce(x, op=op, prescale_factor=factors[0],
                                                       postscale_factor=factors[1]), mine),
          reference_gradient(combine, [contribution(r) for r in range(size)]))
close(distributed_gradient(lambda x: hvd.grouped_allreduce([x, 2 * x], op=hvd.Sum)[1], mine),
      reference_gradient(lambda xs, r: tf.reduce_sum(2 * xs, 0),
                         [contribution(r) for r in range(size)]))
close(distributed_gradient(hvd.allgather, mine),
      reference_gradient(lambda xs, r: tf.reshape(xs, (-1, 2)), [contribution(r)
                                                                   for r in range(size)]))
close(distributed_gradient(lambda x: hvd.broadcast(x, root_rank=1), mine),
      reference_gradient(lambda xs, r: xs[1], [contribution(r) for r in range(size)]))
tall = [contribution(r, (2 * size, 2)) for r in range(size)]
close(distributed_gradient(lambda x: hvd.reducescatter(x, op=hvd.Average), tall[rank]),
      reference_gradient(lambda xs, r: tf.reduce_mean(xs, 0)[2 * r:2 * r + 2], tall))
close(distributed_gradient(lambda x: hvd.grouped_allgather([x, 3 * x[:rank + 1]])[1], mine),
      reference_gradient(lambda xs, r: tf.concat([3 * xs[j][:j + 1] for j in range(size)], 0),
                         [contribution(r) for r in range(size)]))
close(distributed_gradient(lambda x: hvd.grouped_reducescatter([2 * x, x], op=hvd.Average,
                                                               postscale_factor=3.0)[1],
                           tall[rank]),
      reference_gradient(lambda xs, r: 3.0 * tf.reduce_mean(xs, 0)[2 * r:2 * r + 2], tall))
close(distributed_gradient(lambda x: hvd.alltoall(x)[0], tall[rank]),
      reference_gradient(lambda xs, r: tf.concat([xs[j][2 * r:2 * r + 2] for j in range(size)],
                                                 0), tall))

# ---- DistributedGradientTape: eager and tf.function, every argument -------------------------
embedding = tf.Variable(tf.reshape(tf.range(12.0), (4, 3)))
dense_weight = tf.Variable(tf.ones([3]))


def local_gradients(r):
    with tf.GradientTape() as tape:
        looked_up = tf.gather(embedding, [r % 4, 2])  # an IndexedSlices gradient
        loss = tf.reduce_sum(looked_up * dense_weight * float(r + 1)) + 0.0 * tf.reduce_sum(
            dense_weight)
    return tape, loss


def reference_tape(r_list, op_average=True):
    grads = []
    for r in r_list:
        tape, loss = local_gradients(r)
        grads.append([tf.convert_to_tensor(g) for g in tape.gradient(loss, [embedding,
                                                                            dense_weight])])
    total = [tf.add_n(list(g)) for g in zip(*grads)]
    return [t / len(r_list) for t in total] if op_average else total


def tape_gradients(**options):
    def compute():
        tape, loss = local_gradients(rank)
        return hvd.DistributedGradientTape(tape, **options).gradient(loss, [embedding,
                                                                            dense_weight])
    eager = compute()
    traced = tf.function(compute)()
    for a, b in zip(eager, traced):
        np.testing.assert_array_equal(tf.convert_to_tensor(a).numpy(),
                                      tf.convert_to_tensor(b).numpy())
    return eager


plain = tape_gradients()
assert isinstance(plain[0], tf.IndexedSlices)
for got, want in zip(plain, reference_tape(range(size))):
    close(tf.convert_to_tensor(got), want)
as_dense = tape_gradients(sparse_as_dense=True, op=hvd.Sum)
assert not isinstance(as_dense[0], tf.IndexedSlices)
for got, want in zip(as_dense, reference_tape(range(size), op_average=False)):
    close(got, want)
for got, want in zip(tape_gradients(gradient_predivide_factor=2.0, sparse_as_dense=True),
                     reference_tape(range(size))):
    close(got, want)
for got, want in zip(tape_gradients(compression=hvd.Compression.fp16, sparse_as_dense=True),
                     reference_tape(range(size))):
    close(got, want)
the_half = first_half if rank in first_half.ranks else second_half
for got, want in zip(tape_gradients(process_set=the_half, name="half", sparse_as_dense=True),
                     reference_tape(the_half.ranks)):
    close(got, want)
tape, loss = local_gradients(rank)
layer = tf.Module()
layer.kernel = dense_weight  # tf.Module tracks its variables: trainable_variables
partial = hvd.PartialDistributedGradientTape(tape, local_layers=[layer], sparse_as_dense=True)
shared, kept = partial.gradient(loss, [embedding, dense_weight])
close(shared, reference_tape(range(size))[0])
close(kept, reference_tape([rank], op_average=False)[1])  # this rank's own, not reduced

# ---- variables, objects, barrier, join --------------------------------------------------------
variables = [tf.Variable(contribution(rank)), tf.Variable(float(rank))]
hvd.broadcast_variables(variables, root_rank=1)
close(variables[0], contribution(1))
variables[1].assign(float(rank))
tf.function(lambda: hvd.broadcast_variables(variables, root_rank=the_half.ranks[0], process_set=the_half,
                                            name="vars"))()
close(variables[1], float(the_half.ranks[0]))
assert hvd.broadcast_object({"from": rank}, root_rank=1) == {"from": 1}
assert hvd.allgather_object(rank * 10, process_set=the_half) == [r * 10 for r in the_half.ranks]
hvd.barrier()
hvd.barrier(process_set=the_half)
assert 0 <= hvd.join() < size

# ---- SyncBatchNormalization against BatchNormalization over the concatenated batch -----------
import keras  # noqa: E402 - only this section needs Keras

batches = [tf.reshape(tf.sin(tf.range(float((r + 2) * 3 * 4)) * (r + 1.5)), (r + 2, 3, 4))
           for r in range(size)]  # uneven batch sizes, channels last


def batch_norms(layer_class, **options):
    layer = layer_class(momentum=0.5, **options)
    layer.build((None, 3, 4))
    layer.gamma.assign(tf.range(1.0, 5.0))
    layer.beta.assign(tf.range(4.0) / 10)
    return layer


def normalize(layer, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        loss = tf.reduce_sum(tf.sin(y) * tf.range(1.0, 5.0))
    return y, tape.gradient(loss, [x, layer.gamma, layer.beta])


reference = batch_norms(keras.layers.BatchNormalization)
whole = tf.concat(batches, 0)
want_y, (want_dx, want_gamma, want_beta) = normalize(reference, whole)
offset = sum(r + 2 for r in range(rank))
for traced in (False, True):
    synced = batch_norms(hvd.SyncBatchNormalization)
    run = tf.function(normalize) if traced else normalize
    got_y, (got_dx, got_gamma, got_beta) = run(synced, batches[rank])
    close(got_y, want_y[offset:offset + rank + 2], 1e-4, 1e-4)
    # float32 statistics from sums of squares: not summed in the reference's order
    close(got_dx, want_dx[offset:offset + rank + 2], 1e-4, 1e-4)  # sum of the ranks' losses
    close(hvd.allreduce(got_gamma, op=hvd.Sum), want_gamma, 1e-4, 1e-4)
    close(hvd.allreduce(got_beta, op=hvd.Sum), want_beta, 1e-4, 1e-4)
    close(synced.moving_mean, reference.moving_mean, 1e-4, 1e-4)
    close(synced.moving_variance, reference.moving_variance, 1e-4, 1e-4)
    close(synced(batches[rank], training=False),
          reference(batches[rank], training=False), 1e-4, 1e-4)
assert synced.name.startswith("sync_batch_normalization")
half_batches = [batches[r] for r in the_half.ranks]
in_half = batch_norms(hvd.SyncBatchNormalization, process_set=the_half)
half_offset = sum(r + 2 for r in the_half.ranks[:the_half.ranks.index(rank)])
close(in_half(batches[rank], training=True),
      batch_norms(keras.layers.BatchNormalization)(tf.concat(half_batches, 0), training=True)
      [half_offset:half_offset + rank + 2], 1e-4, 1e-4)
# Inside a model trained with fit: the replicas' moving statistics agree.
model = keras.Sequential([keras.Input((3, 4)), hvd.SyncBatchNormalization(), keras.layers.Flatten(),
                          keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse", jit_compile=False)
model.fit(batches[rank], tf.ones([rank + 2, 1]), batch_size=8, epochs=2, verbose=0)
moving = model.layers[0].moving_mean
close(hvd.allreduce(moving, op=hvd.Max), hvd.allreduce(moving, op=hvd.Min))

# ---- misuse ----------------------------------------------------------------------------------
report("jit", lambda: tf.function(lambda: hvd.allreduce(mine), jit_compile=True)())
report("grad-max", lambda: distributed_gradient(lambda x: hvd.allreduce(x, op=hvd.Max), mine))
report("op", lambda: hvd.allreduce(mine, op=7))
report("list", lambda: hvd.allreduce([mine]))
report("sparse-min", lambda: hvd.allreduce(rows, op=hvd.Min))
report("unregistered", lambda: hvd.allreduce(mine, process_set=hvd.ProcessSet([0])))
report("barrier-graph", lambda: tf.function(lambda: hvd.barrier())())
report("tape-op", lambda: hvd.DistributedGradientTape(tf.GradientTape(), op=hvd.Max))
report("grouped-gather-list", lambda: hvd.grouped_allgather(mine))
report("grouped-gather-scalar", lambda: hvd.grouped_allgather([mine, tf.constant(1.0)]))
report("grouped-scatter-op", lambda: hvd.grouped_reducescatter([mine], op=hvd.Max))
report("grouped-scatter-scalar", lambda: hvd.grouped_reducescatter([tf.constant(1.0)]))
report("sync-fused", lambda: hvd.SyncBatchNormalization(fused=True))
report("sync-synchronized", lambda: hvd.SyncBatchNormalization(synchronized=True))
report("shape", lambda: tf.function(lambda: hvd.allreduce(tf.ones([3 + rank]), name="shape"))())
if rank not in first_half.ranks:
    report("non-member", lambda: hvd.allreduce(mine, process_set=first_half))
    report("non-member-graph",
           lambda: tf.function(lambda: hvd.allreduce(mine, process_set=first_half))())
close(hvd.allreduce(mine, op=hvd.Sum), tf.reduce_sum(everyone, 0))  # still works after errors
print("tf api ok", flush=True)
hvd.shutdown()
