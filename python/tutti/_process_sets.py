"""Process sets as Horovod has them, for every binding (tutti.torch, .jax, .tensorflow, .keras,
.mxnet): ProcessSet objects over tutti's integer set ids, the one registry of those registered in
this process's runtime, and the bindings' init and shutdown, which register and invalidate them.

Horovod's contract: every rank calls add_process_set / remove_process_set in the same order.
tutti never makes a non-member wait (its add and remove return at once on it), so overlapping
sets cannot deadlock. Which ids are live is tracked here, because the C API's add returns the id
of an already live set where Horovod raises ValueError. Registrations belong to one runtime: its
shutdown invalidates them (a later init starts again at id 1).
"""
import os

from . import _capi, _horovod_env, _mpi, _runtime, _world
from .errors import InvalidArgumentError, TuttiError, UnsupportedError

WORLD = _capi.WORLD
_live = {}  # id -> ProcessSet registered in the current runtime (not the global set)

# Calls on a set, for a binding that offers them (tutti.torch): some_set.allreduce(tensor) is
# allreduce(tensor, process_set=some_set).
set_calls = {}


class ProcessSet:
    """A set of global ranks, or of an mpi4py communicator's processes (MPI mode). Register it
    with init(process_sets=[...]) or add_process_set(); until then (and after its removal)
    process_set_id is None."""

    process_set_id = None
    _ranks = None
    mpi_comm = None

    def __init__(self, ranks_or_comm):
        if _mpi.is_comm(ranks_or_comm):
            # Registered with tutti_process_set_from_comm; its ranks, until then, are the
            # communicator's processes in MPI_COMM_WORLD.
            self.mpi_comm = ranks_or_comm
            MPI = _mpi._mpi()
            group = ranks_or_comm.Get_group()
            world = MPI.COMM_WORLD.Get_group()
            self.ranks = sorted(MPI.Group.Translate_ranks(group, list(range(group.Get_size())),
                                                          world))
            group.Free()
            world.Free()
            return
        try:
            ranks = sorted(ranks_or_comm)
        except TypeError:
            raise ValueError("ProcessSet should be initialized with a list of process ranks or "
                             "an mpi4py Comm object") from None
        if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks or "
                             "an mpi4py Comm object")
        self.ranks = ranks

    @property
    def ranks(self):
        """The set's global ranks: once registered, as they are now (an elastic job renumbers
        them when it re-forms; docs/elastic.md)."""
        if self.process_set_id is not None and _runtime.is_initialized():
            try:
                return _world.process_set_ranks(self.process_set_id)
            except TuttiError:
                pass  # removed: the ranks it had
        return self._ranks

    @ranks.setter
    def ranks(self, value):
        self._ranks = value

    def _id(self):
        if self.process_set_id is None:
            raise InvalidArgumentError(f"process set {self.ranks} is not registered: pass it to "
                                       "init(process_sets=...) or add_process_set()")
        return self.process_set_id

    def size(self):
        """The number of ranks, or None if not registered (as Horovod)."""
        if self.process_set_id is None:
            return None
        return len(_world.process_set_ranks(self.process_set_id))

    def rank(self):
        """This process's position in the set (-1 if not a member), None if not registered."""
        if self.process_set_id is None:
            return None
        ranks = _world.process_set_ranks(self.process_set_id)
        me = _world.rank()
        return ranks.index(me) if me in ranks else -1

    def included(self):
        """Whether this process is a member; None if the set has no ranks yet."""
        if self.ranks is None:
            return None
        return _world.rank() in self.ranks

    def __str__(self):
        return (f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks}, "
                f"mpi_comm={self.mpi_comm})")

    __repr__ = __str__

    def __getattr__(self, name):
        function = set_calls.get(name)
        if function is None:
            raise AttributeError(name)
        return lambda *args, **kwargs: function(*args, process_set=self, **kwargs)


global_process_set = ProcessSet([])
global_process_set.process_set_id = WORLD


def set_id(process_set):
    """The C id of a ProcessSet, or of an int id as tutti's NumPy API takes them (None: the
    world's)."""
    if process_set is None:
        return WORLD
    if isinstance(process_set, int) and not isinstance(process_set, bool):
        return process_set
    if isinstance(process_set, ProcessSet):
        return process_set._id()
    raise InvalidArgumentError(f"process_set must be a ProcessSet or a set id, not "
                               f"{type(process_set).__name__}")


def members(process_set):
    """The set's global ranks, as the runtime has them now."""
    return _world.process_set_ranks(set_id(process_set))


def position(process_set):
    """This rank's position in the set."""
    return members(process_set).index(_world.rank())


def autotune(process_set=global_process_set):
    """tutti's own (Horovod tunes the whole job only, with HOROVOD_AUTOTUNE): tunes this set's
    fusion threshold and algorithm cut-offs by the measured speed of its own collectives
    (docs/autotune.md). One member's call is enough and returns at once; every member switches
    values at the same collective. NotAMemberError on a non-member."""
    _world.process_set_autotune(set_id(process_set))


# ---- the bindings' init and shutdown -------------------------------------------------------------
def init(comm=None, process_sets=None, **options):
    """Joins the job, as every binding's init: `process_sets`, ProcessSet objects registered on
    every rank at once (ids 1, 2, ... in order), or "dynamic" / None to add them later (tutti's
    sets are always dynamic). A rank list given twice, or equal to the world's, leaves its later
    objects unregistered, as Horovod does. `comm`: an mpi4py communicator, for MPI mode
    (libtutti_mpi.so, docs/launchers.md); ProcessSets of mpi4py communicators imply
    MPI.COMM_WORLD. A second init while initialized does nothing; after shutdown it joins again.
    Other keyword options go to tutti.init (coordinator, job, timeout_ms, transport, ...)."""
    if comm is not None and not _mpi.is_comm(comm):
        raise UnsupportedError("init(comm=...) takes an mpi4py communicator (MPI mode); a list "
                               "of ranks as the world is not supported")
    if _runtime.is_initialized():
        return
    static = [] if process_sets in (None, "dynamic") else list(process_sets)
    if any(not isinstance(s, ProcessSet) for s in static):
        raise ValueError("process_sets must be a list of ProcessSet objects or 'dynamic'")
    from_comms = [s for s in static if s.mpi_comm is not None]
    static = [s for s in static if s.mpi_comm is None]
    if from_comms and comm is None:
        comm = _mpi._mpi().COMM_WORLD
    _horovod_env.read()
    world = list(range(comm.Get_size())) if comm is not None else _world_ranks(options.get("size"))
    distinct = []
    for s in static:
        if s.ranks not in distinct and s.ranks != world:
            distinct.append(s.ranks)
    _world.init(static_sets=distinct, comm=comm, **options)
    _register_static(static, [distinct.index(s.ranks) + 1 if s.ranks in distinct else WORLD
                              for s in static])
    for s in from_comms:  # in the order given, collectively: every process passes its own
        add_process_set(s)


def _world_ranks(size):
    """The world's ranks before init, from the size the library will read (options, then the
    launchers' variables in the library's order: client/runtime_options.cc); None if unknown."""
    if size is None:
        for name in ("TUTTI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "WORLD_SIZE"):
            if os.environ.get(name, "").isdigit():
                size = int(os.environ[name])
                break
    return None if size is None else list(range(size))


def _register_static(process_sets, ids):
    """After init: gives the sets passed to init their ids (a repeated rank list: the first
    object gets the id, the others are invalidated; the world's rank list: invalidated)."""
    _live.clear()
    global_process_set.ranks = list(range(_world.size()))
    for process_set, new_id in zip(process_sets, ids):
        if new_id in _live or new_id == WORLD:
            process_set.process_set_id = None
        else:
            process_set.process_set_id = new_id
            _live[new_id] = process_set


def _invalidate_all():
    """When the runtime ends: the sets registered in it are gone (a later init starts over)."""
    for process_set in _live.values():
        process_set.process_set_id = None
    _live.clear()


_runtime.at_shutdown(_invalidate_all)


def shutdown():
    """Leaves the job; the sets registered in it are invalidated."""
    _runtime.shutdown()


def add_process_set(process_set):
    """Registers a set (a ProcessSet or a list of ranks) after init and returns it. Every rank
    calls it in the same order; non-members return at once. A set with the ranks of a live one
    raises ValueError. A set of an mpi4py communicator (MPI mode) is collective over the job:
    every process passes its own communicator, and every distinct group becomes a set."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.mpi_comm is not None:
        new_id = _world.process_set_from_comm(process_set.mpi_comm)
    else:
        new_id = _world.add_process_set(process_set.ranks)
    if new_id in _live or new_id == WORLD:
        raise ValueError(f"Attempted to add a duplicate process set: {process_set}")
    process_set.process_set_id = new_id
    _live[new_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes a registered set and invalidates it; True on success. False for the global set or
    a set that is not registered (as Horovod). Non-members return at once."""
    if not isinstance(process_set, ProcessSet):
        raise InvalidArgumentError(f"remove_process_set takes a ProcessSet, not "
                                   f"{type(process_set).__name__}")
    old_id = process_set.process_set_id
    if old_id is None or old_id == WORLD:
        return False
    process_set.process_set_id = None
    _live.pop(old_id, None)
    _world.remove_process_set(old_id)
    return True
