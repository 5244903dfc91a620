"""Futures of launches, awaitable from asyncio.

A Future wraps a cua_future. ``result(timeout=None)`` blocks (cua_future_wait, the GIL released);
``await future`` does not: the client's completion fd (cua_client_fd, an eventfd) is watched with
loop.add_reader, and on every wake-up the fd is cleared first and then the awaited futures are polled
(cua_future_poll), which is the order cuasync.h asks for so that no completion is missed.
"""
import asyncio
from typing import Any, Optional, Tuple

from ._ffi import ffi, lib
from .errors import ClosedError, check, error_for


class Future:
    """The result of a launch: completes when the kernel has run."""

    def __init__(self, client, handle, what):
        self._client = client
        self._f = handle  # the cua_future, until freed
        self._what = what
        self._final: Optional[Tuple[int, str]] = None  # (status, message) once read and freed
        client._futures.add(self)

    def __repr__(self):
        return "<cuasync.Future %s %s>" % (self._what, "done" if self.done() else "pending")

    def done(self):
        if self._f is None:
            return True
        return bool(lib.cua_future_poll(self._f))

    def _take(self):
        """Reads the result of a complete future and frees it."""
        st = lib.cua_future_status(self._f)
        msg = ffi.string(lib.cua_future_error(self._f)).decode(errors="replace")
        lib.cua_future_free(self._f)
        self._f = None
        self._final = (st, msg)
        self._client._futures.discard(self)

    def _finish(self):
        """Waits for it without a limit and keeps its result (the client is closing)."""
        if self._f is not None:
            lib.cua_future_wait(self._f, -1)
            self._take()

    def result(self, timeout=None):
        """Waits up to timeout seconds (None: no limit) and returns None, or raises the launch's error
        (cuasync.Error subclass), or cuasync.TimeoutError when it did not complete in time (it stays valid)."""
        if self._f is not None:
            ms = -1 if timeout is None else max(0, int(timeout * 1000))
            rc = lib.cua_future_wait(self._f, ms)
            if rc == 13 and not lib.cua_future_poll(self._f):  # TIMEOUT: the future is still in flight
                check(rc)
            self._take()
        assert self._final is not None  # _take ran
        st, msg = self._final
        if st != 0:
            raise error_for(st, msg)

    def exception(self):
        """The launch's error (once done), or None."""
        try:
            self.result()
        except ClosedError:
            raise
        except Exception as e:  # noqa: BLE001 (the error of the launch is the answer)
            return e
        return None

    def __await__(self):
        if not self.done():
            yield from self._client._waiters.wait(self).__await__()
        return self.result(0)

    def __del__(self):
        # A closed client finished its futures (Client.close): one still holding a cua_future here belongs to
        # an open client, whose cua_client it needs (never free it after cua_disconnect).
        if self._f is not None and self._client._c is not None:
            lib.cua_future_free(self._f)  # in flight: released by the library when it completes
            self._f = None


class _Waiters:
    """The futures awaited on one event loop, and the reader on the client's completion fd."""

    def __init__(self, client):
        self._client = client
        self._loop = None
        self._fd = None
        self._pending = []  # (Future, asyncio.Future)

    def wait(self, fut):
        """An asyncio future of the running loop that completes when fut is done."""
        loop = asyncio.get_running_loop()
        c = self._client._live()
        if self._loop is not None and self._loop.is_closed():
            self._pending, self._loop = [], None  # a finished asyncio.run left it: its reader went with it
        if self._loop is None:
            fd = lib.cua_client_fd(c)
            if fd < 0:
                check(10)  # NO_MEMORY, with cua_last_error's reason
            loop.add_reader(fd, self._wake)
            self._loop, self._fd = loop, fd
        elif self._loop is not loop:
            raise RuntimeError("the futures of one cuasync.Client can be awaited on one event loop at a time")
        w = loop.create_future()
        w.add_done_callback(self._cancelled)
        self._pending.append((fut, w))
        # completions before the reader was there (or before the fd existed) wrote nothing it would see
        self._poll()
        return w

    def _cancelled(self, w):
        # an awaiting task was cancelled (say by asyncio.wait_for): stop watching once nobody waits
        if w.cancelled() and self._loop is not None:
            self._poll()

    def _wake(self):
        lib.cua_client_fd_clear(self._client._c)  # first, so that a completion after it wakes us again
        self._poll()

    def _poll(self):
        still = []
        for fut, w in self._pending:
            if w.done():  # cancelled: the launch goes on, nobody waits for it here
                continue
            if fut.done():
                w.set_result(None)
            else:
                still.append((fut, w))
        self._pending = still
        if not still:
            self.detach()

    def detach(self):
        """Stops watching the fd (when nothing is awaited, or the client closes); pending waits are cancelled."""
        for _, w in self._pending:
            if not w.done():
                w.cancel()
        self._pending = []
        if self._loop is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
            self._loop = None
