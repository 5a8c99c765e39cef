"""ElasticRayExecutor: a RayExecutor whose tutti job is elastic (docs/elastic.md), driver side.

Every rank gets TUTTI_ELASTIC=1 with the job's bounds (TUTTI_MIN_SIZE, TUTTI_MAX_SIZE,
TUTTI_ELASTIC_TIMEOUT), so tutti itself re-forms the job when a rank's actor dies: the
survivors' `hvd.elastic.run` restores the last commit and goes on, without the driver's help.
The driver replaces the dead actor while the call runs: a new actor in the dead one's bundle of
the placement group, with the same rank number, runs the same function and joins the running
job as an added rank at the survivors' next commit (their state syncs to it there). Up to
`reset_limit` replacements over the executor's life (default: no limit, as Horovod's); past it,
or when the others finished before the replacement got in, the rank is dropped: run() returns
the results of the ranks that finished, and later calls go to the survivors alone. If fewer than
min_workers survive, tutti ends the job after elastic_timeout and run() fails with
WorkerError."""
import ray

from . import placement
from .runner import RayExecutor, _positive


class ElasticRayExecutor(RayExecutor):
    """Starts `num_workers` ranks (default: max_workers, else min_workers) and keeps running
    while at least `min_workers` of them live. `elastic_timeout`: seconds the job may stay below
    min_workers before tutti ends it (Horovod's default, 600)."""

    def __init__(self, settings=None, min_workers=1, max_workers=None, num_workers=None,
                 cpus_per_worker=1, use_gpu=False, gpus_per_worker=None, elastic_timeout=600,
                 reset_limit=None):
        _positive("min_workers", min_workers, int)
        if max_workers is not None and _positive("max_workers", max_workers, int) < min_workers:
            raise ValueError(f"max_workers ({max_workers}) is below min_workers ({min_workers})")
        if num_workers is None:
            num_workers = max_workers or min_workers
        if not min_workers <= num_workers <= (max_workers or num_workers):
            raise ValueError(f"num_workers ({num_workers}) must lie within min_workers "
                             f"({min_workers}) and max_workers ({max_workers})")
        super().__init__(settings, num_workers, cpus_per_worker, use_gpu, gpus_per_worker)
        self.min_workers, self.max_workers = min_workers, max_workers
        self.elastic_timeout = _positive("elastic_timeout", elastic_timeout)
        if reset_limit is not None and (isinstance(reset_limit, bool) or
                                        not isinstance(reset_limit, int) or reset_limit < 0):
            raise ValueError(f"reset_limit must be an int >= 0, not {reset_limit!r}")
        self.reset_limit = reset_limit
        self.lost_ranks = []
        self.replaced = []  # the ranks replaced so far, in order (a rank may recur)

    def _job_env(self):
        env = {"TUTTI_ELASTIC": 1, "TUTTI_MIN_SIZE": self.min_workers,
               "TUTTI_ELASTIC_TIMEOUT": self.elastic_timeout}
        if self.max_workers is not None:
            env["TUTTI_MAX_SIZE"] = self.max_workers
        return env

    def start(self, *args, **kwargs):
        self.lost_ranks, self.replaced = [], []
        super().start(*args, **kwargs)

    def live_ranks(self):
        """The ranks whose actors still run, in order."""
        return [r for r in range(len(self.workers)) if r not in self.lost_ranks]

    def run(self, fn, args=None, kwargs=None):
        """fn(*args, **kwargs) on every live rank; the results of those that finished, by rank.
        Ranks whose actors died are added to `lost_ranks` (the job re-formed without them)."""
        args, kwargs = list(args or []), dict(kwargs or {})
        return self._run_live(lambda executable: fn(*args, **kwargs))

    def run_remote(self, fn, args=None, kwargs=None):
        """As run(), without waiting: {rank: ObjectRef} of the live ranks."""
        self._check_usable()
        args, kwargs = list(args or []), dict(kwargs or {})
        return {rank: self.workers[rank].execute.remote(lambda _: fn(*args, **kwargs))
                for rank in self.live_ranks()}

    def execute(self, fn):
        """fn(executable) on every live rank; the results of those that finished, by rank."""
        return self._run_live(fn)

    def worker_pids(self):
        """The actors' process ids by rank, replacements' included (None: a replacement that
        died before it answered)."""
        pids = super().worker_pids()
        for rank, pid in enumerate(pids):
            if isinstance(pid, ray.ObjectRef):
                try:
                    pids[rank] = self._pids[rank] = ray.get(pid, timeout=self.settings.timeout_s)[1]
                except ray.exceptions.RayActorError:
                    pids[rank] = self._pids[rank] = None
        return pids

    def execute_single(self, fn):
        """fn(executable) on the lowest live rank; its result."""
        self._check_usable()
        rank = self.live_ranks()[0]
        results, _ = self._gather_by_rank({rank: self.workers[rank].execute.remote(fn)})
        return results[rank]

    def _run_live(self, fn):
        self._check_usable()
        refs = {rank: self.workers[rank].execute.remote(fn) for rank in self.live_ranks()}
        results, lost = self._gather_by_rank(refs, tolerate_lost=True,
                                             replacer=_Replacer(self, fn))
        self.lost_ranks = sorted(self.lost_ranks + lost)
        return [results[rank] for rank in sorted(results)]


class _Replacer:
    """Starts, for one run, a replacement actor of a rank whose actor died, and stops one that
    never got into the job (results.gather decides when)."""

    def __init__(self, executor, fn):
        self.executor, self.fn = executor, fn

    def start(self, rank):
        """The ObjectRef of fn on a new actor of `rank`, or None past reset_limit."""
        executor = self.executor
        if executor.reset_limit is not None and len(executor.replaced) >= executor.reset_limit:
            return None
        setup = executor._rank_setup
        worker = placement.create_worker(executor.placement_group, setup["bundle"], rank,
                                         setup["envs"][rank])
        executor.replaced.append(rank)
        executor.workers[rank] = worker
        # Actor calls run in order: the executable exists before fn runs. The pid is known once
        # the actor answers (worker_pids waits for it then), not to block the run here.
        executor._pids[rank] = worker.where.remote()
        worker.start_executable.remote(*setup["executable"])
        return worker.execute.remote(self.fn)

    def abandon(self, rank):
        ray.kill(self.executor.workers[rank], no_restart=True)
