"""The client: a connection to cuasyncd and the objects it owns (device and host buffers, modules, kernels,
streams, futures).

Lifetimes: every object belongs to its Client. Closing the client (``close()`` or leaving its ``with``
block) waits for the futures still in flight, closes the session (the daemon frees what it still holds) and
marks every object of it closed: using one afterwards raises ClosedError. An object freed twice raises
ClosedError too, naming it, and so does one used after it was freed.

Threads: a Client may be used from several threads (libcuasync is thread-safe and cffi releases the GIL
during its calls); awaiting futures is for one asyncio event loop at a time.
"""
import atexit
import os
import sys
import weakref

from typing import Any, Dict, Optional, Union

import numpy as np

from ._ffi import ffi, lib
from .errors import ArgumentTypeError, BadArgumentError, ClosedError, check, error_for
from .future import Future, _Waiters


def _dim3(v, what):
    """A grid or block given as an int or a tuple of 1 to 3 ints -> [x, y, z]."""
    t = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, (int, np.integer)) and 0 < int(x) < 2 ** 32 for x in t):
        raise BadArgumentError("%s must be a positive int or a tuple of 1 to 3 positive ints, not %r" % (what, v))
    return [int(x) for x in t] + [1] * (3 - len(t))


class _Owned:
    """An object of a client that can be released once; using it afterwards raises ClosedError."""

    _what = "object"

    def __init__(self, client):
        self._client = client
        self._released = None  # why it is unusable: "freed", "the client was closed"
        client._objects.add(self)

    def _live(self):
        if self._released is not None:
            raise ClosedError("%s is no longer usable: %s" % (self, self._released))
        if self._client._c is None:
            raise ClosedError("%s is no longer usable: its client was closed" % self)
        return self._client._c

    def _release(self, why):
        """Marks it released; False when it was already (a double free)."""
        if self._released is not None:
            return False
        self._released = why
        self._client._objects.discard(self)
        return True

    def free(self) -> None:
        """Releases it (each kind of object says how)."""
        raise NotImplementedError

    def _double(self):
        raise ClosedError("%s was already released (%s): double free" % (self, self._released))

    @property
    def closed(self) -> bool:
        return self._released is not None or self._client._c is None

    def __enter__(self):
        self._live()
        return self

    def __exit__(self, *exc):
        if self._released is None and self._client._c is not None:
            self.free()


class DeviceBuffer(_Owned):
    """nbytes of device memory (cua_mem_alloc). ``int(buf)`` / ``buf.ptr`` is its device address."""

    def __init__(self, client, ptr, nbytes, device):
        super().__init__(client)
        self.ptr, self.nbytes, self.device = ptr, nbytes, device

    def __repr__(self):
        return "<cuasync.DeviceBuffer 0x%x, %d bytes>" % (self.ptr, self.nbytes)

    def __int__(self):
        return self.ptr

    def free(self) -> None:
        """Frees the memory (after the work submitted before it, as the daemon orders it)."""
        if self._released is not None:
            self._double()
        c = self._live()
        self._release("freed")
        check(lib.cua_mem_free(c, self.ptr))

    def _host(self, a, writable):
        if not isinstance(a, np.ndarray):
            raise ArgumentTypeError("expected a numpy array, not %s" % type(a).__name__)
        if not a.flags.c_contiguous:
            raise BadArgumentError("the array must be C-contiguous (use numpy.ascontiguousarray)")
        if writable and not a.flags.writeable:
            raise BadArgumentError("the array is read-only: cannot copy into it")
        if a.nbytes > self.nbytes:
            raise BadArgumentError("the array has %d bytes, %r only %d" % (a.nbytes, self, self.nbytes))
        return ffi.from_buffer(a, require_writable=writable)

    def copy_from(self, a: np.ndarray, stream: "Optional[Stream]" = None) -> None:
        """Copies the C-contiguous array a into the start of this buffer; returns when it is done."""
        c = self._live()
        src = self._host(a, False)
        if stream is None:
            check(lib.cua_memcpy_htod(c, self.ptr, src, a.nbytes))
        else:
            check(lib.cua_memcpy_htod_on(c, self.ptr, src, a.nbytes, stream._handle()))

    def copy_to(self, a: np.ndarray, stream: "Optional[Stream]" = None) -> np.ndarray:
        """Copies the start of this buffer into the writable C-contiguous array a (a.nbytes bytes); returns a."""
        c = self._live()
        dst = self._host(a, True)
        if stream is None:
            check(lib.cua_memcpy_dtoh(c, dst, self.ptr, a.nbytes))
        else:
            check(lib.cua_memcpy_dtoh_on(c, dst, self.ptr, a.nbytes, stream._handle()))
        return a

    def to_numpy(self, dtype: Any = np.uint8, shape: Any = None) -> np.ndarray:
        """A new array of dtype (shape: default as many elements as the buffer holds) copied from the buffer."""
        dtype = np.dtype(dtype)
        if shape is None:
            shape = (self.nbytes // dtype.itemsize,)
        return self.copy_to(np.empty(shape, dtype))

    def memset(self, value: int, width: int = 1, count: Optional[int] = None) -> None:
        """Sets count elements of width (1, 2 or 4) bytes to value (default: the whole buffer)."""
        c = self._live()
        check(lib.cua_memset(c, self.ptr, value, width, self.nbytes // width if count is None else count))


class HostBuffer(_Owned):
    """Host memory shared with the daemon's GPU worker (cua_host_alloc): copies between it and the device skip
    the socket. ``numpy(dtype, shape)`` gives an array over the same memory, without a copy.

    Arrays over it must be gone (``del``) before it is freed: free() refuses with BufferError while one is
    alive, as Python's mmap.close() does, since they would point at unmapped memory. Closing the client
    unmaps the buffer whatever arrays remain: do not use them afterwards."""

    def __init__(self, client, p, nbytes, device):
        super().__init__(client)
        self._p, self.nbytes, self.device = p, nbytes, device
        self._cbuf = ffi.buffer(p, nbytes)  # the one exporter: every array made here holds a reference to it

    def __repr__(self):
        return "<cuasync.HostBuffer at 0x%x, %d bytes>" % (int(ffi.cast("uintptr_t", self._p)), self.nbytes)

    def numpy(self, dtype: Any = np.uint8, shape: Any = None) -> np.ndarray:
        """A writable array of dtype over the buffer's memory (no copy); shape defaults to 1-D, all of it."""
        self._live()
        dtype = np.dtype(dtype)
        count = self.nbytes // dtype.itemsize if shape is None else int(np.prod(shape))
        a = np.frombuffer(self._cbuf, dtype=dtype, count=count)
        return a if shape is None else a.reshape(shape)

    def _views(self):
        # references to the exporter besides self._cbuf and getrefcount's argument: the arrays made here
        return sys.getrefcount(self._cbuf) - 2

    def free(self) -> None:
        if self._released is not None:
            self._double()
        c = self._live()
        n = self._views()
        if n > 0:
            raise BufferError("%r: %d numpy array(s) over it are still alive; del them before freeing it" % (self, n))
        self._release("freed")
        self._cbuf = None
        check(lib.cua_host_free(c, self._p))

    def __exit__(self, exc_type, *exc):
        # While an exception propagates its traceback may hold the arrays: leave the buffer to the client's
        # close rather than hide that exception under a BufferError.
        if exc_type is not None and self._released is None and self._views() > 0:
            return
        super().__exit__(exc_type, *exc)


class Stream(_Owned):
    """A stream of the client's own (cua_stream_create): work on it runs in submission order."""

    def __init__(self, client, handle, device):
        super().__init__(client)
        self._h, self.device = handle, device

    def __repr__(self):
        return "<cuasync.Stream 0x%x>" % self._h.id

    def _handle(self):
        self._live()
        return self._h

    def synchronize(self) -> None:
        check(lib.cua_stream_synchronize(self._live(), self._h))

    def wait_event(self, event: "Event") -> None:
        """Work sent to this stream afterwards waits until event's last record (before this call) is reached."""
        if event._client is not self._client:
            raise BadArgumentError("%r belongs to another client" % event)
        check(lib.cua_stream_wait_event(self._live(), self._h, event._handle()))

    def free(self) -> None:
        if self._released is not None:
            self._double()
        c = self._live()
        self._release("destroyed")
        check(lib.cua_stream_destroy(c, self._h))

    destroy = free


class Event(_Owned):
    """A CUDA event of the client's session (cua_event_*): marks a point of a stream, for another stream to wait
    for (Stream.wait_event: the seed's ``then`` and ``zip`` across streams), to wait for here (synchronize), or to
    time (elapsed_ms)."""

    _what = "event"

    def __init__(self, client, handle, device, timing):
        super().__init__(client)
        self._h, self.device, self.timing = handle, device, timing

    def __repr__(self):
        return "<cuasync.Event 0x%x>" % self._h.id

    def _handle(self):
        self._live()
        return self._h

    def record(self, stream: "Stream") -> None:
        """Marks the point of stream (a Stream of this client) after the work sent to it so far."""
        if not isinstance(stream, Stream):
            raise BadArgumentError("record needs a Stream of this client (the pool is not ordered), not %r" % (stream,))
        if stream._client is not self._client:
            raise BadArgumentError("%r belongs to another client" % stream)
        check(lib.cua_event_record(self._live(), self._h, stream._handle()))

    def synchronize(self) -> None:
        """Returns when the last record has been reached (at once when never recorded)."""
        check(lib.cua_event_synchronize(self._live(), self._h))

    def query(self) -> bool:
        """True when the last record has been reached (or there was none)."""
        out = ffi.new("int *")
        check(lib.cua_event_query(self._live(), self._h, out))
        return bool(out[0])

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds from this event's last record to end's (both reached; both with timing)."""
        if end._client is not self._client:
            raise BadArgumentError("%r belongs to another client" % end)
        out = ffi.new("float *")
        check(lib.cua_event_elapsed_ms(self._live(), self._h, end._handle(), out))
        return float(out[0])

    def free(self) -> None:
        if self._released is not None:
            self._double()
        c = self._live()
        self._release("destroyed")
        check(lib.cua_event_destroy(c, self._h))

    destroy = free


class Module(_Owned):
    """A loaded module (cubin, fatbin, PTX, or the emulated device's kernel list)."""

    def __init__(self, client, handle, device):
        super().__init__(client)
        self._h, self.device = handle, device

    def __repr__(self):
        return "<cuasync.Module 0x%x>" % self._h.id

    def function(self, name: str) -> "Kernel":
        """The kernel called name, with its parameter layout (as the daemon checks launches against it)."""
        c = self._live()
        f = ffi.new("cua_function *")
        check(lib.cua_module_get_function(c, self._h, name.encode(), f))
        n = ffi.new("uint32_t *")
        check(lib.cua_function_get_params(c, f[0], n, ffi.NULL, ffi.NULL))
        offs, sizes = ffi.new("uint32_t[]", max(n[0], 1)), ffi.new("uint32_t[]", max(n[0], 1))
        check(lib.cua_function_get_params(c, f[0], n, offs, sizes))
        return Kernel(self, name, f[0], [(offs[i], sizes[i]) for i in range(n[0])])

    def free(self) -> None:
        if self._released is not None:
            self._double()
        c = self._live()
        self._release("unloaded")
        check(lib.cua_module_unload(c, self._h))

    unload = free


# numpy scalar types a kernel argument may be, by value: their bytes are passed as they are
SCALAR_TYPES = tuple(
    np.dtype(t).type
    for t in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64")
)


class Kernel:
    """A kernel of a module. ``params`` is its parameter layout: (offset, size) per parameter."""

    def __init__(self, module, name, handle, params):
        self.module, self.name, self._h, self.params = module, name, handle, params

    def __repr__(self):
        return "<cuasync.Kernel %s(%s)>" % (self.name, ", ".join("%d bytes" % s for _, s in self.params))

    def _arg(self, i, a):
        """(kind, value) of argument i, checked against parameter i's size."""
        size = self.params[i][1]
        if isinstance(a, DeviceBuffer):
            if a._client is not self.module._client:
                raise BadArgumentError("argument %d: %r belongs to another client" % (i, a))
            a._live()
            got, kind, val = 8, "ptr", a.ptr
        elif isinstance(a, SCALAR_TYPES + (np.void,)):  # np.void: a structured scalar, a by-value struct
            got, kind, val = a.dtype.itemsize, "bytes", a.tobytes()
        elif isinstance(a, (bool, int, float, np.bool_)):
            # The layout gives sizes, not types: an 8-byte parameter may be an int64, a uint64, a double or a
            # pointer, so a Python number cannot be converted without guessing.
            raise ArgumentTypeError(
                "argument %d of %s is a Python %s: pass an explicit numpy scalar of the parameter's type (it is "
                "%d bytes: e.g. %s)" % (i, self.name, type(a).__name__, size, _examples(size))
            )
        else:
            raise ArgumentTypeError(
                "argument %d of %s: cannot pass %s; kernel arguments are DeviceBuffers or numpy scalars "
                "(numpy.int32, numpy.uint32, numpy.int64, numpy.uint64, numpy.float32, numpy.float64, ...)"
                % (i, self.name, type(a).__name__)
            )
        if got != size:
            raise ArgumentTypeError(
                "argument %d of %s is %d bytes (%s) but the kernel's parameter %d is %d bytes (e.g. %s)"
                % (i, self.name, got, type(a).__name__, i, size, _examples(size))
            )
        return kind, val

    def launch(
        self, grid: Any, block: Any, *args: Any, stream: "Optional[Stream]" = None, shared_mem: int = 0
    ) -> Future:
        """Launches the kernel over grid x block with args; returns a Future that completes when it has run.

        args: DeviceBuffer (passed as its device address) or numpy scalars (passed as their bytes; a
        structured scalar, numpy.void, for a struct passed by value), one per parameter and of its size;
        checked before anything is sent (ArgumentTypeError, BadArgumentError). stream: a Stream, or None for
        the daemon's stream pool (not ordered with other work: wait for the future before reading results)."""
        c = self.module._live()
        if len(args) != len(self.params):
            raise BadArgumentError("%s takes %d arguments, %d given" % (self.name, len(self.params), len(args)))
        items = [self._arg(i, a) for i, a in enumerate(args)]
        cfg = ffi.new("cua_launch_config *")
        cfg.grid, cfg.block, cfg.shared_mem_bytes = _dim3(grid, "grid"), _dim3(block, "block"), int(shared_mem)
        s = stream._handle() if stream is not None else ffi.new("cua_stream *")[0]
        if stream is not None and stream._client is not self.module._client:
            raise BadArgumentError("%r belongs to another client" % stream)
        launch = lib.cua_launch_new(c, self._h)
        if launch == ffi.NULL:
            raise error_for(10, "out of memory")  # NO_MEMORY
        try:
            for kind, val in items:
                if kind == "ptr":
                    rc = lib.cua_launch_push_device_ptr(launch, val)
                else:
                    rc = lib.cua_launch_push_arg(launch, val, len(val))
                check(rc)
            check(lib.cua_launch_set_config(launch, cfg[0]))
            check(lib.cua_launch_set_stream(launch, s))
        except BaseException:
            lib.cua_launch_free(launch)
            raise
        out = ffi.new("cua_future **")
        check(lib.cua_launch_submit(launch, out))  # consumes the launch, also on failure
        return Future(self.module._client, out[0], "%s launch" % self.name)

    __call__ = launch


def _examples(size):
    return {
        1: "numpy.int8 or numpy.uint8",
        2: "numpy.int16 or numpy.uint16",
        4: "numpy.int32, numpy.uint32 or numpy.float32",
        8: "numpy.int64, numpy.uint64, numpy.float64 or a DeviceBuffer",
    }.get(size, "a numpy structured scalar (numpy.void) of that size")


# The clients not closed yet. At interpreter exit they are closed while the interpreter is whole (atexit runs
# before modules are torn down): left to __del__ during teardown, a client could be closed after cffi or this
# module's globals were gone, or a Future freed after its client (cua_future_free on a freed cua_client), and
# libcuasync's NNG threads would still be running while the interpreter goes.
_open_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for c in list(_open_clients):
        try:
            c.close()
        except Exception:  # noqa: BLE001 (exiting: nothing to report to)
            pass


class Client:
    """A connection to cuasyncd and its session (cua_connect). A context manager: closes on exit."""

    def __init__(self, url: Optional[str] = None, timeout_ms: Optional[int] = None) -> None:
        out = ffi.new("cua_client **")
        check(lib.cua_connect(url.encode() if url is not None else ffi.NULL, out))
        self._c = out[0]
        _open_clients.add(self)
        self.url = url
        self._objects: "weakref.WeakSet[_Owned]" = weakref.WeakSet()  # the _Owned objects not released yet
        self._futures: "weakref.WeakSet[Future]" = weakref.WeakSet()  # the Futures not freed yet
        self._waiters = _Waiters(self)
        if timeout_ms is not None:
            lib.cua_set_timeout(self._c, int(timeout_ms))

    def __repr__(self):
        return "<cuasync.Client %s%s>" % (self.url or "(default)", " closed" if self._c is None else "")

    def _live(self):
        if self._c is None:
            raise ClosedError("the client is closed")
        return self._c

    @property
    def closed(self) -> bool:
        return self._c is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Waits for the futures in flight (keeping their results), closes the session (the daemon frees
        everything it still holds) and marks every object of this client closed. A second close does nothing."""
        if self._c is None:
            return
        self._waiters.detach()
        for f in list(self._futures):
            f._finish()
        for o in list(self._objects):
            o._release("its client was closed")
        c, self._c = self._c, None
        _open_clients.discard(self)
        lib.cua_disconnect(c)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown: nothing to report to)
            pass

    # ---- what the daemon says
    def ping(self) -> None:
        check(lib.cua_ping(self._live()))

    def status(self) -> Dict[str, int]:
        """This session's usage as the daemon counts it: a dict of allocations, alloc_bytes, modules,
        functions, streams and in_flight."""
        st = ffi.new("cua_daemon_status *")
        check(lib.cua_status(self._live(), st))
        s = st.session
        return {k: getattr(s, k) for k in ("allocations", "alloc_bytes", "modules", "functions", "streams", "in_flight")}

    def device_count(self) -> int:
        n = ffi.new("int *")
        check(lib.cua_device_count(self._live(), n))
        return n[0]

    def device_info(self, device: int = 0) -> Dict[str, Any]:
        d = ffi.new("cua_device_info *")
        check(lib.cua_device_get_info(self._live(), device, d))
        return {
            "index": d.index,
            "name": ffi.string(d.name).decode(errors="replace"),
            "sm": (d.sm_major, d.sm_minor),
            "total_mem": d.total_mem,
            "multiprocessors": d.multiprocessors,
            "backend": ffi.string(d.backend).decode(),
            "generation": d.generation,
        }

    def synchronize(self) -> None:
        """Waits for all work of this client; raises the first error of fire-and-forget work."""
        check(lib.cua_synchronize(self._live()))

    # ---- objects
    def mem_alloc(self, nbytes: int, device: int = 0) -> DeviceBuffer:
        out = ffi.new("cua_deviceptr *")
        check(lib.cua_mem_alloc(self._live(), device, int(nbytes), out))
        return DeviceBuffer(self, out[0], int(nbytes), device)

    def host_alloc(self, nbytes: int, device: int = 0) -> "HostBuffer":
        out = ffi.new("void **")
        check(lib.cua_host_alloc(self._live(), device, int(nbytes), out))
        return HostBuffer(self, out[0], int(nbytes), device)

    def load_module(self, image: Union[str, bytes, os.PathLike], device: int = 0) -> "Module":
        """image: a path (str or os.PathLike) of a module file, or its bytes."""
        out = ffi.new("cua_module *")
        if isinstance(image, (bytes, bytearray, memoryview)):
            data = bytes(image)
            check(lib.cua_module_load(self._live(), device, data, len(data), out))
        else:
            check(lib.cua_module_load_file(self._live(), device, os.fsencode(image), out))
        return Module(self, out[0], device)

    def stream(self, priority: int = 0, device: int = 0) -> "Stream":
        out = ffi.new("cua_stream *")
        check(lib.cua_stream_create(self._live(), device, priority, out))
        return Stream(self, out[0], device)

    def event(self, timing: bool = True, device: int = 0) -> "Event":
        """A new Event; timing=False makes it a little cheaper and refuses elapsed_ms."""
        out = ffi.new("cua_event *")
        check(lib.cua_event_create_on(self._live(), device, 0 if timing else 0x2, out))
        return Event(self, out[0], device, timing)


def connect(url: Optional[str] = None, timeout_ms: Optional[int] = None) -> Client:
    """A Client connected to url (None: $CUASYNC_URL, else the default socket)."""
    return Client(url, timeout_ms)
