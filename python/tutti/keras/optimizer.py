"""DistributedOptimizer for Keras 3: a subclass of the wrapped optimizer's own class (so it is
still that optimizer, saved and configured as one) whose `apply` reduces the gradients first.

Keras calls `apply` inside its train step: on the TensorFlow backend inside a tf.function, where
tutti.tensorflow's grouped_allreduce becomes one py_function; on the JAX backend inside the
jitted step (stateless_apply), where tutti.jax's grouped_allreduce becomes one ordered
io_callback. Each backend's binding is imported when the optimizer is made.
"""
import keras

from tutti import _dtypes
from tutti._process_sets import global_process_set, set_id
from tutti.errors import InvalidArgumentError, UnsupportedError

Sum, Average = _dtypes.Sum, _dtypes.Average


class _NoCompression:
    """Gradients go as they are."""


class _FP16Compression:
    """Floating gradients go as float16 (cast back after the reduction)."""


class Compression:
    none = _NoCompression
    fp16 = _FP16Compression


def _tensorflow_reducer(op, compression, sparse_as_dense, process_set, name):
    import tutti.tensorflow as tf_binding
    wire = tf_binding.Compression.fp16 if compression is Compression.fp16 else \
        tf_binding.Compression.none

    def reduce(gradients):
        return tf_binding.reduce_gradients(gradients, op=op, compression=wire,
                                           sparse_as_dense=sparse_as_dense,
                                           process_set=process_set, name=name)
    return reduce


def _jax_reducer(op, compression, sparse_as_dense, process_set, name):
    import jax.numpy as jnp

    import tutti.jax as jax_binding
    if sparse_as_dense:
        raise InvalidArgumentError("sparse_as_dense applies to Keras' TensorFlow backend only: "
                                   "JAX's gradients are always dense")

    def reduce(gradients):
        present = [(i, g) for i, g in enumerate(gradients) if g is not None]
        dtypes = [g.dtype for _, g in present]
        values = [g.astype(jnp.float16) if compression is Compression.fp16
                  and jnp.issubdtype(g.dtype, jnp.floating) else g for _, g in present]
        reduced = jax_binding.grouped_allreduce(values, op=op, name=name,
                                                process_set=process_set)
        out = list(gradients)
        for (i, _), value, dtype in zip(present, reduced, dtypes):
            out[i] = value.astype(dtype)
        return out
    return reduce


_REDUCERS = {"tensorflow": _tensorflow_reducer, "jax": _jax_reducer}


class _DistributedOptimizer:
    """The method a wrapped optimizer's class gets (see DistributedOptimizer)."""

    def apply(self, grads, trainable_variables=None):
        return super(self.__class__, self).apply(self._tutti_reduce(list(grads)),
                                                 trainable_variables)


def DistributedOptimizer(optimizer, name=None, compression=Compression.none,
                         sparse_as_dense=False, op=Average, process_set=global_process_set):
    """A new optimizer of `optimizer`'s class and configuration that averages (op=Average) or
    sums (op=Sum) each step's gradients across `process_set` in one grouped request named `name`
    (None: tutti's per-set counter) before applying them. compression=Compression.fp16 sends
    floating gradients as float16; sparse_as_dense densifies TensorFlow's IndexedSlices
    gradients (embeddings) instead of allgathering them."""
    backend = keras.backend.backend()
    if backend not in _REDUCERS:
        raise UnsupportedError(f"tutti.keras supports Keras' tensorflow and jax backends, not "
                               f"{backend}")
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise InvalidArgumentError(f"DistributedOptimizer wraps a keras.optimizers.Optimizer, "
                                   f"not {type(optimizer).__name__}")
    if op not in (Sum, Average):
        raise InvalidArgumentError("DistributedOptimizer reduces with op Sum or Average")
    if compression not in (Compression.none, Compression.fp16):
        raise InvalidArgumentError("compression must be tutti.keras.Compression.none or fp16")
    set_id(process_set)  # an unregistered set fails here, not in the first step
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               {"apply": _DistributedOptimizer.apply})
    distributed = cls.from_config(optimizer.get_config())
    distributed._tutti_reduce = _REDUCERS[backend](op, compression, sparse_as_dense,
                                                   process_set, name)
    return distributed
