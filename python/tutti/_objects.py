"""Python objects across a process set, as Horovod's broadcast_object / allgather_object: pickled
into uint8 arrays and moved through the array core (tutti/_arrays.py) on the calling thread. The
framework bindings (tutti.jax, tutti.tensorflow, tutti.mxnet) call these after whatever their
framework needs first (jax: waiting for pending jitted callbacks; TensorFlow: refusing graph
mode). The default names are fixed, not the object's type as in Horovod: the other ranks' objects
(often None) need not have the root's type."""
import pickle

import numpy as np

from . import _arrays, _world
from ._process_sets import global_process_set, set_id


def _to_bytes(obj):
    return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """`obj` as global rank `root_rank` has it, on every member of the set."""
    name = name or "broadcast_object"
    the_set = set_id(process_set)
    root = _world.rank() == root_rank
    payload = _to_bytes(obj) if root else np.empty(0, np.uint8)
    length = _arrays.broadcast(np.array([payload.size], np.int64), root_rank, f"{name}.length",
                               the_set)
    if not root:
        payload = np.empty(int(length[0]), np.uint8)
    payload = _arrays.broadcast(payload, root_rank, f"{name}.payload", the_set)
    return obj if root else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every member's `obj`, in set order."""
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
