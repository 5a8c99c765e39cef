"""Variables and Python objects across a set, and the gradient tapes.

broadcast_variables assigns root's values to tf.Variables (eagerly, or inside tf.function as one
py_function for the whole list followed by the assignments). broadcast_object and
allgather_object pickle into uint8 arrays and run eagerly on the calling thread, as
horovod.tensorflow's (which need a session or eager mode).

DistributedGradientTape wraps a tf.GradientTape: `gradient()` computes the local gradients with
the wrapped tape's recording, then reduces them across the set: every dense gradient of the call
in one grouped allreduce (one fused step; one py_function inside tf.function), tf.IndexedSlices
allgathered (or densified first with sparse_as_dense=True). The wrapper is a subclass of the
tape's own class sharing its recorded state, so it is still a tf.GradientTape.
"""

import tensorflow as tf

from tutti import _objects
from tutti._process_sets import global_process_set, members, set_id
from tutti.errors import InvalidArgumentError

from .compression import Compression
from .ops import Average, Sum, _core, _eager_only, _run, grouped_allreduce


def broadcast_variables(variables, root_rank, process_set=global_process_set, name=None):
    """Assigns global rank `root_rank`'s values to `variables` (a list of tf.Variables, e.g.
    model.variables) on every member of the set, in one request per variable submitted together
    (one py_function inside tf.function). Returns the list of assignment results."""
    variables = list(variables)
    if not variables:
        return []
    the_set = set_id(process_set)
    values = [tf.convert_to_tensor(v) for v in variables]
    broadcast = _run(lambda *arrays: _core.grouped_broadcast(arrays, root_rank, name, the_set),
                     values, [v.dtype for v in values], [v.shape for v in values], the_set)
    return [variable.assign(value) for variable, value in zip(variables, broadcast)]


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """`obj` as global rank `root_rank` has it, on every member of the set (eagerly only)."""
    _eager_only("broadcast_object")
    return _objects.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every member's `obj`, in set order (eagerly only)."""
    _eager_only("allgather_object")
    return _objects.allgather_object(obj, name, process_set)


# ---- gradients ---------------------------------------------------------------------------------
def reduce_gradients(gradients, op=Average, compression=Compression.none, sparse_as_dense=False,
                     gradient_predivide_factor=1.0, process_set=global_process_set, name=None):
    """A list of gradients (None kept as None) reduced across the set: dense ones in one grouped
    allreduce, tf.IndexedSlices allgathered unless `sparse_as_dense`. With
    `gradient_predivide_factor` f and op Average, the sum is taken of gradients divided by f and
    multiplied by f / size afterwards (Horovod's split of the averaging, against overflow)."""
    if op not in (Sum, Average):
        raise InvalidArgumentError("gradients are reduced with op Sum or Average")
    factor = float(gradient_predivide_factor)
    if factor != 1.0 and op != Average:
        raise InvalidArgumentError("gradient_predivide_factor needs op Average")
    prescale, postscale, wire_op = 1.0, 1.0, op
    if factor != 1.0:
        prescale, postscale, wire_op = 1.0 / factor, factor / len(members(process_set)), Sum
    present = [(i, g) for i, g in enumerate(gradients) if g is not None]
    if sparse_as_dense:
        present = [(i, tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g)
                   for i, g in present]
    reduced = grouped_allreduce([g for _, g in present], op=wire_op, name=name,
                                process_set=process_set, compression=compression,
                                prescale_factor=prescale, postscale_factor=postscale)
    out = list(gradients)
    for (i, _), value in zip(present, reduced):
        out[i] = value
    return out


class _DistributedGradientTape(tf.GradientTape):
    """The methods a wrapped tape's class gets (see DistributedGradientTape)."""

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        local = super(self.__class__, self).gradient(target, sources, output_gradients,
                                                     unconnected_gradients)
        flat = tf.nest.flatten(local)
        flat_sources = tf.nest.flatten(sources)
        shared = [g if not self._is_local(s) else None for g, s in zip(flat, flat_sources)]
        reduced = reduce_gradients(shared, **self._tutti_reduction)
        merged = [r if not self._is_local(s) else g
                  for g, r, s in zip(flat, reduced, flat_sources)]
        return tf.nest.pack_sequence_as(local, merged)

    def register_local_source(self, source):
        """Keeps `source`'s gradient local: it is returned as this rank computed it."""
        self._tutti_local_sources.add(id(source))

    def _is_local(self, source):
        return id(source) in self._tutti_local_sources


def DistributedGradientTape(gradtape, compression=Compression.none, sparse_as_dense=False,
                            op=Average, gradient_predivide_factor=1.0,
                            process_set=global_process_set, name=None):
    """`gradtape` whose gradient() returns the gradients reduced across `process_set` with `op`
    (Average or Sum), in one grouped allreduce per call. Wrap it after the `with` block (or wrap
    the new tape and use the wrapper as the context manager)."""
    if op not in (Sum, Average):
        raise InvalidArgumentError("DistributedGradientTape reduces with op Sum or Average")
    set_id(process_set)  # an unregistered set fails here, not at the first step
    cls = type(gradtape.__class__.__name__, (gradtape.__class__,),
               {k: v for k, v in _DistributedGradientTape.__dict__.items()
                if k not in ("__dict__", "__weakref__")})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)  # shares the recording: the same tape, reducing
    tape._tutti_reduction = dict(op=op, compression=compression, sparse_as_dense=sparse_as_dense,
                                 gradient_predivide_factor=gradient_predivide_factor,
                                 process_set=process_set, name=name)
    tape._tutti_local_sources = set()
    return tape


def PartialDistributedGradientTape(gradtape, local_layers=None, compression=Compression.none,
                                   sparse_as_dense=False, op=Average,
                                   gradient_predivide_factor=1.0,
                                   process_set=global_process_set, name=None):
    """DistributedGradientTape whose gradients for the variables of `local_layers` (Keras layers
    or tf.Modules, model-parallel parts) stay local."""
    tape = DistributedGradientTape(gradtape, compression, sparse_as_dense, op,
                                   gradient_predivide_factor, process_set, name)
    for layer in local_layers or []:
        if not hasattr(layer, "trainable_variables"):
            raise InvalidArgumentError(f"local_layers holds {type(layer).__name__}, which has no "
                                       "trainable_variables")
        for variable in layer.trainable_variables:
            tape.register_local_source(variable)
    return tape
