"""JAX on tutti: `import tutti.jax as hvd`, with Horovod's names where horovod.torch and
horovod.tensorflow have the concept (Horovod itself has no JAX binding).

Collectives take jax.Arrays (and pytrees where the name says so), eagerly and inside
`jax.jit`: eagerly they run on the calling thread through zero-copy NumPy views of the CPU
buffers; inside jit each call is one `io_callback(..., ordered=True)`, a host round trip that
runs in this process's program order on a thread of JAX's runtime (ops.py says how). Arrays must
be in host memory: a jax.Array on a GPU is refused (tutti._arrays). allreduce and
grouped_allreduce are differentiable; `distributed_gradients` is an optax transformation that
averages a step's gradients in one grouped call. docs/frameworks.md has the porting table.

Modules: ops (collectives), objects (broadcast_object, allgather_object), optimizer (optax).
Process sets are tutti._process_sets', shared with the other bindings of the array core.
"""
try:
    import jax  # noqa: F401 - the binding's framework
except ImportError as error:
    raise ImportError("tutti.jax needs JAX: pip install tutti[jax] (or pip install jax)") from error

from tutti import _world
from tutti._process_sets import (ProcessSet, add_process_set, autotune,  # noqa: F401
                                 global_process_set, init, remove_process_set, shutdown)
from tutti.errors import (HorovodInternalError, InvalidArgumentError, MismatchError,  # noqa: F401
                          NotAMemberError, TuttiError, UnsupportedError)

from .objects import allgather_object, broadcast_object  # noqa: F401
from .ops import (Average, Max, Min, Product, Sum, allgather, allreduce, alltoall,  # noqa: F401
                  barrier, broadcast, broadcast_parameters, broadcast_variables,
                  grouped_allreduce, reducescatter)
from .optimizer import DistributedOptimizer, distributed_gradients  # noqa: F401

is_initialized = _world.is_initialized
rank, size = _world.rank, _world.size
local_rank, local_size = _world.local_rank, _world.local_size
cross_rank, cross_size = _world.cross_rank, _world.cross_size
