"""One exception class per tutti status; each carries the C library's message.

The classes sit where Horovod's users expect them (docs/python.md, "Exceptions"):
- a call the caller got wrong (bad argument, duplicate name, a set it cannot use) is a
  ValueError, as Horovod's std::invalid_argument becomes one;
- a collective that failed (peers disagreeing, a peer or the coordinator lost, a timeout, an
  abort, shutdown) is a HorovodInternalError, a RuntimeError, as Horovod raises from
  synchronize(); elastic training catches exactly this class;
- a feature tutti lacks is a NotImplementedError.
Every class is also a TuttiError, whose `status` is the tutti.h code.
"""
import builtins

from . import _capi


class TuttiError(Exception):
    """A tutti call failed. `status` is the tutti.h code, `str(error)` the library's message."""

    status = None
    # TensorFlow's AutoGraph re-raises an exception from a traced tf.function as its own
    # StagingError unless the class has a plain constructor; this attribute makes it pass tutti's
    # errors through unchanged, so `except tutti.X` works inside tf.function too.
    ag_pass_through = True

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class HorovodInternalError(TuttiError, RuntimeError):
    """A collective failed on this rank (Horovod's name: scripts and elastic training catch it).
    The subclasses say why; raised as itself only for failures without a status of their own."""


# ---- the caller's mistakes: ValueError ---------------------------------------------------------
class InvalidArgumentError(TuttiError, ValueError):
    status = -1


class UnknownSetError(TuttiError, ValueError):
    status = -2


class NotAMemberError(TuttiError, ValueError):
    status = -3


class DuplicateNameError(TuttiError, ValueError):
    status = -4


class MixedDevicesError(InvalidArgumentError, RuntimeError):
    """The tensors of one call are on different devices. A caller's mistake (a ValueError), and a
    RuntimeError as Horovod raises it for a grouped call mixing CPU and GPU tensors."""


# ---- failed collectives: HorovodInternalError ---------------------------------------------------
class MismatchError(HorovodInternalError):
    status = -5


class PeerLostError(HorovodInternalError):
    status = -6


class CoordinatorLostError(HorovodInternalError):
    status = -7


class TimeoutError(HorovodInternalError, builtins.TimeoutError):  # noqa: A001 - tutti.TimeoutError
    status = -8


class AbortedError(HorovodInternalError):
    status = -9


class StalledError(HorovodInternalError):
    status = -10


class VersionMismatchError(HorovodInternalError):
    status = -11


class AuthFailedError(HorovodInternalError):
    status = -12


class ShutDownError(HorovodInternalError):
    status = -13


class InternalError(HorovodInternalError):
    status = -14


class SetRemovedError(HorovodInternalError):
    status = -15


class EvictedError(HorovodInternalError):
    status = -17


class LimitExceededError(HorovodInternalError):
    status = -18


class DeviceUnavailableError(HorovodInternalError):
    status = -19


class ReformedError(HorovodInternalError):
    """An elastic job lost a rank and re-formed; the request belonged to the earlier membership
    epoch on a set that lost a member (docs/elastic.md)."""
    status = -20


# ---- what tutti lacks: NotImplementedError -----------------------------------------------------
class UnsupportedError(TuttiError, NotImplementedError):
    status = -16


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


# A status's own class: the one that sets it (a subclass inheriting it, such as MixedDevicesError,
# is raised by the Python layer itself, never chosen by status).
_BY_STATUS = {cls.status: cls for cls in _all_subclasses(TuttiError)
              if cls.__dict__.get("status") is not None}


def from_status(status, message=None):
    """The exception for a C status, with `message` (default: the thread's last error)."""
    if message is None:
        message = _capi.tutti_last_error().decode("utf-8", "replace")
    if not message:
        message = _capi.tutti_status_string(status).decode("utf-8", "replace")
    return _BY_STATUS.get(status, TuttiError)(message, status)


def check(status):
    """Raises for an error status; returns the status otherwise (OK or IN_PROGRESS)."""
    if status < 0:
        raise from_status(status)
    return status
