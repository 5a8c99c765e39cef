"""Data-parallel training with MXNet on tutti, as horovod.mxnet: broadcast_parameters,
DistributedOptimizer and DistributedTrainer. Everything runs on the calling thread, in the order
MXNet calls it (gluon's Trainer updates its parameters in the same order on every rank).

Averaging is done by the collective (op Average, with gradient_predivide_factor split into the
prescale 1/f and the postscale f), not by the optimizer's rescale_grad, so the optimizer keeps
the gradient scale gluon gives it (1/batch_size). As in Horovod, a trainer or optimizer whose
process set has one member, or that does not include this rank, reduces nothing and applies the
local gradients.
"""
from collections import OrderedDict
import warnings

import mxnet as mx
from mxnet.gluon.parameter import DeferredInitializationError, Parameter, ParameterDict

from tutti import _world
from tutti._process_sets import global_process_set, members, set_id
from tutti.errors import InvalidArgumentError, UnsupportedError

from ._device import NDArrayView
from .ops import Average, _core, array_view, grouped_allreduce_


def _reduces_in(process_set):
    """Whether gradients are reduced in `process_set`: it is registered (else the set's error),
    has more than one member and includes this rank."""
    ranks = members(process_set)
    return len(ranks) > 1 and _world.rank() in ranks


def _average_gradients(grads, predivide, name, process_set):
    grouped_allreduce_(grads, op=Average, name=name, prescale_factor=1.0 / predivide,
                       postscale_factor=predivide, process_set=process_set)


class DistributedOptimizer(mx.optimizer.Optimizer):
    """Wraps an mx.optimizer.Optimizer: each update first averages its gradients across
    `process_set` in place (one grouped allreduce per update call, which gets a list of indices
    when the optimizer aggregates), then applies the wrapped optimizer. For gluon, prefer
    DistributedTrainer (one grouped allreduce per step); this one suits gluon.Trainer(...,
    kvstore=None) and the Module API.

    Attributes read or set on the wrapper are the wrapped optimizer's: gluon's Trainer sets
    rescale_grad (1/batch_size) and param_dict on the optimizer it is given, and they reach the
    optimizer that uses them."""

    _OWN = ("_optimizer", "_gradient_predivide_factor", "_process_set")

    def __init__(self, optimizer, gradient_predivide_factor=1.0, *,
                 process_set=global_process_set):
        # No super().__init__: every other attribute is the wrapped optimizer's.
        if not isinstance(optimizer, mx.optimizer.Optimizer):
            raise InvalidArgumentError(f"DistributedOptimizer wraps an mx.optimizer.Optimizer, "
                                       f"not {type(optimizer).__name__}")
        set_id(process_set)  # a wrong type fails here rather than at the first update
        object.__setattr__(self, "_optimizer", optimizer)
        object.__setattr__(self, "_gradient_predivide_factor", float(gradient_predivide_factor))
        object.__setattr__(self, "_process_set", process_set)

    def __getattr__(self, item):
        if item in DistributedOptimizer._OWN:  # not set yet (e.g. while unpickling)
            raise AttributeError(item)
        return getattr(self._optimizer, item)

    def __setattr__(self, item, value):
        if item in DistributedOptimizer._OWN:
            object.__setattr__(self, item, value)
        else:
            setattr(self._optimizer, item, value)

    def _reduce(self, index, grad):
        if not _reduces_in(self._process_set):
            return
        grads = list(grad) if isinstance(index, (list, tuple)) else [grad]
        _average_gradients(grads, self._gradient_predivide_factor, None, self._process_set)

    def create_state(self, index, weight):
        return self._optimizer.create_state(index, weight)

    def create_state_multi_precision(self, index, weight):
        return self._optimizer.create_state_multi_precision(index, weight)

    def update(self, index, weight, grad, state):
        self._reduce(index, grad)
        self._optimizer.update(index, weight, grad, state)

    def update_multi_precision(self, index, weight, grad, state):
        self._reduce(index, grad)
        self._optimizer.update_multi_precision(index, weight, grad, state)

    def set_learning_rate(self, lr):
        self._optimizer.set_learning_rate(lr)

    def set_lr_mult(self, args_lr_mult):
        self._optimizer.set_lr_mult(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        self._optimizer.set_wd_mult(args_wd_mult)


class DistributedTrainer(mx.gluon.Trainer):
    """A gluon.Trainer (no kvstore) whose step averages the gradients of every parameter with a
    gradient (grad_req not 'null') across `process_set` in one grouped allreduce, named
    `prefix + "gradients"` when a prefix is given (else matched across ranks by tutti's per-set
    counter), before the update. Each parameter must live on one context (one replica per
    process); gradient_predivide_factor f divides the gradients by f before the sum and
    multiplies the average by f after it."""

    def __init__(self, params, optimizer, optimizer_params=None, *, gradient_predivide_factor=1.0,
                 prefix=None, process_set=global_process_set):
        if isinstance(optimizer, DistributedOptimizer):
            optimizer = optimizer._optimizer
            warnings.warn("DistributedTrainer does not take DistributedOptimizer as its "
                          "optimizer. We have unwrapped it for you.")
        if prefix is not None and not isinstance(prefix, str):
            raise InvalidArgumentError(f"prefix must be a str, not {type(prefix).__name__}")
        set_id(process_set)
        if isinstance(params, dict):
            params = OrderedDict(params)
        super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=None)
        self._gradient_predivide_factor = float(gradient_predivide_factor)
        self._request_name = None if prefix is None else f"{prefix}gradients"
        self._process_set = process_set

    def _allreduce_grads(self):
        if not _reduces_in(self._process_set):
            return
        grads = []
        for param in self._params:
            if param.grad_req == "null":
                continue
            if len(param.list_ctx()) > 1:
                raise UnsupportedError(
                    f"parameter {param.name} is on {len(param.list_ctx())} contexts: "
                    f"DistributedTrainer reduces one replica per process; initialize it on one "
                    f"context")
            grads.append(param.list_grad()[0])
        _average_gradients(grads, self._gradient_predivide_factor, self._request_name,
                           self._process_set)


# ---- broadcast_parameters ----------------------------------------------------------------------
def _broadcast_into(targets, root_rank, name, process_set):
    """Broadcasts each entry's first NDArray from `root_rank` (all submitted together) and writes
    the result into every NDArray of the entry (a Parameter's replicas)."""
    views = [array_view(replicas[0], f"parameter {key}") for key, replicas in targets]
    results = _core.grouped_broadcast(views, root_rank, name, set_id(process_set))
    with mx.autograd.pause():  # a deferred initialization may run inside autograd.record()
        for (_, replicas), result in zip(targets, results):
            if isinstance(result, NDArrayView):  # a GPU context's
                result = result.ndarray
            for replica in replicas:
                replica[:] = result.reshape(replica.shape)


def _broadcast_after_deferred_init(param, key, root_rank, name, process_set):
    """Makes `param`'s deferred initialization (at the first forward, in the same order on every
    rank) broadcast its values from `root_rank` once they exist."""
    initialize = param._init_impl

    def initialize_then_broadcast(*args, **kwargs):
        initialize(*args, **kwargs)
        _broadcast_into([(key, param.list_data())], root_rank, name, process_set)
    param._init_impl = initialize_then_broadcast


def broadcast_parameters(params, root_rank=0, prefix=None, process_set=global_process_set):
    """Copies `root_rank`'s parameters into every member's: `params` is a dict of NDArrays or
    gluon Parameters (Module.get_params(), Block.collect_params() as a dict) or a gluon
    ParameterDict. Entries go in the order of their sorted keys, in one grouped broadcast named
    `prefix + "parameters"` when a prefix is given; a Parameter whose initialization is deferred
    is broadcast right after it is initialized (named `prefix + key`)."""
    if not isinstance(params, (dict, ParameterDict)):
        raise ValueError(f"invalid params of type: {type(params)}")
    if prefix is not None and not isinstance(prefix, str):
        raise InvalidArgumentError(f"prefix must be a str, not {type(prefix).__name__}")
    if len(members(process_set)) == 1:
        return
    ready = []
    for key, value in sorted(params.items()):
        if isinstance(value, Parameter):
            try:
                ready.append((key, value.list_data()))
            except DeferredInitializationError:
                _broadcast_after_deferred_init(value, key, root_rank,
                                               None if prefix is None else f"{prefix}{key}",
                                               process_set)
        elif isinstance(value, mx.nd.NDArray):
            ready.append((key, [value]))
        else:
            raise InvalidArgumentError(f"params[{key!r}] must be an NDArray or a gluon "
                                       f"Parameter, not {type(value).__name__}")
    if ready:
        _broadcast_into(ready, root_rank, None if prefix is None else f"{prefix}parameters",
                        process_set)
