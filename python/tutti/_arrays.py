"""The framework-neutral array core: any framework's array, in and out of tutti's collectives.

A framework binding (tutti.jax, tutti.tensorflow, tutti.keras, tutti.mxnet) hands its arrays to
these functions, with its ArrayHooks for device arrays, and wraps what they return in its own
type; nothing here imports a framework. How an array goes in, first match wins:

- a `numpy.ndarray`: as is;
- a CUDA array (its `__dlpack_device__` says CUDA) with the binding's `hooks`: by DLPack, zero-copy
  (tutti/_dlpack.py). Its producer order is the framework's stream (`hooks.stream`), which the
  capsule is asked for (`__dlpack__(stream=...)`) and the collective is ordered after, as
  tutti.torch orders after PyTorch's current stream. Results are arrays of the input's device
  (`hooks.empty`, `hooks.copy`, `hooks.copy_result`), ready on that stream once the call
  returned (tutti_request_stream_wait), or, for a framework without a stream to order after
  (`hooks.host_waits`: JAX, TensorFlow), ready for any stream (the call waited for the device);
- other device memory, or a CUDA array without hooks (`__cuda_array_interface__` alone, too):
  refused with UnsupportedError;
- `__array_interface__`, the buffer protocol or `__array__` (jax.Array, torch CPU tensors):
  `numpy.asarray`, a zero-copy view where the framework allows it (a jax.Array on the CPU gives a
  read-only view of its buffer);
- `__dlpack__` alone: `numpy.from_dlpack`, zero-copy;
- Python numbers and (nested) sequences: `numpy.asarray`, a copy.

A non-contiguous view is copied once into a contiguous array. Inputs are only read. Every result
is a new NumPy array that nothing else references, so a binding may hand its memory to its
framework without another copy. The calls run on the calling thread and return once their request
completed; the request keeps its input alive until then (tutti._core.Handle). bfloat16 (NumPy's
`ml_dtypes.bfloat16`, which jax uses) travels as itself.
"""
import functools
import types

import numpy as np

from . import _capi, _dlpack, _runtime
from ._core import Buffer, DeviceHooks
from ._dtypes import Sum, dtype_code, new_array
from .errors import InvalidArgumentError, UnsupportedError


class ArrayHooks(DeviceHooks):
    """What the core needs from a framework for its CUDA arrays, beside DeviceHooks' stream
    waits, fences and result copies. Streams are cudaStream_t values as ints (0: the legacy
    default stream). Every method runs on the calling thread."""

    def stream(self, device_index):
        """The stream the framework's work on the device is ordered on (its current stream):
        collectives wait for what it queued before the call, and results are used on it."""
        raise NotImplementedError

    def export_stream(self, device_index):
        """The `stream` argument for a device array's `__dlpack__`: the producer makes the data
        ready there, and the collective is ordered after `stream(device_index)`. By default the
        framework's stream itself (DLPack numbers the legacy default stream 1). A framework whose
        `__dlpack__` takes no stream (TensorFlow) waits for its queued work here and returns
        None."""
        return self.stream(device_index) or 1

    def empty(self, dtype, shape, device_index):
        """A new framework array of the tutti dtype and shape on the device, and its address:
        the library writes it on its own stream; the framework reads it after the wait."""
        raise NotImplementedError

    def copy(self, value, device_index):
        """A new framework array holding a copy of device array `value`, made on the stream, and
        its address."""
        raise NotImplementedError


def _device_memory(value):
    """(name, DLPack device) of the device holding `value` when it is not host memory, else
    None (the DLPack device is None for `__cuda_array_interface__` alone)."""
    device = _dlpack.device_of(value)
    if device is not None and device[0] != _dlpack.CPU:
        name = _dlpack.DEVICE_NAMES.get(device[0], f"DLPack device type {device[0]}")
        return f"{name}:{device[1]}", device
    if hasattr(value, "__cuda_array_interface__"):
        return "cuda", None
    return None


def _has_buffer_protocol(value):
    try:
        memoryview(value)
    except (TypeError, BufferError, ValueError):  # jax's bfloat16: BufferError; TensorFlow's
        # bfloat16 EagerTensor: ValueError (no buffer format for it); both have __array__
        return False
    return True


def host_array(value, what="array"):
    """`value` as a C-contiguous NumPy array of host memory, without a copy where its framework
    allows one (see the module's docstring). Raises UnsupportedError for device memory and
    InvalidArgumentError for what is not an array."""
    if isinstance(value, np.ndarray):
        array = value
    else:
        device = _device_memory(value)
        if device is not None:
            raise UnsupportedError(
                f"{what} is in {device[0]} memory: tutti's framework-neutral core takes device "
                f"memory only with a framework's device hooks, which this binding does not pass "
                f"yet (tutti.torch reduces CUDA tensors on the device); copy it to the host first")
        if (hasattr(value, "__array_interface__") or _has_buffer_protocol(value)
                or hasattr(value, "__array__")):
            array = np.asarray(value)
        elif hasattr(value, "__dlpack__"):
            array = np.from_dlpack(value)
        elif isinstance(value, (bool, int, float, list, tuple)):
            array = np.asarray(value)
        else:
            raise InvalidArgumentError(
                f"{what} must be an array (NumPy, the buffer protocol, __array_interface__, "
                f"__array__ or __dlpack__), not {type(value).__name__}")
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    return array


def buffer_of(value, what="array", hooks=None):
    """The tutti Buffer of `value`'s memory, host or (with `hooks`) CUDA; the Buffer keeps that
    memory alive."""
    if hooks is not None and not isinstance(value, np.ndarray):
        device = _dlpack.device_of(value)
        if device is not None and device[0] == _dlpack.CUDA:
            stream = hooks.stream(device[1])
            d = _dlpack.describe(value, hooks.export_stream(device[1]), what)
            return Buffer(d.pointer, d.dtype, d.shape, (value, d.capsule), _capi.DEVICE_CUDA,
                          d.device_index, stream, hooks)
    array = host_array(value, what)
    return Buffer(array.ctypes.data, dtype_code(array, what), array.shape, array)


def _device_output(source, value=None):
    """A Buffer for the result of a collective on device `source`: a new framework array from
    the hooks, empty, or a copy of `value`; and that array."""
    hooks, index = source.hooks, source.device_index
    array, pointer = hooks.copy(value, index) if value is not None else \
        hooks.empty(source.dtype, source.shape, index)
    return Buffer(pointer, source.dtype, source.shape, array, _capi.DEVICE_CUDA, index,
                  hooks.stream(index), hooks), array


def _output_like(source, what):
    """(Buffer, array) for an output shaped as `source`, on its device."""
    if source.device_type == _capi.DEVICE_CUDA:
        return _device_output(source)
    array = new_array(source.dtype, source.shape)[0]
    return buffer_of(array, what), array


# ---- collectives on host arrays: each returns new NumPy arrays once its request completed -------
def grouped_allreduce(values, op=Sum, name=None, set_id=_capi.WORLD, prescale_factor=1.0,
                      postscale_factor=1.0, hooks=None):
    """Reduces every array of `values` across the set in one request (fused as one step)."""
    sources = [buffer_of(v, f"tensors[{i}]", hooks) for i, v in enumerate(values)]
    if not sources:
        return []
    targets, outs = zip(*[_output_like(s, f"outputs[{i}]") for i, s in enumerate(sources)])
    outs = list(outs)
    return _runtime.get().grouped_allreduce(sources, list(targets), name, set_id, op,
                                          prescale_factor, postscale_factor, 0,
                                          finish=lambda request: outs).wait()


def allreduce(value, op=Sum, name=None, set_id=_capi.WORLD, prescale_factor=1.0,
              postscale_factor=1.0, hooks=None):
    source = buffer_of(value, "array", hooks)
    target, out = _output_like(source, "output")
    return _runtime.get().allreduce(source, target, name, set_id, op, prescale_factor,
                                  postscale_factor, 0, finish=lambda request: out).wait()


def grouped_broadcast(values, root, name=None, set_id=_capi.WORLD, hooks=None):
    """Copies of `values` as the set's global rank `root` has them: one request per array, all
    submitted before the first wait, so that they travel together."""
    copies = []
    for i, value in enumerate(values):
        source = buffer_of(value, f"tensors[{i}]", hooks)
        if source.device_type == _capi.DEVICE_CUDA:
            copies.append(_device_output(source, value))
        else:
            copy = np.array(host_array(value, f"tensors[{i}]"), order="C")
            copies.append((buffer_of(copy, f"tensors[{i}]"), copy))
    runtime = _runtime.get()
    handles = [runtime.broadcast(target, root, None if name is None else f"{name}.{i}", set_id)
               for i, (target, _) in enumerate(copies)]
    for handle in handles:
        handle.wait()
    return [copy for _, copy in copies]


def broadcast(value, root, name=None, set_id=_capi.WORLD, hooks=None):
    return grouped_broadcast([value], root, name, set_id, hooks)[0]


def allgather(value, name=None, set_id=_capi.WORLD, hooks=None):
    """Every member's array concatenated along the first dimension, in set order."""
    return _runtime.get().allgather(buffer_of(value, "array", hooks), new_array, name,
                                    set_id).wait()


def grouped_allgather(values, name=None, set_id=_capi.WORLD, hooks=None):
    """allgather of every array of `values` in one grouped request (negotiated as one unit)."""
    buffers = [buffer_of(v, f"tensors[{i}]", hooks) for i, v in enumerate(values)]
    if not buffers:
        return []
    return _runtime.get().grouped_allgather(buffers, new_array, name, set_id).wait()


def grouped_reducescatter(values, op=Sum, name=None, set_id=_capi.WORLD,
                          prescale_factor=1.0, postscale_factor=1.0, hooks=None):
    """reducescatter of every array of `values`. The C ABI has no grouped reducescatter: one
    request per array (named `name.i`, or unnamed in list order), all submitted from this thread
    before the first wait, so that every rank submits them in the same order and they travel
    together; each completes on its own."""
    buffers = [buffer_of(v, f"tensors[{i}]", hooks) for i, v in enumerate(values)]
    runtime = _runtime.get()
    handles = [runtime.reducescatter(b, new_array, None if name is None else f"{name}.{i}",
                                     set_id, op, prescale_factor, postscale_factor)
               for i, b in enumerate(buffers)]
    return [handle.wait() for handle in handles]


def reducescatter(value, op=Sum, name=None, set_id=_capi.WORLD, prescale_factor=1.0,
                  postscale_factor=1.0, hooks=None):
    """This member's rows of the reduction (the first members get one more when they do not
    divide evenly)."""
    return _runtime.get().reducescatter(buffer_of(value, "array", hooks), new_array, name, set_id,
                                      op, prescale_factor, postscale_factor).wait()


def alltoall(value, splits=None, name=None, set_id=_capi.WORLD, hooks=None):
    """(received rows concatenated in set order, rows received from each member as a host
    list)."""
    if splits is not None:
        splits = [int(s) for s in host_array(splits, "splits").reshape(-1)]
    return _runtime.get().alltoall(buffer_of(value, "array", hooks), new_array, splits, name,
                                 set_id).wait()


def with_hooks(hooks):
    """The collectives above with a binding's `hooks` passed to each (host arrays ignore them)."""
    return types.SimpleNamespace(**{
        name: functools.partial(globals()[name], hooks=hooks)
        for name in ("allreduce", "grouped_allreduce", "broadcast", "grouped_broadcast",
                     "allgather", "grouped_allgather", "reducescatter", "grouped_reducescatter",
                     "alltoall")})


def barrier(set_id=_capi.WORLD):
    _runtime.get().barrier(set_id).wait()

