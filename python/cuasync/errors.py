"""cuasync.Error and one subclass per status of libcuasync.

Every error carries the stable status name (``err.name``: "NOT_FOUND", from cua_strerror_name), the status
code (``err.status``, the wire value), the exact message (``err.message``: the daemon's words, from
cua_last_error or the future's error) and the advice (``err.advice``, cua_strerror). The subclasses are named
after the status: BAD_ARGUMENT -> BadArgumentError, CONTEXT_LOST -> ContextLostError, SESSION_LOST ->
SessionLostError, and so on. They are declared here, one class per status of client/cuasync.h's
CUA_ERROR_TABLE, so that type checkers and IDEs see them; python/tests/test_cuasync.py checks that the table
and these classes agree (a status added to the library needs its class here).
"""
import builtins
from typing import Dict, Optional, Type

from ._ffi import ffi, lib


class Error(Exception):
    """An error of libcuasync or the daemon: a status with its stable name and the exact message."""

    status: Optional[int] = None  # set on the subclasses
    name: str = "UNKNOWN"

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        if status is not None:
            self.status = status
            self.name = _name(status)
        self.message = message
        self.advice: str = ffi.string(lib.cua_strerror(self.status if self.status is not None else -1)).decode()
        super().__init__("%s: %s" % (self.name, message or self.advice))


def _name(status: int) -> str:
    return str(ffi.string(lib.cua_strerror_name(status)).decode())


# One class per status. Python's own exception a status also is comes second, so that `except TimeoutError`
# catches cuasync.TimeoutError too (and MemoryError NoMemoryError).
class InternalError(Error):
    """Status INTERNAL (1)."""

    status = 1
    name = "INTERNAL"


class ProtocolError(Error):
    """Status PROTOCOL (2)."""

    status = 2
    name = "PROTOCOL"


class VersionError(Error):
    """Status VERSION (3)."""

    status = 3
    name = "VERSION"


class UnknownOpError(Error):
    """Status UNKNOWN_OP (4)."""

    status = 4
    name = "UNKNOWN_OP"


class BadArgumentError(Error):
    """Status BAD_ARGUMENT (5)."""

    status = 5
    name = "BAD_ARGUMENT"


class NotFoundError(Error):
    """Status NOT_FOUND (6)."""

    status = 6
    name = "NOT_FOUND"


class ContextLostError(Error):
    """Status CONTEXT_LOST (7)."""

    status = 7
    name = "CONTEXT_LOST"


class QuotaError(Error):
    """Status QUOTA (8)."""

    status = 8
    name = "QUOTA"


class PdlUnsupportedError(Error):
    """Status PDL_UNSUPPORTED (9)."""

    status = 9
    name = "PDL_UNSUPPORTED"


class NoMemoryError(Error, builtins.MemoryError):
    """Status NO_MEMORY (10)."""

    status = 10
    name = "NO_MEMORY"


class DeviceError(Error):
    """Status DEVICE (11)."""

    status = 11
    name = "DEVICE"


class TooLargeError(Error):
    """Status TOO_LARGE (12)."""

    status = 12
    name = "TOO_LARGE"


class TimeoutError(Error, builtins.TimeoutError):
    """Status TIMEOUT (13)."""

    status = 13
    name = "TIMEOUT"


class TransportError(Error):
    """Status TRANSPORT (14)."""

    status = 14
    name = "TRANSPORT"


class ClosedError(Error):
    """Status CLOSED (15)."""

    status = 15
    name = "CLOSED"


class NoSessionError(Error):
    """Status NO_SESSION (16)."""

    status = 16
    name = "NO_SESSION"


class BusyError(Error):
    """Status BUSY (17)."""

    status = 17
    name = "BUSY"


class NoDeviceError(Error):
    """Status NO_DEVICE (18)."""

    status = 18
    name = "NO_DEVICE"


class UnsupportedError(Error):
    """Status UNSUPPORTED (19)."""

    status = 19
    name = "UNSUPPORTED"


class ModuleError(Error):
    """Status MODULE (20)."""

    status = 20
    name = "MODULE"


class DeviceHungError(Error):
    """Status DEVICE_HUNG (21)."""

    status = 21
    name = "DEVICE_HUNG"


class ShuttingDownError(Error):
    """Status SHUTTING_DOWN (22)."""

    status = 22
    name = "SHUTTING_DOWN"


class UnauthenticatedError(Error):
    """Status UNAUTHENTICATED (23)."""

    status = 23
    name = "UNAUTHENTICATED"


class PermissionDeniedError(Error):
    """Status PERMISSION_DENIED (24)."""

    status = 24
    name = "PERMISSION_DENIED"


class SessionLostError(Error):
    """Status SESSION_LOST (25)."""

    status = 25
    name = "SESSION_LOST"



BY_STATUS: Dict[int, Type[Error]] = {
    cls.status: cls
    for cls in (
        InternalError,
        ProtocolError,
        VersionError,
        UnknownOpError,
        BadArgumentError,
        NotFoundError,
        ContextLostError,
        QuotaError,
        PdlUnsupportedError,
        NoMemoryError,
        DeviceError,
        TooLargeError,
        TimeoutError,
        TransportError,
        ClosedError,
        NoSessionError,
        BusyError,
        NoDeviceError,
        UnsupportedError,
        ModuleError,
        DeviceHungError,
        ShuttingDownError,
        UnauthenticatedError,
        PermissionDeniedError,
        SessionLostError,
    )
    if cls.status is not None
}


class ArgumentTypeError(BadArgumentError, TypeError):
    """A kernel argument of a type that cannot be passed (checked before anything is sent)."""


__all__ = ["Error", "ArgumentTypeError", "error_for", "BY_STATUS"] + [c.__name__ for c in BY_STATUS.values()]


def error_for(status: int, message: str) -> Error:
    """The Error subclass instance for status (Error itself for a status this library does not know)."""
    cls = BY_STATUS.get(status)
    return cls(message) if cls else Error(message, status)


def check(status: int) -> None:
    """Raises the error of a failed libcuasync call (its message from cua_last_error); returns otherwise.
    Must run on the thread that made the call, right after it (the message is per thread)."""
    if status != 0:
        raise error_for(status, ffi.string(lib.cua_last_error()).decode(errors="replace"))
