"""Gradient averaging for optax: a GradientTransformation chained before the optimizer, so that
every member of the set applies the same averaged update and the replicas stay identical.

    optimizer = optax.chain(tutti.jax.distributed_gradients(process_set=my_set), optax.adam(1e-3))

A step's whole gradient pytree goes through one grouped allreduce (tutti fuses it into one
transfer); inside a jitted step that is one ordered io_callback (tutti.jax.ops). The
transformation keeps no state. optax is imported when the transformation is made.
"""
from tutti._process_sets import global_process_set

from .ops import Average, grouped_allreduce


def _optax():
    try:
        import optax
    except ImportError as error:
        raise ImportError("tutti.jax's gradient transformations need optax: pip install "
                          "tutti[jax] (or pip install optax)") from error
    return optax


def distributed_gradients(op=Average, process_set=global_process_set, name=None):
    """An optax GradientTransformation that reduces the updates (a step's gradients) across
    `process_set` with `op` (Average: the data-parallel mean; Sum) in one grouped request named
    `name` (None: tutti's per-set counter)."""
    optax = _optax()

    def init(params):
        del params  # stateless: nothing to keep per parameter
        return optax.EmptyState()

    def update(updates, state, params=None):
        del params  # the reduction needs only the gradients
        return grouped_allreduce(updates, op=op, name=name, process_set=process_set), state

    return optax.GradientTransformation(init, update)


def DistributedOptimizer(optimizer, op=Average, process_set=global_process_set, name=None):
    """Horovod's name: `optimizer` (an optax GradientTransformation) applied to gradients
    reduced across the set first, i.e. optax.chain(distributed_gradients(...), optimizer)."""
    return _optax().chain(distributed_gradients(op, process_set, name), optimizer)
