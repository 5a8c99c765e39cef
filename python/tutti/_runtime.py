"""The runtime of this process: one tutti_init ... tutti_finalize, its queries, and one ctypes
call per collective (each returns a tutti._core.Handle). The module keeps the process's current
runtime: init() makes it, get() is what every binding submits through, shutdown() ends it (at
exit too). The collectives themselves are tutti/_submission.py's."""
import atexit
import ctypes
import os

from . import _capi
from ._core import _orphans
from ._submission import Submission, _name
from .errors import InvalidArgumentError, check


class Runtime(Submission):
    """One tutti runtime (tutti_init ... tutti_finalize)."""

    def __init__(self, coordinator=None, job=None, token=None, rank=None, size=None,
                 static_sets=(), timeout_ms=0, fusion_threshold=None, cycle_time_ms=None,
                 cache_capacity=None, timeline=None, transport=None, comm=None):
        options = _capi.InitOptions()
        options.struct_size = ctypes.sizeof(_capi.InitOptions)
        options.header_version = _capi.version()
        options.coordinator = _name(coordinator)
        options.job = _name(job)
        options.token = _name(token)
        options.rank = -1 if rank is None else rank
        options.size = -1 if size is None else size
        flat = [r for s in static_sets for r in s]
        sizes = (ctypes.c_int32 * max(len(static_sets), 1))(*[len(s) for s in static_sets])
        ranks = (ctypes.c_int32 * max(len(flat), 1))(*flat)
        options.num_static_sets = len(static_sets)
        options.static_set_sizes = ctypes.cast(sizes, _capi.c_int32_p)
        options.static_set_ranks = ctypes.cast(ranks, _capi.c_int32_p)
        options.timeout_ms = timeout_ms
        options.fusion_threshold_bytes = -1 if fusion_threshold is None else fusion_threshold
        options.cycle_time_ms = -1.0 if cycle_time_ms is None else cycle_time_ms
        options.cache_capacity = -1 if cache_capacity is None else cache_capacity
        options.timeline_path = _name(timeline)
        options.transport = _name(transport)
        handle = ctypes.c_void_p()
        self._mpi = None
        self._bootstrap = None
        if comm is None:
            from . import _zero_setup
            if _zero_setup.wanted(coordinator):
                # torchrun without a coordinator: rank 0 starts one (docs/launchers.md).
                boot = _zero_setup.TorchrunBootstrap((timeout_ms or 60000) / 1000.0)
                options.coordinator = _name(boot.coordinator)
                options.token = _name(token or boot.token)
                if job is None and not os.environ.get("TUTTI_JOB"):
                    options.job = _name(boot.job)
                self._bootstrap = boot
        if comm is not None:
            # MPI mode: rank, size and the coordinator come from the communicator.
            from . import _mpi
            if rank is not None or size is not None:
                raise InvalidArgumentError("rank and size come from the communicator in MPI mode")
            check(_mpi.lib().tutti_mpi_init(_mpi.handle(comm), ctypes.byref(options),
                                            ctypes.byref(handle)))
            self._mpi = _mpi
        else:
            try:
                check(_capi.tutti_init(ctypes.byref(options), ctypes.byref(handle)))
            except BaseException:
                if self._bootstrap is not None:
                    self._bootstrap.abandon()
                raise
        self._handle = handle

    # ---- lifetime ------------------------------------------------------------------------------
    @property
    def handle(self):
        if self._handle is None:
            raise InvalidArgumentError("tutti is not initialized (init() first, or after shutdown)")
        return self._handle

    def finalize(self):
        if self._handle is not None:
            handle, self._handle = self._handle, None
            _orphans.settle()
            try:
                if self._mpi is not None:
                    check(self._mpi.lib().tutti_mpi_finalize(handle))
                else:
                    check(_capi.tutti_finalize(handle))
            finally:
                if self._bootstrap is not None:
                    self._bootstrap.finish()
                    self._bootstrap = None
            _orphans.sweep(force=True)

    def abort(self):
        check(_capi.tutti_abort(self.handle))

    # ---- the world and process sets ------------------------------------------------------------
    def _int(self, function, *args):
        value = ctypes.c_int32()
        check(function(self.handle, *args, ctypes.byref(value)))
        return value.value

    def rank(self): return self._int(_capi.tutti_rank)
    def size(self): return self._int(_capi.tutti_size)
    def local_rank(self): return self._int(_capi.tutti_local_rank)
    def local_size(self): return self._int(_capi.tutti_local_size)
    def cross_rank(self): return self._int(_capi.tutti_cross_rank)
    def cross_size(self): return self._int(_capi.tutti_cross_size)

    def membership_epoch(self):
        value = ctypes.c_uint64()
        check(_capi.tutti_membership_epoch(self.handle, ctypes.byref(value)))
        return value.value

    def await_membership_epoch(self, after, timeout_ms=0):
        value = ctypes.c_uint64()
        check(_capi.tutti_await_membership_epoch(self.handle, after, timeout_ms,
                                                 ctypes.byref(value)))
        return value.value

    def ranks_waiting(self):
        value = ctypes.c_int32()
        check(_capi.tutti_ranks_waiting(self.handle, ctypes.byref(value)))
        return value.value

    def add_process_set(self, ranks, timeout_ms=0):
        ranks = list(ranks)
        array = (ctypes.c_int32 * max(len(ranks), 1))(*ranks)
        set_id = ctypes.c_int32()
        check(_capi.tutti_process_set_add(self.handle, array, len(ranks), timeout_ms,
                                          ctypes.byref(set_id)))
        return set_id.value

    def process_set_from_comm(self, comm, timeout_ms=0):
        """MPI mode: the set of this process's communicator (None: none), collective over the
        job; -1 for None. Every distinct group of the processes' communicators becomes a set."""
        if self._mpi is None:
            raise InvalidArgumentError("process sets from communicators need MPI mode: "
                                       "init(comm=MPI.COMM_WORLD)")
        set_id = ctypes.c_int32()
        check(self._mpi.lib().tutti_process_set_from_comm(
            self.handle, self._mpi.handle(comm), timeout_ms, ctypes.byref(set_id)))
        return set_id.value

    def process_set_comm(self, set_id):
        """MPI mode: a new mpi4py communicator of the set's members (None for a non-member);
        collective over the members."""
        if self._mpi is None:
            raise InvalidArgumentError("communicators of process sets need MPI mode: "
                                       "init(comm=MPI.COMM_WORLD)")
        comm_handle = self._mpi._comm_type()()
        check(self._mpi.lib().tutti_process_set_comm(self.handle, set_id, ctypes.byref(comm_handle)))
        comm = self._mpi.from_handle(comm_handle.value)
        return None if comm == self._mpi._mpi().COMM_NULL else comm

    def remove_process_set(self, set_id, timeout_ms=0):
        check(_capi.tutti_process_set_remove(self.handle, set_id, timeout_ms))

    def process_set_autotune(self, set_id):
        check(_capi.tutti_process_set_autotune(self.handle, set_id))

    def process_set_ranks(self, set_id):
        count = self._int(_capi.tutti_process_set_size, set_id)
        ranks = (ctypes.c_int32 * max(count, 1))()
        n = ctypes.c_int32()
        check(_capi.tutti_process_set_ranks(self.handle, set_id, ranks, count, ctypes.byref(n)))
        return [ranks[i] for i in range(n.value)]

    def process_set_included(self, set_id):
        return bool(self._int(_capi.tutti_process_set_included, set_id))

    def process_set_rank(self, set_id):
        return self._int(_capi.tutti_process_set_rank, set_id)

    # ---- observability -------------------------------------------------------------------------
    _TRANSPORTS = {1: "tcp", 2: "shm", 3: "mpi"}

    def peer_stats(self, peer, set_id=0):
        s = _capi.PeerStats()
        s.struct_size = ctypes.sizeof(_capi.PeerStats)
        check(_capi.tutti_get_peer_stats(self.handle, set_id, peer, ctypes.byref(s)))
        return {"transport": self._TRANSPORTS.get(s.transport, str(s.transport)),
                "connected": bool(s.connected), "bytes_sent": s.bytes_sent,
                "bytes_received": s.bytes_received}

    def counters(self):
        c = _capi.Counters()
        c.struct_size = ctypes.sizeof(_capi.Counters)
        check(_capi.tutti_get_counters(self.handle, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _capi.Counters._fields_[1:]}

    def coordinator_counters(self):
        c = _capi.CoordinatorCounters()
        c.struct_size = ctypes.sizeof(_capi.CoordinatorCounters)
        check(_capi.tutti_get_coordinator_counters(self.handle, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _capi.CoordinatorCounters._fields_[1:]}

    def set_counters(self, set_id):
        c = _capi.SetCounters()
        c.struct_size = ctypes.sizeof(_capi.SetCounters)
        check(_capi.tutti_get_set_counters(self.handle, set_id, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _capi.SetCounters._fields_[2:]}

    def coordinator_set_counters(self, set_id):
        c = _capi.CoordinatorSetCounters()
        c.struct_size = ctypes.sizeof(_capi.CoordinatorSetCounters)
        check(_capi.tutti_get_coordinator_set_counters(self.handle, set_id, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _capi.CoordinatorSetCounters._fields_[2:]}

    def timeline_start(self, path):
        check(_capi.tutti_timeline_start(self.handle, _name(path)))

    def timeline_stop(self):
        check(_capi.tutti_timeline_stop(self.handle))


# ---- the process's runtime ----------------------------------------------------------------------
_current = None


def init(**options):
    """Makes the process's runtime (Runtime's options) unless there is one; returns it."""
    global _current
    if _current is None:
        _current = Runtime(**options)
    return _current


def get():
    """The current runtime; InvalidArgumentError before init() and after shutdown()."""
    if _current is None:
        raise InvalidArgumentError("tutti is not initialized: call tutti.init() first")
    return _current


def is_initialized():
    return _current is not None


_at_shutdown = []  # what the bindings forget when a runtime ends (its sets, its handles)


def at_shutdown(forget):
    """Registers `forget()`, run when a runtime ends, before it is finalized."""
    _at_shutdown.append(forget)


def shutdown():
    """Ends the current runtime, if any; pending requests fail with tutti.ShutDownError."""
    global _current
    if _current is not None:
        for forget in _at_shutdown:
            forget()
        runtime, _current = _current, None
        runtime.finalize()


atexit.register(shutdown)
