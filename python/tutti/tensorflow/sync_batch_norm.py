"""SyncBatchNormalization: a Keras 3 BatchNormalization (TensorFlow backend) whose training-time
batch statistics are those of the whole process set's batch.

In training, each member sums its inputs, their squares and its count of values over the
reduction axes (the mask, where given, weights them), and one differentiable grouped allreduce
(Sum) adds them across the set: mean = sum / count, variance = sum of squares / count - mean**2.
The statistics are therefore those of the members' batches concatenated, also when the members'
batch sizes differ (horovod.tensorflow averages the members' means, which assumes equal batches).
The moving statistics, gamma and beta are updated as BatchNormalization does, from these
statistics; inference uses the moving statistics, with no collective. float16 and bfloat16 inputs
are summed in float32. Imported on first use of tutti.tensorflow.SyncBatchNormalization, so that
tutti.tensorflow does not import Keras.
"""
import keras
import tensorflow as tf

from tutti._process_sets import global_process_set
from tutti.errors import InvalidArgumentError

from .ops import Sum, grouped_allreduce


class SyncBatchNormalization(keras.layers.BatchNormalization):
    """keras.layers.BatchNormalization with batch statistics over the process set in training.
    `process_set` (default: every rank) is not part of get_config(): a model loaded from a file
    synchronizes over every rank unless it is given another one."""

    def __init__(self, fused=False, process_set=global_process_set, **kwargs):
        if fused:
            raise InvalidArgumentError("SyncBatchNormalization does not support fused=True "
                                       "(Keras 3 has no fused batch normalization)")
        if kwargs.get("synchronized"):
            raise InvalidArgumentError("SyncBatchNormalization synchronizes through tutti; "
                                       "synchronized=True (tf.distribute) does not apply")
        kwargs["synchronized"] = False
        if not kwargs.get("name"):
            kwargs["name"] = "sync_batch_normalization"
        super().__init__(**kwargs)
        self.process_set = process_set

    def _moments(self, inputs, mask):
        compute_dtype = inputs.dtype
        if compute_dtype in (tf.float16, tf.bfloat16):
            inputs = tf.cast(inputs, tf.float32)
        axes = list(self._reduction_axes)
        if mask is None:
            weights = tf.ones_like(inputs)
        else:
            weights = tf.broadcast_to(tf.cast(tf.expand_dims(mask, -1), inputs.dtype),
                                      tf.shape(inputs))
        total, squares, count = grouped_allreduce(
            [tf.reduce_sum(inputs * weights, axes), tf.reduce_sum(tf.square(inputs) * weights,
                                                                   axes),
             tf.reduce_sum(weights, axes)],
            op=Sum, process_set=self.process_set)
        count = tf.maximum(count, 1.0)
        mean = total / count
        variance = tf.maximum(squares / count - tf.square(mean), 0.0)
        return tf.cast(mean, compute_dtype), tf.cast(variance, compute_dtype)
