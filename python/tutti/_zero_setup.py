"""Zero-setup launch under torchrun (docs/launchers.md): with no coordinator named
(TUTTI_COORDINATOR unset or "auto"), rank 0 starts the tuttid binary as its child and hands its
endpoint and a random job token to the others through torch's own TCPStore at
MASTER_ADDR:MASTER_PORT, as a client: tutti never binds that port. Under torch 1.x the store is
served by rank 0's torch.distributed.init_process_group, so that call comes first; torch 2's
agent store (TORCH_ELASTIC_USE_AGENT_STORE) serves it from the start.

Standard library and torch only; used by tutti.init from the application's thread."""
import builtins
import datetime
import os
import secrets

from ._tuttid_child import TuttidChild
from .errors import TimeoutError

_REQUIRED = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID")


def wanted(coordinator):
    """Whether this process should bootstrap through torchrun's store."""
    named = coordinator or os.environ.get("TUTTI_COORDINATOR", "")
    return named in ("", "auto") and all(k in os.environ for k in _REQUIRED)


class TorchrunBootstrap:
    """One rank's part: `coordinator`, `job` and `token` for tutti_init; `finish()` after it."""

    def __init__(self, timeout_s):
        import torch.distributed as dist
        self.rank = int(os.environ["RANK"])
        self.size = int(os.environ["WORLD_SIZE"])
        # One namespace per run and restart: an elastic restart bootstraps afresh.
        self._prefix = (f"tutti/{os.environ['TORCHELASTIC_RUN_ID']}/"
                        f"{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/")
        address, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
        self._timeout = datetime.timedelta(seconds=timeout_s)
        try:
            self._store = dist.TCPStore(address, port, None, False, self._timeout)
        except (RuntimeError, builtins.TimeoutError) as e:
            raise TimeoutError(
                f"torchrun: no TCPStore answered at MASTER_ADDR:MASTER_PORT ({address}:{port}) "
                f"within {timeout_s:g} s ({e}); under torch 1.x call "
                f"torch.distributed.init_process_group before tutti's init (its rank 0 serves "
                f"the store), or name a coordinator with TUTTI_COORDINATOR", -8) from None
        self._child = None
        if self.rank == 0:
            self.coordinator = self._start_tuttid(timeout_s)
            self.token = secrets.token_hex(16)
            self._store.set(self._prefix + "token", self.token)
            self._store.set(self._prefix + "coordinator", self.coordinator)
        else:
            # get() waits for rank 0's set(), up to the store's timeout.
            try:
                self.coordinator = self._store.get(self._prefix + "coordinator").decode()
                self.token = self._store.get(self._prefix + "token").decode()
            except (RuntimeError, builtins.TimeoutError) as e:
                raise TimeoutError(f"torchrun: rank 0 published no coordinator within "
                                   f"{timeout_s:g} s ({e})", -8) from None
        self.job = f"torchrun-{os.environ['TORCHELASTIC_RUN_ID']}"

    def _start_tuttid(self, timeout_s):
        one_host = os.environ.get("LOCAL_WORLD_SIZE") == os.environ["WORLD_SIZE"]
        advertised = None if one_host else (os.environ.get("TUTTI_COORDINATOR_HOST")
                                            or os.environ["MASTER_ADDR"])
        self._child = TuttidChild("127.0.0.1" if one_host else "0.0.0.0", advertised, timeout_s,
                                  whose="this rank's")
        return self._child.endpoint

    def abandon(self):
        """The init failed on this rank: its tuttid, if it started one, goes now."""
        self._stop_child()

    def finish(self):
        """After tutti_finalize: every rank says so; rank 0 then stops its tuttid."""
        try:
            self._store.set(self._prefix + f"done/{self.rank}", "1")
            if self.rank == 0:
                self._store.wait([self._prefix + f"done/{r}" for r in range(self.size)],
                                 self._timeout)
        except (RuntimeError, builtins.TimeoutError):
            pass  # a rank that never finished: stop the coordinator all the same
        finally:
            self._stop_child()

    def _stop_child(self):
        if self._child is not None:
            self._child.stop()
            self._child = None
