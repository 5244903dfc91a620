"""cuasync — Python client of cuasyncd, over libcuasync (cffi, ABI mode) and numpy.

    import numpy as np, cuasync
    with cuasync.connect() as client:                 # $CUASYNC_URL, else the default socket
        mod = client.load_module("kernels.fatbin")    # or the image's bytes
        axpy = mod.function("axpy")
        with client.mem_alloc(x.nbytes) as dx, client.mem_alloc(y.nbytes) as dy:
            dx.copy_from(x); dy.copy_from(y)
            axpy.launch(4096, 256, np.float32(2.0), dx, dy, np.uint64(n)).result()
            out = dy.to_numpy(np.float32)

Launches return a Future: ``.result(timeout=None)`` blocks, ``await`` works in asyncio. Errors are
cuasync.Error subclasses named after the status (NotFoundError, BadArgumentError, ...), with ``.name``
("NOT_FOUND") and ``.message`` (the daemon's words). The library is found through $CUASYNC_LIB, the build
tree, or the system (see cuasync._ffi).
"""
from .client import SCALAR_TYPES, Client, DeviceBuffer, Event, HostBuffer, Kernel, Module, Stream, connect
from .errors import (  # noqa: F401 (one class per status, re-exported)
    ArgumentTypeError,
    Error,
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
    error_for,
)
from .future import Future

__all__ = [
    "connect",
    "Client",
    "DeviceBuffer",
    "HostBuffer",
    "Module",
    "Kernel",
    "Stream",
    "Event",
    "Future",
    "Error",
    "error_for",
    "SCALAR_TYPES",
    "ArgumentTypeError",
    "InternalError",
    "ProtocolError",
    "VersionError",
    "UnknownOpError",
    "BadArgumentError",
    "NotFoundError",
    "ContextLostError",
    "QuotaError",
    "PdlUnsupportedError",
    "NoMemoryError",
    "DeviceError",
    "TooLargeError",
    "TimeoutError",
    "TransportError",
    "ClosedError",
    "NoSessionError",
    "BusyError",
    "NoDeviceError",
    "UnsupportedError",
    "ModuleError",
    "DeviceHungError",
    "ShuttingDownError",
    "UnauthenticatedError",
    "PermissionDeniedError",
    "SessionLostError",
]
