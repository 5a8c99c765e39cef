"""Process sets for the framework bindings built on the array core (tutti.jax; later TensorFlow,
Keras, MXNet): horovod's ProcessSet objects over tutti's integer set ids, with no framework in
them. tutti.torch keeps its own (with mpi4py communicators); the semantics are the same.

Horovod's contract: every rank calls add_process_set / remove_process_set in the same order.
tutti never makes a non-member wait (its add and remove return at once on it), so overlapping
sets cannot deadlock. Which ids are live is tracked per process here, because the C API's add
returns the id of an already live set where Horovod raises ValueError. Registrations belong to
one runtime: shutdown() invalidates them (a later init starts again at id 1).
"""
import tutti as _tutti
from tutti import _horovod_env
from .errors import InvalidArgumentError

_live = {}  # id -> ProcessSet registered in this process's current runtime (not the world's)


class ProcessSet:
    """A set of global ranks. Register it with init(process_sets=[...]) or add_process_set();
    until then (and after its removal) process_set_id is None."""

    process_set_id = None

    def __init__(self, ranks):
        try:
            ranks = sorted(ranks)
        except TypeError:
            raise ValueError("ProcessSet should be initialized with a list of process "
                             "ranks") from None
        if any(not isinstance(r, int) or isinstance(r, bool) for r in ranks):
            raise ValueError("ProcessSet should be initialized with a list of process ranks")
        self.ranks = ranks

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
        """Whether this process is a member."""
        return _tutti.rank() in self.ranks

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


global_process_set = ProcessSet([])
global_process_set.process_set_id = _tutti.WORLD


def autotune(process_set=global_process_set):
    """tutti's own (Horovod tunes the whole job only, with HOROVOD_AUTOTUNE): tunes this set's
    fusion threshold and algorithm cut-offs by the measured speed of its own collectives
    (docs/autotune.md). One member's call is enough and returns at once; every member switches
    values at the same collective. NotAMemberError on a non-member."""
    _tutti.process_set_autotune(set_id(process_set))


def set_id(process_set):
    """The C id of a ProcessSet, or of an int id as tutti's NumPy API takes them."""
    if process_set is None:
        return _tutti.WORLD
    if isinstance(process_set, int) and not isinstance(process_set, bool):
        return process_set
    if isinstance(process_set, ProcessSet):
        return process_set._id()
    raise InvalidArgumentError(f"process_set must be a ProcessSet or a set id, not "
                               f"{type(process_set).__name__}")


def members(process_set):
    """The set's global ranks, as the runtime has them now."""
    return _tutti.process_set_ranks(set_id(process_set))


def init(process_sets=None, **options):
    """Joins the job (tutti.init's keyword options) with `process_sets`, ProcessSet objects
    registered on every rank at once (ids 1, 2, ... in order). A rank list given twice, or equal
    to the world's, leaves its later objects unregistered, as Horovod does."""
    if _tutti.is_initialized():
        return
    static = list(process_sets or [])
    if any(not isinstance(s, ProcessSet) for s in static):
        raise ValueError("process_sets must be a list of ProcessSet objects")
    _horovod_env.read()
    _tutti.init(**options)
    world = list(range(_tutti.size()))
    _live.clear()
    global_process_set.ranks = world
    seen = {}
    for process_set in static:
        key = tuple(process_set.ranks)
        if process_set.ranks == world or key in seen:
            process_set.process_set_id = None
            continue
        # Collective over the set's members, in the same order on every rank.
        seen[key] = _tutti.add_process_set(process_set.ranks)
        process_set.process_set_id = seen[key]
        _live[seen[key]] = process_set


def shutdown():
    """Leaves the job; the sets registered in it are invalidated."""
    for process_set in _live.values():
        process_set.process_set_id = None
    _live.clear()
    _tutti.shutdown()


def add_process_set(process_set):
    """Registers a set (a ProcessSet or a list of ranks) after init and returns it. Every rank
    calls it in the same order; non-members return at once. A set with the ranks of a live one
    raises ValueError."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    new_id = _tutti.add_process_set(process_set.ranks)
    if new_id in _live or new_id == _tutti.WORLD:
        raise ValueError(f"Attempted to add a duplicate process set: {process_set}")
    process_set.process_set_id = new_id
    _live[new_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Removes a registered set and invalidates it; True on success. False for the global set or
    a set that is not registered (as Horovod)."""
    if not isinstance(process_set, ProcessSet):
        raise InvalidArgumentError(f"remove_process_set takes a ProcessSet, not "
                                   f"{type(process_set).__name__}")
    old_id = process_set.process_set_id
    if old_id is None or old_id == _tutti.WORLD:
        return False
    process_set.process_set_id = None
    _live.pop(old_id, None)
    _tutti.remove_process_set(old_id)
    return True
