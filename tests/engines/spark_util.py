"""Helpers of the Spark suite: one local-cluster session per module, and the checks that nothing
a run started outlives it (the driver's tuttid children, the ranks' fn, Spark's tasks)."""
import fcntl
import os
import shutil
import time

# 2 executor JVMs with 2 cores each: 4 task slots, separate Python workers per task; the
# machine has 2 cores, so runs use 2 or 3 ranks.
MASTER = "local-cluster[2,2,1024]"
SLOTS = 4


def start_session(engine_missing):
    """A SparkSession on MASTER whose executors have all registered; skips (fails on CI) without
    pyspark or Java."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        engine_missing("pyspark is not installed in this Python (scripts/setup_venv.sh engines)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        engine_missing("no Java runtime for Spark (apt-get install openjdk-17-jre-headless)")
    session = (SparkSession.builder.master(MASTER).appName("tutti tests")
               .config("spark.ui.enabled", "false")
               .config("spark.python.worker.reuse", "true")
               # A crashing Python worker's traceback in Spark's error, not just "crashed".
               .config("spark.python.worker.faulthandler.enabled", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def stop_session(session):
    """Stops the context and the driver's JVM, and reaps it."""
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    session.stop()
    if gateway is not None:
        process = getattr(gateway, "proc", None)
        gateway.shutdown()
        SparkContext._gateway = SparkContext._jvm = None
        if process is not None:
            process.stdin.close()  # PythonGatewayServer exits at EOF on its stdin
            process.wait(timeout=60)


def child_tuttids():
    """The tuttid processes whose parent is this (the driver's) process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        parent = int(stat[stat.rindex(")") + 2:].split()[1])
        if name == "tuttid" and parent == os.getpid():
            found.append(int(entry))
    return found


def hold_while_running(path):
    """In fn: an exclusive lock on `path` held for as long as this process runs fn (it is released
    when fn's frame goes, or when the process dies). Keep the returned file referenced."""
    f = open(path, "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def wait_until_released(path, timeout_s):
    """True once nobody holds `path`'s lock: no fn that took it still runs."""
    deadline = time.monotonic() + timeout_s
    with open(path) as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.05)  # flock has no timed wait


def active_stages(session):
    return list(session.sparkContext.statusTracker().getActiveStageIds())


def wait_for_slots(session, slots, timeout_s):
    """After an executor was killed: the cluster replaced it (Spark standalone relaunches it)."""
    from tutti.spark._driver import available_slots
    deadline = time.monotonic() + timeout_s
    while available_slots(session.sparkContext) < slots:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)  # no event for an executor's registration in PySpark
    return True
