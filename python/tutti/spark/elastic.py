"""Driver side: `tutti.spark.run_elastic`, one elastic tutti job (docs/elastic.md) as one
ordinary Spark stage whose failed tasks Spark itself retries.

Runs in the Spark driver's Python process for the length of one call. Recovery needs nothing of
the driver: when a rank fails or its executor is lost, tutti re-forms the job over the survivors
(their `hvd.elastic.run` restores the last commit and goes on), and Spark retries the task
(`spark.task.maxFailures`), whose new attempt joins the running job as an added rank at its next
commit. The driver admits each task before it joins (none once a rank has finished: the
training is ending), counts failures against `reset_limit`, and fails the run when Spark gives
up on a task, the limit is passed, or the first ranks do not start in time.
"""
import os
import queue
import sys
import time

from . import _driver
from ._task import ElasticRankTask
from .errors import RankFailedError, RankLostError, SparkRunError, StartTimeoutError
from .runner import CONSEQUENCES

CALLER = "tutti.spark.run_elastic"
# Set by run_elastic from its arguments; `env` may not change them.
_JOB_SETTINGS = ("TUTTI_ELASTIC", "TUTTI_MIN_SIZE", "TUTTI_MAX_SIZE", "TUTTI_ELASTIC_TIMEOUT")
# How long a task waits for the driver's admission (the driver answers at once while it runs).
ADMISSION_TIMEOUT_S = 60


def run_elastic(fn, args=(), kwargs=None, num_proc=None, min_num_proc=None, max_num_proc=None,
                start_timeout=None, elastic_timeout=None, reset_limit=None, env=None,
                stdout=None, stderr=None, verbose=1, min_np=None, max_np=None):
    """Runs fn(*args, **kwargs) as an elastic tutti job on Spark tasks, as
    horovod.spark.run_elastic does, and returns the results of the ranks that finished, ordered
    by the rank (Spark partition) each started as; a rank that was replaced gives its
    replacement's result. fn is expected to train under hvd.elastic.run.

    num_proc: ranks that start the job (default the context's defaultParallelism).
    min_num_proc, max_num_proc (or Horovod's older min_np, max_np): the job's bounds, default
    num_proc. The stage has max_num_proc tasks; those from num_proc up join as added ranks when
    Spark schedules them. elastic_timeout: seconds the job may stay below min_num_proc before
    tutti ends it (default TUTTI_ELASTIC_TIMEOUT, else 600). reset_limit: how many rank failures
    (a raising fn, a lost executor) the run tolerates; the next one fails it (default: no limit
    but Spark's own, spark.task.maxFailures attempts per task). Other arguments as for run()."""
    min_num_proc = _one_of("min_num_proc", min_num_proc, "min_np", min_np)
    max_num_proc = _one_of("max_num_proc", max_num_proc, "max_np", max_np)
    context = _driver.active_context(CALLER)
    num_proc = _driver.proc_count(CALLER, "num_proc", num_proc, context.defaultParallelism)
    min_num_proc = _driver.proc_count(CALLER, "min_num_proc", min_num_proc, num_proc)
    max_num_proc = _driver.proc_count(CALLER, "max_num_proc", max_num_proc, num_proc)
    if not min_num_proc <= num_proc <= max_num_proc:
        raise ValueError(f"{CALLER}: num_proc ({num_proc}) must lie within min_num_proc "
                         f"({min_num_proc}) and max_num_proc ({max_num_proc})")
    if reset_limit is not None and (isinstance(reset_limit, bool) or
                                    not isinstance(reset_limit, int) or reset_limit < 0):
        raise ValueError(f"{CALLER}: reset_limit must be an int >= 0, not {reset_limit!r}")
    if elastic_timeout is None:
        elastic_timeout = float(os.environ.get("TUTTI_ELASTIC_TIMEOUT", "600"))
    clash = sorted(set(map(str, env or {})) & set(_JOB_SETTINGS))
    if clash:
        raise ValueError(f"{CALLER}: env may not set {', '.join(clash)}: run_elastic sets the "
                         f"job's elastic settings from its arguments")
    start_timeout = _driver.start_timeout_s(start_timeout)
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    say = _driver.sayer(verbose, stderr)
    started = time.monotonic()
    _driver.require_slots(CALLER, context, num_proc, started + start_timeout, start_timeout)
    events = queue.Queue()
    job_env = {**(env or {}), "TUTTI_ELASTIC": 1, "TUTTI_MIN_SIZE": min_num_proc,
               "TUTTI_MAX_SIZE": max_num_proc, "TUTTI_ELASTIC_TIMEOUT": f"{elastic_timeout:g}"}
    with _driver.Driver(context, events, job_env) as driver:
        task = ElasticRankTask(fn, tuple(args), dict(kwargs or {}), num_proc, driver.run_id,
                               driver.coordinator, driver.token, driver.reports.address,
                               driver.reports.authkey, driver.forwarded, ADMISSION_TIMEOUT_S)
        rows = context.parallelize(range(max_num_proc), max_num_proc)
        say(f"running {num_proc} ranks (elastic, {min_num_proc} to {max_num_proc}) as a stage of "
            f"{max_num_proc} tasks; {driver.describe()}, job {driver.run_id}")
        cancel = driver.submit(rows, task, f"{CALLER}: {num_proc} ranks")
        watch = _ElasticWatch(num_proc, reset_limit, started + start_timeout,
                              _driver.LineWriter(stdout, stderr),
                              say if verbose >= 2 else (lambda text: None))
        results = _driver.results_by_rank(watch, events, cancel,
                                          lambda: watch.error(start_timeout))
        say(f"{len(results)} ranks finished in {time.monotonic() - started:.1f} s after "
            f"{len(watch.failures)} rank failures")
        return [result for _, result in results]


def _one_of(name, value, old_name, old_value):
    if old_value is not None and value is not None and old_value != value:
        raise ValueError(f"{CALLER}: {name}={value!r} and {old_name}={old_value!r} disagree; "
                         f"give {name} only")
    return value if value is not None else old_value


class _ElasticWatch(_driver.EventLoop):
    """The driver's view of an elastic run's tasks, each keyed (partition, attempt), fed by the
    event queue. A failure is ("failed", key, type, message, traceback, pickled) or
    ("lost", key), in arrival order."""

    def __init__(self, num_proc, reset_limit, start_deadline, writer, say):
        super().__init__(writer)
        self.num_proc, self.reset_limit = num_proc, reset_limit
        self.start_deadline, self.say = start_deadline, say
        self.admitted, self.done = set(), set()
        self.reported = set()     # keys whose fn reported "done" or "failed"
        self.failures = []
        self.stopping = False     # cancelled (or failing): no more admissions
        self.timed_out = self.limit_passed = False

    def started_ranks(self):
        return {partition for partition, _ in self.admitted if partition < self.num_proc}

    def rank_of(self, key):
        return key[0]

    def all_closed(self):
        # Every task's output arrives before its connection closes.
        return self.closed >= self.connected

    def should_stop(self, now, spark_ended):
        starting = len(self.started_ranks()) < self.num_proc
        self.timed_out = starting and now >= self.start_deadline
        self.limit_passed = (self.reset_limit is not None and
                             len(self.failures) > self.reset_limit)
        return self.timed_out or self.limit_passed or spark_ended

    def on_cancel(self):
        self.stopping = True

    def next_wake(self, now):
        return self.start_deadline if len(self.started_ranks()) < self.num_proc else now + 3600

    def on_event(self, event):
        kind, key = event[0], event[1]
        if kind == "hello":
            self._admit(key, event[2], event[3])
        elif kind == "done":
            self.done.add(key)
            self.reported.add(key)
        elif kind == "failed":
            self.failures.append(event[:6])
            self.reported.add(key)

    def on_closed(self, key):
        if key in self.admitted and key not in self.reported and not self.stopping:
            self.failures.append(("lost", key))

    def _admit(self, key, info, reply):
        partition, attempt = key
        if self.done or self.stopping:
            reply("skip")
            self.say(f"rank {partition} (attempt {attempt}) not started: "
                     f"{'the training is ending' if self.done else 'the run is failing'}")
            return
        reply("admit")
        self.admitted.add(key)
        joins = "starts" if partition < self.num_proc and attempt == 0 else "joins as added rank"
        self.say(f"rank {partition} (attempt {attempt}) {joins}: pid {info['pid']} on "
                 f"{info['host']}")

    def error(self, start_timeout):
        """The failure that ended the run: past reset_limit, the failure that passed it; when
        Spark gave up on a task, that task's last failure; else the start timeout."""
        if self.timed_out:
            return StartTimeoutError(
                f"{CALLER}: only {len(self.started_ranks())} of num_proc={self.num_proc} ranks "
                f"started within start_timeout={start_timeout:g} s; raise start_timeout "
                f"(TUTTI_SPARK_START_TIMEOUT) or lower num_proc")
        if not self.failures:
            return SparkRunError(f"{CALLER}: the stage failed before any rank reported: "
                                 f"{_driver.spark_reason(self.spark_error)}")
        if self.limit_passed:
            cause = self.failures[self.reset_limit]
            note = (f"{len(self.failures)} rank failures, more than reset_limit="
                    f"{self.reset_limit}")
        else:
            primary = [f for f in self.failures if f[0] == "lost" or f[2] not in CONSEQUENCES]
            cause = (primary or self.failures)[-1]
            note = f"Spark gave up: {_driver.spark_reason(self.spark_error)}"
        partition = cause[1][0]
        others = {f[1][0]: ("lost" if f[0] == "lost" else f"{f[2]}: {f[3]}")
                  for f in self.failures if f[1][0] != partition}
        if cause[0] == "lost":
            return RankLostError(partition, None, others, note=note)
        _, _, type_name, message, remote_traceback, pickled = cause
        return RankFailedError(partition, type_name, message, remote_traceback,
                               _driver.unpickle(pickled), others, note=note)
