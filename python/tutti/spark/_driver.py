"""Driver side: what `run` and `run_elastic` share.

Runs in the Spark driver's Python process for the length of one call: the checks of the context
and of num_proc, the wait for task slots, the run's coordinator and report listener (`Driver`,
a context manager that stops both), the stage submitted from a helper thread (collect() blocks),
the ranks' output written line by line, and the reading of Spark's errors.
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
from .errors import SparkRunError, StartTimeoutError

DEFAULT_START_TIMEOUT_S = 600  # Horovod's default for horovod.spark.run
# Variables of the driver that describe the driver's own install or identity, never the ranks'.
NOT_FORWARDED = {"TUTTI_LIBRARY", "TUTTI_TUTTID", "TUTTI_COORDINATOR", "TUTTI_COORDINATOR_HOST",
                 "TUTTI_JOB", "TUTTI_TOKEN", "TUTTI_RANK", "TUTTI_SIZE", "TUTTI_BUILD_DIR",
                 "TUTTI_SPARK_START_TIMEOUT"}


def active_context(caller):
    from pyspark import SparkContext
    context = SparkContext._active_spark_context
    if context is None:
        raise SparkRunError(f"{caller}: no active SparkContext; create a SparkSession "
                            "(or SparkContext) first")
    _use_this_python(context)
    return context


def proc_count(caller, name, value, default):
    """A positive int argument (default when None), else ValueError naming it."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{caller}: {name} must be a positive int, not {value!r}")
    return value


def start_timeout_s(start_timeout):
    if start_timeout is None:
        return float(os.environ.get("TUTTI_SPARK_START_TIMEOUT", DEFAULT_START_TIMEOUT_S))
    return start_timeout


def sayer(verbose, stderr):
    if not verbose:
        return lambda text: None
    return lambda text: print(f"tutti.spark: {text}", file=stderr, flush=True)


def require_slots(caller, context, num_proc, deadline, start_timeout, why=""):
    """Waits until the cluster can run num_proc tasks at once (executors register after the
    context starts, and come and go under dynamic allocation); the slots it has, or
    StartTimeoutError at the deadline."""
    while True:
        slots = available_slots(context)
        if slots >= num_proc:
            return slots
        if time.monotonic() >= deadline:
            raise StartTimeoutError(
                f"{caller}: num_proc={num_proc} needs {num_proc} task slots at once{why}, but the "
                f"Spark cluster had {slots} within start_timeout={start_timeout:g} s; add "
                f"executors or cores, lower num_proc, or raise start_timeout "
                f"(TUTTI_SPARK_START_TIMEOUT)")
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


class Driver:
    """One run's coordinator (a tuttid child unless TUTTI_COORDINATOR names one), its report
    listener feeding `events`, its id, token and the TUTTI_* settings passed to the ranks.
    Both are stopped on exit, whatever happened."""

    def __init__(self, context, events, env):
        self.context, self.events = context, events
        self.run_id = f"spark-{context.applicationId}-{uuid.uuid4().hex[:8]}"
        self.token = uuid.uuid4().hex + uuid.uuid4().hex
        self.host = _coordinator.advertised_host(context)
        self.forwarded = {k: v for k, v in os.environ.items()
                          if k.startswith("TUTTI_") and k not in NOT_FORWARDED}
        self.forwarded.update({str(k): str(v) for k, v in (env or {}).items()})
        self.child = self.reports = None
        self.coordinator = _coordinator.named_coordinator()

    def __enter__(self):
        try:
            if self.coordinator is None:
                self.child = TuttidChild(_coordinator.bind_host(self.host), self.host,
                                         whose="the driver's")
                self.coordinator = self.child.endpoint
            self.reports = ReportServer(_coordinator.bind_host(self.host), self.host,
                                        self.events)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.reports is not None:
            self.reports.close()
        if self.child is not None:
            self.child.stop()

    def describe(self):
        return (f"coordinator {self.coordinator}"
                f"{' (started here)' if self.child else ' (TUTTI_COORDINATOR)'}")

    def submit(self, rows, task, description):
        """Runs `task` over `rows` (an RDD, barrier or not) as the job group of this run, from a
        helper thread; its outcome arrives as ("spark-finished", results) or
        ("spark-failed", exception). Returns cancel(): ends the stage (Spark kills its tasks;
        PySpark destroys a Python worker that does not stop within
        spark.python.task.killTimeout)."""
        from pyspark import InheritableThread
        group = f"tutti-{self.run_id}"

        def collect():
            try:
                self.context.setJobGroup(group, description, interruptOnCancel=True)
                self.events.put(("spark-finished", rows.mapPartitions(task).collect()))
            except BaseException as e:
                self.events.put(("spark-failed", e))

        InheritableThread(target=collect, name="tutti.spark stage", daemon=True).start()
        return lambda: self.context.cancelJobGroup(group)


def results_by_rank(watch, events, cancel, error):
    """Runs `watch` over the stage's events until it ends: the (rank, result) pairs by rank;
    else raises error(), the exception that explains the failure. Whatever interrupts the wait
    (KeyboardInterrupt) cancels the stage first."""
    try:
        results = watch.until_done(events, cancel)
    except BaseException:
        cancel()
        raise
    if results is None:
        raise error()
    return sorted(results, key=lambda pair: pair[0])


class LineWriter:
    """The ranks' output on the driver's streams: whole lines only, each prefixed with its rank,
    so that ranks' lines never mix; a task's unfinished line waits for the rest (or its end)."""

    def __init__(self, stdout, stderr):
        self.streams = {"out": (stdout, "stdout"), "err": (stderr, "stderr")}
        self.partial = {}  # (kind, key) -> the start of a line not ended yet

    def write(self, kind, key, label, text):
        stream, name = self.streams[kind]
        text = self.partial.pop((kind, key), "") + text
        complete, newline, rest = text.rpartition("\n")
        if rest:
            self.partial[(kind, key)] = rest
        if newline:
            for line in complete.split("\n"):
                stream.write(f"[{label}]<{name}>:{line}\n")
            stream.flush()

    def end(self, key, label):
        """A task's connection closed: its last line, if it had no newline."""
        for kind in self.streams:
            if self.partial.get((kind, key)):
                self.write(kind, key, label, "\n")


# After a failure: how long a run waits for Spark to end the stage's other tasks before raising.
SETTLE_TIMEOUT_S = 30


class EventLoop:
    """What the drivers of run and run_elastic share: the loop over one stage's events (output
    lines, connections, Spark's end) with its three phases. Running: until the subclass's
    should_stop() says stop, when the stage is cancelled. Settling: until Spark ended the stage
    and every connection closed, or SETTLE_TIMEOUT_S (then None: the run failed). Draining, once
    Spark returned the results: until every output arrived (all_closed()), or SETTLE_TIMEOUT_S.

    Subclasses define rank_of(key) (the rank a task key names, for output prefixes),
    should_stop(now, spark_ended), next_wake(now) (when the running phase must look again),
    all_closed(), on_closed(key) and on_event(event) for their own kinds (hello, done, failed)."""

    def __init__(self, writer):
        self.writer = writer
        self.connected, self.closed = set(), set()
        self.spark_error = None

    def on_cancel(self):
        pass

    def until_done(self, events, cancel):
        """The stage's collected results, or None after a failure (see the subclass's error())."""
        settle_deadline = drain_deadline = None
        results = None
        spark_ended = False
        while True:
            now = time.monotonic()
            if results is not None:
                if self.all_closed() or now >= drain_deadline:
                    return results
            elif settle_deadline is not None:
                if (spark_ended and self.closed >= self.connected) or now >= settle_deadline:
                    return None
            elif self.should_stop(now, spark_ended):
                cancel()
                self.on_cancel()
                settle_deadline = now + SETTLE_TIMEOUT_S
                continue
            wake = drain_deadline or settle_deadline or self.next_wake(now)
            try:
                event = events.get(timeout=max(wake - now, 0.001))
            except queue.Empty:
                continue
            kind = event[0]
            if kind in self.writer.streams:
                self.writer.write(kind, event[1], self.rank_of(event[1]), event[2])
            elif kind == "connected":
                self.connected.add(event[1])
            elif kind == "closed":
                self.closed.add(event[1])
                self.writer.end(event[1], self.rank_of(event[1]))
                self.on_closed(event[1])
            elif kind == "spark-finished" and settle_deadline is None:
                spark_ended, results = True, event[1]
                drain_deadline = time.monotonic() + SETTLE_TIMEOUT_S
            elif kind == "spark-finished":
                spark_ended = True  # after a failure of ours: the results are incomplete
            elif kind == "spark-failed":
                spark_ended, self.spark_error = True, event[1]
            else:
                self.on_event(event)


def unpickle(pickled):
    if pickled is None:
        return None
    try:
        return pickle.loads(pickled)
    except Exception:  # its class may exist on the executors only
        return None


def spark_reason(error):
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
