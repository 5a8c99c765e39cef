"""tutti's NumPy API, which the package exports: collectives on numpy.ndarrays (contiguous CPU
memory, passed by pointer), each NAME returning its result and NAME_async a tutti.Handle. Process
sets are integer ids here (tutti.WORLD is 0); the framework bindings take ProcessSet objects."""
import numpy as np

from . import _capi, _compression, _runtime
from ._core import Buffer
from ._dtypes import NUMPY_TO_TUTTI, TUTTI_TO_NUMPY, Sum
from .errors import InvalidArgumentError

WORLD = _capi.WORLD
_rt = _runtime.get


def _buffer(array, writable=False, what="array"):
    if not isinstance(array, np.ndarray):
        raise InvalidArgumentError(f"{what} must be a numpy.ndarray, not {type(array).__name__}")
    if array.dtype not in NUMPY_TO_TUTTI:
        raise InvalidArgumentError(f"{what} has dtype {array.dtype}, which tutti does not reduce; "
                                   f"use one of {', '.join(str(d) for d in NUMPY_TO_TUTTI)}")
    if not array.flags.c_contiguous:
        if writable:
            raise InvalidArgumentError(f"{what} must be C-contiguous to be written in place")
        array = np.ascontiguousarray(array)
    if writable and not array.flags.writeable:
        raise InvalidArgumentError(f"{what} is read-only")
    return Buffer(array.ctypes.data, NUMPY_TO_TUTTI[array.dtype], array.shape, array)


def _new_array(dtype, shape):
    array = np.empty(shape, TUTTI_TO_NUMPY[dtype])
    return array, array.ctypes.data


# ---- collectives: NAME_async returns a Handle, NAME waits -------------------------------------
class Compression:
    """Compression for the NumPy API's allreduce: the library's compressors
    (docs/compression.md). tutti.torch.Compression adds Horovod's framework-side ones."""
    none = None
    wire_fp16 = _compression.fp16
    wire_bf16 = _compression.bf16
    topk = staticmethod(_compression.topk)
    adaptive = staticmethod(_compression.adaptive)


def _wire(compression):
    if compression is None or isinstance(compression, _compression.WireCompressor):
        return compression
    raise InvalidArgumentError(f"compression must be one of tutti.Compression's, not "
                               f"{compression!r}")


def allreduce_async(array, out=None, op=Sum, name=None, process_set=WORLD, prescale_factor=1.0,
                    postscale_factor=1.0, priority=0, compression=None):
    """Reduces `array` across the set into `out` (a new array if None; may be `array`).
    `compression`: one of tutti.Compression's library compressors (docs/compression.md)."""
    source = _buffer(array)
    if out is None:
        out = np.empty_like(source.owner)
    target = _buffer(out, writable=True, what="out")
    return _rt().allreduce(source, target, name, process_set, op, prescale_factor,
                           postscale_factor, priority, finish=lambda request: out,
                           compression=_wire(compression))


def allreduce(array, out=None, **kwargs):
    return allreduce_async(array, out, **kwargs).wait()


def grouped_allreduce_async(arrays, op=Sum, name=None, process_set=WORLD, prescale_factor=1.0,
                            postscale_factor=1.0, priority=0, compression=None):
    sources = [_buffer(a) for a in arrays]
    outs = [np.empty_like(s.owner) for s in sources]
    targets = [_buffer(o, writable=True) for o in outs]
    return _rt().grouped_allreduce(sources, targets, name, process_set, op, prescale_factor,
                                   postscale_factor, priority, finish=lambda request: outs,
                                   compression=_wire(compression))


def grouped_allreduce(arrays, **kwargs):
    return grouped_allreduce_async(arrays, **kwargs).wait()


def broadcast_async(array, root, name=None, process_set=WORLD):
    """Broadcasts `array` in place from global rank `root`; the result is `array`."""
    return _rt().broadcast(_buffer(array, writable=True), root, name, process_set,
                           finish=lambda request: array)


def broadcast(array, root, **kwargs):
    return broadcast_async(array, root, **kwargs).wait()


def allgather_async(array, name=None, process_set=WORLD):
    return _rt().allgather(_buffer(array), _new_array, name, process_set)


def allgather(array, **kwargs):
    return allgather_async(array, **kwargs).wait()


def grouped_allgather_async(arrays, name=None, process_set=WORLD):
    return _rt().grouped_allgather([_buffer(a) for a in arrays], _new_array, name, process_set)


def grouped_allgather(arrays, **kwargs):
    return grouped_allgather_async(arrays, **kwargs).wait()


def reducescatter_async(array, op=Sum, name=None, process_set=WORLD, prescale_factor=1.0,
                        postscale_factor=1.0):
    return _rt().reducescatter(_buffer(array), _new_array, name, process_set, op,
                               prescale_factor, postscale_factor)


def reducescatter(array, **kwargs):
    return reducescatter_async(array, **kwargs).wait()


def alltoall_async(array, splits=None, name=None, process_set=WORLD):
    """Result: (received rows concatenated in set order, rows received from each member)."""
    return _rt().alltoall(_buffer(array), _new_array, splits, name, process_set)


def alltoall(array, splits=None, **kwargs):
    return alltoall_async(array, splits, **kwargs).wait()


def send_async(array, destination, tag=0, process_set=WORLD):
    return _rt().send(_buffer(array), destination, tag, process_set)


def send(array, destination, **kwargs):
    send_async(array, destination, **kwargs).wait()


def recv_async(array, source, tag=0, process_set=WORLD):
    """Receives into `array` (which must have exactly the sent size)."""
    return _rt().recv(_buffer(array, writable=True), source, tag, process_set,
                      finish=lambda request: array)


def recv(array, source, **kwargs):
    return recv_async(array, source, **kwargs).wait()


def barrier(process_set=WORLD):
    _rt().barrier(process_set).wait()


def join(process_set=WORLD, timeout_ms=0):
    """This rank has no more data for the set; returns the global rank that joined last."""
    return _rt().join(process_set, timeout_ms)
