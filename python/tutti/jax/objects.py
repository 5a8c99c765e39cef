"""Python objects across a set, as horovod.torch's broadcast_object / allgather_object, through
the core's pickled arrays (tutti/_objects.py), eagerly only: Python objects have no place inside
jax.jit. Pending jitted callbacks are waited for first, so these calls keep their place in this
process's order of requests."""
import jax

from tutti import _objects
from tutti._process_sets import global_process_set


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """`obj` as global rank `root_rank` has it, on every member of the set."""
    jax.effects_barrier()
    return _objects.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every member's `obj`, in set order."""
    jax.effects_barrier()
    return _objects.allgather_object(obj, name, process_set)
