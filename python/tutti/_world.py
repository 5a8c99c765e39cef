"""The job as every binding sees it: joining and leaving (init, shutdown), ranks, membership
epochs, process sets by id, devices, and what the library counted. Collectives are elsewhere: the
NumPy API (tutti/_numpy_api.py), the array core (tutti/_arrays.py), tutti.torch."""
import ctypes

from . import _capi, _runtime
from .errors import InvalidArgumentError
from .errors import check as _check

WORLD = _capi.WORLD
_rt = _runtime.get


# ---- lifetime and the world ---------------------------------------------------------------------
def init(coordinator=None, job=None, token=None, rank=None, size=None, static_sets=(),
         timeout_ms=0, fusion_threshold=None, cycle_time_ms=None, cache_capacity=None,
         timeline=None, transport=None, comm=None):
    """Joins the job (arguments left None come from the environment, as tuttirun sets it).
    Static process sets get ids 1, 2, ... in the order given. `transport`: "auto" (shared memory
    within a host, TCP across), "tcp", "shm" or, in MPI mode, "mpi" (docs/transports.md).
    `comm`: an mpi4py communicator for MPI mode (libtutti_mpi.so, docs/launchers.md): ranks and
    the coordinator come from it, collectively over its processes."""
    return _runtime.init(coordinator=coordinator, job=job, token=token, rank=rank, size=size,
                         static_sets=[list(s) for s in static_sets], timeout_ms=timeout_ms,
                         fusion_threshold=fusion_threshold, cycle_time_ms=cycle_time_ms,
                         cache_capacity=cache_capacity, timeline=timeline, transport=transport,
                         comm=comm)


def shutdown():
    """Leaves the job; pending requests fail with tutti.ShutDownError, and the ProcessSets
    registered in it are invalidated. Runs at exit too, so a script that never calls it still
    leaves cleanly (its peers see an orderly leave)."""
    _runtime.shutdown()


is_initialized = _runtime.is_initialized


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
