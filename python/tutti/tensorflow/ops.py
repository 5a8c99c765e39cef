"""tutti.tensorflow's collectives: tf.Tensors through the array core (tutti._arrays).

Where they run:

- **Eagerly**: on the calling thread. The input's CPU buffer is read through the buffer protocol
  (no copy) and the result is a new tf.Tensor made from the NumPy array tutti filled; an
  EagerTensor on a GPU goes through DLPack, zero-copy, and its result is a new tensor on that GPU
  (tutti/tensorflow/_device.py says how the order between TF's work and the collective is kept).
- **Inside `tf.function`** (while tracing, `tf.executing_eagerly()` is False): each call is **one**
  `tf.py_function` placed on the CPU, whose body runs the same host code on a thread of TF's
  executor when the graph reaches it, blocking that thread until the collective completed. A
  py_function is a stateful op, so TF's automatic control dependencies run this function's
  collectives in program order, which unnamed requests need: tutti matches them across ranks by
  a per-set counter. Result shapes need not be known when tracing (allgather and alltoall with
  splits work inside tf.function); what is known is set on the outputs. A failure inside the body
  reaches the caller as TF's error for the Python exception's class (ValueError ->
  tf.errors.InvalidArgumentError, NotImplementedError -> UnimplementedError, others ->
  UnknownError), whose message holds the tutti class and message.
- **`tf.function(jit_compile=True)`** (XLA) cannot run Python: refused while tracing with
  UnsupportedError.

Gradients (tf.custom_gradient), for the ranks' losses summed: allreduce and grouped_allreduce
(op Sum or Average: the cotangent is allreduced with the same op and factors; Min, Max, Product
raise UnsupportedError when differentiated), allgather (the cotangent summed over the set, this
member's rows), broadcast (the cotangent summed over the set on the root, zeros elsewhere),
reducescatter (the cotangents allgathered, with the same factors), grouped_allgather and
grouped_reducescatter (as their single counterparts, the cotangents in one grouped allreduce or
allgather) and alltoall (the cotangent sent back with the received splits).
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops as _tf_ops
from tensorflow.python.ops import control_flow_util as _control_flow_util

from tutti import _arrays, _dlpack, _dtypes, _numpy_api, _world
from tutti._process_sets import global_process_set, members, set_id
from tutti.errors import InvalidArgumentError, NotAMemberError, UnsupportedError

from ._device import HOOKS
from .compression import Compression

_core = _arrays.with_hooks(HOOKS)  # the core's collectives, GPU tensors through HOOKS

Sum, Average, Min, Max, Product = (_dtypes.Sum, _dtypes.Average, _dtypes.Min, _dtypes.Max,
                                   _dtypes.Product)
_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product"}


def _check_op(op):
    if op not in _OP_NAMES:
        raise InvalidArgumentError(f"unknown reduction op {op!r}: use tutti.tensorflow.Sum, "
                                   f"Average, Min, Max or Product")


def _sub_name(name, suffix):
    return None if name is None else f"{name}.{suffix}"


def _as_tensor(value):
    """A tf.Tensor of `value` (a Variable is read; NumPy arrays and numbers converted)."""
    if isinstance(value, tf.IndexedSlices):
        raise InvalidArgumentError("this collective takes dense tensors; tf.IndexedSlices go "
                                   "through allreduce, or tf.convert_to_tensor them first")
    return tf.convert_to_tensor(value)


def _refuse_xla():
    if _control_flow_util.GraphOrParentsInXlaContext(_tf_ops.get_default_graph()):
        raise UnsupportedError("tutti.tensorflow collectives cannot run inside "
                               "tf.function(jit_compile=True): XLA compiles no Python callback; "
                               "use tf.function without jit_compile (Keras: "
                               "model.compile(..., jit_compile=False))")


def _eager(tensor):
    """An eager input as the core takes it: a tensor on a GPU as is (DLPack, tutti/tensorflow/
    _device.py), else a NumPy view of its host memory."""
    device = _dlpack.device_of(tensor)
    if device is not None and device[0] == _dlpack.CUDA:
        return tensor
    return _arrays.host_array(tensor, "tensor")


def _run(host_function, tensors, out_dtypes, out_shapes, the_set):
    """Runs `host_function(*numpy arrays) -> [numpy arrays]` on `tensors`: eagerly on this
    thread, or while tracing as one tf.py_function on the CPU whose outputs have `out_dtypes`
    and get `out_shapes` (None: unknown). A traced call on a set this rank is not a member of
    raises NotAMemberError (the library's message) while tracing, not when the graph runs."""
    if tf.executing_eagerly():
        return [tf.convert_to_tensor(r) for r in host_function(*[_eager(t) for t in tensors])]
    _refuse_xla()
    if _world.rank() not in members(the_set):
        raise NotAMemberError(f"rank {_world.rank()} is not a member of process set {the_set}")

    def body(*inputs):
        # Inside the py_function the inputs are EagerTensors on the CPU (the op is placed there).
        return host_function(*[_arrays.host_array(t, "tensor") for t in inputs])
    with tf.device("/CPU:0"):
        outputs = tf.py_function(body, list(tensors), list(out_dtypes))
    for output, shape in zip(outputs, out_shapes):
        if shape is not None:
            output.set_shape(shape)
    return list(outputs)


def _zeros_like(array):
    """Zeros shaped as a host array or an eager tensor on a GPU, where it is."""
    return tf.zeros_like(array) if isinstance(array, tf.Tensor) else np.zeros_like(array)


def _scaled(array, scale):
    """`array * scale` in its dtype, for a host array or an eager tensor on a GPU."""
    if isinstance(array, tf.Tensor):
        return tf.cast(tf.cast(array, tf.float64) * scale, array.dtype)
    return (array * scale).astype(array.dtype)


def _zeros_for_none(cotangents, forwards):
    return [tf.zeros_like(f) if c is None else c for c, f in zip(cotangents, forwards)]


# ---- allreduce ---------------------------------------------------------------------------------
def _grouped_dense(tensors, op, name, the_set, prescale_factor, postscale_factor):
    """Dense tensors reduced in one grouped request (one fused step), differentiable."""
    def host(*arrays):
        return _core.grouped_allreduce(arrays, op, name, the_set, prescale_factor,
                                         postscale_factor)

    @tf.custom_gradient
    def reduce(*inputs):
        outputs = _run(host, inputs, [t.dtype for t in inputs], [t.shape for t in inputs],
                       the_set)

        def gradient(*cotangents):
            if op not in (Sum, Average):
                raise UnsupportedError(f"the gradient of an allreduce with op {_OP_NAMES[op]} is "
                                       "not defined in tutti.tensorflow: differentiate Sum or "
                                       "Average")
            return _grouped_dense(_zeros_for_none(cotangents, outputs), op,
                                  _sub_name(name, "grad"), the_set, prescale_factor,
                                  postscale_factor)
        return outputs, gradient
    return list(reduce(*tensors))


def _sparse_allreduce(slices, op, name, the_set, prescale_factor, postscale_factor):
    """tf.IndexedSlices as Horovod reduces them: values and indices allgathered (every member's
    rows, repeated indices summed when densified); Average divides the values by the set's size."""
    if op not in (Sum, Average):
        raise UnsupportedError(f"allreduce of tf.IndexedSlices supports op Sum and Average, not "
                               f"{_OP_NAMES[op]}: pass sparse_as_dense=True or densify it")
    values = allgather(slices.values, _sub_name(name, "values"), the_set)
    indices = allgather(slices.indices, _sub_name(name, "indices"), the_set)
    scale = prescale_factor * postscale_factor
    if op == Average:
        scale /= len(members(the_set))
    if scale != 1.0:
        values = values * tf.cast(scale, values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def _scaled_op(op, process_set, prescale_factor, postscale_factor):
    _check_op(op)
    return op, set_id(process_set), float(prescale_factor), float(postscale_factor)


def allreduce(tensor, op=Average, name=None, process_set=global_process_set,
              compression=Compression.none, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces one tensor (or tf.Variable) across the set into a new tensor; differentiable.
    A tf.IndexedSlices is allgathered instead (Sum and Average), as Horovod does. op defaults to
    Average; `compression` (Compression.fp16) casts floating tensors to float16 on the wire."""
    op, the_set, prescale_factor, postscale_factor = _scaled_op(op, process_set, prescale_factor,
                                                                postscale_factor)
    if isinstance(tensor, (list, tuple, dict)):
        raise InvalidArgumentError("allreduce takes one tensor; use grouped_allreduce for a list")
    if isinstance(tensor, tf.IndexedSlices):
        return _sparse_allreduce(tensor, op, name, the_set, prescale_factor, postscale_factor)
    compressed, context = compression.compress(_as_tensor(tensor))
    (reduced,) = _grouped_dense([compressed], op, name, the_set, prescale_factor,
                                postscale_factor)
    return compression.decompress(reduced, context)


def grouped_allreduce(tensors, op=Average, name=None, process_set=global_process_set,
                      compression=Compression.none, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces a list of tensors in one grouped request (fused as one step; one py_function
    inside tf.function) and returns a list; tf.IndexedSlices among them are allgathered apart.
    Differentiable."""
    op, the_set, prescale_factor, postscale_factor = _scaled_op(op, process_set, prescale_factor,
                                                                postscale_factor)
    tensors = list(tensors)
    results = [None] * len(tensors)
    dense, contexts = [], []
    for i, tensor in enumerate(tensors):
        if isinstance(tensor, tf.IndexedSlices):
            results[i] = _sparse_allreduce(tensor, op, _sub_name(name, i), the_set,
                                           prescale_factor, postscale_factor)
        else:
            compressed, context = compression.compress(_as_tensor(tensor))
            dense.append((i, compressed))
            contexts.append(context)
    if dense:
        reduced = _grouped_dense([t for _, t in dense], op, name, the_set, prescale_factor,
                                 postscale_factor)
        for (i, _), out, context in zip(dense, reduced, contexts):
            results[i] = compression.decompress(out, context)
    return results


# ---- allgather, broadcast, reducescatter, alltoall ---------------------------------------------
def _rows_before_and_mine(array, name, the_set):
    """(rows of the members before this one, this member's rows), from an allgather of counts."""
    counts = _core.allgather(np.array([array.shape[0]], np.int64), name, the_set)
    position = members(the_set).index(_world.rank())
    return int(counts[:position].sum()), int(counts[position])


def allgather(tensor, name=None, process_set=global_process_set):
    """Every member's tensor concatenated along the first dimension, in set order (the first
    dimension may differ between members, inside tf.function too); differentiable."""
    tensor = _as_tensor(tensor)
    if tensor.shape.rank == 0:
        raise InvalidArgumentError("allgather takes a tensor of at least one dimension, "
                                   "not a scalar")
    the_set = set_id(process_set)

    @tf.custom_gradient
    def gather(value):
        (output,) = _run(lambda a: [_core.allgather(a, name, the_set)], [value],
                         [value.dtype], [tf.TensorShape([None]).concatenate(value.shape[1:])],
                         the_set)

        def gradient(cotangent):
            def host(array, summed):
                before, mine = _rows_before_and_mine(array, _sub_name(name, "grad.rows"),
                                                     the_set)
                total = _core.allreduce(summed, Sum, _sub_name(name, "grad"), the_set)
                return [total[before:before + mine]]
            return _run(host, [value, cotangent], [value.dtype], [value.shape], the_set)[0]
        return output, gradient
    return gather(tensor)


def _list_of_tensors(tensors, function):
    if not isinstance(tensors, (list, tuple)):
        raise InvalidArgumentError(f"{function} takes a list of tensors, not "
                                   f"{type(tensors).__name__}")
    tensors = [_as_tensor(t) for t in tensors]
    for i, tensor in enumerate(tensors):
        if tensor.shape.rank == 0:
            raise InvalidArgumentError(f"{function} takes tensors of at least one dimension; "
                                       f"tensors[{i}] is a scalar")
    return tensors


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of every tensor of the list in one grouped request (one py_function inside
    tf.function); returns a list. First dimensions may differ between members; differentiable
    (the cotangents summed over the set in one grouped allreduce, this member's rows)."""
    tensors = _list_of_tensors(tensors, "grouped_allgather")
    if not tensors:
        return []
    the_set = set_id(process_set)

    @tf.custom_gradient
    def gather(*values):
        outputs = _run(lambda *a: _core.grouped_allgather(a, name, the_set), values,
                       [v.dtype for v in values],
                       [tf.TensorShape([None]).concatenate(v.shape[1:]) for v in values],
                       the_set)

        def gradient(*cotangents):
            count = len(values)

            def host(*arrays):
                rows = np.array([a.shape[0] for a in arrays[:count]], np.int64)
                every = _core.allgather(rows, _sub_name(name, "grad.rows"),
                                          the_set).reshape(-1, count)
                position = members(the_set).index(_world.rank())
                totals = _core.grouped_allreduce(arrays[count:], Sum, _sub_name(name, "grad"),
                                                   the_set)
                before = every[:position].sum(0)
                return [total[b:b + m] for total, b, m in zip(totals, before, every[position])]
            return _run(host, list(values) + _zeros_for_none(cotangents, outputs),
                        [v.dtype for v in values], [v.shape for v in values], the_set)
        return outputs, gradient
    return list(gather(*tensors))


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A new tensor holding global rank `root_rank`'s `tensor` on every member; differentiable
    (the root's gradient is the set's sum of cotangents, the others' zero)."""
    tensor = _as_tensor(tensor)
    the_set = set_id(process_set)

    @tf.custom_gradient
    def send(value):
        (output,) = _run(lambda a: [_core.broadcast(a, root_rank, name, the_set)], [value],
                         [value.dtype], [value.shape], the_set)

        def gradient(cotangent):
            def host(array):
                total = _core.allreduce(array, Sum, _sub_name(name, "grad"), the_set)
                return [total if _world.rank() == root_rank else _zeros_like(total)]
            return _run(host, [cotangent], [value.dtype], [value.shape], the_set)[0]
        return output, gradient
    return send(tensor)


def reducescatter(tensor, op=Average, name=None, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """This member's rows of the reduction along the first dimension (the first members get one
    more row when the set's size does not divide it); differentiable for Sum and Average."""
    op, the_set, prescale_factor, postscale_factor = _scaled_op(op, process_set, prescale_factor,
                                                                postscale_factor)
    if op not in (Sum, Average):
        raise InvalidArgumentError(f"reducescatter takes op Sum or Average, not {_OP_NAMES[op]}")
    tensor = _as_tensor(tensor)
    if tensor.shape.rank == 0:
        raise InvalidArgumentError("reducescatter takes a tensor of at least one dimension, "
                                   "not a scalar")

    @tf.custom_gradient
    def scatter(value):
        (output,) = _run(lambda a: [_core.reducescatter(a, op, name, the_set, prescale_factor,
                                                          postscale_factor)],
                         [value], [value.dtype],
                         [tf.TensorShape([None]).concatenate(value.shape[1:])], the_set)

        def gradient(cotangent):
            scale = prescale_factor * postscale_factor
            if op == Average:
                scale /= len(members(the_set))

            def host(array):
                gathered = _core.allgather(array, _sub_name(name, "grad"), the_set)
                return [_scaled(gathered, scale)]
            return _run(host, [cotangent], [value.dtype], [value.shape], the_set)[0]
        return output, gradient
    return scatter(tensor)


def grouped_reducescatter(tensors, op=Average, name=None, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of every tensor of the list (one py_function inside tf.function); returns
    a list. The core has no grouped reducescatter: one request per tensor, all submitted from that
    one call before the first wait (named `name.i`), so the ranks submit them in the same order;
    they complete one by one, not as one fused step. Differentiable for Sum and Average (the
    cotangents in one grouped allgather)."""
    op, the_set, prescale_factor, postscale_factor = _scaled_op(op, process_set, prescale_factor,
                                                                postscale_factor)
    if op not in (Sum, Average):
        raise InvalidArgumentError(f"grouped_reducescatter takes op Sum or Average, not "
                                   f"{_OP_NAMES[op]}")
    tensors = _list_of_tensors(tensors, "grouped_reducescatter")
    if not tensors:
        return []

    @tf.custom_gradient
    def scatter(*values):
        outputs = _run(lambda *a: _core.grouped_reducescatter(a, op, name, the_set,
                                                                prescale_factor,
                                                                postscale_factor),
                       values, [v.dtype for v in values],
                       [tf.TensorShape([None]).concatenate(v.shape[1:]) for v in values],
                       the_set)

        def gradient(*cotangents):
            scale = prescale_factor * postscale_factor
            if op == Average:
                scale /= len(members(the_set))

            def host(*arrays):
                gathered = _core.grouped_allgather(arrays, _sub_name(name, "grad"), the_set)
                return [_scaled(g, scale) for g in gathered]
            return _run(host, _zeros_for_none(cotangents, outputs), [v.dtype for v in values],
                        [v.shape for v in values], the_set)
        return outputs, gradient
    return list(scatter(*tensors))


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends the i-th group of rows to the set's i-th member (evenly divided without `splits`)
    and returns (received rows concatenated in set order, rows received from each member, an
    int32 tensor), as horovod.tensorflow. Works inside tf.function with splits too; the rows are
    differentiable (the cotangent travels back with the received splits)."""
    tensor = _as_tensor(tensor)
    the_set = set_id(process_set)
    split_inputs = [] if splits is None else [tf.cast(_as_tensor(splits), tf.int64)]

    def host(array, *split_arrays):
        output, received = _core.alltoall(array, split_arrays[0] if split_arrays else None,
                                            name, the_set)
        return [output, np.asarray(received, np.int32)]

    @tf.custom_gradient
    def exchange(value):
        output, received = _run(host, [value] + split_inputs, [value.dtype, tf.int32],
                                [tf.TensorShape([None]).concatenate(value.shape[1:]),
                                 tf.TensorShape([len(members(the_set))])], the_set)

        def gradient(cotangent, _received_cotangent=None):
            back = _run(lambda a, s: [_core.alltoall(a, s, _sub_name(name, "grad"),
                                                       the_set)[0]],
                        [cotangent, tf.cast(received, tf.int64)], [value.dtype],
                        [value.shape], the_set)[0]
            return back
        return (output, tf.stop_gradient(received)), gradient
    output, received = exchange(tensor)
    return output, received


# ---- eager-only: no data for a graph to order --------------------------------------------------
def _eager_only(what):
    if not tf.executing_eagerly():
        raise UnsupportedError(f"{what} runs eagerly only, not inside tf.function")


def barrier(process_set=global_process_set):
    """Returns once every member of the set reached it (eagerly only)."""
    _eager_only("barrier")
    _arrays.barrier(set_id(process_set))


def join(process_set=global_process_set):
    """This rank has no more data: it stands in for the set's collectives until every member
    joined; returns the global rank that joined last (eagerly only)."""
    _eager_only("join")
    return _numpy_api.join(set_id(process_set))
