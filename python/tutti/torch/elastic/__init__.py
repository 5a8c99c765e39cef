"""horovod.torch.elastic on tutti (docs/elastic.md): `run`, TorchState, ObjectState and
ElasticSampler, each bound to a process set (the world by default).

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, batch in enumerate(loader):
                ...
                state.commit()

    state = hvd.elastic.TorchState(model, optimizer, process_set=my_set, epoch=0, batch=0)
    train(state)

After a failure `run` restores the state to its last commit, waits for the job to re-form (by
itself, without shutdown()/init()), re-syncs the state within its set and calls the function
again; sets that did not lose a member go on untouched.
"""
import functools

from tutti.elastic import (HostsUpdatedInterrupt, HostUpdateResult, State,  # noqa: F401
                           run_fn, wait_for_next_epoch)

from .sampler import ElasticSampler  # noqa: F401
from .state import ObjectState, TorchState  # noqa: F401

run = functools.partial(run_fn, reset=wait_for_next_epoch)
run.__doc__ = """Decorator: runs `func(state, ...)` again after each failure, as Horovod's
hvd.elastic.run does (docs/elastic.md)."""
