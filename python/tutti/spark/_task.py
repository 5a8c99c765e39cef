"""Executor side: the body of each task, i.e. one rank (RankTask in run's barrier stage,
ElasticRankTask in run_elastic's stage).

Runs in a PySpark Python worker on an executor, once per rank per task attempt. PySpark reuses
its Python workers for later tasks, so everything this sets up for `fn` (environment variables,
sys.stdout/sys.stderr, tutti's runtime, the partition) is undone before the task returns: the
next task of the same worker, of this run or another, starts clean.
"""
import os
import socket
import sys
import traceback

from ._reports import ForwardedStream, Reporter

# This rank's partition of `data` while fn runs (tutti.spark.partition() returns it).
current_partition = None
in_task = False


class RankTask:
    """The closure Spark ships to every task: fn and everything a rank needs to join the job.
    `token` is the tutti job's secret, made by the driver for this run."""

    def __init__(self, fn, args, kwargs, num_proc, run_id, coordinator, token, report_address,
                 report_key, env, has_data):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.num_proc, self.run_id = num_proc, run_id
        self.coordinator, self.token = coordinator, token
        self.report_address, self.report_key = report_address, report_key
        self.env, self.has_data = env, has_data

    def __call__(self, partition):
        from pyspark import BarrierTaskContext
        context = BarrierTaskContext.get()
        rank = context.partitionId()
        reporter = Reporter(self.report_address, self.report_key, rank)
        # The job id must be the same for every task of this stage attempt and for no other, so
        # that a stage Spark retries is a new tutti job and never joins the old one. PySpark does
        # not tell a task its stage attempt number; a barrier allGather gathers exactly the tasks
        # of one stage attempt, and their task attempt ids are unique in the application.
        attempt_key = min(int(i) for i in context.allGather(str(context.taskAttemptId())))
        job = f"{self.run_id}-stage{context.stageId()}-task{attempt_key}"
        reporter.send("hello", {"pid": os.getpid(), "host": socket.gethostname(), "job": job,
                                "stage": context.stageId()})
        identity = {"TUTTI_COORDINATOR": self.coordinator, "TUTTI_JOB": job,
                    "TUTTI_TOKEN": self.token, "TUTTI_RANK": str(rank),
                    "TUTTI_SIZE": str(self.num_proc)}
        return _run_as_rank(reporter, identity, self.env, partition if self.has_data else None,
                            lambda: self.fn(*self.args, **self.kwargs), rank)


class ElasticRankTask:
    """The closure of run_elastic's stage (not a barrier stage: Spark retries a failed task on
    its own). Every task of every attempt joins the one elastic job `run_id` as the rank of its
    partition: partitions below num_proc form the job, a later attempt of one (Spark's retry of a
    task that failed or whose executor was lost) and partitions from num_proc up join it as added
    ranks at its next commit. Before fn, a task asks the driver whether to join at all: once the
    training is ending (a rank finished) or the run is failing, the driver says "skip", and the
    task returns no result without touching the job."""

    def __init__(self, fn, args, kwargs, num_proc, run_id, coordinator, token, report_address,
                 report_key, env, admission_timeout_s):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.num_proc, self.run_id = num_proc, run_id
        self.coordinator, self.token = coordinator, token
        self.report_address, self.report_key = report_address, report_key
        self.env, self.admission_timeout_s = env, admission_timeout_s

    def __call__(self, partition):
        from pyspark import TaskContext
        context = TaskContext.get()
        rank, attempt = context.partitionId(), context.attemptNumber()
        reporter = Reporter(self.report_address, self.report_key, (rank, attempt))
        try:
            reporter.send("hello", {"pid": os.getpid(), "host": socket.gethostname(),
                                    "job": self.run_id, "stage": context.stageId(),
                                    "attempt": attempt})
            answer = reporter.receive(self.admission_timeout_s)
        except BaseException:
            reporter.close()
            raise
        if answer is None or answer[0] != "admit":
            reporter.close()  # not a rank of the job: no result, no failure
            return []
        identity = {"TUTTI_COORDINATOR": self.coordinator, "TUTTI_JOB": self.run_id,
                    "TUTTI_TOKEN": self.token, "TUTTI_RANK": str(rank),
                    "TUTTI_SIZE": str(self.num_proc)}
        return _run_as_rank(reporter, identity, self.env, None,
                            lambda: self.fn(*self.args, **self.kwargs), rank)


def _run_as_rank(reporter, identity, env, partition, call, rank):
    """call() with the rank's identity and env in os.environ and its output forwarded; reports
    "done" or "failed" and closes the reporter. Everything is undone before it returns."""
    saved_env = {name: os.environ.get(name) for name in {**env, **identity}}
    saved_streams = sys.stdout, sys.stderr
    global current_partition, in_task
    try:
        os.environ.update(env)
        os.environ.update(identity)
        sys.stdout = ForwardedStream(reporter, "out")
        sys.stderr = ForwardedStream(reporter, "err")
        current_partition = partition
        in_task = True
        try:
            result = call()
            _flush_streams()
            _leave_job()
        except BaseException as e:
            _flush_streams()
            reporter.failed(e, traceback.format_exc())
            try:
                _leave_job()
            except BaseException:
                pass  # the failure reported is fn's
            raise
        reporter.send("done")
        return [(rank, result)]
    finally:
        current_partition, in_task = None, False
        sys.stdout, sys.stderr = saved_streams
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        reporter.close()


def _flush_streams():
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, ForwardedStream):
            stream.flush()


def _leave_job():
    """Leaves the tutti job if fn did not: the Python worker outlives this task."""
    torch_api = sys.modules.get("tutti.torch")
    if torch_api is not None:
        torch_api.shutdown()  # also invalidates its registered ProcessSets
    elif "tutti" in sys.modules:
        sys.modules["tutti"].shutdown()
