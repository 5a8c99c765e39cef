"""SyncBatchNorm, as horovod.torch's: in training, batch statistics are those of the batch
concatenated over the process set's members (one fused allreduce of per-channel sums, squared
sums and counts), so each member normalizes as if it saw the whole batch. The backward pass
allreduces the two per-channel sums the input gradient needs; weight and bias gradients stay
local (the optimizer's allreduce combines them), as in Horovod and torch.nn.SyncBatchNorm.
Works on CPU and CUDA tensors (plain tensor arithmetic, no CUDA-only kernels)."""
import torch
from torch.nn.modules.batchnorm import _BatchNorm
from tutti._process_sets import global_process_set

from .ops import Sum
from .functions import allreduce, grouped_allreduce


def _channel_view(t, dim):
    shape = [1] * dim
    shape[1] = -1
    return t.view(shape)


def _reduce_dims(x):
    return [d for d in range(x.dim()) if d != 1]


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, process_set):
        x = x.contiguous()
        dims = _reduce_dims(x)
        # Statistics in float32 at least: half-precision sums and counts overflow at 65504.
        wide = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        count = torch.tensor([x.numel() // x.shape[1]], dtype=wide.dtype, device=x.device)
        local = torch.cat([wide.sum(dims), (wide * wide).sum(dims), count])
        total = allreduce(local, op=Sum, process_set=process_set)
        channels = x.shape[1]
        n = total[-1]
        mean = total[:channels] / n
        var = (total[channels:2 * channels] / n - mean * mean).clamp_min(0)
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                unbiased = var * (n / (n - 1)) if float(n) > 1 else var
                running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
                running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
        xhat = ((wide - _channel_view(mean, x.dim())) * _channel_view(invstd, x.dim())).to(x.dtype)
        mean, invstd = mean.to(x.dtype), invstd.to(x.dtype)
        ctx.save_for_backward(xhat, weight, invstd, n)  # n stays wide: it may exceed 65504
        ctx.process_set = process_set
        y = xhat
        if weight is not None:
            y = y * _channel_view(weight, x.dim())
        if bias is not None:
            y = y + _channel_view(bias, x.dim())
        return y

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, invstd, n = ctx.saved_tensors
        dy = dy.contiguous()
        dims = _reduce_dims(dy)
        sum_dy = dy.sum(dims)
        sum_dy_xhat = (dy * xhat).sum(dims)
        grad_weight = sum_dy_xhat if weight is not None else None
        grad_bias = sum_dy if ctx.needs_input_grad[2] else None
        grad_x = None
        if ctx.needs_input_grad[0]:
            total_dy, total_dy_xhat = grouped_allreduce([sum_dy, sum_dy_xhat], op=Sum,
                                                        process_set=ctx.process_set)
            scale = invstd if weight is None else invstd * weight
            rank = dy.dim()
            grad_x = (_channel_view(scale, rank) * (
                dy - _channel_view(total_dy / n, rank)
                - xhat * _channel_view(total_dy_xhat / n, rank))).to(dy.dtype)
        return grad_x, grad_weight, grad_bias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over the batch of every member of `process_set` (default: all
    ranks); arguments as torch.nn.BatchNorm*d. In eval mode it is ordinary batch norm with the
    running statistics."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training and self.track_running_stats:
            return torch.nn.functional.batch_norm(
                input, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0,
                self.eps)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                momentum = 1.0 / float(self.num_batches_tracked)
        running_mean = self.running_mean if self.track_running_stats else None
        running_var = self.running_var if self.track_running_stats else None
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, running_mean,
                                            running_var, self.eps, momentum, self.process_set)
