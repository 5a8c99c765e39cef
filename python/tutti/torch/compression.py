"""Gradient compression for allreduce, as horovod.torch.Compression."""
import torch

from .._compression import Compressor, NoneCompressor  # noqa: F401 - part of the API


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
    none = NoneCompressor
    fp16 = FP16Compressor
