"""tutti.mxnet's collectives on every rank against single-process references, in place and not,
in process sets; misuse prints "error KEY Class message" lines for the test to compare. Prints
"mxnet api ok"."""
import os
import warnings

import mxnet as mx
import numpy as np

import tutti.mxnet as hvd

launched = int(os.environ["TUTTI_SIZE"])  # what tuttirun started, known before init
first_half, whole = hvd.ProcessSet(range(launched // 2)), hvd.ProcessSet(range(launched))
hvd.init(process_sets=[first_half, whole])
rank, size = hvd.rank(), hvd.size()
assert first_half.process_set_id == 1 and whole.process_set_id is None  # the world's: as Horovod
assert 0 <= hvd.local_rank() < hvd.local_size() and hvd.cross_size() >= 1
second_half = hvd.add_process_set(list(range(size // 2, size)))  # 2 ranks: [1]; 4: [2, 3]


def contribution(r, shape=(3, 2), dtype=np.float32):
    return (np.arange(np.prod(shape)).reshape(shape) % 5 + 1 + r).astype(dtype)


def close(got, want):
    assert isinstance(got, mx.nd.NDArray), type(got)
    np.testing.assert_allclose(got.asnumpy().astype(np.float64), np.asarray(want, np.float64),
                               rtol=1e-5, atol=1e-6)


everyone = np.stack([contribution(r) for r in range(size)])
mine = mx.nd.array(contribution(rank))

# ---- allreduce: ops, factors, dtypes, in place, grouped, sets ----------------------------------
references = {hvd.Sum: everyone.sum(0), hvd.Average: everyone.mean(0), hvd.Min: everyone.min(0),
              hvd.Max: everyone.max(0), hvd.Product: everyone.prod(0)}
for op, want in references.items():
    close(hvd.allreduce(mine, op=op), want)
close(hvd.allreduce(mine), everyone.mean(0))  # op defaults to Average
close(hvd.allreduce(mine, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0),
      1.5 * everyone.sum(0))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    close(hvd.allreduce(mine, average=False), everyone.sum(0))
    close(hvd.allreduce(mine, average=True), everyone.mean(0))
assert [w.category for w in caught] == [DeprecationWarning] * 2
for dtype in (np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8):
    got = hvd.allreduce(mx.nd.array(contribution(rank, (4,), dtype), dtype=dtype), op=hvd.Sum)
    assert got.dtype == dtype, (got.dtype, dtype)
    close(got, sum(contribution(r, (4,), dtype).astype(np.float64) for r in range(size)))
flags = mx.nd.array([rank == 0, True], dtype="bool")  # bool: through asnumpy, not DLPack
assert hvd.allreduce(flags, op=hvd.Min).asnumpy().tolist() == [size == 1, True]
on_cpu1 = mx.nd.array(contribution(rank), ctx=mx.cpu(1))
assert hvd.allreduce(on_cpu1).context == mx.cpu(1)
assert hvd.allreduce(mine).context == mx.cpu(0) and hvd.allreduce(mine).shape == (3, 2)
as_np = hvd.allreduce(mine.as_np_ndarray(), op=hvd.Sum)
assert isinstance(as_np, mx.np.ndarray)
close(as_np.as_nd_ndarray(), everyone.sum(0))
in_place = mx.nd.array(contribution(rank))
assert hvd.allreduce_(in_place, op=hvd.Max) is in_place
close(in_place, everyone.max(0))
pair = [mx.nd.array(contribution(rank)), mx.nd.array([float(rank)], dtype=np.float64)]
reduced = hvd.grouped_allreduce(pair, op=hvd.Sum, name="pair")
close(reduced[0], everyone.sum(0))
close(reduced[1], [sum(range(size))])
close(pair[0], contribution(rank))  # the inputs are untouched
assert hvd.grouped_allreduce_(pair, name="pair_") == pair
close(pair[0], everyone.mean(0))
assert hvd.grouped_allreduce([]) == []
for the_set in (first_half, second_half):
    if rank in the_set.ranks:
        close(hvd.allreduce(mine, process_set=the_set), everyone[np.array(the_set.ranks)].mean(0))
    assert the_set.size() == len(the_set.ranks)
    assert the_set.rank() == (the_set.ranks.index(rank) if rank in the_set.ranks else -1)
    assert the_set.included() == (rank in the_set.ranks)

# ---- broadcast, allgather, alltoall, reducescatter, objects ------------------------------------
close(hvd.broadcast(mine, root_rank=size - 1), everyone[-1])
close(mine, contribution(rank))
target = mx.nd.array(contribution(rank))
assert hvd.broadcast_(target, root_rank=1, name="target") is target
close(target, everyone[1])
if rank in second_half.ranks:
    close(hvd.broadcast(mine, root_rank=second_half.ranks[-1], process_set=second_half),
          everyone[second_half.ranks[-1]])
flags = hvd.broadcast(mx.nd.array([rank, 1], dtype="bool"), root_rank=0)
assert flags.dtype == np.bool_ and flags.asnumpy().tolist() == [False, True]
rows = mx.nd.full((rank + 1, 2), rank)  # uneven first dimension
close(hvd.allgather(rows), np.concatenate([np.full((r + 1, 2), r) for r in range(size)]))
close(hvd.allgather(mine), everyone.reshape(size * 3, 2))
if rank in first_half.ranks:
    close(hvd.allgather(mine, process_set=first_half),
          everyone[np.array(first_half.ranks)].reshape(-1, 2))
sent = mx.nd.arange(2 * size) + 100 * rank
close(hvd.alltoall(sent),
      np.concatenate([np.arange(2.0 * size)[2 * rank:2 * rank + 2] + 100 * r for r in range(size)]))
splits = [1 + (rank + d) % 2 for d in range(size)]
for given in (splits, mx.nd.array(splits, dtype=np.int32)):
    received, counts = hvd.alltoall(mx.nd.arange(sum(splits)) + 100 * rank, splits=given)
    assert counts.dtype == np.int32 and counts.context == mx.cpu()
    assert counts.asnumpy().tolist() == [1 + (r + rank) % 2 for r in range(size)]
    assert received.shape[0] == sum(counts.asnumpy().tolist())
tall = np.stack([contribution(r, (size + 1, 2)) for r in range(size)])
scattered = hvd.reducescatter(mx.nd.array(tall[rank]), op=hvd.Sum)
start = sum((size + 1) // size + (1 if p < (size + 1) % size else 0) for p in range(rank))
close(scattered, tall.sum(0)[start:start + scattered.shape[0]])
close(hvd.reducescatter(mx.nd.array(tall[rank]), prescale_factor=2.0),  # Average by default
      2 * tall.mean(0)[start:start + scattered.shape[0]])
# grouped: allgather in one request, reducescatter one request per tensor submitted together
gathered = hvd.grouped_allgather([rows, mx.nd.array(contribution(rank), dtype=np.int32)],
                                 name="grouped.gather")
close(gathered[0], np.concatenate([np.full((r + 1, 2), r) for r in range(size)]))
assert gathered[1].dtype == np.int32
close(gathered[1], everyone.reshape(size * 3, 2))
wide = np.stack([contribution(r, (2 * size, 3)) for r in range(size)])
pair = hvd.grouped_reducescatter([mx.nd.array(tall[rank]), mx.nd.array(wide[rank])], op=hvd.Sum)
close(pair[0], tall.sum(0)[start:start + scattered.shape[0]])
close(pair[1], wide.sum(0)[2 * rank:2 * rank + 2])
pair = hvd.grouped_reducescatter([mx.nd.array(tall[rank]), mx.nd.array(wide[rank])],
                                 name="grouped.scatter", postscale_factor=3.0)
close(pair[1], 3 * wide.mean(0)[2 * rank:2 * rank + 2])
assert hvd.grouped_allgather([]) == [] and hvd.grouped_reducescatter([]) == []
if rank in second_half.ranks:
    position = second_half.ranks.index(rank)
    close(hvd.grouped_allgather([mine], process_set=second_half)[0],
          everyone[np.array(second_half.ranks)].reshape(-1, 2))
    share = 2 * size // len(second_half.ranks)
    close(hvd.grouped_reducescatter([mx.nd.array(wide[rank])], op=hvd.Sum,
                                    process_set=second_half)[0],
          wide[np.array(second_half.ranks)].sum(0)[position * share:(position + 1) * share])
assert hvd.broadcast_object({"from": rank}, root_rank=size - 1) == {"from": size - 1}
assert hvd.broadcast_object(None if rank else [1, 2]) == [1, 2]  # other types elsewhere
assert hvd.allgather_object(("r", rank)) == [("r", r) for r in range(size)]
if rank in second_half.ranks:
    assert hvd.allgather_object(rank, process_set=second_half) == second_half.ranks


# ---- misuse: exact classes and messages --------------------------------------------------------
def report(key, function):
    try:
        function()
    except Exception as error:  # noqa: BLE001 - the test compares class and message
        print(f"error {key} {type(error).__name__} {error}", flush=True)
    else:
        print(f"error {key} none", flush=True)


if rank not in first_half.ranks:
    report("non-member", lambda: hvd.allreduce(mine, process_set=first_half))
report("unregistered", lambda: hvd.allreduce(mine, process_set=hvd.ProcessSet([0])))
report("shape", lambda: hvd.allreduce(mx.nd.ones(3 + rank), name="shape"))
report("op", lambda: hvd.allreduce(mine, op=7))
report("average-and-op", lambda: hvd.allreduce(mine, average=True, op=hvd.Sum))
report("list", lambda: hvd.allreduce([mine]))
report("not-list", lambda: hvd.grouped_allreduce(mine))
report("numpy", lambda: hvd.allgather(np.ones(2)))
report("sparse", lambda: hvd.allreduce(mine.tostype("row_sparse")))
report("reducescatter-op", lambda: hvd.reducescatter(mine, op=hvd.Max))
report("grouped-scatter-op", lambda: hvd.grouped_reducescatter([mine], op=hvd.Max))
report("grouped-gather-not-list", lambda: hvd.grouped_allgather(mine))
report("grouped-gather-numpy", lambda: hvd.grouped_allgather([mine, np.ones(2)]))
close(hvd.allreduce(mine, op=hvd.Sum), everyone.sum(0))  # the job goes on after the failures
assert hvd.remove_process_set(second_half) and second_half.process_set_id is None
assert not hvd.remove_process_set(hvd.global_process_set)
print("mxnet api ok", flush=True)
hvd.shutdown()
assert first_half.process_set_id is None
