"""Python objects across a set, as horovod.torch's broadcast_object / allgather_object: pickled
into uint8 NumPy arrays and moved through the array core on the calling thread (eagerly only:
Python objects have no place inside jax.jit). Pending jitted callbacks are waited for first, so
these calls keep their place in this process's order of requests."""
import pickle

import jax
import numpy as np

import tutti as _tutti
from tutti import _arrays
from tutti._process_sets import global_process_set, set_id


def _to_bytes(obj):
    return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """`obj` as global rank `root_rank` has it, on every member of the set."""
    jax.effects_barrier()
    name = name or "broadcast_object"
    the_set = set_id(process_set)
    root = _tutti.rank() == root_rank
    payload = _to_bytes(obj) if root else np.empty(0, np.uint8)
    length = _arrays.broadcast(np.array([payload.size], np.int64), root_rank, f"{name}.length",
                               the_set)
    if not root:
        payload = np.empty(int(length[0]), np.uint8)
    payload = _arrays.broadcast(payload, root_rank, f"{name}.payload", the_set)
    return obj if root else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every member's `obj`, in set order."""
    jax.effects_barrier()
    name = name or "allgather_object"
    the_set = set_id(process_set)
    payload = _to_bytes(obj)
    lengths = _arrays.allgather(np.array([payload.size], np.int64), f"{name}.lengths", the_set)
    data = _arrays.allgather(payload, f"{name}.payload", the_set)
    out, at = [], 0
    for n in lengths.tolist():
        out.append(pickle.loads(data[at:at + n].tobytes()))
        at += n
    return out
