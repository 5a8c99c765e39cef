"""Driver side: `tutti.spark.run`, one tutti job as one barrier-mode Spark stage.

Runs in the Spark driver's Python process for the length of one call. It starts (unless
TUTTI_COORDINATOR names one) a tuttid child and a report listener (_driver.Driver), submits the
stage from a helper thread, and waits on one event queue for the ranks' reports, their closed
connections and the stage's outcome. On the first failure it cancels the stage and waits for the
stage to end before raising, so that nothing of the run outlives the call: no task, no tuttid.
"""
import queue
import sys
import time

from . import _driver
from ._task import RankTask
from .errors import RankFailedError, RankLostError, SparkRunError, StartTimeoutError

# Exceptions a rank raises *because* another rank failed or the stage was cancelled: the report
# names the rank that failed first among the others.
CONSEQUENCES = {"PeerLostError", "CoordinatorLostError", "AbortedError", "ShutDownError",
                "ReformedError", "EvictedError", "TaskKilledError"}
# How long the driver waits, after a rank reported only such a consequence, for the cause: the
# rank that raised or died. Its death reaches the driver by its own connection, which can close
# a moment after tuttid has told the others; cancelling at once would hide it.
CONSEQUENCE_GRACE_S = 3


def run(fn, args=(), kwargs=None, num_proc=None, start_timeout=None, env=None, stdout=None,
        stderr=None, verbose=1, data=None):
    """Runs fn(*args, **kwargs) on `num_proc` ranks, one per task of a barrier-mode stage of the
    active SparkContext, and returns its results as a list by rank.

    num_proc: default the context's defaultParallelism. start_timeout: seconds to wait for
    num_proc task slots and for every task to start (default TUTTI_SPARK_START_TIMEOUT, else
    600). env: variables set in each rank's environment while fn runs (with the driver's TUTTI_*
    settings, e.g. TUTTI_TIMEOUT_MS). stdout, stderr: streams that receive the lines fn writes to
    sys.stdout and sys.stderr on every rank, as "[RANK]<stdout>:LINE" (default sys.stdout,
    sys.stderr). verbose: 0 silent; 1 a line at the start and the end of the run; 2 also a line
    per rank as it starts (on `stderr`). data: a DataFrame repartitioned to num_proc; fn reads
    its rank's rows with tutti.spark.partition()."""
    caller = "tutti.spark.run"
    context = _driver.active_context(caller)
    num_proc = _driver.proc_count(caller, "num_proc", num_proc, context.defaultParallelism)
    start_timeout = _driver.start_timeout_s(start_timeout)
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    say = _driver.sayer(verbose, stderr)
    started = time.monotonic()
    slots = _driver.require_slots(caller, context, num_proc, started + start_timeout,
                                  start_timeout, " (one barrier stage)")
    events = queue.Queue()
    with _driver.Driver(context, events, env) as driver:
        task = RankTask(fn, tuple(args), dict(kwargs or {}), num_proc, driver.run_id,
                        driver.coordinator, driver.token, driver.reports.address,
                        driver.reports.authkey, driver.forwarded, data is not None)
        rows = (data.repartition(num_proc).rdd if data is not None
                else context.parallelize(range(num_proc), num_proc))
        say(f"running {num_proc} ranks as a barrier stage; {driver.describe()}, job "
            f"{driver.run_id}-...")
        cancel = driver.submit(rows.barrier(), task, f"{caller}: {num_proc} ranks")
        watch = _Watch(num_proc, started + start_timeout, _driver.LineWriter(stdout, stderr),
                       say if verbose >= 2 else (lambda text: None))
        results = _driver.results_by_rank(watch, events, cancel,
                                          lambda: watch.error(start_timeout, slots))
        say(f"{num_proc} ranks finished in {time.monotonic() - started:.1f} s")
        return [result for _, result in results]


class _Watch(_driver.EventLoop):
    """The driver's view of one run's ranks, fed by the event queue; keyed by rank."""

    def __init__(self, num_proc, start_deadline, writer, say):
        super().__init__(writer)
        self.num_proc, self.start_deadline = num_proc, start_deadline
        self.say = say
        self.hello, self.done = {}, set()
        self.failed = []         # (rank, type name, message, traceback, pickled), in arrival order
        self.lost = []           # ranks whose connection closed, unreported, before any cancel
        self.cancelled = False
        self.timed_out = False
        self.cause_deadline = None

    def rank_of(self, rank):
        return rank

    def all_closed(self):
        # Every rank's output arrives before its connection closes.
        return self.closed >= set(range(self.num_proc))

    def should_stop(self, now, spark_ended):
        if len(self.hello) < self.num_proc and now >= self.start_deadline:
            self.timed_out = True
        cause_known = self.lost or any(f[1] not in CONSEQUENCES for f in self.failed)
        if self.failed and not cause_known and self.cause_deadline is None:
            self.cause_deadline = now + CONSEQUENCE_GRACE_S
        return (self.timed_out or cause_known or spark_ended or
                (self.cause_deadline is not None and now >= self.cause_deadline))

    def on_cancel(self):
        self.cancelled = True

    def next_wake(self, now):
        return self.cause_deadline or (
            self.start_deadline if len(self.hello) < self.num_proc else now + 3600)

    def on_event(self, event):
        kind = event[0]
        if kind == "hello":
            self.hello[event[1]] = event[2]
            self.say(f"rank {event[1]} started: pid {event[2]['pid']} on "
                     f"{event[2]['host']}, job {event[2]['job']}")
        elif kind == "done":
            self.done.add(event[1])
        elif kind == "failed":
            self.failed.append(event[1:])

    def on_closed(self, rank):
        reported = rank in self.done or any(f[0] == rank for f in self.failed)
        if not reported and not self.cancelled:
            self.lost.append(rank)

    def error(self, start_timeout, slots):
        """The exception that explains the failure best: a rank's own exception, else a rank
        that died, else a consequence (PeerLostError...), else Spark's or the start timeout."""
        others = {f[0]: f"{f[1]}: {f[2]}" for f in self.failed}
        primary = [f for f in self.failed if f[1] not in CONSEQUENCES]
        if primary or (self.failed and not self.lost):
            rank, type_name, message, remote_traceback, pickled = (primary or self.failed)[0]
            del others[rank]
            return RankFailedError(rank, type_name, message, remote_traceback,
                                   _driver.unpickle(pickled), others)
        if self.lost:
            return RankLostError(self.lost[0], _driver.spark_reason(self.spark_error), others)
        if self.timed_out:
            return StartTimeoutError(
                f"tutti.spark.run: only {len(self.connected)} of num_proc={self.num_proc} ranks "
                f"started within start_timeout={start_timeout:g} s (the cluster had {slots} "
                f"task slots when the stage was submitted; other jobs may hold them); raise "
                f"start_timeout (TUTTI_SPARK_START_TIMEOUT) or lower num_proc")
        return SparkRunError(f"tutti.spark.run: the barrier stage failed before any rank "
                             f"reported: {_driver.spark_reason(self.spark_error)}")
