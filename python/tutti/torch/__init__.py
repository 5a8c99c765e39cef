"""Horovod's PyTorch API on tutti: `import tutti.torch as hvd` in a Horovod training script.

Names and semantics follow `horovod.torch` 0.28 (ranks are global ranks; op defaults to
Average); docs/python.md has the porting table, name by name. Contiguous CPU and CUDA tensors are
passed by pointer without copies and kept alive by their request until it completes. A CUDA
tensor is produced by the current stream at submission, and synchronize() makes the current
stream (not the host) wait for the transfer (docs/python.md).

The module's parts: tensors (dtypes, buffers), ops (asynchronous collectives and handles), functions (the synchronous, differentiable ones),
adasum, state (objects, parameters, optimizer state), optimizer (DistributedOptimizer) and
sync_batch_norm. ProcessSet, its registry, init and shutdown are the core's
(tutti/_process_sets.py), shared with every binding.
"""
import os

from tutti import _horovod_env, _process_sets, _runtime, _world  # noqa: F401 - hvd._horovod_env
from tutti import errors as _errors
from tutti._process_sets import (ProcessSet, add_process_set, autotune,  # noqa: F401
                                 global_process_set, remove_process_set)
from tutti.errors import (HorovodInternalError, InvalidArgumentError,  # noqa: F401 - exported
                          UnsupportedError)

from .compression import Compression  # noqa: F401
from .functions import (allgather, allreduce, alltoall, broadcast, grouped_allgather,  # noqa: F401
                        grouped_allreduce, grouped_reducescatter, reducescatter)
from .ops import (Adasum, Average, Max, Min, Product, Sum, allgather_async,  # noqa: F401
                  allreduce_, allreduce_async, allreduce_async_, alltoall_async, barrier,
                  broadcast_, broadcast_async, broadcast_async_, grouped_allgather_async,
                  grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
                  grouped_reducescatter_async, join, poll, recv, reducescatter_async, send,
                  sparse_allreduce_async, synchronize)
from .state import (allgather_object, broadcast_object, broadcast_optimizer_state,  # noqa: F401
                    broadcast_parameters)


# ---- lifetime: the core's (tutti/_process_sets.py), shared with every binding ------------------
init, shutdown = _process_sets.init, _process_sets.shutdown


is_initialized = _world.is_initialized
rank, size = _world.rank, _world.size
local_rank, local_size = _world.local_rank, _world.local_size
cross_rank, cross_size = _world.cross_rank, _world.cross_size


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
        return _world.nccl_version()
    except _errors.DeviceUnavailableError:
        return 0


def cuda_built():
    """True when tutti's GPU module is installed and loads."""
    try:
        _world.nccl_version()
        return True
    except _errors.DeviceUnavailableError:
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
    return _world.is_initialized() and _runtime.get()._mpi is not None
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
    _world.start_timeline(file_path)


def stop_timeline():
    _world.stop_timeline()


from .optimizer import DistributedOptimizer  # noqa: E402,F401 - it uses the functions above
from .sync_batch_norm import SyncBatchNorm  # noqa: E402,F401
from . import elastic  # noqa: E402,F401 - hvd.elastic.run, hvd.elastic.TorchState, ...

# Calls on a set: some_set.allreduce(tensor) is allreduce(tensor, process_set=some_set).
_process_sets.set_calls.update({f.__name__: f for f in (
    allreduce, allreduce_, allreduce_async, allreduce_async_, grouped_allreduce,
    grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, allgather,
    allgather_async, grouped_allgather, grouped_allgather_async, broadcast, broadcast_,
    broadcast_async, broadcast_async_, alltoall, alltoall_async, reducescatter,
    reducescatter_async, grouped_reducescatter, grouped_reducescatter_async, barrier, join,
    broadcast_object, allgather_object, broadcast_parameters)})
