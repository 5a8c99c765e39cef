"""tutti.mxnet's collectives: NDArrays through the array core (tutti._arrays), on the calling
thread, each returning once its request completed (there is no handle to wait on, hence no
`priority`: a process never has two of these requests pending to order).

In: an NDArray on a CPU context is read through DLPack (`to_dlpack_for_read`, which first waits
for MXNet's engine to finish the operations writing it) as a NumPy view of its own memory, without
a copy; bool NDArrays, which NumPy 1.23 cannot take through DLPack, are copied with asnumpy().
One on a GPU context goes through DLPack too, with the core's device path and its result on
that context (tutti/mxnet/_device.py; never run on a GPU). Sparse NDArrays are refused.

Out: the core's result is a new NumPy array that nothing else references; it becomes an NDArray
through DLPack without a copy when the input is on cpu(0) (a copy onto another CPU context, and
for bool). The in-place names (allreduce_, grouped_allreduce_, broadcast_) copy the result into
the caller's NDArray once and return it. An mx.np.ndarray in gives an mx.np.ndarray out.
"""
import warnings

import mxnet as mx
import numpy as np

from tutti import _arrays, _dtypes, _objects
from tutti._process_sets import global_process_set, set_id
from tutti.errors import InvalidArgumentError, UnsupportedError

from ._device import HOOKS, NDArrayView

Sum, Average, Min, Max, Product = (_dtypes.Sum, _dtypes.Average, _dtypes.Min, _dtypes.Max,
                                   _dtypes.Product)
_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product"}
_core = _arrays.with_hooks(HOOKS)  # the core's collectives, GPU NDArrays through HOOKS


def array_view(tensor, what="tensor"):
    """`tensor` as the core takes it: a NumPy array over its host memory, or on a GPU context an
    NDArrayView (see the module's docstring)."""
    if not isinstance(tensor, mx.nd.NDArray):
        raise InvalidArgumentError(f"{what} must be an mxnet NDArray, not {type(tensor).__name__}")
    if tensor.stype != "default":
        raise UnsupportedError(f"{what} is a {tensor.stype} NDArray: tutti.mxnet reduces dense "
                               f"arrays only; convert it with .tostype('default')")
    if tensor.context.device_type not in ("cpu", "cpu_pinned", "cpu_shared", "gpu"):
        raise UnsupportedError(f"{what} is on {tensor.context}: tutti.mxnet takes host and GPU "
                               f"memory; copy it with .as_in_context(mx.cpu()) first")
    if tensor.dtype == np.bool_:
        return tensor.asnumpy()
    if tensor.context.device_type == "gpu":
        return NDArrayView(tensor)
    return np.from_dlpack(NDArrayView(tensor))


def as_ndarray(array, like):
    """A new NDArray holding the core's result `array` (a NumPy array, or an NDArrayView of a GPU
    result, which nothing else references), on the context of the NDArray `like` and of its kind
    (mx.nd or mx.np)."""
    if isinstance(array, NDArrayView):
        out = array.ndarray
    elif array.dtype == np.bool_ or like.context != mx.cpu(0):
        out = mx.nd.array(array, ctx=like.context, dtype=array.dtype)
    else:
        out = mx.nd.from_dlpack(array.__dlpack__())
    return out.as_np_ndarray() if isinstance(like, mx.np.ndarray) else out


def _write(tensor, array):
    """Copies `array` into the NDArray `tensor` (its shape), outside autograd's record."""
    if isinstance(array, NDArrayView):
        array = array.ndarray
    with mx.autograd.pause():
        tensor[:] = array.reshape(tensor.shape)
    return tensor


def reduce_op(op, average):
    """Horovod's rules for the deprecated `average` and the default op (Average)."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed in v1.0",
                      DeprecationWarning, stacklevel=3)
        return Average if average else Sum
    op = Average if op is None else op
    if op not in _OP_NAMES:
        raise InvalidArgumentError(f"unknown reduction op {op!r}: use tutti.mxnet.Sum, Average, "
                                   f"Min, Max or Product")
    return op


def _tensor_list(tensors):
    if not isinstance(tensors, (list, tuple)):
        raise InvalidArgumentError(f"tensors must be a list of NDArrays, not "
                                   f"{type(tensors).__name__}")
    return list(tensors)


def _reduce(tensors, op, name, prescale_factor, postscale_factor, process_set):
    views = [array_view(t, f"tensors[{i}]") for i, t in enumerate(tensors)]
    return _core.grouped_allreduce(views, op, name, set_id(process_set),
                                     float(prescale_factor), float(postscale_factor))


# ---- allreduce ---------------------------------------------------------------------------------
def grouped_allreduce(tensors, average=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set, op=None):
    """New NDArrays: every tensor of the list reduced across the set in one grouped request
    (fused as one step). op defaults to Average, as in Horovod."""
    tensors = _tensor_list(tensors)
    op = reduce_op(op, average)
    if not tensors:
        return []
    results = _reduce(tensors, op, name, prescale_factor, postscale_factor, process_set)
    return [as_ndarray(r, t) for r, t in zip(results, tensors)]


def grouped_allreduce_(tensors, average=None, name=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set, op=None):
    """grouped_allreduce writing each result into its tensor; returns the tensors."""
    tensors = _tensor_list(tensors)
    op = reduce_op(op, average)
    if not tensors:
        return tensors
    results = _reduce(tensors, op, name, prescale_factor, postscale_factor, process_set)
    return [_write(t, r) for t, r in zip(tensors, results)]


def _one(tensor, function):
    if isinstance(tensor, (list, tuple)):
        raise InvalidArgumentError(f"{function} takes one NDArray; use grouped_{function} for a "
                                   f"list")
    return [tensor]


def allreduce(tensor, average=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set, op=None):
    """A new NDArray: `tensor` reduced across the set (op defaults to Average)."""
    return grouped_allreduce(_one(tensor, "allreduce"), average, name, prescale_factor,
                             postscale_factor, process_set, op)[0]


def allreduce_(tensor, average=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set, op=None):
    """allreduce writing the result into `tensor`; returns it."""
    return grouped_allreduce_(_one(tensor, "allreduce"), average, name, prescale_factor,
                              postscale_factor, process_set, op)[0]


# ---- broadcast, allgather, alltoall, reducescatter ---------------------------------------------
def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A new NDArray holding global rank `root_rank`'s `tensor` on every member."""
    result = _core.broadcast(array_view(tensor), root_rank, name, set_id(process_set))
    return as_ndarray(result, tensor)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """broadcast writing `root_rank`'s values into `tensor` on every member; returns it."""
    result = _core.broadcast(array_view(tensor), root_rank, name, set_id(process_set))
    return _write(tensor, result)


def allgather(tensor, name=None, process_set=global_process_set):
    """A new NDArray: every member's tensor concatenated along the first dimension, in set order
    (the first dimension may differ between members)."""
    return as_ndarray(_core.allgather(array_view(tensor), name, set_id(process_set)), tensor)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends the i-th group of rows of `tensor` to the set's i-th member. Without `splits` the
    rows are divided evenly and the received rows are returned; with `splits` (a list or an
    NDArray of row counts) the result is (received rows, an int32 NDArray on the CPU of the rows
    received from each member), as Horovod returns them."""
    if splits is not None:
        splits = splits.asnumpy() if isinstance(splits, mx.nd.NDArray) else np.asarray(splits)
    output, received = _core.alltoall(array_view(tensor), splits, name, set_id(process_set))
    if splits is None:
        return as_ndarray(output, tensor)
    return as_ndarray(output, tensor), mx.nd.array(received, ctx=mx.cpu(), dtype=np.int32)


def reducescatter(tensor, op=Average, name=None, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """A new NDArray: this member's rows of the reduction along the first dimension (the first
    members get one more row when the set's size does not divide it). op Average or Sum, as
    Horovod."""
    if op not in (Average, Sum):
        raise InvalidArgumentError(f"reducescatter takes op tutti.mxnet.Average or Sum, not "
                                   f"{_OP_NAMES.get(op, repr(op))}")
    result = _core.reducescatter(array_view(tensor), op, name, set_id(process_set),
                                   float(prescale_factor), float(postscale_factor))
    return as_ndarray(result, tensor)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """New NDArrays: allgather of every tensor of the list in one grouped request (negotiated as
    one unit); first dimensions may differ between members."""
    tensors = _tensor_list(tensors)
    views = [array_view(t, f"tensors[{i}]") for i, t in enumerate(tensors)]
    results = _core.grouped_allgather(views, name, set_id(process_set))
    return [as_ndarray(r, t) for r, t in zip(results, tensors)]


def grouped_reducescatter(tensors, op=Average, name=None, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """New NDArrays: reducescatter of every tensor of the list (op Average or Sum). The core has
    no grouped reducescatter: one request per tensor (named `name.i`), all submitted by this call
    before the first wait, so every rank submits them in the same order; they complete one by one,
    not as one fused step."""
    if op not in (Average, Sum):
        raise InvalidArgumentError(f"grouped_reducescatter takes op tutti.mxnet.Average or Sum, "
                                   f"not {_OP_NAMES.get(op, repr(op))}")
    tensors = _tensor_list(tensors)
    views = [array_view(t, f"tensors[{i}]") for i, t in enumerate(tensors)]
    results = _core.grouped_reducescatter(views, op, name, set_id(process_set),
                                            float(prescale_factor), float(postscale_factor))
    return [as_ndarray(r, t) for r, t in zip(results, tensors)]


# ---- Python objects ----------------------------------------------------------------------------
def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """`obj` as global rank `root_rank` has it, on every member (pickled through uint8 arrays;
    tutti/_objects.py)."""
    return _objects.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every member's `obj`, in set order."""
    return _objects.allgather_object(obj, name, process_set)
