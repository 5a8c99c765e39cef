"""Gradient compression for allreduce, as horovod.tensorflow.Compression: fp16 casts floating
tensors to float16 before the collective and back after it, halving the bytes on the wire."""
import tensorflow as tf

from .._compression import Compressor, NoneCompressor  # noqa: F401 - part of the API


class FP16Compressor(Compressor):
    """Floating tensors go as float16; other dtypes as they are."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tf.cast(tensor, ctx)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
