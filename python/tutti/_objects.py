"""Python objects across a process set, as Horovod's broadcast_object / allgather_object: pickled
into uint8 arrays and moved through the array core (tutti/_arrays.py) on the calling thread. The
framework bindings (tutti.jax, tutti.tensorflow, tutti.mxnet) call these after whatever their
framework needs first (jax: waiting for pending jitted callbacks; TensorFlow: refusing graph
mode). tutti.torch calls them with its own serialization (torch.save). The default names are fixed, not
the object's type as in Horovod: the other ranks' objects (often None) need not have the root's
type."""
import pickle

import numpy as np

from . import _arrays, _world
from ._process_sets import global_process_set, set_id


def _dumps(obj):
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set, dumps=_dumps,
                     loads=pickle.loads):
    """`obj` as global rank `root_rank` has it, on every member of the set. `dumps`/`loads`:
    the binding's serialization (tutti.torch's keeps tensors as torch.save does)."""
    name = name or "broadcast_object"
    the_set = set_id(process_set)
    root = _world.rank() == root_rank
    payload = np.frombuffer(dumps(obj), np.uint8) if root else np.empty(0, np.uint8)
    length = _arrays.broadcast(np.array([payload.size], np.int64), root_rank, f"{name}.length",
                               the_set)
    if not root:
        payload = np.empty(int(length[0]), np.uint8)
    payload = _arrays.broadcast(payload, root_rank, f"{name}.payload", the_set)
    return obj if root else loads(payload.tobytes())


def allgather_object(obj, name=None, process_set=global_process_set, dumps=_dumps,
                     loads=pickle.loads):
    """Every member's `obj`, in set order."""
    name = name or "allgather_object"
    the_set = set_id(process_set)
    payload = np.frombuffer(dumps(obj), np.uint8)
    lengths = _arrays.allgather(np.array([payload.size], np.int64), f"{name}.lengths", the_set)
    data = _arrays.allgather(payload, f"{name}.payload", the_set)
    out, at = [], 0
    for n in lengths.tolist():
        out.append(loads(data[at:at + n].tobytes()))
        at += n
    return out
