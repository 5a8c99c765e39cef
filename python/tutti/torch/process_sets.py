"""Process sets as horovod.torch has them: ProcessSet objects, registered by init(process_sets=)
or add_process_set(), invalidated when removed or when the runtime they belong to shuts down.

Horovod's contract: every rank calls add_process_set / remove_process_set, in the same order.
tutti never makes a non-member wait (its add and remove return at once), so the calls cannot
deadlock whatever sets overlap. Which ids are live is tracked per process here, because the C
API's add returns the id of an already live set where Horovod raises ValueError.
"""
import tutti as _tutti
from tutti.errors import InvalidArgumentError

# id -> ProcessSet registered in this process's current runtime (not the global set).
_live = {}


class ProcessSet:
    """A set of global ranks. Register it with init(process_sets=[...]) or add_process_set();
    until then (and after its removal) process_set_id is None."""

    process_set_id = None
    _ranks = None
    mpi_comm = None

    @property
    def ranks(self):
        """The set's global ranks: once registered, as they are now (an elastic job renumbers
        them when it re-forms; docs/elastic.md)."""
        if self.process_set_id is not None and _tutti.is_initialized():
            try:
                return _tutti.process_set_ranks(self.process_set_id)
            except _tutti.TuttiError:
                pass  # removed: the ranks it had
        return self._ranks

    @ranks.setter
    def ranks(self, value):
        self._ranks = value

    def __init__(self, ranks_or_comm):
        from tutti import _mpi
        if _mpi.is_comm(ranks_or_comm):
            # MPI mode (docs/launchers.md): registered with tutti_process_set_from_comm; its
            # ranks, until then, are the communicator's processes in MPI_COMM_WORLD.
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

    def _invalidate(self):
        self.process_set_id = None

    def _id(self):
        if self.process_set_id is None:
            raise InvalidArgumentError(f"process set {self.ranks} is not registered: pass it to "
                                       "init(process_sets=...) or add_process_set()")
        return self.process_set_id

    def size(self):
        """The number of ranks, or None if not registered (as Horovod)."""
        if self.process_set_id is None:
            return None
        return len(_tutti.process_set_ranks(self.process_set_id))

    def rank(self):
        """This process's position in the set (-1 if not a member), None if not registered."""
        if self.process_set_id is None:
            return None
        ranks = _tutti.process_set_ranks(self.process_set_id)
        me = _tutti.rank()
        return ranks.index(me) if me in ranks else -1

    def included(self):
        """Whether this process is a member; None if the set has no ranks yet."""
        if self.ranks is None:
            return None
        return _tutti.rank() in self.ranks

    def __str__(self):
        return (f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks}, "
                f"mpi_comm={self.mpi_comm})")

    __repr__ = __str__

    # Calls on a set: some_set.allreduce(tensor) is allreduce(tensor, process_set=some_set).
    def __getattr__(self, name):
        from . import _SET_METHODS
        function = _SET_METHODS.get(name)
        if function is None:
            raise AttributeError(name)
        return lambda *args, **kwargs: function(*args, process_set=self, **kwargs)


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def autotune(process_set=global_process_set):
    """tutti's own (Horovod tunes the whole job only, with HOROVOD_AUTOTUNE): tunes this set's
    fusion threshold and algorithm cut-offs by the measured speed of its own collectives
    (docs/autotune.md). One member's call is enough and returns at once; every member switches
    values at the same collective. NotAMemberError on a non-member."""
    _tutti.process_set_autotune(set_id(process_set))


def set_id(process_set):
    """The C id of a ProcessSet (or of an int id, as tutti's own API takes them)."""
    if process_set is None:
        return 0
    if isinstance(process_set, int) and not isinstance(process_set, bool):
        return process_set
    return process_set._id()


def position(process_set):
    """This rank's position in the set."""
    ranks = _tutti.process_set_ranks(set_id(process_set))
    return ranks.index(_tutti.rank())


def members(process_set):
    return _tutti.process_set_ranks(set_id(process_set))


def register_static(process_sets, ids):
    """After init: gives the sets passed to init their ids (a repeated rank list: the first
    object gets the id, the others are invalidated, as Horovod does; id 0, the world's rank
    list: invalidated)."""
    _live.clear()
    global_process_set.ranks = list(range(_tutti.size()))
    for process_set, new_id in zip(process_sets, ids):
        if new_id in _live or new_id == 0:
            process_set._invalidate()
        else:
            process_set.process_set_id = new_id
            _live[new_id] = process_set


def invalidate_all():
    """At shutdown: the sets of this runtime are gone (a later init starts over)."""
    for process_set in _live.values():
        process_set._invalidate()
    _live.clear()


def add_process_set(process_set):
    """Adds a set after init and returns it registered. Every rank calls it in the same order;
    non-members return at once. A set with the same ranks as a live one raises ValueError. A set
    of an mpi4py communicator (MPI mode) is collective over the job: every process passes its
    own communicator, and every distinct group becomes a set."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.mpi_comm is not None:
        new_id = _tutti.process_set_from_comm(process_set.mpi_comm)
    else:
        new_id = _tutti.add_process_set(process_set.ranks)
    if new_id in _live or new_id == 0:
        raise ValueError(f"Attempted to add a duplicate process set: {process_set}")
    process_set.process_set_id = new_id
    _live[new_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes a registered set and invalidates it; True on success. False for the global set
    or a set that is not registered (as Horovod). Non-members return at once."""
    if not isinstance(process_set, ProcessSet):
        raise InvalidArgumentError(f"remove_process_set takes a ProcessSet, not "
                                   f"{type(process_set).__name__}")
    old_id = process_set.process_set_id
    if old_id is None or old_id == 0:
        return False
    process_set._invalidate()
    _live.pop(old_id, None)
    _tutti.remove_process_set(old_id)
    return True
