"""Keras 3 on tutti: `import tutti.keras as hvd`, with horovod.tensorflow.keras' names, on Keras'
TensorFlow and JAX backends.

DistributedOptimizer wraps a Keras optimizer: its `apply` (which `apply_gradients` and, on JAX,
`stateless_apply` go through) first reduces the step's gradients across the process set in one
grouped call, with the backend's binding: tutti.tensorflow inside Keras' tf.function train step
(one py_function; compile with jit_compile=False, which Keras picks on CPU by default, since XLA
runs no Python), tutti.jax inside Keras' jitted JAX train step (one ordered io_callback). The
callbacks (tutti.keras.callbacks) run in fit's Python loop, on the calling thread, through the
framework-neutral array core on NumPy copies of the values; each takes process_set=, so models in
different sets train side by side. Keras' PyTorch backend is refused (not run: it needs torch >=
2.1). docs/frameworks.md has the porting table.
"""
try:
    import keras
except ImportError as error:
    raise ImportError("tutti.keras needs Keras 3: pip install tutti[keras] (or pip install "
                      "keras)") from error

from tutti import _world
from tutti._process_sets import (ProcessSet, add_process_set, autotune,  # noqa: F401
                                 global_process_set, init, remove_process_set, shutdown)
from tutti.errors import (HorovodInternalError, InvalidArgumentError,  # noqa: F401
                          NotAMemberError, TuttiError, UnsupportedError)

from . import callbacks  # noqa: F401
from .optimizer import Average, Compression, DistributedOptimizer, Sum  # noqa: F401

is_initialized = _world.is_initialized
rank, size = _world.rank, _world.size
local_rank, local_size = _world.local_rank, _world.local_size
cross_rank, cross_size = _world.cross_rank, _world.cross_size
