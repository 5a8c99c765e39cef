"""Driver side: where the executors reach the driver, and whether a coordinator is named.

Runs in the Spark driver's Python process. The tuttid the driver starts for one run
(tutti._tuttid_child) lives from the start of `run` to its end, and in any case no longer than
the driver's thread that started it (`--exit-with-parent`, PR_SET_PDEATHSIG): a driver killed
mid-run leaves no coordinator behind.
"""
import os

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
