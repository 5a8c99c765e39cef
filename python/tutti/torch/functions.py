"""The synchronous collectives of horovod.torch, differentiable as Horovod's are: each one whose
input requires grad runs inside an autograd Function whose backward is Horovod's:

- allreduce / grouped_allreduce: the gradient is allreduced with the same op and factors;
- allgather / grouped_allgather: the gradient is averaged over the set, then each member keeps
  the rows it contributed;
- broadcast: the gradient is averaged over the set and kept by the root (zero elsewhere);
- alltoall: the gradient goes back with an alltoall using the received splits;
- reducescatter / grouped_reducescatter: the gradient (times the set size for Sum, times the
  factors) is allgathered.
"""
import torch

from tutti import _world
from tutti._process_sets import global_process_set, members, position

from .compression import Compression
from .ops import (Average, Sum, allgather_async, allreduce_async, alltoall_async,
                  broadcast_async, grouped_allgather_async, grouped_allreduce_async,
                  grouped_reducescatter_async, reduce_op, reducescatter_async, synchronize)


def _any_requires_grad(tensors):
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _reduce_compressed(compression, tensors, differentiable, plain):
    """The reductions' common frame: compress each tensor, reduce them through the autograd
    Function (`differentiable(*compressed)`) when one requires grad, else directly
    (`plain(compressed)`), and decompress each result."""
    pairs = [compression.compress(t) for t in tensors]
    compressed = [c for c, _ in pairs]
    if _any_requires_grad(compressed):
        results = differentiable(*compressed)
    else:
        results = plain(compressed)
    return [compression.decompress(r, ctx) for r, (_, ctx) in zip(results, pairs)]


# ---- allreduce ----------------------------------------------------------------------------------
class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale, process_set, compression=None):
        ctx.args = (op, prescale, postscale, process_set)
        return synchronize(allreduce_async(tensor, None, name, op, prescale, postscale,
                                           process_set, compression=compression))

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale, postscale, process_set = ctx.args
        grad = allreduce(grad_output, op=op, prescale_factor=prescale,
                         postscale_factor=postscale, process_set=process_set)
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces into a new tensor (the input is not modified); differentiable."""
    op = reduce_op(op, average)
    if compression is Compression.none and not (torch.is_grad_enabled() and
                                               tensor.requires_grad):
        # The common case without the frame's closures and lists (docs/python.md).
        return synchronize(allreduce_async(tensor, None, name, op, prescale_factor,
                                           postscale_factor, process_set))
    args = (name, op, prescale_factor, postscale_factor, process_set)
    return _reduce_compressed(
        compression, [tensor], lambda t: [_Allreduce.apply(t, *args, compression)],
        lambda ts: [synchronize(allreduce_async(ts[0], None, *args, compression=compression))])[0]


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale, postscale, process_set, compression, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(synchronize(grouped_allreduce_async(list(tensors), None, name, op, prescale,
                                                         postscale, process_set,
                                                         compression=compression)))

    @staticmethod
    def backward(ctx, *grad_output):
        op, prescale, postscale, process_set = ctx.args
        grads = grouped_allreduce(list(grad_output), op=op, prescale_factor=prescale,
                                  postscale_factor=postscale, process_set=process_set)
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    op = reduce_op(op, average)
    args = (name, op, prescale_factor, postscale_factor, process_set)
    return _reduce_compressed(
        compression, tensors, lambda *ts: _GroupedAllreduce.apply(*args, compression, *ts),
        lambda ts: synchronize(grouped_allreduce_async(ts, None, *args, compression=compression)))


# ---- allgather ----------------------------------------------------------------------------------
def _rows(tensor):
    return tensor.shape[0] if tensor.dim() > 0 else 1


def _my_slice(grad, counts, process_set):
    """The rows this member contributed, from a gradient of the gathered tensor."""
    offset = int(sum(counts[:position(process_set)]))
    return grad.narrow(0, offset, counts[position(process_set)])


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.process_set, ctx.rows = process_set, _rows(tensor)
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output.contiguous(), op=Average, process_set=ctx.process_set)
        counts = synchronize(allgather_async(torch.tensor([ctx.rows], dtype=torch.int64),
                                             None, ctx.process_set)).tolist()
        return _my_slice(grad, counts, ctx.process_set), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every member's tensor along the first dimension; differentiable."""
    if _any_requires_grad([tensor]):
        return _Allgather.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.process_set, ctx.rows = process_set, [_rows(t) for t in tensors]
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_output):
        grads = grouped_allreduce([g.contiguous() for g in grad_output], op=Average,
                                  process_set=ctx.process_set)
        counts = synchronize(allgather_async(torch.tensor(ctx.rows, dtype=torch.int64),
                                             None, ctx.process_set)).view(-1, len(ctx.rows))
        sliced = [_my_slice(g, counts[:, i].tolist(), ctx.process_set)
                  for i, g in enumerate(grads)]
        return (None, None, *sliced)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    if _any_requires_grad(tensors):
        return list(_GroupedAllgather.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, process_set))


# ---- broadcast ----------------------------------------------------------------------------------
class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output.contiguous(), op=Average, process_set=ctx.process_set)
        if _world.rank() != ctx.root_rank:
            grad = grad * 0
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns `root_rank`'s tensor on every member (the input is not modified); differentiable."""
    if _any_requires_grad([tensor]):
        return _Broadcast.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


# ---- alltoall -----------------------------------------------------------------------------------
class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set, ctx.received = process_set, received
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, *unused):
        grad, _ = synchronize(alltoall_async(grad_output.contiguous(), ctx.received, None,
                                             ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends the i-th group of rows to the set's i-th member; returns the received rows and,
    when `splits` is given, how many rows came from each member. Differentiable."""
    if _any_requires_grad([tensor]):
        output, received = _Alltoall.apply(tensor, splits, name, process_set)
    else:
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received)


# ---- reducescatter ------------------------------------------------------------------------------
def _reducescatter_grad(grad, op, prescale, postscale, process_set):
    if op == Sum:
        grad = grad * len(members(process_set))
    if prescale != 1.0:
        grad = grad * prescale
    if postscale != 1.0:
        grad = grad * postscale
    return grad.contiguous()


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale, postscale):
        ctx.args = (op, prescale, postscale, process_set)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale,
                                               postscale))

    @staticmethod
    def backward(ctx, grad_output):
        op, prescale, postscale, process_set = ctx.args
        grad = _reducescatter_grad(grad_output, op, prescale, postscale, process_set)
        return allgather(grad, process_set=process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces over the set and returns this member's share of rows; differentiable."""
    args = (name, op, process_set, prescale_factor, postscale_factor)
    return _reduce_compressed(
        compression, [tensor], lambda t: [_Reducescatter.apply(t, *args)],
        lambda ts: [synchronize(reducescatter_async(ts[0], *args))])[0]


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale, postscale, *tensors):
        ctx.args = (op, prescale, postscale, process_set)
        return tuple(synchronize(grouped_reducescatter_async(list(tensors), name, op,
                                                             process_set, prescale, postscale)))

    @staticmethod
    def backward(ctx, *grad_output):
        op, prescale, postscale, process_set = ctx.args
        grads = [_reducescatter_grad(g, op, prescale, postscale, process_set)
                 for g in grad_output]
        return (None, None, None, None, None, *grouped_allgather(grads, process_set=process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    args = (name, op, process_set, prescale_factor, postscale_factor)
    return _reduce_compressed(
        compression, tensors, lambda *ts: _GroupedReducescatter.apply(*args, *ts),
        lambda ts: synchronize(grouped_reducescatter_async(ts, *args)))
