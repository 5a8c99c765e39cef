"""DistributedOptimizer, as horovod.torch's: each gradient's allreduce starts from a hook as soon
as backward produces it, and step() waits for them before updating the parameters.

Behaviour follows Horovod 0.28 (names, groups, sparse gradients, backward_passes_per_step, the
warnings and errors scripts match on); op=hvd.Adasum wraps the optimizer in Horovod's Adasum
scheme instead (a local step, then Adasum of the parameter deltas).
"""
import os
import warnings
from contextlib import contextmanager

import torch
from tutti._process_sets import global_process_set

from tutti import _world
from .compression import Compression
from .ops import (Adasum, Average, allreduce_async_, grouped_allreduce_async_,
                  sparse_allreduce_async, synchronize)
from .optimizer_adasum import _DistributedAdasumOptimizer
from . import optimizer_common as common
from .state import broadcast_object


def _split(items, parts):
    """`items` in `parts` consecutive groups of nearly equal size."""
    size, extra = divmod(len(items), parts)
    out, at = [], 0
    for i in range(parts):
        n = size + (1 if i < extra else 0)
        if n:
            out.append(items[at:at + n])
        at += n
    return out


class _DistributedOptimizer(torch.optim.Optimizer):
    _tutti_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        named_parameters = common.named(self, named_parameters)
        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda x: x[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        if groups is not None:
            if not (isinstance(groups, list) or groups > 0):
                raise ValueError("groups should be a non-negative integer or a list of list of "
                                 "torch.Tensor.")
            if isinstance(groups, list):
                seen = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError("groups must consist of torch.Tensor.")
                        if id(p) in seen:
                            raise ValueError("A parameter can only appear once in groups.")
                        seen.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}
        if self.process_set.included() and (_world.size() > 1 or
                                            os.environ.get("HOROVOD_ELASTIC") == "1" or
                                            os.environ.get("TUTTI_ELASTIC") == "1"):
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    set_backward_passes_per_step = common.set_backward_passes_per_step

    def _form_groups(self):
        trainable = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        # Every member must form the same groups: take rank 0's parameter order.
        order = broadcast_object([self._parameter_names.get(p) for p in trainable], root_rank=0,
                                 process_set=self.process_set)
        trainable.sort(key=lambda p: order.index(self._parameter_names.get(p)))
        if isinstance(self._groups, list):
            ids = {id(p) for p in trainable}
            groups = [[p for p in g if id(p) in ids] for g in self._groups]
            grouped = {id(p) for g in groups for p in g}
            groups += [[p] for p in trainable if id(p) not in grouped]
        else:
            groups = _split(trainable, self._groups)
        for group in (tuple(g) for g in groups if g):
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0

    def _register_hooks(self):
        if self._groups is not None:
            self._form_groups()
        common.hook_accumulators(self)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # This rank computed no gradient for p (a branch not taken), others may have: it
            # still takes part, with zeros.
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                return sparse_allreduce_async(tensor, name=name, op=self.op,
                                              process_set=self.process_set), None
            tensor = tensor.to_dense()
        compressed, ctx = self._compression.compress(tensor)
        if self.op == Average:
            # The library divides by the set size for Average; split it as asked.
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor
        else:
            prescale = postscale = 1.0
        handle = allreduce_async_(compressed, name=name, op=self.op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=self.process_set,
                                  compression=self._compression)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group):
        name = self._parameter_names.get(group[0])
        compressed, ctxs = zip(*[self._compression.compress(p.grad) for p in group])
        handle = grouped_allreduce_async_(list(compressed), name=name, op=self.op,
                                          process_set=self.process_set,
                                          compression=self._compression)
        return handle, ctxs

    def _make_hook(self, p):
        def hook(*ignore):
            handle, ctx = None, None
            if common.count_pass(self, p):
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        for member in group:  # drop the placeholders of earlier hooks
                            self._handles.pop(member, None)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce, starting those whose hook did not run."""
        if not self.process_set.included():
            self._synchronized = True
            return
        started = set()
        for key in self._handles:
            started.update(key) if isinstance(key, tuple) else started.add(key)
        for p in self._requires_update - started:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in self._handles.items():
            if isinstance(p, tuple):
                for member, output, member_ctx in zip(p, synchronize(handle), ctx):
                    self._allreduce_delay[member] = self.backward_passes_per_step
                    member.grad.set_(self._compression.decompress(output, member_ctx))
                if self._groups is not None and self._group_counts[p] != 0:
                    self._group_counts[p] = 0
                continue
            output = synchronize(handle)  # sparse_allreduce_async's callable too
            self._allreduce_delay[p] = self.backward_passes_per_step
            if self._groups is not None:
                group = self._p_to_group[p]
                if self._group_counts[group] != 0:
                    self._group_counts[group] = 0
            if p.grad.is_sparse:
                aggregated = output if ctx is None else self._compression.decompress(output, ctx)
                if not aggregated.is_sparse:
                    aggregated = aggregated.to_sparse()  # sparse_as_dense: back to sparse
                p.grad.zero_().add_(aggregated)
            else:
                p.grad.set_(self._compression.decompress(output, ctx))
        self._handles.clear()
        self._synchronized = True

    @contextmanager
    def skip_synchronize(self):
        """For `with optimizer.skip_synchronize(): optimizer.step()` after an explicit
        synchronize() (gradient clipping)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        common.check_zero_grad(self)
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` so that step() applies gradients reduced over `process_set` (default:
    every rank). Arguments as horovod.torch.DistributedOptimizer."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed "
                      "in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be > 0")
    if op != Adasum or _world.size() == 1:
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
                   dict(_DistributedOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression,
                   backward_passes_per_step, op, gradient_predivide_factor, groups,
                   sparse_as_dense, process_set)
    if process_set is not global_process_set and process_set != global_process_set:
        raise NotImplementedError("Adasum does not support non-global process sets yet.")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step)
