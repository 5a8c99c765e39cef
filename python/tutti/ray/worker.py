"""The Ray actor that is one rank (runs in its own Ray worker process, for the executor's life).

It is created with its rank's identity in the environment (TUTTI_COORDINATOR, TUTTI_JOB,
TUTTI_TOKEN, TUTTI_RANK, TUTTI_SIZE, TUTTI_TIMEOUT_MS, and horovodrun's HOROVOD_* names), set
in os.environ before any user code runs, so `tutti.init()` and `tutti.torch.init()` inside the
executed functions need no arguments. tutti stays initialized between calls, as under
horovod.ray, so a second run() reuses the connections the first made. A call that raises
aborts and leaves this rank's tutti job first: the other ranks' collectives then fail at once
(AbortedError naming this rank) instead of waiting for it, and the next call can init again.
shutdown() has the actor leave the tutti job, then kills it (ray.kill); it also dies with the
driver."""
import os
import sys


class TuttiWorker:
    def __init__(self, rank, env):
        self.rank = rank
        os.environ.update({name: str(value) for name, value in env.items()})
        self.executable = None

    def __repr__(self):  # Ray names the actor by this in its errors and logs
        return f"TuttiWorker(rank={self.rank})"

    def where(self):
        """(Ray node id, pid): the driver groups ranks by node for HOROVOD_LOCAL_*."""
        import ray
        return ray.get_runtime_context().get_node_id(), os.getpid()

    def update_env_vars(self, env):
        os.environ.update({name: str(value) for name, value in env.items()})

    def start_executable(self, executable_cls, args, kwargs):
        self.executable = executable_cls(*args, **kwargs) if executable_cls else None

    def leave(self):
        """Before shutdown() kills the actor: leave the tutti job in order, so that tuttid and
        the other ranks see a finalize rather than a lost connection."""
        _shut_down_tutti()

    def execute(self, fn):
        """fn(executable); see the module's docstring for what an exception does here."""
        try:
            return fn(self.executable)
        except BaseException:
            _leave_job()
            raise


def _leave_job():
    """Aborts and finalizes this rank's tutti runtime if fn left one initialized."""
    tutti = sys.modules.get("tutti")
    if tutti is None or not tutti.is_initialized():
        return
    try:
        tutti.abort()
    except Exception:
        pass  # already aborted or failed: leaving is what matters
    _shut_down_tutti()


def _shut_down_tutti():
    tutti = sys.modules.get("tutti")
    if tutti is None or not tutti.is_initialized():
        return
    torch_api = sys.modules.get("tutti.torch")
    try:
        # tutti.torch's shutdown also forgets its handles and process sets
        (torch_api.shutdown if torch_api is not None else tutti.shutdown)()
    except Exception:
        pass  # a finalize after abort may report the abort; the runtime is gone either way
