"""The executor's settings (driver side): how long start() waits for its placement group, and
how long the ranks' rendezvous and the coordinator's start may take. Made once, read by
RayExecutor.start() each time; horovod.ray's `RayExecutor.create_settings` returns one."""
from dataclasses import dataclass


@dataclass
class Settings:
    """`timeout_s`: the job's start deadline: the coordinator must listen, every actor must
    answer and every rank's tutti init must rendezvous within it (each rank gets it as
    TUTTI_TIMEOUT_MS). `placement_group_timeout_s`: how long start() waits for Ray to place the
    whole placement group before it gives up with TimeoutError (all or nothing)."""
    timeout_s: float = 30
    placement_group_timeout_s: float = 100

    def __post_init__(self):
        for name in ("timeout_s", "placement_group_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")


def create_settings(timeout_s=30, placement_group_timeout_s=100):
    """horovod.ray's RayExecutor.create_settings, without its ssh and nics options: tutti's
    ranks start as Ray actors, never over ssh, and find their data-plane address themselves."""
    return Settings(timeout_s=timeout_s, placement_group_timeout_s=placement_group_timeout_s)
