"""tutti on Apache Spark: run a tutti job as one barrier-mode stage, as horovod.spark.run does,
or an elastic one whose failed tasks Spark retries, as horovod.spark.run_elastic does.

    import tutti.spark
    results = tutti.spark.run(train, args=(lr,), num_proc=4)   # on the driver

`run` (runner.py) and `run_elastic` (elastic.py) run on the driver; `fn` runs once per rank in a
Spark task on the executors (_task.py), where tutti.init() needs no arguments and
tutti.spark.partition() gives the rank's rows of `data`. docs/spark.md says how ranks start, where the coordinator lives and what happens
on failure.
"""
try:
    import pyspark  # noqa: F401
except ImportError as e:
    raise ImportError("tutti.spark needs PySpark, which is not installed in this Python: "
                      "pip install 'tutti[spark]' (or pip install pyspark)") from e

from . import _task
from .errors import RankFailedError, RankLostError, SparkRunError, StartTimeoutError
from .elastic import run_elastic
from .runner import run

__all__ = ["run", "run_elastic", "partition", "RankFailedError", "RankLostError", "SparkRunError",
           "StartTimeoutError"]


def partition():
    """Inside fn, on an executor: an iterator over this rank's rows (pyspark.sql.Row) of
    run(..., data=df), which was repartitioned into num_proc partitions. It can be read once."""
    if not _task.in_task:
        raise RuntimeError("tutti.spark.partition() is for fn while tutti.spark.run runs it on "
                           "an executor")
    if _task.current_partition is None:
        raise RuntimeError("tutti.spark.partition(): this run was given no data= DataFrame")
    return _task.current_partition
