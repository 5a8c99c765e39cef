"""tutti.jax's collectives on every rank, eagerly and inside jax.jit, against single-process
references (values and gradients); misuse prints "error KEY Class message" lines for the test to
compare. Prints "jax api ok"."""
import array
import os

import jax
import jax.numpy as jnp
import numpy as np

import tutti.errors
import tutti.jax as hvd
from tutti import _arrays

launched = int(os.environ["TUTTI_SIZE"])  # what tuttirun started, known before init
first_half, whole = hvd.ProcessSet(range(launched // 2)), hvd.ProcessSet(range(launched))
hvd.init(process_sets=[first_half, whole])
rank, size = hvd.rank(), hvd.size()
assert first_half.process_set_id == 1 and whole.process_set_id is None  # the world's: as Horovod
assert 0 <= hvd.local_rank() < hvd.local_size() and hvd.cross_size() >= 1
second_half = hvd.add_process_set(list(range(size // 2, size)))  # 2 ranks: [1]; 4: [2, 3]
the_sets = [hvd.global_process_set, first_half, second_half]


def contribution(r, shape=(3, 2), dtype=jnp.float32):
    return (jnp.arange(np.prod(shape)).reshape(shape) % 5 + 1 + r).astype(dtype)


def close(got, want, **tolerance):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=1e-5, atol=1e-6, **tolerance)


jitted = {}


def both(name, function):
    """function eagerly and jitted (one trace per name), checking they agree; the eager result."""
    eager = function()
    traced = jax.jit(function)()
    jax.tree_util.tree_map(lambda a, b: np.testing.assert_array_equal(np.asarray(a),
                                                                      np.asarray(b)),
                           eager, traced)
    return eager


# ---- allreduce: every op, factors, dtypes, pytrees, sets ---------------------------------------
everyone = jnp.stack([contribution(r) for r in range(size)])
mine = contribution(rank)
references = {hvd.Sum: everyone.sum(0), hvd.Average: everyone.mean(0), hvd.Min: everyone.min(0),
              hvd.Max: everyone.max(0), hvd.Product: everyone.prod(0)}
for op, want in references.items():
    close(both(f"op{op}", lambda: hvd.allreduce(mine, op=op)), want)
close(both("scaled", lambda: hvd.allreduce(mine, op=hvd.Sum, prescale_factor=0.5,
                                           postscale_factor=3.0)), 1.5 * everyone.sum(0))
assert hvd.allreduce(mine).dtype == jnp.float32 and hvd.allreduce(mine).shape == (3, 2)
for dtype in (jnp.int32, jnp.bfloat16, jnp.float16, jnp.int8, jnp.uint8):
    got = both(f"dtype{dtype}", lambda: hvd.allreduce(contribution(rank, (4,), dtype),
                                                      op=hvd.Sum))
    assert got.dtype == dtype, (got.dtype, dtype)
    close(got, sum(contribution(r, (4,), dtype).astype(jnp.float32) for r in range(size)))
tree = {"w": mine, "b": [mine[0], jnp.float32(rank)]}
reduced = both("tree", lambda: hvd.grouped_allreduce(tree, op=hvd.Sum, name="tree"))
assert jax.tree_util.tree_structure(reduced) == jax.tree_util.tree_structure(tree)
close(reduced["w"], everyone.sum(0))
close(reduced["b"][1], sum(range(size)))
assert hvd.grouped_allreduce({}) == {}
for the_set in (first_half, second_half):
    if rank in the_set.ranks:
        close(both(f"set{the_set.process_set_id}", lambda: hvd.allreduce(mine, process_set=the_set)),
              everyone[np.array(the_set.ranks)].mean(0))
    assert the_set.size() == len(the_set.ranks)
    assert the_set.rank() == (the_set.ranks.index(rank) if rank in the_set.ranks else -1)
close(hvd.allreduce(np.ones(3, np.float32), op=hvd.Sum), np.full(3, size))  # NumPy in, jax out
assert isinstance(hvd.allreduce(np.ones(3, np.float32)), jax.Array)

# ---- gradients against a single process holding every rank's input ----------------------------
weights = jnp.arange(1.0, size + 1.0)


def loss_of(r, reduced):
    return weights[r] * jnp.sum(jnp.sin(reduced) * (jnp.arange(6.0).reshape(3, 2) + r))


for op, reduce_all, factors in (
        (hvd.Average, lambda xs: xs.mean(0), (1.0, 1.0)),
        (hvd.Sum, lambda xs: 0.5 * 0.25 * xs.sum(0), (0.5, 0.25))):
    reference = jax.grad(lambda xs: sum(loss_of(r, reduce_all(xs)) for r in range(size)))(
        everyone)[rank]
    distributed = jax.grad(lambda x: loss_of(rank, hvd.allreduce(
        x, op=op, prescale_factor=factors[0], postscale_factor=factors[1])))
    close(distributed(mine), reference)
    close(jax.jit(distributed)(mine), reference)
# A pytree through grouped_allreduce, within a set.
members = np.array(first_half.ranks)
if rank in first_half.ranks:
    reference = jax.grad(lambda xs: sum(
        loss_of(r, xs[members].mean(0)) + weights[r] * jnp.sum(xs[members].mean(0)[0] ** 2)
        for r in members))(everyone)[rank]
    grouped = jax.jit(jax.grad(lambda x: (lambda t: loss_of(rank, t["a"]) + weights[rank] * jnp.sum(
        t["b"] ** 2))(hvd.grouped_allreduce({"a": x, "b": x[0]}, process_set=first_half))))
    close(grouped(mine), reference)

# ---- allgather, broadcast, reducescatter, alltoall, barrier, objects ---------------------------
rows = jnp.full((rank + 1, 2), rank, jnp.float32)  # uneven: eagerly only
close(hvd.allgather(rows), np.concatenate([np.full((r + 1, 2), r) for r in range(size)]))
close(both("allgather", lambda: hvd.allgather(mine)), everyone.reshape(size * 3, 2))
close(both("broadcast", lambda: hvd.broadcast(mine, root_rank=size - 1)), everyone[-1])
params = {"layer": {"w": mine, "b": mine[:, 0]}, "step": jnp.int32(rank)}
synced = both("bv", lambda: hvd.broadcast_variables(params, root_rank=1))
close(synced["layer"]["w"], everyone[1])
assert int(synced["step"]) == 1 and hvd.broadcast_parameters is hvd.broadcast_variables
tall = jnp.stack([contribution(r, (size + 1, 2)) for r in range(size)])
scattered = both("rs", lambda: hvd.reducescatter(tall[rank], op=hvd.Sum))
start = sum(((size + 1) // size + (1 if p < (size + 1) % size else 0)) for p in range(rank))
close(scattered, tall.sum(0)[start:start + scattered.shape[0]])
close(hvd.reducescatter(tall[rank], op=hvd.Average, prescale_factor=2.0), 2 * tall.mean(0)[
    start:start + scattered.shape[0]])
sent = jnp.arange(2.0 * size) + 100 * rank
close(both("a2a", lambda: hvd.alltoall(sent)),
      np.concatenate([np.arange(2.0 * size)[2 * rank:2 * rank + 2] + 100 * r for r in range(size)]))
splits = [1 + (rank + d) % 2 for d in range(size)]
received, counts = hvd.alltoall(jnp.arange(float(sum(splits))), splits=splits)
assert counts.tolist() == [1 + (r + rank) % 2 for r in range(size)], counts
assert received.shape[0] == sum(counts.tolist())
hvd.barrier()
hvd.barrier(process_set=first_half) if rank in first_half.ranks else None
assert hvd.broadcast_object({"from": rank}, root_rank=size - 1) == {"from": size - 1}
assert hvd.allgather_object(("r", rank)) == [("r", r) for r in range(size)]
if rank in second_half.ranks:
    assert hvd.allgather_object(rank, process_set=second_half) == second_half.ranks

# ---- the array core with other framework-neutral inputs, on the job ----------------------------
class DLPackOnly:
    def __init__(self, a): self.a = a
    def __dlpack__(self, **kwargs): return self.a.__dlpack__(**kwargs)
    def __dlpack_device__(self): return self.a.__dlpack_device__()


close(_arrays.allreduce(array.array("f", [rank, 1.0])), [sum(range(size)), size])
close(_arrays.allreduce(DLPackOnly(np.full(2, rank, np.int64))), [sum(range(size))] * 2)
as_bytes, as_list = _arrays.grouped_allreduce([bytearray([rank, 1]), [2.5]])
assert as_bytes.dtype == np.uint8 and as_bytes.tolist() == [sum(range(size)), size]
close(as_list, [2.5 * size])

# ---- misuse: exact classes and messages --------------------------------------------------------
def report(key, function):
    try:
        function()
    except Exception as error:  # noqa: BLE001 - the test compares class and message
        message = str(error)
        if isinstance(error, jax.errors.JaxRuntimeError):  # a callback's error: its last line
            message = [line for line in message.splitlines()
                       if hasattr(tutti.errors, line.split(":")[0])][-1]
        print(f"error {key} {type(error).__name__} {message}", flush=True)
    else:
        print(f"error {key} none", flush=True)


if rank not in first_half.ranks:
    report("non-member", lambda: hvd.allreduce(mine, process_set=first_half))
    report("non-member-jit", lambda: jax.jit(
        lambda x: hvd.allreduce(x, process_set=first_half))(mine))
report("unregistered", lambda: hvd.allreduce(mine, process_set=hvd.ProcessSet([0])))
report("shape", lambda: hvd.allreduce(jnp.ones(3 + rank), name="shape"))
report("grad-max", lambda: jax.grad(lambda x: jnp.sum(hvd.allreduce(x, op=hvd.Max)))(mine))
report("splits-jit", lambda: jax.jit(lambda x: hvd.alltoall(x, splits=[1] * size))(sent))
report("op", lambda: hvd.allreduce(mine, op=7))
report("pytree", lambda: hvd.allreduce([mine]))
report("jit-rows", lambda: jax.jit(hvd.allgather)(rows).block_until_ready())
# After a failed callback the job and JAX go on.
close(jax.jit(lambda x: hvd.allreduce(x, op=hvd.Sum))(mine), everyone.sum(0))
assert hvd.remove_process_set(second_half) and second_half.process_set_id is None
assert not hvd.remove_process_set(hvd.global_process_set)
hvd.barrier()
print("jax api ok", flush=True)
hvd.shutdown()
assert first_half.process_set_id is None
