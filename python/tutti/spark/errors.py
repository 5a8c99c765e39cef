"""The errors tutti.spark.run raises on the driver (plain Python, no Spark needed to use them)."""
import builtins


class SparkRunError(RuntimeError):
    """Base class: the run failed; its stage was cancelled and its tasks are gone."""


class RankFailedError(SparkRunError):
    """`fn` raised on a rank. `rank`, `exception` (the original exception when it could be
    unpickled on the driver, else None), `exception_type` and `exception_message` (always),
    `remote_traceback` (the executor's traceback text), `others` (what the other ranks reported:
    {rank: 'Type: message'}, often the consequence, e.g. a PeerLostError). `note`: why an
    elastic run stopped at this failure (run_elastic), else None."""

    def __init__(self, rank, exception_type, exception_message, remote_traceback, exception=None,
                 others=None, note=None):
        self.rank = rank
        self.exception_type = exception_type
        self.exception_message = exception_message
        self.remote_traceback = remote_traceback
        self.exception = exception
        self.others = dict(others or {})
        self.note = note
        super().__init__(f"rank {rank} failed: {exception_type}: {exception_message}"
                         + _others_text(self.others) + _note_text(note)
                         + f"\n\nRemote traceback (rank {rank}):\n{remote_traceback}")


class RankLostError(SparkRunError):
    """A rank's process ended without reporting a result or an exception: its Python worker or
    its executor died (killed, out of memory, a lost host). `spark_reason` is Spark's account of
    the stage failure when it gave one in time; `note` as for RankFailedError."""

    def __init__(self, rank, spark_reason=None, others=None, note=None):
        self.rank = rank
        self.spark_reason = spark_reason
        self.others = dict(others or {})
        self.note = note
        text = (f"rank {rank} was lost: its Spark task's Python process ended without a result "
                f"or an exception (the Python worker or its executor died)")
        if spark_reason:
            text += f"; Spark: {spark_reason}"
        super().__init__(text + _others_text(self.others) + _note_text(note))


class StartTimeoutError(SparkRunError, builtins.TimeoutError):
    """The stage did not get its first num_proc tasks running within start_timeout."""


def _others_text(others):
    if not others:
        return ""
    return "; other ranks: " + ", ".join(f"rank {r}: {what}" for r, what in sorted(others.items()))


def _note_text(note):
    return f"; {note}" if note else ""
