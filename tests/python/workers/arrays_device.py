"""The array core's device path (tutti/_arrays.py, tutti/_dlpack.py) with DLPack producers over
the simulated GPU's memory (TUTTI_GPU_MODULE: tests/gpu_sim), as a framework binding would use it:
its hooks name a stream, allocate and copy device arrays, and copy request-owned results. The
simulator's device memory is host memory, so the checks read it after synchronizing the stream.
Each check prints "ok <name>"; every rank runs all of them."""
import ctypes
import os

import numpy as np

import tutti
from tutti import _arrays, _capi, _dlpack

tutti.init()
rank, size = tutti.rank(), tutti.size()
sim = ctypes.CDLL(os.environ["TUTTI_GPU_MODULE"])
sim.tutti_sim_stream_create.restype = ctypes.c_void_p
sim.tutti_sim_stream_create.argtypes = [ctypes.c_int32]
sim.tutti_sim_stream_synchronize.argtypes = [ctypes.c_void_p]


class SimArray:
    """A "device" array of simulated cuda:0: NumPy memory that speaks DLPack as CUDA memory."""

    def __init__(self, host):
        self.host = np.ascontiguousarray(host)
        self.streams_asked = []

    def __dlpack_device__(self):
        return (_dlpack.CUDA, 0)

    def __dlpack__(self, stream=None):
        self.streams_asked.append(stream)
        code = _arrays.dtype_code(self.host)
        return _dlpack.View(self.host.ctypes.data, code, self.host.shape, (_dlpack.CUDA, 0),
                            self).__dlpack__()


class Fence:
    def __init__(self, stream):
        self.stream = stream

    def query(self):
        self.synchronize()
        return True

    def synchronize(self):
        assert sim.tutti_sim_stream_synchronize(self.stream) == 0


class SimHooks(_arrays.ArrayHooks):
    """A framework's hooks on the simulator: one stream of its own, host copies after it ran."""

    def __init__(self):
        self.current = sim.tutti_sim_stream_create(0)

    def sync(self):
        assert sim.tutti_sim_stream_synchronize(self.current) == 0

    def stream(self, device_index):
        assert device_index == 0
        return self.current

    def wait_stream(self, device_index, owners):
        return self.current

    def fence(self, device_index):
        return Fence(self.current)

    def empty(self, dtype, shape, device_index):
        array = SimArray(_arrays.new_array(dtype, shape)[0])
        return array, array.host.ctypes.data

    def copy(self, value, device_index):
        self.sync()  # a framework would copy on the stream; the simulator's memory is the host's
        array = SimArray(value.host.copy())
        return array, array.host.ctypes.data

    def copy_result(self, dtype, shape, pointer, device_index):
        self.sync()
        host = _arrays.new_array(dtype, shape)[0]
        if host.nbytes:
            ctypes.memmove(host.ctypes.data, pointer, host.nbytes)
        return SimArray(host)


hooks = SimHooks()


def values(array):
    assert isinstance(array, SimArray), type(array)  # a device array, as the input
    hooks.sync()
    return array.host


def check(name, condition, detail=""):
    print(f"{'ok' if condition else 'fail'} {name}{'' if condition else ': ' + str(detail)}",
          flush=True)


mine = SimArray(np.arange(6, dtype=np.float32).reshape(2, 3) + rank)
total = sum(np.arange(6, dtype=np.float32).reshape(2, 3) + r for r in range(size))
got = _arrays.allreduce(mine, name="allreduce", hooks=hooks)
check("allreduce", np.array_equal(values(got), total), values(got))
check("producer_stream", mine.streams_asked and mine.streams_asked[-1] == hooks.current,
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
    check("no_hooks", str(e).startswith("array is in cuda:0 memory: this call takes host memory"),
          e)
else:
    check("no_hooks", False, "no error")
tutti.shutdown()
