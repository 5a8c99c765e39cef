"""The framework-neutral array core: any framework's host array, in and out of tutti's collectives.

A framework binding (tutti.jax, and later TensorFlow, Keras, MXNet) hands its arrays to these
functions and wraps the NumPy arrays they return in its own type; nothing here imports a
framework. How an array goes in, first match wins:

- a `numpy.ndarray`: as is;
- memory on a device (`__cuda_array_interface__`, or a `__dlpack_device__` that is not the CPU):
  refused with UnsupportedError. The C ABI does take CUDA tensors, but a request on them needs
  the framework's stream (tutti._core.DeviceHooks), which only tutti.torch supplies;
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
import numpy as np

import tutti as _tutti
from . import _capi
from ._core import Buffer
from .errors import InvalidArgumentError, UnsupportedError

# DLPack's DLDeviceType codes (dlpack.h), for naming the device of a refused array.
_DLPACK_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
                   9: "vpi", 10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi",
                   15: "webgpu", 16: "hexagon"}
_DLPACK_CPU = 1


def _bfloat16():
    """NumPy's bfloat16 type (ml_dtypes, which jax and TensorFlow install); None without it."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


def dtype_code(array, what="array"):
    """The tutti dtype of a NumPy array; InvalidArgumentError (the NumPy API's message, with
    bfloat16 among the choices) for another."""
    code = _tutti._NUMPY_TO_TUTTI.get(array.dtype)
    if code is None and array.dtype.name == "bfloat16":
        code = _capi.DTYPE_BFLOAT16
    if code is None:
        names = [str(d) for d in _tutti._NUMPY_TO_TUTTI] + ["bfloat16"]
        raise InvalidArgumentError(f"{what} has dtype {array.dtype}, which tutti does not reduce; "
                                   f"use one of {', '.join(names)}")
    return code


def _device_memory(value):
    """The name of the device holding `value` when it is not host memory, else None."""
    if hasattr(value, "__cuda_array_interface__"):
        return "cuda"
    dlpack_device = getattr(value, "__dlpack_device__", None)
    if dlpack_device is not None:
        device_type, index = dlpack_device()
        if int(device_type) != _DLPACK_CPU:
            name = _DLPACK_DEVICES.get(int(device_type), f"DLPack device type {int(device_type)}")
            return f"{name}:{index}"
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
                f"{what} is in {device} memory: tutti's framework-neutral core takes host memory "
                f"only (tutti.torch alone reduces CUDA tensors on the device); copy it to the host "
                f"first")
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


def buffer_of(value, what="array"):
    """The tutti Buffer of `value`'s host memory; the Buffer keeps that memory alive."""
    array = host_array(value, what)
    return Buffer(array.ctypes.data, dtype_code(array, what), array.shape, array)


def new_array(dtype, shape):
    """An empty NumPy array of a tutti dtype, and its address (for results the library owns)."""
    if dtype == _capi.DTYPE_BFLOAT16:
        numpy_dtype = _bfloat16()
        if numpy_dtype is None:
            raise InvalidArgumentError("a bfloat16 result needs ml_dtypes (pip install ml_dtypes)")
    else:
        numpy_dtype = _tutti._TUTTI_TO_NUMPY[dtype]
    array = np.empty(shape, numpy_dtype)
    return array, array.ctypes.data


def _empty_like(buffer):
    return new_array(buffer.dtype, buffer.shape)[0]


# ---- collectives on host arrays: each returns new NumPy arrays once its request completed -------
def grouped_allreduce(values, op=_tutti.Sum, name=None, set_id=_tutti.WORLD, prescale_factor=1.0,
                      postscale_factor=1.0):
    """Reduces every array of `values` across the set in one request (fused as one step)."""
    sources = [buffer_of(v, f"tensors[{i}]") for i, v in enumerate(values)]
    if not sources:
        return []
    outs = [_empty_like(s) for s in sources]
    targets = [buffer_of(o, f"outputs[{i}]") for i, o in enumerate(outs)]
    return _tutti._rt().grouped_allreduce(sources, targets, name, set_id, op, prescale_factor,
                                          postscale_factor, 0, finish=lambda request: outs).wait()


def allreduce(value, op=_tutti.Sum, name=None, set_id=_tutti.WORLD, prescale_factor=1.0,
              postscale_factor=1.0):
    source = buffer_of(value)
    out = _empty_like(source)
    return _tutti._rt().allreduce(source, buffer_of(out, "output"), name, set_id, op,
                                  prescale_factor, postscale_factor, 0,
                                  finish=lambda request: out).wait()


def grouped_broadcast(values, root, name=None, set_id=_tutti.WORLD):
    """Copies of `values` as the set's global rank `root` has them: one request per array, all
    submitted before the first wait, so that they travel together."""
    copies = [np.array(host_array(v, f"tensors[{i}]"), order="C") for i, v in enumerate(values)]
    runtime = _tutti._rt()
    handles = [runtime.broadcast(buffer_of(c, f"tensors[{i}]"), root,
                                 None if name is None else f"{name}.{i}", set_id)
               for i, c in enumerate(copies)]
    for handle in handles:
        handle.wait()
    return copies


def broadcast(value, root, name=None, set_id=_tutti.WORLD):
    return grouped_broadcast([value], root, name, set_id)[0]


def allgather(value, name=None, set_id=_tutti.WORLD):
    """Every member's array concatenated along the first dimension, in set order."""
    return _tutti._rt().allgather(buffer_of(value), new_array, name, set_id).wait()


def grouped_allgather(values, name=None, set_id=_tutti.WORLD):
    """allgather of every array of `values` in one grouped request (negotiated as one unit)."""
    buffers = [buffer_of(v, f"tensors[{i}]") for i, v in enumerate(values)]
    if not buffers:
        return []
    return _tutti._rt().grouped_allgather(buffers, new_array, name, set_id).wait()


def grouped_reducescatter(values, op=_tutti.Sum, name=None, set_id=_tutti.WORLD,
                          prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of every array of `values`. The C ABI has no grouped reducescatter: one
    request per array (named `name.i`, or unnamed in list order), all submitted from this thread
    before the first wait, so that every rank submits them in the same order and they travel
    together; each completes on its own."""
    buffers = [buffer_of(v, f"tensors[{i}]") for i, v in enumerate(values)]
    runtime = _tutti._rt()
    handles = [runtime.reducescatter(b, new_array, None if name is None else f"{name}.{i}",
                                     set_id, op, prescale_factor, postscale_factor)
               for i, b in enumerate(buffers)]
    return [handle.wait() for handle in handles]


def reducescatter(value, op=_tutti.Sum, name=None, set_id=_tutti.WORLD, prescale_factor=1.0,
                  postscale_factor=1.0):
    """This member's rows of the reduction (the first members get one more when they do not
    divide evenly)."""
    return _tutti._rt().reducescatter(buffer_of(value), new_array, name, set_id, op,
                                      prescale_factor, postscale_factor).wait()


def alltoall(value, splits=None, name=None, set_id=_tutti.WORLD):
    """(received rows concatenated in set order, rows received from each member)."""
    if splits is not None:
        splits = [int(s) for s in host_array(splits, "splits").reshape(-1)]
    return _tutti._rt().alltoall(buffer_of(value), new_array, splits, name, set_id).wait()


def barrier(set_id=_tutti.WORLD):
    _tutti._rt().barrier(set_id).wait()

