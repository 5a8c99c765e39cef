"""Objects and model state across a set: broadcast_object, allgather_object,
broadcast_parameters and broadcast_optimizer_state, as horovod.torch has them."""
import inspect
import io
import pickle

import torch

from tutti import _objects, _world
from tutti._process_sets import global_process_set

from .ops import broadcast_async_, synchronize
from .optimizer_common import is_distributed

# Objects are arbitrary pickles: torch >= 2.6 defaults torch.load to weights_only=True, which
# refuses them. Say False explicitly where torch knows the argument (1.13 and later).
_LOAD_ARGS = ({"weights_only": False}
              if "weights_only" in inspect.signature(torch.load).parameters else {})


def _dumps(obj):
    stream = io.BytesIO()
    torch.save(obj, stream, pickle_protocol=pickle.HIGHEST_PROTOCOL)
    return stream.getvalue()


def _loads(data):
    return torch.load(io.BytesIO(data), **_LOAD_ARGS)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns `obj` from `root_rank` on every member (pickled through torch.save; the core's
    object collectives, tutti/_objects.py)."""
    return _objects.broadcast_object(obj, root_rank, name, process_set, _dumps, _loads)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns every member's `obj`, in set order."""
    return _objects.allgather_object(obj, name, process_set, _dumps, _loads)


def broadcast_parameters(params, root_rank, prefix="", process_set=global_process_set):
    """Broadcasts in place from `root_rank`: a state_dict, named_parameters() or a list of
    parameters (or (name, parameter) pairs)."""
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, list):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    elif inspect.isgenerator(params) or hasattr(params, "__iter__"):
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for i, (name, p) in enumerate(items):
        if not isinstance(p, torch.Tensor):
            continue
        label = f"broadcast.{prefix}{name if name is not None else f'param.{i}'}"
        handles.append(broadcast_async_(p.data if p.requires_grad else p, root_rank,
                                        name=label, process_set=process_set))
    for h in handles:
        synchronize(h)


def _initialize_state(optimizer, model):
    """An optimizer that never stepped has no state to send: step once with zero gradients (as
    Horovod does), so that every member holds the same structure; sparse embeddings of `model`
    get sparse zero gradients."""
    sparse = set()
    if model is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding) and module.sparse:
                sparse.update(id(p) for p in module.parameters())
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = p.data.new(p.size()).zero_()
                if isinstance(optimizer, torch.optim.SparseAdam) or \
                        (isinstance(optimizer, torch.optim.SGD) and id(p) in sparse):
                    p.grad = p.grad.to_sparse()
    if is_distributed(optimizer):
        super(optimizer.__class__, optimizer).step()  # a local step: no allreduce
    else:
        optimizer.step()


def broadcast_optimizer_state(optimizer, root_rank, model=None, prefix="",
                              process_set=global_process_set):
    """Makes every member's optimizer state and hyperparameters equal to `root_rank`'s.
    `model` marks sparse embeddings, as in Horovod."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if len(optimizer.state_dict()["state"]) == 0:
        _initialize_state(optimizer, model)
    state = broadcast_object(optimizer.state_dict(), root_rank,
                             name=f"{prefix}optimizer_state", process_set=process_set)
    if _world.rank() != root_rank:
        optimizer.load_state_dict(state)
