"""Driver side: where the executors reach the driver, and the tuttid the driver starts for one run.

Runs in the Spark driver's Python process. The tuttid lives from the start of `run` to its end
(stopped by `stop()`), and in any case no longer than the driver's thread that started it
(`--exit-with-parent`, PR_SET_PDEATHSIG): a driver killed mid-run leaves no coordinator behind.
"""
import os
import signal
import subprocess

from tutti import _zero_setup
from tutti.errors import InvalidArgumentError

LOOPBACK = "127.0.0.1"


def advertised_host(spark_context):
    """The driver's address toward the executors. In local modes (local, local[N],
    local-cluster[...]) every executor runs on this host: loopback, so nothing is exposed.
    Otherwise TUTTI_COORDINATOR_HOST, else the address Spark itself gives the executors for the
    driver (spark.driver.host)."""
    if spark_context.master.startswith("local"):
        return LOOPBACK
    return (os.environ.get("TUTTI_COORDINATOR_HOST")
            or spark_context.getConf().get("spark.driver.host"))


def bind_host(host):
    """Loopback when advertised there, else every interface (the advertised address is one)."""
    return LOOPBACK if host == LOOPBACK else "0.0.0.0"


def named_coordinator():
    """A standalone tuttid named by TUTTI_COORDINATOR ("auto" means none, as for tutti.init)."""
    named = os.environ.get("TUTTI_COORDINATOR", "")
    return None if named in ("", "auto") else named


class ChildCoordinator:
    """A tuttid started as the driver's child, bound on an OS-chosen port."""

    def __init__(self, host):
        binary = _zero_setup.find_tuttid()
        if binary is None:
            raise InvalidArgumentError("tutti.spark: no coordinator named (TUTTI_COORDINATOR) and "
                                       "no tuttid to start: set TUTTI_TUTTID, or put tuttid "
                                       "beside libtutti.so or on PATH")
        try:
            self._child = subprocess.Popen(
                [binary, "--bind", f"tcp://{bind_host(host)}:*", "--log-level", "warn",
                 "--exit-with-parent"], stdout=subprocess.PIPE, text=True)
        except OSError as e:
            raise InvalidArgumentError(f"tutti.spark: cannot start tuttid ({binary}): {e}") from None
        line = self._child.stdout.readline().strip()  # "tuttid listening on tcp://ADDRESS:PORT"
        self._child.stdout.close()
        prefix = "tuttid listening on "
        if not line.startswith(prefix):
            code = self._child.wait()
            raise InvalidArgumentError(f"tutti.spark: tuttid ({binary}) exited with status {code} "
                                       f"before listening; its stderr is the driver's")
        self.endpoint = f"tcp://{host}:{line.rsplit(':', 1)[1]}"

    @property
    def pid(self):
        return self._child.pid

    def stop(self):
        if self._child.poll() is None:
            self._child.send_signal(signal.SIGTERM)
            try:
                self._child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
