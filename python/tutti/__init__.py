"""tutti: collective communication on process sets, from Python.

The package's own API works on NumPy arrays (contiguous CPU memory, passed by pointer;
tutti/_numpy_api.py); `tutti.torch`, `tutti.jax`, `tutti.tensorflow`, `tutti.keras` and
`tutti.mxnet` are the Horovod-compatible framework APIs. The library is libtutti.so, loaded
through ctypes: set TUTTI_LIBRARY to its path if it is not found next to this package, in a build
tree or on the system path.

    import numpy as np, tutti
    tutti.init()                      # rank, size, coordinator from tuttirun's environment
    total = tutti.allreduce(np.ones(4, np.float32))
    tutti.shutdown()

The parts every binding shares: _capi (the C ABI through ctypes), _runtime (the process's
runtime) and _submission (one ctypes call per collective), _core (buffers, requests, device
order), _dtypes, _process_sets (ProcessSet and its one registry), _arrays (any framework's arrays
in and out), _objects (Python objects), _world (the job: ranks, sets by id, devices, counters).
"""
from ._core import Buffer, Handle  # noqa: F401 - tutti.Handle is what NAME_async returns
from ._dtypes import Average, Max, Min, Product, Sum  # noqa: F401
from ._numpy_api import (Compression, WORLD, allgather, allgather_async,  # noqa: F401
                         allreduce, allreduce_async, alltoall, alltoall_async, barrier,
                         broadcast, broadcast_async, grouped_allgather, grouped_allgather_async,
                         grouped_allreduce, grouped_allreduce_async, join, recv, recv_async,
                         reducescatter, reducescatter_async, send, send_async)
from ._runtime import Runtime  # noqa: F401
from ._version import __version__  # noqa: F401
from ._world import (abort, add_process_set, await_membership_epoch,  # noqa: F401
                     coordinator_counters, counters, cross_rank, cross_size, device_check, init,
                     is_initialized, local_rank, local_size, membership_epoch, nccl_version,
                     peer_stats, process_set_autotune, process_set_comm, process_set_from_comm,
                     process_set_included, process_set_rank, process_set_ranks, rank,
                     ranks_waiting, remove_process_set, set_counters, shutdown, size,
                     start_timeline, stop_timeline)
from .errors import (AbortedError, AuthFailedError, CoordinatorLostError,  # noqa: F401
                     DeviceUnavailableError, DuplicateNameError, EvictedError, InternalError,
                     InvalidArgumentError, LimitExceededError, MismatchError, MixedDevicesError,
                     NotAMemberError, PeerLostError, ReformedError, SetRemovedError,
                     ShutDownError, StalledError, TimeoutError, TuttiError, UnknownSetError,
                     UnsupportedError, VersionMismatchError)
