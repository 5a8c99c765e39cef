"""A framework's device arrays and hooks over the simulated GPU (TUTTI_GPU_MODULE: tests/gpu_sim),
for the array core's device path (tutti/_arrays.py): the simulator's device memory is host
memory, so an array is NumPy memory that speaks DLPack as CUDA memory of a chosen device, and the
hooks copy on the host after synchronizing their stream (a framework would copy on the stream)."""
import ctypes
import os

import numpy as np

from tutti import _arrays, _dlpack

sim = ctypes.CDLL(os.environ["TUTTI_GPU_MODULE"])
sim.tutti_sim_stream_create.restype = ctypes.c_void_p
sim.tutti_sim_stream_create.argtypes = [ctypes.c_int32]
sim.tutti_sim_stream_synchronize.argtypes = [ctypes.c_void_p]
sim.tutti_sim_communicators_created.restype = ctypes.c_int64


class SimArray:
    """A "device" array of simulated cuda:`device`: NumPy memory that speaks DLPack as CUDA."""

    def __init__(self, host, device=0):
        self.host = np.ascontiguousarray(host)
        self.device = device
        self.streams_asked = []

    def __dlpack_device__(self):
        return (_dlpack.CUDA, self.device)

    def __dlpack__(self, stream=None):
        self.streams_asked.append(stream)
        code = _arrays.dtype_code(self.host)
        return _dlpack.View(self.host.ctypes.data, code, self.host.shape,
                            (_dlpack.CUDA, self.device), self).__dlpack__()


class Fence:
    def __init__(self, stream):
        self.stream = stream

    def query(self):
        self.synchronize()
        return True

    def synchronize(self):
        assert sim.tutti_sim_stream_synchronize(self.stream) == 0


class SimHooks(_arrays.ArrayHooks):
    """A framework's hooks on the simulator: one stream of its own per device."""

    def __init__(self):
        self.streams = {}

    def stream(self, device_index):
        if device_index not in self.streams:
            self.streams[device_index] = sim.tutti_sim_stream_create(device_index)
        return self.streams[device_index]

    def sync(self, device_index):
        assert sim.tutti_sim_stream_synchronize(self.stream(device_index)) == 0

    def wait_stream(self, device_index, owners):
        return self.stream(device_index)

    def fence(self, device_index):
        return Fence(self.stream(device_index))

    def empty(self, dtype, shape, device_index):
        array = SimArray(_arrays.new_array(dtype, shape)[0], device_index)
        return array, array.host.ctypes.data

    def copy(self, value, device_index):
        self.sync(device_index)
        array = SimArray(value.host.copy(), device_index)
        return array, array.host.ctypes.data

    def copy_result(self, dtype, shape, pointer, device_index):
        self.sync(device_index)
        host = _arrays.new_array(dtype, shape)[0]
        if host.nbytes:
            ctypes.memmove(host.ctypes.data, pointer, host.nbytes)
        return SimArray(host, device_index)

    def values(self, array):
        """The array's values, read as the framework's stream has them."""
        assert isinstance(array, SimArray), type(array)  # a device array, as the input
        self.sync(array.device)
        return array.host


def check(name, condition, detail=""):
    print(f"{'ok' if condition else 'fail'} {name}{'' if condition else ': ' + str(detail)}",
          flush=True)
