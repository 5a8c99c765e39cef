"""Elastic training, framework-neutral (docs/elastic.md): the State protocol, ObjectState and the
retry loop that Horovod's `hvd.elastic.run` is, made set-aware.

A state belongs to a process set (the world by default). When a request fails because the job
lost a rank (HorovodInternalError: PeerLostError, ReformedError), `run` waits until the runtime
is in the next membership epoch (the job re-forms by itself), restores the state to its last
commit, re-syncs it within its set from the set's lowest surviving member, and calls the
function again. No shutdown()/init(): sets that did not lose a member never stop, and their
states are never reset.
"""
import copy
import functools
import os
import queue

from tutti import _world
from tutti.errors import HorovodInternalError


class HostsUpdatedInterrupt(RuntimeError):
    """The hosts changed; raised by check_host_updates() on every member of the state's set at
    the same commit. `skip_sync`: only hosts were removed, the state needs no re-sync.
    `ranks_waiting`: ranks wait to join the job; `run` admits them at this commit."""

    def __init__(self, skip_sync, ranks_waiting=False):
        super().__init__("ranks wait to join the job" if ranks_waiting
                         else "the hosts of the job changed")
        self.skip_sync = skip_sync
        self.ranks_waiting = ranks_waiting


class HostUpdateResult:
    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


def _elastic_timeout_ms():
    """How long `run` waits for the job to re-form: TUTTI_ELASTIC_TIMEOUT (seconds, as tuttirun
    --elastic-timeout sets it; Horovod's default of 600 s otherwise), plus a grace period: tuttid
    enforces the timeout itself and says why the job ended, which should arrive first."""
    try:
        seconds = float(os.environ.get("TUTTI_ELASTIC_TIMEOUT", "600"))
    except ValueError:
        seconds = 600
    return int((seconds + 5) * 1000)


class State:
    """What `run` keeps consistent across failures. Subclasses define save, restore, sync and
    reset. `bcast_object(obj)` broadcasts within the state's set from its lowest member."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._host_messages = queue.Queue()
        self._last_updated_timestamp = 0
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Functions called, in order, after each reset (e.g. to scale the learning rate)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self._host_messages = queue.Queue()
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """A host-discovery notification (HostUpdateResult); acted on at the next commit."""
        self._host_messages.put((timestamp, update_res))

    def commit(self):
        """Saves the state (restore() comes back here) and checks for host updates."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every member at once if ranks wait to join the job
        (tutti.ranks_waiting()) or a host update arrived, as the set's lowest member sees it (the
        members agree through a broadcast from it)."""
        last = prev = self._last_updated_timestamp
        update = HostUpdateResult.no_update
        while not self._host_messages.empty():
            timestamp, result = self._host_messages.get()
            if timestamp > last:
                last = timestamp
                update |= result
        waiting = _world.ranks_waiting() > 0
        prev, self._last_updated_timestamp, update, waiting = self._bcast_object(
            (prev, last, update, waiting))
        if waiting:
            raise HostsUpdatedInterrupt(False, ranks_waiting=True)
        if self._last_updated_timestamp > prev:
            raise HostsUpdatedInterrupt(update == HostUpdateResult.removed)

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def reset(self):
        """Called after the job re-formed, before sync(): rebuild what depends on the world size."""


class ObjectState(State):
    """Picklable attributes (`epoch=0, batch=0`), saved by commit(), broadcast by sync()."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: copy.deepcopy(getattr(self, attr)) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, copy.deepcopy(value))


def run_fn(func, reset):
    """Horovod's retry loop. `reset(epoch_before)`, after a failure, waits for the job to leave
    the epoch the attempt started in."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            epoch = _world.membership_epoch()
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                skip_sync = False
                reset(epoch)
            except HostsUpdatedInterrupt as e:
                # The members agreed on it at one commit; the world they share has not failed.
                skip_sync = e.skip_sync
                if e.ranks_waiting:
                    # This commit is the boundary: the waiting ranks are admitted once every
                    # rank of the job reached one (they sync with the others below).
                    reset(_world.membership_epoch())
            state.on_reset()

    return wrapper


def wait_for_next_epoch(epoch):
    """The reset of tutti's `run`: the job re-forms by itself; wait until this process is past
    `epoch`, which also acknowledges the re-formation (the sets it changed take requests again).
    A failure that was no membership change, such as a stall, times out here with TimeoutError
    instead of looping."""
    _world.await_membership_epoch(epoch, _elastic_timeout_ms())
