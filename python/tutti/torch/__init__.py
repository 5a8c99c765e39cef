"""Horovod's PyTorch API on tutti: `import tutti.torch as hvd` in a Horovod training script.

Names and semantics follow `horovod.torch` 0.28 (ranks are global ranks; op defaults to
Average); docs/python.md has the porting table, name by name. Contiguous CPU and CUDA tensors are
passed by pointer without copies and kept alive by their request until it completes. A CUDA
tensor is produced by the current stream at submission, and synchronize() makes the current
stream (not the host) wait for the transfer (docs/python.md).

The module's parts: process_sets (ProcessSet and its registry), tensors (dtypes, buffers), ops
(asynchronous collectives and handles), functions (the synchronous, differentiable ones),
adasum, state (objects, parameters, optimizer state), optimizer (DistributedOptimizer) and
sync_batch_norm.
"""
import os

import tutti as _tutti
from tutti import _horovod_env
from tutti.errors import (HorovodInternalError, InvalidArgumentError,  # noqa: F401 - exported
                          UnsupportedError)

from . import process_sets as _process_sets
from .compression import Compression  # noqa: F401
from .functions import (allgather, allreduce, alltoall, broadcast, grouped_allgather,  # noqa: F401
                        grouped_allreduce, grouped_reducescatter, reducescatter)
from .ops import (Adasum, Average, Max, Min, Product, Sum, allgather_async,  # noqa: F401
                  allreduce_, allreduce_async, allreduce_async_, alltoall_async, barrier,
                  broadcast_, broadcast_async, broadcast_async_, grouped_allgather_async,
                  grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
                  grouped_reducescatter_async, join, poll, recv, reducescatter_async, send,
                  sparse_allreduce_async, synchronize)
from .process_sets import (ProcessSet, add_process_set, autotune,  # noqa: F401
                           global_process_set, remove_process_set)
from .state import (allgather_object, broadcast_object, broadcast_optimizer_state,  # noqa: F401
                    broadcast_parameters)


# ---- lifetime -----------------------------------------------------------------------------------
def init(comm=None, process_sets=None, **options):
    """Joins the job. `process_sets`: ProcessSet objects registered on every rank at once (ids
    1, 2, ... in order), or "dynamic" / None to add them later (tutti's sets are always
    dynamic). `comm`: an mpi4py communicator, for MPI mode (libtutti_mpi.so,
    docs/launchers.md): ranks, size and the coordinator come from it; ProcessSets of mpi4py
    communicators imply MPI.COMM_WORLD. A second init() while initialized does nothing; after
    shutdown() it joins again. Other keyword options go to tutti.init (coordinator, job,
    timeout_ms, transport, ...)."""
    from tutti import _mpi
    if comm is not None and not _mpi.is_comm(comm):
        raise UnsupportedError("init(comm=...) takes an mpi4py communicator (MPI mode); a list "
                               "of ranks as the world is not supported")
    if _tutti.is_initialized():
        return
    static = [] if process_sets in (None, "dynamic") else list(process_sets)
    if any(not isinstance(s, ProcessSet) for s in static):
        raise ValueError("process_sets must be a list of ProcessSet objects or 'dynamic'")
    from_comms = [s for s in static if s.mpi_comm is not None]
    static = [s for s in static if s.mpi_comm is None]
    if from_comms and comm is None:
        comm = _mpi._mpi().COMM_WORLD
    _horovod_env.read()
    # Repeated rank lists: Horovod gives the first object the id and invalidates the others; a
    # list equal to the world is the global set's, so its object is invalidated too.
    world = list(range(comm.Get_size())) if comm is not None else _world_ranks(options.get("size"))
    distinct = []
    for s in static:
        if s.ranks not in distinct and s.ranks != world:
            distinct.append(s.ranks)
    _tutti.init(static_sets=distinct, comm=comm, **options)
    _process_sets.register_static(
        static, [distinct.index(s.ranks) + 1 if s.ranks in distinct else 0 for s in static])
    for s in from_comms:  # in the order given, collectively: every process passes its own
        _process_sets.add_process_set(s)


def _world_ranks(size):
    """The world's ranks before init, from the size the library will read (options, then the
    launchers' variables in the library's order: client/runtime_options.cc); None if unknown."""
    if size is None:
        for name in ("TUTTI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE"):
            if os.environ.get(name, "").isdigit():
                size = int(os.environ[name])
                break
    return None if size is None else list(range(size))


def shutdown():
    """Leaves the job: pending requests fail, registered ProcessSets are invalidated."""
    from .ops import clear_handles
    clear_handles()
    _process_sets.invalidate_all()
    _tutti.shutdown()


is_initialized = _tutti.is_initialized
rank, size = _tutti.rank, _tutti.size
local_rank, local_size = _tutti.local_rank, _tutti.local_size
cross_rank, cross_size = _tutti.cross_rank, _tutti.cross_size


def is_homogeneous():
    """True when every host runs the same number of ranks."""
    sizes = allgather_object(local_size(), name="is_homogeneous")
    return len(set(sizes)) == 1


# ---- build queries: true of this tutti, in Horovod's types ---------------------------------------
# Horovod answers for its build; tutti's GPU support is a module loaded at run time, so these
# answer for the module: installed and loadable here (whether a device exists is
# tutti.device_check's question).
def nccl_built():
    """The NCCL version code (e.g. 22809) of tutti's GPU module; 0 when it cannot be loaded."""
    try:
        return _tutti.nccl_version()
    except _tutti.DeviceUnavailableError:
        return 0


def cuda_built():
    """True when tutti's GPU module is installed and loads."""
    try:
        _tutti.nccl_version()
        return True
    except _tutti.DeviceUnavailableError:
        return False


def mpi_threads_supported():
    return False  # tutti does not run on MPI; its calls are thread-safe regardless


def mpi_built():
    """Whether MPI mode's libtutti_mpi.so sits beside the loaded libtutti (docs/launchers.md)."""
    from tutti import _capi
    here = os.path.dirname(_capi.library_path)
    return any(os.path.exists(os.path.join(here, n)) for n in ("libtutti_mpi.so.0", "libtutti_mpi.so"))


def mpi_enabled():
    """Whether this runtime was made from an MPI communicator (init(comm=...))."""
    return _tutti.is_initialized() and _tutti._rt()._mpi is not None
def gloo_built(): return False
def gloo_enabled(): return False
def ccl_built(): return False
def ddl_built(): return False
def rocm_built(): return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing the timeline (Chrome trace format) to `file_path`."""
    if mark_cycles:
        raise UnsupportedError("start_timeline(mark_cycles=True) is not supported: tutti's "
                               "timeline has no cycle markers")
    _tutti.start_timeline(file_path)


def stop_timeline():
    _tutti.stop_timeline()


from .optimizer import DistributedOptimizer  # noqa: E402,F401 - it uses the functions above
from .sync_batch_norm import SyncBatchNorm  # noqa: E402,F401
from . import elastic  # noqa: E402,F401 - hvd.elastic.run, hvd.elastic.TorchState, ...

# Calls on a set: some_set.allreduce(tensor) is allreduce(tensor, process_set=some_set).
_SET_METHODS = {f.__name__: f for f in (
    allreduce, allreduce_, allreduce_async, allreduce_async_, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, allgather,
    allgather_async, grouped_allgather, grouped_allgather_async, broadcast, broadcast_,
    broadcast_async, broadcast_async_, alltoall, alltoall_async, reducescatter,
    reducescatter_async, grouped_reducescatter, grouped_reducescatter_async, barrier, join,
    broadcast_object, allgather_object, broadcast_parameters)}

