"""The array core's device path (tutti/_arrays.py, tutti/_dlpack.py) with DLPack producers over
the simulated GPU's memory (TUTTI_GPU_MODULE: tests/gpu_sim), as a framework binding would use it:
its hooks name a stream, allocate and copy device arrays, and copy request-owned results. The
simulator's device memory is host memory, so the checks read it after synchronizing the stream.
Each check prints "ok <name>"; every rank runs all of them."""
import ctypes

import numpy as np
from sim_device import SimArray, SimHooks, check

import tutti
from tutti import _arrays

tutti.init()
rank, size = tutti.rank(), tutti.size()
hooks = SimHooks()


def values(array):
    return hooks.values(array)


mine = SimArray(np.arange(6, dtype=np.float32).reshape(2, 3) + rank)
total = sum(np.arange(6, dtype=np.float32).reshape(2, 3) + r for r in range(size))
got = _arrays.allreduce(mine, name="allreduce", hooks=hooks)
check("allreduce", np.array_equal(values(got), total), values(got))
check("producer_stream", mine.streams_asked and mine.streams_asked[-1] == hooks.stream(0),
      mine.streams_asked)
half = SimArray(np.full(4, 3, np.float16))
got = _arrays.allreduce(half, prescale_factor=0.1, name="float16 prescale", hooks=hooks)
check("float16_scaled_in_float16", values(got).tobytes() == np.full(4, 0.599609375, np.float16)
      .tobytes() if size == 2 else True, values(got))
a, b = _arrays.grouped_allreduce([SimArray(np.ones(3, np.int32)), SimArray(np.full(2, 2, np.int64))],
                                 name="grouped", hooks=hooks)
check("grouped_allreduce", np.array_equal(values(a), np.full(3, size)) and
      np.array_equal(values(b), np.full(2, 2 * size)))
source = SimArray(np.full(3, float(rank)))
got = _arrays.broadcast(source, size - 1, name="broadcast", hooks=hooks)
check("broadcast", np.array_equal(values(got), np.full(3, size - 1.0)) and
      np.array_equal(values(source), np.full(3, float(rank))), values(got))
got = _arrays.allgather(SimArray(np.full((rank + 1, 2), rank, np.int64)), name="allgather",
                        hooks=hooks)
expected = np.concatenate([np.full((r + 1, 2), r, np.int64) for r in range(size)])
check("allgather", np.array_equal(values(got), expected), values(got))
x, y = _arrays.grouped_allgather([SimArray(np.array([rank], np.int8)),
                                  SimArray(np.full((2,), rank, np.uint8))], name="grouped gather",
                                 hooks=hooks)
check("grouped_allgather", np.array_equal(values(x), np.arange(size, dtype=np.int8)) and
      values(y).shape == (2 * size,))
got = _arrays.reducescatter(SimArray(np.ones((2 * size, 3), np.float64)), name="reducescatter",
                            hooks=hooks)
check("reducescatter", np.array_equal(values(got), np.full((2, 3), float(size))), values(got))
got, received = _arrays.alltoall(SimArray(np.arange(size, dtype=np.int32) + 10 * rank),
                                 splits=[1] * size, name="alltoall", hooks=hooks)
check("alltoall", np.array_equal(values(got), np.array([10 * r + rank for r in range(size)],
                                                       np.int32)) and list(received) == [1] * size,
      (values(got), received))
try:
    _arrays.grouped_allreduce([SimArray(np.ones(2, np.float32)), np.ones(2, np.float32)],
                              name="mixed", hooks=hooks)
except tutti.MixedDevicesError as e:
    check("mixed_devices", isinstance(e, RuntimeError) and "same device" in str(e), e)
else:
    check("mixed_devices", False, "no error")
try:
    _arrays.allreduce(SimArray(np.ones(2, np.float32)), name="no hooks")
except tutti.UnsupportedError as e:
    check("no_hooks", str(e).startswith("array is in cuda:0 memory: tutti's framework-neutral "
                                        "core takes device memory only with a framework's device "
                                        "hooks"),
          e)
else:
    check("no_hooks", False, "no error")

class HostWaitHooks(SimHooks):
    """A framework without a stream to order after (tutti.jax's hooks): inputs exported for the
    legacy default stream, and a wait that holds the host until the device work finished."""
    host_waits = True

    def stream(self, device_index):
        return 0

    def export_stream(self, device_index):
        return 1

    def wait_stream(self, device_index, owners):
        raise AssertionError("a host-waiting framework's stream wait was used")

    def fence(self, device_index):
        raise AssertionError("a host-waiting framework's fence was used")

    def copy_result(self, dtype, shape, pointer, device_index):
        # No stream to synchronize: the host wait saw the device work finish.
        host = _arrays.new_array(dtype, shape)[0]
        ctypes.memmove(host.ctypes.data, pointer, host.nbytes)
        return SimArray(host, device_index)


host_waits = HostWaitHooks()
mine = SimArray(np.full((3, 2), rank + 1.0, np.float32))
got = _arrays.allreduce(mine, name="host waits", hooks=host_waits)
# Read without synchronizing any stream: the wait itself must have seen the device work finish.
check("host_waits_allreduce", np.array_equal(got.host, np.full((3, 2), sum(range(1, size + 1))))
      and mine.streams_asked == [1], (got.host, mine.streams_asked))
got = _arrays.allgather(SimArray(np.full(2, rank, np.int16)), name="host waits gather",
                        hooks=host_waits)
check("host_waits_allgather", np.array_equal(got.host, np.repeat(np.arange(size), 2)), got.host)
tutti.shutdown()
