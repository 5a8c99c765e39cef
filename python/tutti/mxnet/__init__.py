"""MXNet on tutti: `import tutti.mxnet as hvd` in a horovod.mxnet training script (MXNet 1.9.1,
the last release; it needs numpy<1.24).

Everything runs on the calling thread and returns once its request completed: the collectives
(ops) read an NDArray's host memory through DLPack without a copy, wait for MXNet's engine to
finish writing it first, and return new NDArrays (or write into the given one, for the names
ending in `_`). NDArrays on a GPU context go through the framework-neutral core's device path
(tutti/mxnet/_device.py), their results on the same context: never run on a GPU. training holds DistributedOptimizer (wraps an
mx.optimizer.Optimizer), DistributedTrainer (a gluon.Trainer whose gradients go through one
grouped allreduce per step) and broadcast_parameters; each takes a process set. Process sets are
tutti._process_sets', shared with the other bindings of the array core. docs/frameworks.md has
the porting table.
"""
try:
    import mxnet  # noqa: F401 - the binding's framework
except ImportError as error:
    raise ImportError("tutti.mxnet needs MXNet: pip install tutti[mxnet] (or pip install "
                      "mxnet==1.9.1 'numpy<1.24')") from error

from tutti import _world
from tutti._process_sets import (ProcessSet, add_process_set, autotune,  # noqa: F401
                                 global_process_set, init, remove_process_set, shutdown)
from tutti.errors import (HorovodInternalError, InvalidArgumentError, MismatchError,  # noqa: F401
                          NotAMemberError, TuttiError, UnsupportedError)

from .ops import (Average, Max, Min, Product, Sum, allgather, allgather_object,  # noqa: F401
                  allreduce, allreduce_, alltoall, broadcast, broadcast_, broadcast_object,
                  grouped_allgather, grouped_allreduce, grouped_allreduce_,
                  grouped_reducescatter, reducescatter)
from .training import (DistributedOptimizer, DistributedTrainer,  # noqa: F401
                       broadcast_parameters)

is_initialized = _world.is_initialized
rank, size = _world.rank, _world.size
local_rank, local_size = _world.local_rank, _world.local_size
cross_rank, cross_size = _world.cross_rank, _world.cross_size
