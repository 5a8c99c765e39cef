"""TensorFlow 2 on tutti: `import tutti.tensorflow as hvd`, with horovod.tensorflow's names.

Collectives take tf.Tensors and tf.Variables, eagerly and inside `tf.function`: eagerly they run
on the calling thread through zero-copy NumPy views of the CPU buffers; inside tf.function each
call is one `tf.py_function` on the CPU, run by a thread of TF's executor in this function's
program order (TF's automatic control dependencies order stateful ops), and blocking that thread
until the collective completed (ops.py says how). `tf.function(jit_compile=True)` is refused.
Tensors must be in host memory: an EagerTensor on a GPU is refused by the array core
(tutti._arrays); inside tf.function TF copies to and from the CPU-placed py_function. The
collectives are differentiable (tf.custom_gradient); DistributedGradientTape reduces a step's
gradients in one grouped call. docs/frameworks.md has the porting table.

Modules: ops (collectives), functions (variables, objects, gradient tapes), compression,
sync_batch_norm (SyncBatchNormalization, a Keras 3 layer, imported on first use).
Process sets are tutti._process_sets', shared with the other bindings of the array core.
"""
try:
    import tensorflow  # noqa: F401 - the binding's framework
except ImportError as error:
    raise ImportError("tutti.tensorflow needs TensorFlow: pip install tutti[tensorflow] "
                      "(or pip install tensorflow)") from error

from tutti import _world
from tutti._process_sets import (ProcessSet, add_process_set, autotune,  # noqa: F401
                                 global_process_set, init, remove_process_set, shutdown)
from tutti.errors import (HorovodInternalError, InvalidArgumentError, MismatchError,  # noqa: F401
                          NotAMemberError, TuttiError, UnsupportedError)

from .compression import Compression  # noqa: F401
from .functions import (DistributedGradientTape, PartialDistributedGradientTape,  # noqa: F401
                        allgather_object, broadcast_object, broadcast_variables,
                        reduce_gradients)
from .ops import (Average, Max, Min, Product, Sum, allgather, allreduce, alltoall,  # noqa: F401
                  barrier, broadcast, grouped_allgather, grouped_allreduce,
                  grouped_reducescatter, join, reducescatter)

is_initialized = _world.is_initialized
rank, size = _world.rank, _world.size
local_rank, local_size = _world.local_rank, _world.local_size
cross_rank, cross_size = _world.cross_rank, _world.cross_size


def __getattr__(name):
    # SyncBatchNormalization is a Keras layer: Keras is imported on its first use only.
    if name == "SyncBatchNormalization":
        from .sync_batch_norm import SyncBatchNormalization
        return SyncBatchNormalization
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
