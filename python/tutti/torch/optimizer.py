"""DistributedOptimizer, as horovod.torch's: each gradient's allreduce starts from a hook as soon
as backward produces it, and step() waits for them before updating the parameters."""
import warnings

import torch

import tutti.torch as hvd
from .compression import Compression


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._process_set = process_set
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        if op != hvd.Average and gradient_predivide_factor != 1.0:
            raise ValueError("gradient_predivide_factor applies to op=Average only")
        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            if any(not isinstance(n, tuple) or len(n) != 2 for n in named):
                raise ValueError("named_parameters must be (name, parameter) pairs, as "
                                 "model.named_parameters() yields")
            if len({n for n, _ in named}) != len(named):
                raise ValueError("named_parameters has duplicate names")
            known = {id(p) for _, p in named}
            missing = [p for p in all_params if id(p) not in known]
            if missing:
                raise ValueError(f"named_parameters lacks {len(missing)} of the optimizer's "
                                 "parameters")
            self._names = {id(p): name for name, p in named}
        else:
            self._names = {id(p): f"param.{i}" for i, p in enumerate(all_params)}
        if groups is not None:
            # Tensors released together fuse anyway (docs/fusion.md); explicit groups would only
            # delay the first gradients until their whole group is ready.
            warnings.warn("groups= is accepted for compatibility; tutti fuses gradients itself")
        self.backward_passes_per_step = backward_passes_per_step
        self._passes = {}
        self._handles = {}
        self._grad_accumulators = []
        self._synchronized = False
        self._should_synchronize = True
        self._register_hooks()

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if not p.requires_grad:
                    continue
                self._passes[id(p)] = 0
                # The gradient accumulator's hook runs once p.grad holds this pass's gradient.
                p_tmp = p.expand_as(p)
                accumulator = p_tmp.grad_fn.next_functions[0][0]
                accumulator.register_hook(self._make_hook(p))
                self._grad_accumulators.append(accumulator)

    def _allreduce_grad_async(self, p):
        name = "allreduce." + self._names[id(p)]
        tensor, ctx = self._compression.compress(p.grad)
        if self.op == hvd.Average:
            # The library divides by the set size for Average; split it as asked.
            prescale, postscale = 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        else:
            prescale, postscale = 1.0, 1.0
        handle = hvd.allreduce_async_(tensor, name=name, op=self.op, prescale_factor=prescale,
                                      postscale_factor=postscale, process_set=self._process_set)
        return handle, tensor, ctx

    def _make_hook(self, p):
        def hook(*ignore):
            if self._handles.get(id(p)) is not None:
                # Its allreduce is already in flight: one backward pass too many before step().
                raise AssertionError(
                    "gradients were computed more than backward_passes_per_step times "
                    "before step() or synchronize(); raise backward_passes_per_step")
            self._passes[id(p)] += 1
            handle = None
            if self._passes[id(p)] == self.backward_passes_per_step:
                handle = self._allreduce_grad_async(p)
                self._passes[id(p)] = 0
            self._handles[id(p)] = handle
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hook did not run)."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is not None and id(p) not in self._handles:
                    self._handles[id(p)] = self._allreduce_grad_async(p)
        for key, entry in list(self._handles.items()):
            if entry is None:
                continue
            handle, tensor, ctx = entry
            hvd.synchronize(handle)
            p = self._param(key)
            result = self._compression.decompress(tensor, ctx)
            if result is not p.grad:
                p.grad.copy_(result)
        self._handles.clear()
        self._synchronized = True

    def _param(self, key):
        for group in self.param_groups:
            for p in group["params"]:
                if id(p) == key:
                    return p
        raise KeyError(key)

    def skip_synchronize(self):
        """For `with optimizer.skip_synchronize(): optimizer.step()` after an explicit
        synchronize() (gradient clipping)."""
        optimizer = self

        class _Skip:
            def __enter__(self):
                optimizer._should_synchronize = False

            def __exit__(self, *exc):
                optimizer._should_synchronize = True
        return _Skip()

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called after optimizer.synchronize(); use "
                              "`with optimizer.skip_synchronize():` around step()")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if any(h is not None for h in self._handles.values()):
            raise AssertionError("optimizer.zero_grad() called while gradients are being "
                                 "allreduced; call step() or synchronize() first")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=None, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=None):
    """Wraps `optimizer` so that step() applies gradients averaged over `process_set` (default:
    every rank). Arguments as horovod.torch.DistributedOptimizer; num_groups and sparse gradients
    are not supported."""
    if num_groups:
        raise ValueError("num_groups is not supported by tutti; pass groups= lists or rely on "
                         "fusion")
    op = hvd.Average if op is None else op
    process_set = hvd.global_process_set if process_set is None else process_set
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, process_set)
