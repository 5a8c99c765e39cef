"""Driver side: `tutti.spark.run`, one tutti job as one barrier-mode Spark stage.

Runs in the Spark driver's Python process for the length of one call. It starts (unless
TUTTI_COORDINATOR names one) a tuttid child and a report listener, submits the stage from a
helper thread (collect() blocks), and waits on one event queue for the ranks' reports, their
closed connections and the stage's outcome. On the first failure it cancels the stage (Spark kills
the other tasks; PySpark destroys a Python worker that does not stop within
spark.python.task.killTimeout) and waits for the stage to end before raising, so that nothing of
the run outlives the call: no task, no tuttid.
"""
import os
import pickle
import queue
import re
import sys
import time
import uuid

from .._tuttid_child import TuttidChild
from . import _coordinator
from ._reports import ReportServer
from ._task import RankTask
from .errors import RankFailedError, RankLostError, SparkRunError, StartTimeoutError

DEFAULT_START_TIMEOUT_S = 600  # Horovod's default for horovod.spark.run
# After a failure: how long run waits for Spark to end the stage's other tasks before raising.
SETTLE_TIMEOUT_S = 30
# Exceptions a rank raises *because* another rank failed or the stage was cancelled: the report
# names the rank that failed first among the others.
CONSEQUENCES = {"PeerLostError", "CoordinatorLostError", "AbortedError", "ShutDownError",
                "ReformedError", "EvictedError", "TaskKilledError"}
# How long the driver waits, after a rank reported only such a consequence, for the cause: the
# rank that raised or died. Its death reaches the driver by its own connection, which can close
# a moment after tuttid has told the others; cancelling at once would hide it.
CONSEQUENCE_GRACE_S = 3
# Variables of the driver that describe the driver's own install or identity, never the ranks'.
NOT_FORWARDED = {"TUTTI_LIBRARY", "TUTTI_TUTTID", "TUTTI_COORDINATOR", "TUTTI_COORDINATOR_HOST",
                 "TUTTI_JOB", "TUTTI_TOKEN", "TUTTI_RANK", "TUTTI_SIZE", "TUTTI_BUILD_DIR",
                 "TUTTI_SPARK_START_TIMEOUT"}


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
    from pyspark import InheritableThread, SparkContext
    context = SparkContext._active_spark_context
    if context is None:
        raise SparkRunError("tutti.spark.run: no active SparkContext; create a SparkSession "
                            "(or SparkContext) first")
    if num_proc is None:
        num_proc = context.defaultParallelism
    if isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc < 1:
        raise ValueError(f"tutti.spark.run: num_proc must be a positive int, not {num_proc!r}")
    if start_timeout is None:
        start_timeout = float(os.environ.get("TUTTI_SPARK_START_TIMEOUT",
                                             DEFAULT_START_TIMEOUT_S))
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr
    say = (lambda text: print(f"tutti.spark: {text}", file=stderr, flush=True)) if verbose \
        else (lambda text: None)
    started = time.monotonic()
    _use_this_python(context)

    slots = wait_for_slots(context, num_proc, started + start_timeout)
    if slots < num_proc:
        raise StartTimeoutError(
            f"tutti.spark.run: num_proc={num_proc} needs {num_proc} task slots at once (one "
            f"barrier stage), but the Spark cluster had {slots} within start_timeout="
            f"{start_timeout:g} s; add executors or cores, lower num_proc, or raise "
            f"start_timeout (TUTTI_SPARK_START_TIMEOUT)")

    run_id = f"spark-{context.applicationId}-{uuid.uuid4().hex[:8]}"
    host = _coordinator.advertised_host(context)
    events = queue.Queue()
    coordinator = child = reports = None
    try:
        coordinator = _coordinator.named_coordinator()
        if coordinator is None:
            child = TuttidChild(_coordinator.bind_host(host), host, whose="the driver's")
            coordinator = child.endpoint
        reports = ReportServer(_coordinator.bind_host(host), host, events)
        forwarded = {k: v for k, v in os.environ.items()
                     if k.startswith("TUTTI_") and k not in NOT_FORWARDED}
        forwarded.update({str(k): str(v) for k, v in (env or {}).items()})
        task = RankTask(fn, tuple(args), dict(kwargs or {}), num_proc, run_id, coordinator,
                        uuid.uuid4().hex + uuid.uuid4().hex, reports.address, reports.authkey,
                        forwarded, data is not None)
        rows = (data.repartition(num_proc).rdd if data is not None
                else context.parallelize(range(num_proc), num_proc))
        group = f"tutti-{run_id}"

        def submit():
            try:
                context.setJobGroup(group, f"tutti.spark.run: {num_proc} ranks",
                                    interruptOnCancel=True)
                events.put(("spark-finished", rows.barrier().mapPartitions(task).collect()))
            except BaseException as e:
                events.put(("spark-failed", e))

        say(f"running {num_proc} ranks as a barrier stage; coordinator {coordinator}"
            f"{' (started here)' if child else ' (TUTTI_COORDINATOR)'}, job {run_id}-...")
        InheritableThread(target=submit, name="tutti.spark stage", daemon=True).start()
        watch = _Watch(num_proc, started + start_timeout, stdout, stderr, say if verbose >= 2
                       else (lambda text: None))
        try:
            results = watch.until_done(events, lambda: context.cancelJobGroup(group))
        except BaseException:
            context.cancelJobGroup(group)
            raise
        if results is None:
            raise watch.error(start_timeout, slots)
        say(f"{num_proc} ranks finished in {time.monotonic() - started:.1f} s")
        return [result for _, result in sorted(results, key=lambda pair: pair[0])]
    finally:
        if reports is not None:
            reports.close()
        if child is not None:
            child.stop()


def wait_for_slots(context, num_proc, deadline):
    """Waits until the cluster can run num_proc tasks at once (executors register after the
    context starts, and come and go under dynamic allocation); returns the slots it has."""
    while True:
        slots = available_slots(context)
        if slots >= num_proc or time.monotonic() >= deadline:
            return slots
        time.sleep(0.1)  # Spark has no event for "an executor registered" in its Python API


def available_slots(context):
    """How many tasks of the default resource profile Spark can run at once (what Spark's own
    barrier check compares a stage with)."""
    spark = context._jsc.sc()
    return int(spark.maxNumConcurrentTasks(spark.resourceProfileManager()
                                           .defaultResourceProfile()))


def _use_this_python(context):
    """Executors run the driver's Python unless PYSPARK_PYTHON says otherwise: tutti and fn's
    imports must be there. A context made with PYSPARK_PYTHON unset took "python3" from PATH."""
    if "PYSPARK_PYTHON" not in os.environ:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        if context.pythonExec == "python3":
            context.pythonExec = sys.executable


class _Watch:
    """The driver's view of one run's ranks, fed by the event queue."""

    def __init__(self, num_proc, start_deadline, stdout, stderr, say):
        self.num_proc, self.start_deadline = num_proc, start_deadline
        self.streams = {"out": (stdout, "stdout"), "err": (stderr, "stderr")}
        self.partial = {}        # (kind, rank) -> the start of a line not ended yet
        self.say = say
        self.hello, self.connected, self.done, self.closed = {}, set(), set(), set()
        self.failed = []         # (rank, type name, message, traceback, pickled), in arrival order
        self.lost = []           # ranks whose connection closed, unreported, before any cancel
        self.spark_error = None
        self.cancelled = False
        self.timed_out = False

    def until_done(self, events, cancel):
        """The stage's collected results, or None after a failure (see error())."""
        settle_deadline = drain_deadline = cause_deadline = None
        results = None
        spark_ended = False
        everyone = set(range(self.num_proc))
        while True:
            now = time.monotonic()
            if results is not None:
                # Every rank's output arrives before its connection closes.
                if self.closed >= everyone or now >= drain_deadline:
                    return results
            elif settle_deadline is not None:
                if (spark_ended and self.closed >= self.connected) or now >= settle_deadline:
                    return None
            else:
                if len(self.hello) < self.num_proc and now >= self.start_deadline:
                    self.timed_out = True
                cause_known = self.lost or any(f[1] not in CONSEQUENCES for f in self.failed)
                if self.failed and not cause_known and cause_deadline is None:
                    cause_deadline = now + CONSEQUENCE_GRACE_S
                if (self.timed_out or cause_known or spark_ended or
                        (cause_deadline is not None and now >= cause_deadline)):
                    cancel()
                    self.cancelled = True
                    settle_deadline = now + SETTLE_TIMEOUT_S
                    continue
            wake = drain_deadline or settle_deadline or cause_deadline or (
                self.start_deadline if len(self.hello) < self.num_proc else now + 3600)
            try:
                event = events.get(timeout=max(wake - now, 0.001))
            except queue.Empty:
                continue
            kind = event[0]
            if kind in self.streams:
                self._write(kind, event[1], event[2])
            elif kind == "connected":
                self.connected.add(event[1])
            elif kind == "hello":
                self.hello[event[1]] = event[2]
                self.say(f"rank {event[1]} started: pid {event[2]['pid']} on "
                         f"{event[2]['host']}, job {event[2]['job']}")
            elif kind == "done":
                self.done.add(event[1])
            elif kind == "failed":
                self.failed.append(event[1:])
            elif kind == "closed":
                rank = event[1]
                self.closed.add(rank)
                for stream_kind in self.streams:  # a last line without its newline
                    if self.partial.get((stream_kind, rank)):
                        self._write(stream_kind, rank, "\n")
                reported = rank in self.done or any(f[0] == rank for f in self.failed)
                if not reported and not self.cancelled:
                    self.lost.append(rank)
            elif kind == "spark-finished" and settle_deadline is None:
                spark_ended, results = True, event[1]
                drain_deadline = time.monotonic() + SETTLE_TIMEOUT_S
            elif kind == "spark-finished":
                spark_ended = True  # after a failure of ours: the results are incomplete
            elif kind == "spark-failed":
                spark_ended, self.spark_error = True, event[1]

    def _write(self, kind, rank, text):
        """Whole lines only, each prefixed with its rank, so that ranks' lines never mix; a
        rank's unfinished line waits for the rest (or for the end of the rank)."""
        stream, label = self.streams[kind]
        text = self.partial.pop((kind, rank), "") + text
        complete, newline, rest = text.rpartition("\n")
        if rest:
            self.partial[(kind, rank)] = rest
        if newline:
            for line in complete.split("\n"):
                stream.write(f"[{rank}]<{label}>:{line}\n")
            stream.flush()

    def error(self, start_timeout, slots):
        """The exception that explains the failure best: a rank's own exception, else a rank
        that died, else a consequence (PeerLostError...), else Spark's or the start timeout."""
        others = {f[0]: f"{f[1]}: {f[2]}" for f in self.failed}
        primary = [f for f in self.failed if f[1] not in CONSEQUENCES]
        if primary or (self.failed and not self.lost):
            rank, type_name, message, remote_traceback, pickled = (primary or self.failed)[0]
            del others[rank]
            return RankFailedError(rank, type_name, message, remote_traceback,
                                   _unpickle(pickled), others)
        if self.lost:
            return RankLostError(self.lost[0], _spark_reason(self.spark_error), others)
        if self.timed_out:
            return StartTimeoutError(
                f"tutti.spark.run: only {len(self.connected)} of num_proc={self.num_proc} ranks "
                f"started within start_timeout={start_timeout:g} s (the cluster had {slots} "
                f"task slots when the stage was submitted; other jobs may hold them); raise "
                f"start_timeout (TUTTI_SPARK_START_TIMEOUT) or lower num_proc")
        return SparkRunError(f"tutti.spark.run: the barrier stage failed before any rank "
                             f"reported: {_spark_reason(self.spark_error)}")


def _unpickle(pickled):
    if pickled is None:
        return None
    try:
        return pickle.loads(pickled)
    except Exception:  # its class may exist on the executors only
        return None


def _spark_reason(error):
    """The first lines of Spark's exception, without the JVM stack trace."""
    if error is None:
        return None
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(lines[:3])
    text = text if len(text) <= 600 else text[:600] + "..."
    # The Python exception a task died of, which the JVM's message buries in its traceback.
    python = [line for line in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception): ", line)
              and not line.startswith(("org.", "java.", "py4j.", "scala."))]
    return text + (f" ... {python[-1]}" if python else "")
