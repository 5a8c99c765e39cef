"""What both DistributedOptimizers (optimizer.py, optimizer_adasum.py) do alike, with Horovod's
rules and messages: naming parameters, hooking their gradient accumulators, counting backward
passes, and refusing zero_grad while reductions are in flight."""


def named(optimizer, named_parameters):
    """The (name, parameter) pairs, checked as Horovod checks them."""
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [(f"allreduce.noname.{i}.{j}", v)
                            for i, group in enumerate(optimizer.param_groups)
                            for j, v in enumerate(group["params"])]
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                         "usually produced by model.named_parameters().")
    names = [k for k, _ in named_parameters]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError("Parameter names in named_parameters must be unique. Found "
                         "duplicates: %s" % ", ".join(dups))
    all_ids = {id(v) for group in optimizer.param_groups for v in group["params"]}
    unnamed = all_ids - {id(v) for _, v in named_parameters}
    if unnamed:
        raise ValueError("named_parameters was specified, but one or more model parameters "
                         "were not named. Python object ids: "
                         "%s" % ", ".join(str(i) for i in unnamed))
    return named_parameters


def hook_accumulators(optimizer, prepare=None):
    """Runs optimizer._make_hook(p)'s hook once backward accumulated p's gradient, for every
    trainable parameter (after `prepare(p)`, if given); they are the optimizer's
    _requires_update."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            if not p.requires_grad:
                continue
            if prepare is not None:
                prepare(p)
            optimizer._requires_update.add(p)
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(optimizer._make_hook(p))
            optimizer._grad_accs.append(accumulator)


def count_pass(optimizer, p):
    """A backward pass produced p's gradient: True when it is the last one before a reduction."""
    if p in optimizer._handles and optimizer._handles[p][0] is not None:
        if optimizer._allreduce_delay[p] <= 0:
            raise AssertionError(
                "Gradients were computed more than backward_passes_per_step times before call "
                "to step(). Increase backward_passes_per_step to accumulate gradients locally.")
    assert not p.grad.requires_grad
    assert optimizer._allreduce_delay[p] > 0
    optimizer._allreduce_delay[p] -= 1
    return optimizer._allreduce_delay[p] == 0


def set_backward_passes_per_step(optimizer, passes):
    optimizer.backward_passes_per_step = passes
    for p in optimizer._allreduce_delay:
        optimizer._allreduce_delay[p] = passes


def check_zero_grad(optimizer):
    if optimizer._handles:
        raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before "
                             "optimizer.step() or optimizer.synchronize(). This is prohibited as "
                             "it can cause a race condition.")


def is_distributed(optimizer):
    """Whether `optimizer` is one DistributedOptimizer made (its step allreduces)."""
    return getattr(optimizer, "_tutti_distributed", False)
