"""Collecting the ranks' results on the driver, and the error that names a failed rank.

A failing rank usually takes the others down within milliseconds: its actor aborts its tutti
job (worker.py), or tutti sees its process die (docs/failures.md), and their collectives fail
with AbortedError or PeerLostError. So after the first failure the driver waits a short grace
for the rest, then reports the root cause: the lowest rank whose failure was not one of those
consequences. Ranks still running after the grace are returned as stragglers for the executor
to stop."""
import time

import ray

from .. import errors as tutti_errors

# What a rank raises because another rank failed, not of its own accord.
_CONSEQUENCES = (tutti_errors.AbortedError, tutti_errors.PeerLostError,
                 tutti_errors.CoordinatorLostError)


class WorkerError(RuntimeError):
    """A rank's function raised, or its worker actor died. `rank`: the root cause's rank;
    `cause`: what it raised (the original exception; for a dead actor, Ray's error); `failures`:
    {rank: exception} of every rank that failed; `stragglers`: ranks stopped because they were
    still running after the grace. The remote traceback is in the chained Ray error."""

    def __init__(self, message, rank, cause, failures, stragglers):
        super().__init__(message)
        self.rank, self.cause, self.failures, self.stragglers = rank, cause, failures, stragglers


def _cause(error):
    """The exception the rank's function raised (Ray wraps it), or Ray's own error."""
    return error.cause if isinstance(error, ray.exceptions.RayTaskError) and error.cause else error


def _describe(rank, error):
    if isinstance(error, ray.exceptions.RayActorError):
        # Ray's text runs to many lines; its first says why the actor died.
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"rank {rank}: its worker actor died ({first})"
    cause = _cause(error)
    return f"rank {rank} failed: {type(cause).__name__}: {cause}"


def gather(refs_by_rank, grace_s, tolerate_lost=False, replacer=None):
    """{rank: ObjectRef} -> ({rank: result}, [ranks lost]); raises WorkerError on any failure.
    With `tolerate_lost` (an elastic job, which re-forms without them), a rank whose actor died
    is lost rather than failed, as long as every other rank succeeds. `replacer.start(rank)`, if
    a replacer is given, is asked first for the ObjectRef of the same call on a replacement
    actor (None: no replacement); a replacement still running `grace_s` after every other rank
    returned never got into the job (the others finished first) and is lost too:
    `replacer.abandon(rank)` stops it."""
    pending = {ref: rank for rank, ref in refs_by_rank.items()}
    results, failures, lost, deadline = {}, {}, [], None
    replacements = set()
    while pending:
        if deadline is None and replacements and set(pending) <= replacements:
            deadline = time.monotonic() + grace_s
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=timeout)
        if not ready:
            if not failures:  # only replacements left: lost, not stragglers
                for ref in list(pending):
                    rank = pending.pop(ref)
                    replacer.abandon(rank)
                    lost.append(rank)
            break  # the grace is over: what still runs is a straggler
        for ref in ready:
            rank = pending.pop(ref)
            replacements.discard(ref)
            try:
                results[rank] = ray.get(ref)
            except ray.exceptions.RayActorError as error:
                if tolerate_lost:
                    again = (replacer.start(rank) if replacer is not None and not failures
                             else None)
                    if again is None:
                        lost.append(rank)
                    else:
                        pending[again] = rank
                        replacements.add(again)
                    continue
                failures[rank] = error
                if deadline is None:
                    deadline = time.monotonic() + grace_s
            except ray.exceptions.RayTaskError as error:
                failures[rank] = error
                if deadline is None:
                    deadline = time.monotonic() + grace_s
    if not failures:
        return results, sorted(lost)
    roots = [r for r in sorted(failures) if not isinstance(_cause(failures[r]), _CONSEQUENCES)]
    rank = roots[0] if roots else min(failures)
    stragglers = sorted(pending.values())
    message = _describe(rank, failures[rank])
    others = sorted(set(failures) - {rank})
    if lost:
        message = f"ranks {sorted(lost)}' worker actors died; " + message
    if others:
        message += f"; then ranks {others} failed too"
    if stragglers:
        message += (f"; ranks {stragglers} were still running {grace_s:g} s later and were "
                    f"stopped")
    raise WorkerError(message, rank, _cause(failures[rank]),
                      {r: _cause(e) for r, e in failures.items()}, stragglers) from failures[rank]
