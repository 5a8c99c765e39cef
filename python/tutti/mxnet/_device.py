"""tutti.mxnet's device hooks (tutti/_arrays.py ArrayHooks): NDArrays on a GPU context through
DLPack, zero-copy, results on the input's context. Never run on a GPU: MXNet ships no GPU wheel
for the Python versions tutti is tested with (docs/frameworks.md).

MXNet exposes no stream; its engine orders its own work, and `to_dlpack_for_read` /
`to_dlpack_for_write` wait for the engine's operations on the array. So: inputs are exported
after their writers finished, outputs of allreduce and broadcast are new NDArrays whose pending
operations finished before the library writes them, and a wait holds the host until the
collective's device work finished (`host_waits`), so that MXNet may read the results at once.
Request-owned results (allgather, reducescatter, alltoall) are imported with `mx.nd.from_dlpack`
and copied.
"""
import mxnet as mx

from tutti import _arrays, _dlpack, _dtypes


class NDArrayView:
    """An NDArray as the core takes it (MXNet 1.9 has to_dlpack_for_read/_write, not the
    __dlpack__ protocol): read-only for inputs, writable for outputs."""

    def __init__(self, ndarray, writable=False):
        self.ndarray, self.writable = ndarray, writable

    def __dlpack__(self, stream=None):
        # MXNet takes no stream: both calls first wait for the engine's work on the array.
        if self.writable:
            return self.ndarray.to_dlpack_for_write()
        return self.ndarray.to_dlpack_for_read()

    def __dlpack_device__(self):
        context = self.ndarray.context
        if context.device_type == "gpu":
            return (_dlpack.CUDA, context.device_id)
        return (_dlpack.CPU, 0)


class MXNetHooks(_arrays.ArrayHooks):
    host_waits = True  # MXNet has no stream to order after: see the module's docstring

    def __init__(self, context=mx.gpu):
        # The context of device memory of DLPack type CUDA (mx.cpu only in tests, which run
        # these hooks' MXNet calls on a machine without a GPU).
        self.context = context
        self.dlpack_type = _dlpack.CUDA if context is mx.gpu else _dlpack.CPU

    def stream(self, device_index):
        return 0  # the legacy default stream, after the engine finished the array's writers

    def export_stream(self, device_index):
        return None

    def _made(self, ndarray):
        view = NDArrayView(ndarray, writable=True)
        return view, _dlpack.describe(view, None, "result").pointer

    def empty(self, dtype, shape, device_index):
        numpy_dtype = _dtypes.numpy_dtype(dtype)
        return self._made(mx.nd.zeros(shape, ctx=self.context(device_index), dtype=numpy_dtype))

    def copy(self, value, device_index):
        return self._made(value.ndarray.copy())

    def copy_result(self, dtype, shape, pointer, device_index):
        if not pointer:  # an empty result has no memory to import (nor does mx.nd.zeros
            # make one of a 0 dimension)
            host = _dtypes.new_array(dtype, shape)[0]
            return NDArrayView(mx.nd.array(host, ctx=self.context(device_index), dtype=host.dtype))
        view = _dlpack.View(pointer, dtype, shape, (self.dlpack_type, device_index))
        copy = mx.nd.from_dlpack(view.__dlpack__()).copy()
        copy.wait_to_read()  # the request, and its memory, is freed next
        return NDArrayView(copy, writable=True)


HOOKS = MXNetHooks()
