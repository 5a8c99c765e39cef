"""Horovod's Adasum optimizer (DistributedOptimizer(op=hvd.Adasum)): each parameter takes a local
step as soon as its gradient is ready; the step's delta is combined over the world with Adasum
(tutti/torch/adasum.py) and added to the parameter's start."""
from contextlib import contextmanager

import torch

from .ops import Adasum, allreduce_async_, synchronize
from . import optimizer_common as common


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    """Horovod's Adasum optimizer: each parameter takes a local step as soon as its gradient is
    ready; the step's delta is combined with Adasum and added to the parameter's start."""
    _tutti_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        named_parameters = common.named(self, named_parameters)
        self._parameter_names = {v: k for k, v in sorted(named_parameters, key=lambda x: x[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: backward_passes_per_step for _, v in named_parameters}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for _, p in named_parameters}
        common.hook_accumulators(self, prepare=lambda p: setattr(p, "grad",
                                                                 p.data.new(p.size()).zero_()))

    set_backward_passes_per_step = common.set_backward_passes_per_step

    def _allreduce_grad_async(self, p):
        # With start := current, step() computes current - lr f(g); its delta is -lr f(g). Step
        # on p alone, from a zero start, and the parameter holds exactly the delta.
        start = self._starting_models[p]
        stashed = [group["params"] for group in self.param_groups]
        for group in self.param_groups:
            group["params"] = [p] if any(p is v for v in group["params"]) else []
        start.data.copy_(p)
        super(self.__class__, self).step()
        p.data.sub_(start)
        for group, params in zip(self.param_groups, stashed):
            group["params"] = params
        compressed, ctx = self._compression.compress(p)
        return allreduce_async_(compressed.data, name=self._parameter_names.get(p),
                                op=Adasum), ctx

    def _make_hook(self, p):
        def hook(*ignore):
            due = common.count_pass(self, p)
            self._handles[p] = self._allreduce_grad_async(p) if due else (None, None)
        return hook

    def synchronize(self):
        pass

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")
        yield  # a generator, so that the context manager raises on entry

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if not handle:  # step() before backward_passes_per_step passes: reduce now
                handle, ctx = self._allreduce_grad_async(p)
                self._handles[p] = (handle, ctx)
            delta = self._compression.decompress(synchronize(handle), ctx)
            start = self._starting_models[p]
            start.data.add_(delta.data)
            p.data.copy_(start)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        common.check_zero_grad(self)
        return super(self.__class__, self).zero_grad(*args, **kwargs)
