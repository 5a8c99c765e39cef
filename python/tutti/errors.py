"""One exception class per tutti status; each carries the C library's message."""
import builtins

from . import _capi


class TuttiError(Exception):
    """A tutti call failed. `status` is the tutti.h code, `str(error)` the library's message."""

    status = None

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgumentError(TuttiError, ValueError):
    status = -1


class UnknownSetError(TuttiError):
    status = -2


class NotAMemberError(TuttiError):
    status = -3


class DuplicateNameError(TuttiError):
    status = -4


class MismatchError(TuttiError):
    status = -5


class PeerLostError(TuttiError):
    status = -6


class CoordinatorLostError(TuttiError):
    status = -7


class TimeoutError(TuttiError, builtins.TimeoutError):  # noqa: A001 - tutti.TimeoutError
    status = -8


class AbortedError(TuttiError):
    status = -9


class StalledError(TuttiError):
    status = -10


class VersionMismatchError(TuttiError):
    status = -11


class AuthFailedError(TuttiError):
    status = -12


class ShutDownError(TuttiError):
    status = -13


class InternalError(TuttiError):
    status = -14


class SetRemovedError(TuttiError):
    status = -15


class UnsupportedError(TuttiError):
    status = -16


class EvictedError(TuttiError):
    status = -17


class LimitExceededError(TuttiError):
    status = -18


class DeviceUnavailableError(TuttiError):
    status = -19


_BY_STATUS = {cls.status: cls for cls in TuttiError.__subclasses__()}


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
