"""tutti: collective communication on process sets, from Python.

The core API works on NumPy arrays (contiguous CPU memory, passed by pointer). `tutti.torch` is
the Horovod-compatible PyTorch API (CPU and CUDA tensors). The library is libtutti.so, loaded through ctypes: set
TUTTI_LIBRARY to its path if it is not found next to this package, in a build tree or on the
system path.

    import numpy as np, tutti
    tutti.init()                      # rank, size, coordinator from tuttirun's environment
    total = tutti.allreduce(np.ones(4, np.float32))
    tutti.shutdown()
"""
import atexit
import ctypes

import numpy as np

from . import _capi
from . import _compression
from ._core import Buffer, Handle, Runtime
from .errors import check as _check
from .errors import (AbortedError, AuthFailedError, CoordinatorLostError, DeviceUnavailableError,
                     DuplicateNameError, EvictedError, LimitExceededError, InternalError,
                     InvalidArgumentError, MismatchError, MixedDevicesError, NotAMemberError,
                     PeerLostError,
                     ReformedError, SetRemovedError, ShutDownError, StalledError, TimeoutError,
                     TuttiError,
                     UnknownSetError, UnsupportedError, VersionMismatchError)

__version__ = "0.13.0"

Sum, Average, Min, Max, Product = (_capi.OP_SUM, _capi.OP_AVERAGE, _capi.OP_MIN, _capi.OP_MAX,
                                   _capi.OP_PRODUCT)
WORLD = _capi.WORLD

_NUMPY_TO_TUTTI = {np.dtype(np.float16): _capi.DTYPE_FLOAT16,
                   np.dtype(np.float32): _capi.DTYPE_FLOAT32,
                   np.dtype(np.float64): _capi.DTYPE_FLOAT64,
                   np.dtype(np.int8): _capi.DTYPE_INT8, np.dtype(np.uint8): _capi.DTYPE_UINT8,
                   np.dtype(np.int32): _capi.DTYPE_INT32, np.dtype(np.int64): _capi.DTYPE_INT64,
                   np.dtype(np.int16): _capi.DTYPE_INT16, np.dtype(np.bool_): _capi.DTYPE_BOOL}
_TUTTI_TO_NUMPY = {v: k for k, v in _NUMPY_TO_TUTTI.items()}

_runtime = None


def _buffer(array, writable=False, what="array"):
    if not isinstance(array, np.ndarray):
        raise InvalidArgumentError(f"{what} must be a numpy.ndarray, not {type(array).__name__}")
    if array.dtype not in _NUMPY_TO_TUTTI:
        raise InvalidArgumentError(f"{what} has dtype {array.dtype}, which tutti does not reduce; "
                                   f"use one of {', '.join(str(d) for d in _NUMPY_TO_TUTTI)}")
    if not array.flags.c_contiguous:
        if writable:
            raise InvalidArgumentError(f"{what} must be C-contiguous to be written in place")
        array = np.ascontiguousarray(array)
    if writable and not array.flags.writeable:
        raise InvalidArgumentError(f"{what} is read-only")
    return Buffer(array.ctypes.data, _NUMPY_TO_TUTTI[array.dtype], array.shape, array)


def _new_array(dtype, shape):
    array = np.empty(shape, _TUTTI_TO_NUMPY[dtype])
    return array, array.ctypes.data


def _rt():
    if _runtime is None:
        raise InvalidArgumentError("tutti is not initialized: call tutti.init() first")
    return _runtime


# ---- lifetime and the world ---------------------------------------------------------------------
def init(coordinator=None, job=None, token=None, rank=None, size=None, static_sets=(),
         timeout_ms=0, fusion_threshold=None, cycle_time_ms=None, cache_capacity=None,
         timeline=None, transport=None, comm=None):
    """Joins the job (arguments left None come from the environment, as tuttirun sets it).
    Static process sets get ids 1, 2, ... in the order given. `transport`: "auto" (shared memory
    within a host, TCP across), "tcp", "shm" or, in MPI mode, "mpi" (docs/transports.md). `comm`: an mpi4py
    communicator for MPI mode (libtutti_mpi.so, docs/launchers.md): ranks and the coordinator
    come from it, collectively over its processes."""
    global _runtime
    if _runtime is not None:
        return _runtime
    _runtime = Runtime(coordinator, job, token, rank, size, [list(s) for s in static_sets],
                       timeout_ms, fusion_threshold, cycle_time_ms, cache_capacity, timeline,
                       transport, comm)
    return _runtime


def shutdown():
    """Leaves the job; pending requests fail with tutti.ShutDownError. Runs at exit too, so a
    script that never calls it still leaves cleanly (its peers see an orderly leave)."""
    global _runtime
    if _runtime is not None:
        runtime, _runtime = _runtime, None
        runtime.finalize()


atexit.register(shutdown)


def is_initialized():
    return _runtime is not None


_DEVICE_TYPES = {"cpu": _capi.DEVICE_CPU, "cuda": _capi.DEVICE_CUDA}


def device_check(device_type="cuda", index=0):
    """Returns None if this process can use tensors on the device ("cpu" always; "cuda": the
    library was built with GPU support, its GPU module and CUDA/NCCL load, and device `index`
    exists). Otherwise raises DeviceUnavailableError with the library's reason, or
    InvalidArgumentError for an unknown device type or a negative index. Needs no init()."""
    if isinstance(device_type, str):
        code = _DEVICE_TYPES.get(device_type.lower())
        if code is None:
            raise InvalidArgumentError(f"unknown device type {device_type!r}: use one of "
                                       f"{', '.join(repr(k) for k in _DEVICE_TYPES)}")
    elif isinstance(device_type, int) and not isinstance(device_type, bool):
        code = device_type  # a TUTTI_DEVICE_* value; the library judges it
    else:
        raise InvalidArgumentError(f"device_type must be 'cpu' or 'cuda', not "
                                   f"{type(device_type).__name__}")
    _check(_capi.tutti_device_check(code, int(index)))


def nccl_version():
    """The NCCL version code (e.g. 22809) of the GPU module CUDA tensors use; 0 if it runs
    without NCCL. Raises DeviceUnavailableError when the module cannot be loaded."""
    version = ctypes.c_int32()
    _check(_capi.tutti_nccl_version(ctypes.byref(version)))
    return version.value


def abort():
    _rt().abort()


def rank(): return _rt().rank()
def size(): return _rt().size()
def local_rank(): return _rt().local_rank()
def local_size(): return _rt().local_size()
def cross_rank(): return _rt().cross_rank()
def cross_size(): return _rt().cross_size()


def membership_epoch():
    """The membership epoch this process is in (docs/elastic.md): 1 for the job's first, growing
    each time an elastic job re-forms."""
    return _rt().membership_epoch()


def await_membership_epoch(after, timeout_ms=0):
    """Waits until this process is in a membership epoch later than `after` and returns it; an
    elastic job re-forms by itself after losing a rank (docs/elastic.md)."""
    return _rt().await_membership_epoch(after, timeout_ms)


def ranks_waiting():
    """How many ranks wait to join this running elastic job (docs/elastic.md, "Adding ranks").
    They are admitted when every live rank calls await_membership_epoch(membership_epoch()) at a
    commit, which `elastic.run` does when check_host_updates() raises HostsUpdatedInterrupt."""
    return _rt().ranks_waiting()


def add_process_set(ranks, timeout_ms=0):
    """Adds a process set (collective over its members) and returns its id."""
    return _rt().add_process_set(ranks, timeout_ms)


def remove_process_set(set_id, timeout_ms=0):
    _rt().remove_process_set(set_id, timeout_ms)


def process_set_autotune(set_id):
    """Autotunes the set's fusion threshold and algorithm cut-offs by the speed of its own
    collectives (docs/autotune.md), as TUTTI_AUTOTUNE=1 does for every set. One member's call is
    enough; it returns at once. NotAMemberError on a non-member."""
    _rt().process_set_autotune(set_id)


def process_set_from_comm(comm, timeout_ms=0):
    """MPI mode: the id of the set of this process's mpi4py communicator (-1 for None);
    collective over the job: every process passes its own (a colour of one Split, say)."""
    return _rt().process_set_from_comm(comm, timeout_ms)


def process_set_comm(set_id):
    """MPI mode: an mpi4py communicator of the set's members (None for a non-member)."""
    return _rt().process_set_comm(set_id)


def process_set_ranks(set_id): return _rt().process_set_ranks(set_id)
def process_set_included(set_id): return _rt().process_set_included(set_id)
def process_set_rank(set_id): return _rt().process_set_rank(set_id)


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


# ---- observability ------------------------------------------------------------------------------
def counters(): return _rt().counters()
def coordinator_counters(process_set=None):
    """What tuttid did for this job; with `process_set` (an id or ProcessSet), for that set alone
    (announcements, fast-path grants and exits: docs/steady-state.md)."""
    if process_set is None:
        return _rt().coordinator_counters()
    return _rt().coordinator_set_counters(getattr(process_set, "process_set_id", process_set))
def set_counters(process_set=WORLD):
    """What this rank did in one of its sets since init, without asking tuttid: {"collectives",
    "tensors", "tensors_fused", "bytes" (its input bytes), "wait_ns" (submission to the start of
    execution, summed over tensors), "execute_ns" (on the data plane, summed over
    collectives), "tensors_compressed", "adaptive_revisits", "adaptive_compress_choices"
    (library compression: docs/compression.md)}."""
    return _rt().set_counters(getattr(process_set, "process_set_id", process_set))
def peer_stats(peer, process_set=WORLD):
    """This rank's link with global rank `peer` in the set: {"transport": "shm", "tcp" or "mpi",
    "connected", "bytes_sent", "bytes_received"}."""
    return _rt().peer_stats(peer, process_set)


def start_timeline(path): _rt().timeline_start(path)
def stop_timeline(): _rt().timeline_stop()
