"""tutti on Ray: horovod.ray's RayExecutor, with tutti's ranks in Ray actors (docs/ray.md).

    import ray, tutti.ray
    ray.init()
    executor = tutti.ray.RayExecutor(tutti.ray.RayExecutor.create_settings(timeout_s=30),
                                     num_workers=2)
    executor.start()
    print(executor.run(train, args=[config]))   # train calls tutti.torch.init() itself
    executor.shutdown()

The driver (this process) owns the job's coordinator (a child tuttid, unless TUTTI_COORDINATOR
names one), its placement group and actors; each actor is one rank until shutdown()."""
try:
    import ray as _ray  # noqa: F401  (only to say what to install when it is missing)
except ImportError as _missing:
    raise ImportError("tutti.ray needs Ray: pip install tutti[ray] (or pip install ray); "
                      f"importing it failed: {_missing}", name="ray") from _missing

from .elastic import ElasticRayExecutor
from .results import WorkerError
from .runner import RayExecutor
from .settings import Settings, create_settings

__all__ = ["ElasticRayExecutor", "RayExecutor", "Settings", "WorkerError", "create_settings"]
