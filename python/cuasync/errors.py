"""cuasync.Error and one subclass per status of libcuasync.

Every error carries the stable status name (``err.name``: "NOT_FOUND", from cua_strerror_name), the status
code (``err.status``, the wire value), the exact message (``err.message``: the daemon's words, from
cua_last_error or the future's error) and the advice (``err.advice``, cua_strerror). The subclasses are named
after the status: BAD_ARGUMENT -> BadArgumentError, CONTEXT_LOST -> ContextLostError, and so on; the table is
read from the library itself, so a status added there gets its class here.
"""
from ._ffi import ffi, lib


class Error(Exception):
    """An error of libcuasync or the daemon: a status with its stable name and the exact message."""

    status = None  # set on the subclasses
    name = "UNKNOWN"

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
            self.name = _name(status)
        self.message = message
        self.advice = ffi.string(lib.cua_strerror(self.status if self.status is not None else -1)).decode()
        super().__init__("%s: %s" % (self.name, message or self.advice))


def _name(status):
    return ffi.string(lib.cua_strerror_name(status)).decode()


def _camel(name):
    return "".join(part.capitalize() for part in name.split("_")) + "Error"


# Python's own exception a status also is, so that `except TimeoutError` catches cuasync.TimeoutError too.
_ALSO = {"TIMEOUT": TimeoutError, "NO_MEMORY": MemoryError}

BY_STATUS = {}
for _st in range(1, 256):
    _nm = _name(_st)
    if _nm == "UNKNOWN":
        break
    _bases = (Error, _ALSO[_nm]) if _nm in _ALSO else (Error,)
    _cls = type(_camel(_nm), _bases, {"status": _st, "name": _nm, "__doc__": "Status %s." % _nm})
    BY_STATUS[_st] = _cls
    globals()[_cls.__name__] = _cls

__all__ = ["Error", "ArgumentTypeError", "error_for"] + [c.__name__ for c in BY_STATUS.values()]


class ArgumentTypeError(BY_STATUS[5], TypeError):  # 5: BAD_ARGUMENT, a wire value that never changes
    """A kernel argument of a type that cannot be passed (checked before anything is sent)."""


def error_for(status, message):
    """The Error subclass instance for status (Error itself for a status this library does not know)."""
    cls = BY_STATUS.get(status)
    return cls(message) if cls else Error(message, status)


def check(status):
    """Raises the error of a failed libcuasync call (its message from cua_last_error); returns otherwise.
    Must run on the thread that made the call, right after it (the message is per thread)."""
    if status != 0:
        raise error_for(status, ffi.string(lib.cua_last_error()).decode(errors="replace"))
