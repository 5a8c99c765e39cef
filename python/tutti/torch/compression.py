"""Gradient compression for allreduce, as horovod.torch.Compression."""
import torch

from .. import _compression
from .._compression import Compressor, NoneCompressor, WireCompressor  # noqa: F401 - part of the API


class FP16Compressor(Compressor):
    """Sends floating tensors as float16, halving the bytes; other dtypes go as they are."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class Compression:
    """Horovod's `none` and `fp16` (a cast in torch, summed in float16), and tutti's library
    compressors (docs/compression.md), which compress float32 CPU tensors on the wire and reduce
    in float32: `wire_fp16`, `wire_bf16`, `topk(ratio)` with error feedback, and
    `adaptive(...)`, which picks per tensor from measured statistics, alike on every member."""
    none = NoneCompressor
    fp16 = FP16Compressor
    wire_fp16 = _compression.fp16
    wire_bf16 = _compression.bf16
    topk = staticmethod(_compression.topk)
    adaptive = staticmethod(_compression.adaptive)
