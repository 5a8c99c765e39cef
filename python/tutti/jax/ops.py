"""tutti.jax's collectives: jax.Arrays and pytrees through the array core (tutti._arrays).

Where they run:

- **Eagerly** (concrete arrays): on the calling thread. The call first waits for the ordered
  callbacks that jitted computations already dispatched (`jax.effects_barrier()`), so that this
  process submits its requests in program order, which unnamed requests need: tutti matches them
  across ranks by a per-set counter. An input on the CPU is read through a zero-copy NumPy view
  of its buffer and the result is a new jax.Array made from the new NumPy array tutti filled;
  one on a GPU goes through DLPack, zero-copy, and its result is a new jax.Array on that GPU
  (tutti/jax/_device.py says how the order between JAX's work and the collective is kept).
- **Inside `jax.jit`** (or under a transformation: traced arrays): as one
  `jax.experimental.io_callback(..., ordered=True)` per call (so per pytree), which runs on a
  thread of JAX's runtime when the computation reaches it. Arrays on a GPU travel to the host
  and back for it (XLA copies them for the callback): inside jit tutti.jax stages through host
  memory; an XLA FFI custom call that keeps them on the device is not there yet.
  `ordered=True` keeps this process's callbacks in program order and stops XLA from dropping or
  duplicating them, which `pure_callback` allows. Each one is a round trip through host memory
  and blocks its computation until the collective completed. The result's shape must be known
  when tracing: allgather inside jit needs the same first dimension on every member, alltoall
  takes no `splits`, and each is checked when the callback runs (a mismatch raises there, on
  every member).

allreduce and grouped_allreduce are differentiable (jax.custom_vjp): the cotangent of an
allreduce with op Sum or Average is the allreduce of the cotangent with the same op and factors
within the set, the reverse of `y = postscale * op_j(prescale * x_j)` summed over the ranks'
losses. Differentiating Min, Max or Product raises UnsupportedError.
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from tutti import _arrays, _dtypes, _world
from tutti._process_sets import global_process_set, members, set_id
from tutti.errors import (InvalidArgumentError, MismatchError, NotAMemberError,
                          UnsupportedError)

from ._device import HOOKS

Sum, Average, Min, Max, Product = (_dtypes.Sum, _dtypes.Average, _dtypes.Min, _dtypes.Max,
                                   _dtypes.Product)
_OP_NAMES = {Sum: "Sum", Average: "Average", Min: "Min", Max: "Max", Product: "Product"}


def _traced(leaves):
    return any(isinstance(leaf, jax.core.Tracer) for leaf in leaves)


def _as_jax(leaves):
    """Leaves as jax values (NumPy arrays and Python numbers become jax.Arrays)."""
    return [leaf if isinstance(leaf, (jax.Array, jax.core.Tracer)) else jnp.asarray(leaf)
            for leaf in leaves]


def _run(host_function, leaves, result_shapes, the_set):
    """Runs `host_function(*numpy arrays) -> [numpy arrays]` on `leaves` eagerly or, when they
    are traced, as one ordered io_callback whose results have `result_shapes`. A traced call on a
    set this rank is not a member of raises NotAMemberError (the library's message) while
    tracing: inside the callback it would surface only as JAX's runtime error."""
    if _traced(leaves):
        if _world.rank() not in members(the_set):
            raise NotAMemberError(f"rank {_world.rank()} is not a member of process set "
                                  f"{the_set}")
        def callback(*arrays):
            results = host_function(*arrays)
            for got, want in zip(results, result_shapes):
                if got.shape != want.shape:  # JAX's own message would not say why
                    raise MismatchError(f"inside jax.jit this rank traced a result of shape "
                                        f"{tuple(want.shape)}, the collective gave "
                                        f"{got.shape}: the members' shapes differ")
            return [np.asarray(r, want.dtype) for r, want in zip(results, result_shapes)]
        return io_callback(callback, result_shapes, *leaves, ordered=True)
    jax.effects_barrier()
    return [jnp.asarray(r) for r in host_function(*leaves)]


def _shapes(leaves):
    return [jax.ShapeDtypeStruct(leaf.shape, leaf.dtype) for leaf in leaves]


def _sub_name(name, suffix):
    return None if name is None else f"{name}.{suffix}"


def _check_op(op):
    if op not in _OP_NAMES:
        raise InvalidArgumentError(f"unknown reduction op {op!r}: use tutti.jax.Sum, Average, "
                                   f"Min, Max or Product")


# ---- allreduce: differentiable -----------------------------------------------------------------
class _Reduction(NamedTuple):
    op: int
    prescale_factor: float
    postscale_factor: float
    set_id: int
    name: object


def _reduce_leaves(reduction, leaves):
    def host(*arrays):
        return _arrays.grouped_allreduce(arrays, reduction.op, reduction.name, reduction.set_id,
                                         reduction.prescale_factor, reduction.postscale_factor,
                                         hooks=HOOKS)
    return tuple(_run(host, list(leaves), _shapes(leaves), reduction.set_id))


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _differentiable_reduce(reduction, leaves):
    return _reduce_leaves(reduction, leaves)


def _reduce_forward(reduction, leaves):
    return _reduce_leaves(reduction, leaves), None


def _reduce_backward(reduction, _, cotangents):
    if reduction.op not in (Sum, Average):
        raise UnsupportedError(f"the gradient of an allreduce with op {_OP_NAMES[reduction.op]} "
                               "is not defined in tutti.jax: differentiate Sum or Average")
    return (_reduce_leaves(reduction._replace(name=_sub_name(reduction.name, "grad")),
                           cotangents),)


_differentiable_reduce.defvjp(_reduce_forward, _reduce_backward)


def grouped_allreduce(tree, op=Average, name=None, process_set=global_process_set,
                      prescale_factor=1.0, postscale_factor=1.0):
    """Reduces every leaf of a pytree across the set in one grouped request (fused as one step;
    one io_callback inside jit) and returns a pytree of the same structure; differentiable."""
    _check_op(op)
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    if not leaves:
        return tree
    reduction = _Reduction(op, float(prescale_factor), float(postscale_factor),
                           set_id(process_set), name)
    return jax.tree_util.tree_unflatten(
        treedef, list(_differentiable_reduce(reduction, tuple(_as_jax(leaves)))))


def allreduce(tensor, op=Average, name=None, process_set=global_process_set, prescale_factor=1.0,
              postscale_factor=1.0):
    """Reduces one array across the set into a new array; differentiable. op defaults to
    Average, as in Horovod."""
    if isinstance(tensor, (list, tuple, dict)):
        raise InvalidArgumentError("allreduce takes one array; use grouped_allreduce for a pytree")
    return grouped_allreduce([tensor], op, name, process_set, prescale_factor,
                             postscale_factor)[0]


# ---- the others: not differentiable ------------------------------------------------------------
def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """A new array holding global rank `root_rank`'s `tensor` on every member."""
    return broadcast_variables([tensor], root_rank, name, process_set)[0]


def broadcast_variables(tree, root_rank, name=None, process_set=global_process_set):
    """A pytree of the same structure holding `root_rank`'s leaves (model parameters, optimizer
    state) on every member: JAX's arrays are immutable, so the broadcast values are returned.
    One io_callback for the whole tree inside jit."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    if not leaves:
        return tree
    leaves = _as_jax(leaves)
    the_set = set_id(process_set)
    results = _run(lambda *arrays: _arrays.grouped_broadcast(arrays, root_rank, name, the_set,
                                                                   hooks=HOOKS),
                   leaves, _shapes(leaves), the_set)
    return jax.tree_util.tree_unflatten(treedef, list(results))


broadcast_parameters = broadcast_variables  # horovod.torch's name for the same thing


def allgather(tensor, name=None, process_set=global_process_set):
    """Every member's array concatenated along the first dimension, in set order. Eagerly the
    first dimension may differ between members; inside jit it must be the same."""
    (tensor,) = _as_jax([tensor])
    if tensor.ndim == 0:
        raise InvalidArgumentError("allgather takes an array of at least one dimension, "
                                   "not a scalar")
    the_set = set_id(process_set)
    shape = (tensor.shape[0] * len(members(the_set)),) + tuple(tensor.shape[1:])
    return _run(lambda array: [_arrays.allgather(array, name, the_set, HOOKS)], [tensor],
                [jax.ShapeDtypeStruct(shape, tensor.dtype)], the_set)[0]


def reducescatter(tensor, op=Average, name=None, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """This member's rows of the reduction along the first dimension (the first members get one
    more row when the set's size does not divide it)."""
    _check_op(op)
    (tensor,) = _as_jax([tensor])
    if tensor.ndim == 0:
        raise InvalidArgumentError("reducescatter takes an array of at least one dimension, "
                                   "not a scalar")
    the_set = set_id(process_set)
    ranks = members(the_set)
    shape = tuple(tensor.shape)  # a non-member's: its request is refused
    if _world.rank() in ranks:
        count, position = len(ranks), ranks.index(_world.rank())
        rows = tensor.shape[0] // count + (1 if position < tensor.shape[0] % count else 0)
        shape = (rows,) + shape[1:]
    return _run(lambda array: [_arrays.reducescatter(array, op, name, the_set,
                                                     float(prescale_factor),
                                                     float(postscale_factor), HOOKS)],
                [tensor], [jax.ShapeDtypeStruct(shape, tensor.dtype)], the_set)[0]


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends the i-th group of rows to the set's i-th member. Without `splits` the rows are
    divided evenly and the received rows are returned; with `splits` (eagerly only: how many rows
    arrive is known only at run time) the result is (received rows, rows from each member), as
    horovod.torch returns them."""
    (tensor,) = _as_jax([tensor])
    the_set = set_id(process_set)
    if splits is None:
        return _run(lambda array: [_arrays.alltoall(array, None, name, the_set, HOOKS)[0]],
                    [tensor], _shapes([tensor]), the_set)[0]
    if _traced([tensor]) or isinstance(splits, jax.core.Tracer):
        raise UnsupportedError("alltoall with splits inside jax.jit: the number of rows it "
                               "receives is known only when it runs; call it outside jit, or "
                               "without splits")
    jax.effects_barrier()
    output, received = _arrays.alltoall(tensor, np.asarray(splits), name, the_set, HOOKS)
    return jnp.asarray(output), jnp.asarray(np.asarray(received, np.int32))


def barrier(process_set=global_process_set):
    """Returns once every member of the set reached it (eagerly only: it has no data for jit to
    order)."""
    jax.effects_barrier()
    _arrays.barrier(set_id(process_set))
