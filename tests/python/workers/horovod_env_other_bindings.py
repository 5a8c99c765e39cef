"""The init() that tutti.tensorflow, .keras, .jax and .mxnet share (tutti._process_sets.init,
importable without any framework): Horovod's variables are read there as in tutti.torch.
Prints what init did on this rank."""
import tutti
from tutti import _process_sets

try:
    _process_sets.init()
except NotImplementedError as e:
    print(f"refused {type(e).__name__} {e}", flush=True)
else:
    import os
    print(f"fusion {os.environ.get('TUTTI_FUSION_THRESHOLD')} "
          f"log {os.environ.get('TUTTI_AUTOTUNE_LOG')}", flush=True)
    _process_sets.shutdown()
    assert not tutti.is_initialized()
