"""Every collective of the NumPy API against NumPy references; prints "numpy api ok"."""
import sys

import numpy as np

import tutti

tutti.init()
rank, size = tutti.rank(), tutti.size()
assert tutti.is_initialized()
assert 0 <= tutti.local_rank() < tutti.local_size() and tutti.cross_size() >= 1


def contribution(r, shape, dtype):
    return (np.arange(np.prod(shape)).reshape(shape) % 7 + r).astype(dtype)


everyone = [contribution(r, (5, 3), np.float32) for r in range(size)]
mine = everyone[rank]
np.testing.assert_array_equal(tutti.allreduce(mine), sum(everyone))
np.testing.assert_array_equal(tutti.allreduce(mine, op=tutti.Max), np.max(everyone, axis=0))
np.testing.assert_allclose(tutti.allreduce(mine, op=tutti.Average, postscale_factor=2.0),
                           2 * sum(everyone) / size, rtol=1e-6)
for dtype in (np.float16, np.float64, np.int8, np.uint8, np.int32, np.int64, np.int16):
    values = [contribution(r, (6,), dtype) for r in range(size)]
    np.testing.assert_array_equal(tutti.allreduce(values[rank], name=f"dtype.{np.dtype(dtype)}"),
                                  np.sum(values, axis=0).astype(dtype))
# bool: sum is "or", min is "and"; integers scale as Horovod does, truncating after each factor.
flags = [np.array([r == 0, False, True, r % 2 == 1]) for r in range(size)]
np.testing.assert_array_equal(tutti.allreduce(flags[rank], name="bool.or"),
                              np.logical_or.reduce(flags))
np.testing.assert_array_equal(tutti.allreduce(flags[rank], op=tutti.Min, name="bool.and"),
                              np.logical_and.reduce(flags))
np.testing.assert_array_equal(
    tutti.allreduce(np.array([1, 2, 3], np.int32), name="int.scaled", prescale_factor=0.5),
    np.array([0, 1, 1], np.int32) * size)
# In place, and async with poll and wait.
inplace = mine.copy()
assert tutti.allreduce(inplace, out=inplace) is inplace
np.testing.assert_array_equal(inplace, sum(everyone))
handle = tutti.allreduce_async(mine, name="async")
handle.wait(timeout_ms=60000)
assert handle.poll()
grouped = tutti.grouped_allreduce([mine, mine[0]])
np.testing.assert_array_equal(grouped[1], sum(everyone)[0])

data = np.full(4, rank, np.int64)
tutti.broadcast(data, root=size - 1)
np.testing.assert_array_equal(data, np.full(4, size - 1))
gathered = tutti.allgather(np.full((rank + 1, 2), rank, np.int32))
np.testing.assert_array_equal(gathered, np.concatenate([np.full((r + 1, 2), r) for r in range(size)]))
first, second = tutti.grouped_allgather([np.full(1, rank, np.float64), np.full((2, 2), rank, np.int8)])
np.testing.assert_array_equal(first, np.arange(size))
assert second.shape == (2 * size, 2)
rows = 2 * size + 1
block = tutti.reducescatter(np.ones((rows, 3), np.float32))
expected_rows = rows // size + (1 if rank < rows % size else 0)
np.testing.assert_array_equal(block, np.full((expected_rows, 3), size, np.float32))
splits = [r + 1 for r in range(size)]
received, received_splits = tutti.alltoall(np.full((sum(splits), 2), rank, np.float32), splits)
assert received_splits == [rank + 1] * size
np.testing.assert_array_equal(received[:, 0], np.repeat(np.arange(size), rank + 1))
tutti.barrier()

# Process sets: a set of the even ranks; non-members get the id and take no part.
evens = list(range(0, size, 2))
set_id = tutti.add_process_set(evens)
assert tutti.process_set_ranks(set_id) == evens
assert tutti.process_set_included(set_id) == (rank in evens)
if rank in evens:
    assert tutti.process_set_rank(set_id) == evens.index(rank)
    np.testing.assert_array_equal(tutti.allreduce(np.ones(3, np.float32), process_set=set_id),
                                  np.full(3, len(evens), np.float32))
    tutti.remove_process_set(set_id)

# Point to point around a ring.
if size > 1:
    right, left = (rank + 1) % size, (rank - 1) % size
    sent = tutti.send_async(np.full(3, rank, np.float64), right, tag=7)
    got = tutti.recv(np.empty(3, np.float64), left, tag=7)
    sent.wait()
    np.testing.assert_array_equal(got, np.full(3, left))

c = tutti.counters()
assert c["collectives"] >= 10 and c["tensors_executed"] >= c["collectives"], c
assert tutti.coordinator_counters()["tensors_released"] >= 10
tutti.shutdown()
assert not tutti.is_initialized()
print("numpy api ok")
sys.exit(0)
