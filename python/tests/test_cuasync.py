"""The Python client against the real cuasyncd on the emulated device (fixtures in conftest.py)."""
import asyncio
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import cuasync
from conftest import BUILDDIR, start_daemon, stop_daemon

N = 10000


def axpy_args(client, n=N):
    # multiples of 1/8 below 2^12: a*x+y with a = 2 is exact in binary32, so the device's fused multiply-add
    # and numpy's two roundings give the same bits
    rng = np.random.default_rng(14)
    x = (rng.integers(-2 ** 15, 2 ** 15, n) / 8).astype(np.float32)
    y = (rng.integers(-2 ** 15, 2 ** 15, n) / 8).astype(np.float32)
    return x, y


def expected_axpy(a, x, y):
    return np.float32(a) * x + y


def test_vector_add(client, kernels):
    axpy = kernels.function("axpy")
    assert [s for _, s in axpy.params] == [4, 8, 8, 8]
    x, y = axpy_args(client)
    with client.mem_alloc(x.nbytes) as dx, client.mem_alloc(y.nbytes) as dy:
        dx.copy_from(x)
        dy.copy_from(y)
        f = axpy.launch((N + 255) // 256, 256, np.float32(2.0), dx, dy, np.uint64(N))
        assert f.result(timeout=30) is None
        assert f.done()
        out = dy.to_numpy(np.float32)
    np.testing.assert_array_equal(out, expected_axpy(2.0, x, y))


def test_copies_round_trip(client):
    a = np.arange(4096, dtype=np.uint32) * np.uint32(2654435761)
    with client.mem_alloc(a.nbytes + 100) as buf:
        buf.copy_from(a)
        back = np.zeros_like(a)
        assert buf.copy_to(back) is back
        np.testing.assert_array_equal(back, a)
        np.testing.assert_array_equal(buf.to_numpy(np.uint32, (4096,)), a)
        np.testing.assert_array_equal(buf.to_numpy(np.uint32, (64, 64)), a.reshape(64, 64))
        with pytest.raises(cuasync.BadArgumentError, match="C-contiguous"):
            buf.copy_from(np.zeros((8, 8), np.uint32)[:, ::2])
        with pytest.raises(cuasync.BadArgumentError, match="bytes"):
            buf.copy_from(np.zeros(a.nbytes + 101, np.uint8))
        with pytest.raises(cuasync.BadArgumentError, match="read-only"):
            buf.copy_to(np.frombuffer(bytes(16), np.uint8))


def test_host_buffer_is_zero_copy(client):
    n = 1 << 16
    with client.host_alloc(n * 4) as hb, client.mem_alloc(n * 4) as dev:
        a = hb.numpy(np.float32)
        b = hb.numpy(np.float32)
        assert a.shape == (n,) and a.flags.writeable
        a[:] = np.arange(n, dtype=np.float32)
        assert b[12345] == 12345.0  # the same memory, not a copy
        dev.copy_from(a)  # from the shared buffer: no bytes through the socket
        a[:] = 0
        dev.copy_to(a)  # back into the shared buffer
        np.testing.assert_array_equal(b, np.arange(n, dtype=np.float32))
        np.testing.assert_array_equal(dev.to_numpy(np.float32), np.arange(n, dtype=np.float32))
        with pytest.raises(BufferError, match="still alive"):
            hb.free()
        del a, b
    assert hb.closed
    with pytest.raises(cuasync.ClosedError):
        hb.numpy()


def test_asyncio_awaits_several_launches(client, kernels):
    fill = kernels.function("fill_u32")
    spin = kernels.function("spin")
    bufs = [client.mem_alloc(64 * 4) for _ in range(8)]

    async def main():
        # spins of different lengths on streams of their own, then a fill each: they complete out of order
        streams = [client.stream() for _ in bufs]
        futs = []
        for i, (b, s) in enumerate(zip(bufs, streams)):
            spin.launch(1, 1, np.int64((8 - i) * 5_000_000), stream=s)
            futs.append(fill.launch(1, 64, b, np.uint32(0xC0DE0000 + i), np.uint64(64), stream=s))
        done_order = []
        ticks_before_first = 0

        async def one(i, f):
            await f
            done_order.append(i)

        async def ticker():  # runs only while the loop is free: awaiting must not block it
            nonlocal ticks_before_first
            while not done_order:
                ticks_before_first += 1
                await asyncio.sleep(0.001)

        await asyncio.wait_for(asyncio.gather(ticker(), *(one(i, f) for i, f in enumerate(futs))), 60)
        for s in streams:
            s.free()
        return done_order, ticks_before_first

    order, ticks = asyncio.run(main())
    assert sorted(order) == list(range(8))
    assert ticks >= 3, "the event loop was blocked while the launches ran (%d ticks)" % ticks
    # (the order is the replies': launches sent while others are in flight share one BATCH message and reply)
    for i, b in enumerate(bufs):
        np.testing.assert_array_equal(b.to_numpy(np.uint32), np.full(64, 0xC0DE0000 + i, np.uint32))
        b.free()


def test_await_raises_the_launch_error(client, kernels):
    fill = kernels.function("fill_u32")
    # an address the daemon never handed out passes the Python checks (8 bytes) and is refused by the daemon
    stray = cuasync.DeviceBuffer(client, 0x1000, 64, 0)

    async def main():
        await fill.launch(1, 1, stray, np.uint32(1), np.uint64(16))

    with pytest.raises(cuasync.BadArgumentError) as ei:
        asyncio.run(main())
    assert ei.value.name == "BAD_ARGUMENT" and "argument 0" in ei.value.message


def test_double_free_and_use_after_free(client):
    buf = client.mem_alloc(1024)
    buf.free()
    with pytest.raises(cuasync.ClosedError, match="double free"):
        buf.free()
    with pytest.raises(cuasync.ClosedError, match="freed"):
        buf.copy_from(np.zeros(4, np.uint8))
    with pytest.raises(cuasync.ClosedError):
        buf.to_numpy()
    hb = client.host_alloc(4096)
    hb.free()
    with pytest.raises(cuasync.ClosedError, match="double free"):
        hb.free()


def test_a_freed_buffer_cannot_be_a_kernel_argument(client, kernels):
    fill = kernels.function("fill_u32")
    buf = client.mem_alloc(256)
    buf.free()
    with pytest.raises(cuasync.ClosedError):
        fill.launch(1, 1, buf, np.uint32(1), np.uint64(1))


def test_the_daemon_error_carries_name_and_message(client):
    # an address the daemon never handed out: NOT_FOUND with the daemon's message, raised as a subclass
    with pytest.raises(cuasync.Error) as ei:
        lib_buf = cuasync.DeviceBuffer(client, 0x123400, 16, 0)
        lib_buf.free()
    assert isinstance(ei.value, (cuasync.NotFoundError, cuasync.BadArgumentError))
    assert ei.value.name in ("NOT_FOUND", "BAD_ARGUMENT") and ei.value.message


def test_wrong_argument_types(client, kernels):
    axpy = kernels.function("axpy")
    with client.mem_alloc(64) as x, client.mem_alloc(64) as y:
        with pytest.raises(cuasync.ArgumentTypeError, match="Python float.*numpy"):
            axpy.launch(1, 1, 2.0, x, y, np.uint64(16))
        with pytest.raises(TypeError, match="Python int.*8 bytes"):
            axpy.launch(1, 1, np.float32(2), x, y, 16)
        with pytest.raises(cuasync.ArgumentTypeError, match="8 bytes.*parameter 0 is 4 bytes"):
            axpy.launch(1, 1, np.float64(2), x, y, np.uint64(16))
        with pytest.raises(cuasync.ArgumentTypeError, match="cannot pass ndarray"):
            axpy.launch(1, 1, np.float32(2), np.zeros(4), y, np.uint64(16))
        with pytest.raises(cuasync.BadArgumentError, match="takes 4 arguments, 3 given"):
            axpy.launch(1, 1, np.float32(2), x, y)
        with pytest.raises(cuasync.BadArgumentError, match="grid"):
            axpy.launch(0, 1, np.float32(2), x, y, np.uint64(16))
        # and nothing of it reached the daemon: a correct launch still works
        axpy.launch(1, 1, np.float32(2), x, y, np.uint64(16)).result(30)


def test_context_managers_free_what_they_hold(client, kernels):
    before = client.status()
    with client.mem_alloc(1 << 20) as a, client.mem_alloc(4096) as b, client.stream() as s:
        during = client.status()
        assert during["allocations"] == before["allocations"] + 2
        assert during["alloc_bytes"] >= before["alloc_bytes"] + (1 << 20) + 4096
        assert during["streams"] == before["streams"] + 1
        a.copy_from(np.ones(16, np.uint8), stream=s)
        s.synchronize()
    assert a.closed and b.closed and s.closed
    after = client.status()
    assert (after["allocations"], after["alloc_bytes"], after["streams"]) == (
        before["allocations"],
        before["alloc_bytes"],
        before["streams"],
    )
    with client.load_module(kernels_image(client)) as m:
        assert client.status()["modules"] == after["modules"] + 1
        m.function("axpy")
    assert client.status()["modules"] == after["modules"]


def kernels_image(client):
    from conftest import BUILDDIR, EMU_IMAGE

    fatbin = os.path.join(BUILDDIR, "tests", "kernels", "test_kernels.fatbin")
    return fatbin if os.path.exists(fatbin) else EMU_IMAGE


def test_closing_the_client_closes_its_objects(daemon):
    with cuasync.connect(daemon) as c:
        buf = c.mem_alloc(256)
        mod = c.load_module(kernels_image(c))
        spin = mod.function("spin")
        f = spin.launch(1, 1, np.int64(20_000_000))
    assert c.closed and buf.closed
    assert f.done() and f.result() is None  # waited for by close, its result kept
    with pytest.raises(cuasync.ClosedError, match="client was closed"):
        buf.copy_from(np.zeros(4, np.uint8))
    with pytest.raises(cuasync.ClosedError):
        spin.launch(1, 1, np.int64(0))
    with pytest.raises(cuasync.ClosedError):
        c.status()
    c.close()  # a second close does nothing


def test_result_timeout_keeps_the_future(client, kernels):
    spin = kernels.function("spin")
    f = spin.launch(1, 1, np.int64(2_000_000_000))  # 2 s on the emulated device
    with pytest.raises(cuasync.TimeoutError) as ei:
        f.result(timeout=0.01)
    assert ei.value.name == "TIMEOUT" and isinstance(ei.value, TimeoutError)
    assert f.result(timeout=30) is None


def test_connect_failure_names_the_status(tmp_path):
    with pytest.raises(cuasync.TransportError) as ei:
        cuasync.connect("ipc://%s/nobody.sock" % tmp_path, timeout_ms=2000)
    assert ei.value.name == "TRANSPORT" and ei.value.message


@pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None, reason="no C compiler to read cuasync.h")
def test_cdef_matches_header(tmp_path):
    """ABI mode trusts _ffi.CDEF: compare its struct sizes and offsets with the header's, through the compiler."""
    from cuasync._ffi import ffi

    srcdir = os.path.normpath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
    checks = {
        "cua_device_info": ["index", "name", "sm_major", "total_mem", "backend", "generation", "max_param_bytes",
                            "max_shared_optin", "cluster_launch", "cooperative_launch"],
        "cua_status_counts": ["allocations", "in_flight"],
        "cua_daemon_status": ["uptime_ms", "sessions", "requests", "ndevices", "devices", "session", "total",
                              "insecure_listeners"],
        "cua_launch_config": ["grid", "block", "shared_mem_bytes"],
        "cua_event": ["id"],
    }
    lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "cuasync.h"', "int main(void) {"]
    want = []
    for t, fields in checks.items():
        lines.append('printf("%%zu\\n", sizeof(%s));' % t)
        want.append(ffi.sizeof(t))
        for fld in fields:
            lines.append('printf("%%zu\\n", offsetof(%s, %s));' % (t, fld))
            want.append(ffi.offsetof(t, fld))
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run([os.environ.get("CC", "cc"), "-I", os.path.join(srcdir, "client"), str(src), "-o", str(exe)], check=True)
    got = [int(v) for v in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    assert got == want


def test_a_cancelled_await_leaves_the_client_usable_on_another_loop(client, kernels):
    spin = kernels.function("spin")
    slow = spin.launch(1, 1, np.int64(1_000_000_000))  # 1 s

    async def give_up():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(slow, 0.05)

    asyncio.run(give_up())

    async def again():
        await spin.launch(1, 1, np.int64(1_000_000))
        await slow

    asyncio.run(again())  # a new loop: the first one's reader is gone with it
    assert slow.done() and slow.result() is None


def test_a_structured_scalar_passes_its_bytes(client, kernels):
    fill = kernels.function("fill_u32")
    v = np.zeros((), dtype=[("lo", "<u2"), ("hi", "<u2")])[()]
    v["lo"], v["hi"] = 0xBEEF, 0xDEAD
    with client.mem_alloc(64) as p:
        fill.launch(1, 16, p, v, np.uint64(16)).result(30)
        np.testing.assert_array_equal(p.to_numpy(np.uint32), np.full(16, 0xDEADBEEF, np.uint32))
        wide = np.zeros((), dtype=[("a", "<u4"), ("b", "<u4")])[()]
        with pytest.raises(cuasync.ArgumentTypeError, match="argument 1 of fill_u32 is 8 bytes"):
            fill.launch(1, 16, p, wide, np.uint64(16))


def test_events_zip_two_streams_then_time(client, kernels):
    """The seed's zip across streams: stream a fills x behind a 50 ms spin, stream b fills y; a third waits for
    both events, then computes y = 2x + y. Without the waits it would read x unfilled. (Few launches in flight:
    libcuasync holds further launches while 4 messages are unanswered, which would order them by itself.)"""
    fill, spin, axpy = kernels.function("fill_u32"), kernels.function("spin"), kernels.function("axpy")
    one, three = np.float32(1.0).view(np.uint32), np.float32(3.0).view(np.uint32)
    with client.mem_alloc(4 * N) as dx, client.mem_alloc(4 * N) as dy, client.stream() as a, client.stream() as b, \
            client.stream() as c, client.event() as ea, client.event() as eb, client.event() as t0, \
            client.event() as t1:
        dx.memset(0, 4, N)
        dy.memset(0, 4, N)
        client.synchronize()
        t0.record(c)
        spin.launch(1, 1, np.int64(50_000_000), stream=a)  # 50 ms on the emulated device
        for s, buf, v in ((a, dx, one), (b, dy, three)):
            fill.launch((N + 255) // 256, 256, buf, np.uint32(v), np.uint64(N), stream=s)
        ea.record(a)
        eb.record(b)
        c.wait_event(ea)
        c.wait_event(eb)
        f = axpy.launch((N + 255) // 256, 256, np.float32(2.0), dx, dy, np.uint64(N), stream=c)
        t1.record(c)
        t1.synchronize()
        assert t1.query() and ea.query() and eb.query()
        assert f.result(timeout=30) is None
        np.testing.assert_array_equal(dy.to_numpy(np.float32), np.full(N, 5.0, np.float32))
        assert 40.0 <= t0.elapsed_ms(t1) < 60000.0


def test_event_misuse_is_refused(client):
    s = client.stream()
    e = client.event(timing=False)
    with pytest.raises(cuasync.BadArgumentError, match="Stream"):
        e.record(None)  # the pool is not ordered: no point to mark
    e.record(s)
    e.synchronize()
    with pytest.raises(cuasync.BadArgumentError, match="timing"):
        e.elapsed_ms(e)
    e.free()
    with pytest.raises(cuasync.ClosedError, match="double free"):
        e.free()
    with pytest.raises(cuasync.ClosedError):
        s.wait_event(e)
    s.free()


def test_error_classes_match_the_library():
    # declared statically (for type checkers); one per status of the library's table, named after it
    for st in range(1, 256):
        name = ffi_name(st)
        if name == "UNKNOWN":
            break
        cls = cuasync.errors.BY_STATUS[st]
        assert cls.name == name and cls.status == st
        assert cls.__name__ == "".join(p.capitalize() for p in name.split("_")) + "Error"
        assert getattr(cuasync, cls.__name__) is cls
    assert len(cuasync.errors.BY_STATUS) == st - 1
    assert issubclass(cuasync.TimeoutError, TimeoutError) and issubclass(cuasync.SessionLostError, cuasync.Error)


def ffi_name(st):
    from cuasync._ffi import ffi, lib

    return ffi.string(lib.cua_strerror_name(st)).decode()


def _assert_lost(client):
    for call in (client.ping, client.synchronize, lambda: client.mem_alloc(4096)):
        with pytest.raises(cuasync.SessionLostError) as ei:
            call()
        assert "session is gone" in ei.value.message and "cua_connect" in ei.value.message


def test_daemon_restart_loses_the_session_then_reconnecting_works(tmp_path):
    # the next call fails at once with SESSION_LOST (not a 5 s stall, PROTOCOL, then NO_SESSION forever)
    url, log = "ipc://%s/r.sock" % tmp_path, str(tmp_path / "daemon.log")
    proc = start_daemon(url, log)
    try:
        c = cuasync.connect(url, timeout_ms=60000)
        c.ping()
        stop_daemon(proc, log)
        proc = start_daemon(url, log)
        _assert_lost(c)
        c.close()
        with cuasync.connect(url, timeout_ms=60000) as c:
            c.ping()
    finally:
        stop_daemon(proc, log)


# The daemon's SIGTERM stop afterwards used to hang in nng_close (NNG 1.5.2's reaper defect after a dropped
# pipe, issue 22 point 4; daemon/nngfix.c).
def test_operator_disconnect_loses_the_session_then_reconnecting_works(tmp_path):
    url, op, log = "ipc://%s/r.sock" % tmp_path, "ipc://%s/op.sock" % tmp_path, str(tmp_path / "daemon.log")
    proc = start_daemon(url, log, "--operator-url", op)
    ctl = os.path.join(BUILDDIR, "tools", "cuasyncctl")
    try:
        c = cuasync.connect(url, timeout_ms=60000)
        out = subprocess.run([ctl, "--url", op, "--json", "sessions"], check=True, capture_output=True, text=True)
        ids = [s["id"] for s in json.loads(out.stdout)["sessions"] if s["pid"] == os.getpid()]
        assert len(ids) == 1, out.stdout
        subprocess.run([ctl, "--url", op, "disconnect", str(ids[0])], check=True, capture_output=True)
        # served until the daemon closes the connection (within a second), then lost at once: nothing else
        for _ in range(10000000):
            try:
                c.ping()
            except cuasync.SessionLostError:
                break
        _assert_lost(c)
        c.close()
        with cuasync.connect(url, timeout_ms=60000) as c:
            c.ping()
    finally:
        stop_daemon(proc, log)


LEAKY_CLIENT = """
import sys, time
import cuasync
c = cuasync.connect(sys.argv[1], timeout_ms=5000)
c.ping()
print("connected", flush=True)
sys.stdin.readline()  # its daemon is gone now
time.sleep(0.3)       # a window in which a re-dialing client's NNG threads wake up
# exits with the client still open
"""


def test_exit_with_a_client_open_after_its_daemon_went_is_clean(tmp_path):
    # The SIGSEGV at interpreter exit (issue 21): cffi dlclosed libcuasync (and NNG with it) when its lib object
    # was collected during teardown, while NNG's threads kept running (re-dialing the daemon that went) into
    # unmapped code; about one exit in three crashed. Now the library stays mapped (RTLD_NODELETE), open
    # clients are closed at exit, and a lost session does not re-dial.
    url, log = "ipc://%s/x.sock" % tmp_path, str(tmp_path / "daemon.log")
    for i in range(8):
        proc = start_daemon(url, log)
        child = subprocess.Popen([sys.executable, "-c", LEAKY_CLIENT, url], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert child.stdout.readline().strip() == "connected"
        finally:
            stop_daemon(proc, log)
        out, _ = child.communicate("go\n", timeout=60)
        assert child.returncode == 0, "run %d: exit status %d: %s" % (i, child.returncode, out)
