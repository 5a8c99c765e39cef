"""RayExecutor: a tutti job whose ranks are Ray actors, driven from the Ray driver.

Driver side (this module): start() makes the job's coordinator and identity (coordinator.py),
places one actor per rank in a placement group (placement.py) and gives each its identity;
run()/execute() send a function to every actor and collect the results by rank (results.py);
shutdown() kills the actors, removes the group and stops the coordinator. Actor side
(worker.py): each actor is one rank for the executor's whole life. The names and signatures
are horovod.ray's, so `import tutti.ray` replaces `import horovod.ray`."""

import ray

from . import placement
from .coordinator import Coordinator
from .results import WorkerError, gather
from .settings import Settings, create_settings

# How long the other ranks get, after one failed, to fail too (they normally take milliseconds:
# the failed rank aborts its job, or tutti sees its process die) before they are stopped.
FAILURE_GRACE_S = 5.0

# Set by start() for each rank; extra_env_vars may not change them.
_IDENTITY = ("TUTTI_COORDINATOR", "TUTTI_JOB", "TUTTI_TOKEN", "TUTTI_RANK", "TUTTI_SIZE",
             "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
             "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE")


def _positive(name, value, kind=(int, float)):
    if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
        raise ValueError(f"{name} must be a positive {'integer' if kind is int else 'number'}, "
                         f"not {value!r}")
    return value


class RayExecutor:
    """`num_workers` ranks, one per actor of `cpus_per_worker` CPUs (and, with `use_gpu`,
    `gpus_per_worker` GPUs, default 1), placed all at once or not at all."""

    create_settings = staticmethod(create_settings)

    def __init__(self, settings=None, num_workers=None, cpus_per_worker=1, use_gpu=False,
                 gpus_per_worker=None):
        if settings is None:
            settings = Settings()
        if not isinstance(settings, Settings):
            raise TypeError(f"settings must come from RayExecutor.create_settings(), not "
                            f"{type(settings).__name__}")
        if num_workers is None:
            raise ValueError("num_workers is required: the number of ranks (Ray actors)")
        self.num_workers = _positive("num_workers", num_workers, int)
        self.cpus_per_worker = _positive("cpus_per_worker", cpus_per_worker)
        if gpus_per_worker is not None and not use_gpu:
            raise ValueError(f"gpus_per_worker={gpus_per_worker!r} needs use_gpu=True")
        self.use_gpu = bool(use_gpu)
        self.gpus_per_worker = (_positive("gpus_per_worker", gpus_per_worker or 1)
                                if use_gpu else 0)
        self.settings = settings
        self.workers = []
        self._rank_setup = None
        self.coordinator = None
        self.placement_group = None
        self._pids = []
        self._lost = None  # why the workers can no longer run anything, after a failure

    # ---- lifetime ------------------------------------------------------------------------------
    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Starts the coordinator and the actors; each actor then builds
        `executable_cls(*executable_args, **executable_kwargs)`, which execute() passes to its
        functions. `extra_env_vars` are set in every actor before that."""
        if self.workers:
            raise RuntimeError("this RayExecutor is started already: shutdown() it first")
        extra = {str(k): str(v) for k, v in (extra_env_vars or {}).items()}
        clash = sorted(set(extra) & (set(_IDENTITY) | set(self._job_env())))
        if clash:
            raise ValueError(f"extra_env_vars may not set {', '.join(clash)}: start() sets each "
                             f"rank's identity and the job's settings itself")
        if not ray.is_initialized():
            ray.init()  # what Ray's first remote call would do; ray.nodes() needs it first
        timeout_s = self.settings.timeout_s
        try:
            self.coordinator = Coordinator(timeout_s)
            bundle = placement.resources_per_worker(self.cpus_per_worker, self.gpus_per_worker)
            self.placement_group = placement.create_placement_group(
                self.num_workers, bundle, self.settings.placement_group_timeout_s)
            envs = [dict(extra, TUTTI_COORDINATOR=self.coordinator.endpoint,
                         TUTTI_JOB=self.coordinator.job, TUTTI_TOKEN=self.coordinator.token,
                         TUTTI_RANK=rank, TUTTI_SIZE=self.num_workers, HOROVOD_RANK=rank,
                         HOROVOD_SIZE=self.num_workers,
                         TUTTI_TIMEOUT_MS=extra.get("TUTTI_TIMEOUT_MS", int(timeout_s * 1000)),
                         **self._job_env())
                    for rank in range(self.num_workers)]
            self.workers = placement.create_workers(self.placement_group, bundle, envs)
            where = self._get([w.where.remote() for w in self.workers], "answer")
            self._pids = [pid for _, pid in where]
            local = placement.local_ranks([node for node, _ in where])
            self._get([w.update_env_vars.remote(local[rank])
                       for rank, w in enumerate(self.workers)], "take their local ranks")
            executable = (executable_cls, list(executable_args or []),
                          dict(executable_kwargs or {}))
            self._get([w.start_executable.remote(*executable) for w in self.workers],
                      "build executable_cls")
            # What a replacement of a rank needs (ElasticRayExecutor).
            self._rank_setup = {"bundle": bundle, "executable": executable,
                                "envs": [{**env, **local[rank]} for rank, env in enumerate(envs)]}
        except BaseException:
            self.shutdown()
            raise

    def _job_env(self):
        """Variables every rank gets beside its identity (the elastic executor's settings)."""
        return {}

    def _get(self, refs, what):
        try:
            return ray.get(refs, timeout=self.settings.timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise TimeoutError(f"the {self.num_workers} worker actors did not {what} within "
                               f"{self.settings.timeout_s:g} s (timeout_s)") from None

    def shutdown(self):
        """Kills the actors, removes the placement group and stops the coordinator; returns
        once Ray reports every actor dead. Safe to call twice, or after a failed start()."""
        if self.workers and not self._lost:
            # An orderly leave first (tuttid logs a lost rank otherwise); a rank stuck in fn
            # does not hold shutdown() up for long.
            # ray.wait, not ray.get: a dead actor's error must not cut the others' leave short.
            leaving = [w.leave.remote() for w in self.workers]
            ray.wait(leaving, num_returns=len(leaving), timeout=10)
        for worker in self.workers:
            ray.kill(worker, no_restart=True)
        for worker in self.workers:
            try:
                ray.get(worker.where.remote(), timeout=30)  # answered only while alive
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                pass
        self.workers, self._pids, self._lost = [], [], None
        if self.placement_group is not None:
            ray.util.remove_placement_group(self.placement_group)
            self.placement_group = None
        if self.coordinator is not None:
            self.coordinator.stop()
            self.coordinator = None

    # ---- running functions ---------------------------------------------------------------------
    def run(self, fn, args=None, kwargs=None):
        """fn(*args, **kwargs) on every rank; the results by rank. Raises WorkerError naming the
        rank if one raised or its actor died."""
        return self._gather(self.run_remote(fn, args, kwargs))

    def run_remote(self, fn, args=None, kwargs=None):
        """As run(), without waiting: one Ray ObjectRef per rank, by rank."""
        args, kwargs = list(args or []), dict(kwargs or {})
        return self._submit(lambda executable: fn(*args, **kwargs))

    def execute(self, fn):
        """fn(executable) on every rank (executable: what start() built from executable_cls,
        else None); the results by rank."""
        return self._gather(self._submit(fn))

    def execute_single(self, fn):
        """fn(executable) on rank 0 alone; its result."""
        self._check_usable()
        return self._gather([self.workers[0].execute.remote(fn)])[0]

    def worker_pids(self):
        """The actors' process ids, by rank."""
        self._check_usable()
        return list(self._pids)

    def _check_usable(self):
        if not self.workers:
            raise RuntimeError("this RayExecutor is not started: call start() first")
        if self._lost:
            raise RuntimeError(f"this RayExecutor's workers were lost ({self._lost}): call "
                               f"shutdown() and start() again")

    def _submit(self, fn):
        self._check_usable()
        return [worker.execute.remote(fn) for worker in self.workers]

    def _gather(self, refs):
        results, _ = self._gather_by_rank(dict(enumerate(refs)))
        return [result for _, result in sorted(results.items())]

    def _gather_by_rank(self, refs_by_rank, tolerate_lost=False, replacer=None):
        """({rank: result}, [ranks lost]) from results.gather; after a failure, stops the
        stragglers and remembers that the workers are no longer whole."""
        try:
            return gather(refs_by_rank, FAILURE_GRACE_S, tolerate_lost, replacer)
        except WorkerError as error:
            dead = [r for r, e in error.failures.items()
                    if isinstance(e, ray.exceptions.RayActorError)]
            for rank in error.stragglers:
                ray.kill(self.workers[rank], no_restart=True)
            if dead or error.stragglers:
                self._lost = str(error)
            raise


__all__ = ["RayExecutor", "WorkerError"]
