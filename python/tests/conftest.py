"""Fixtures: the real cuasyncd on the emulated device, on a private socket, for the whole session.

The build tree is $CUASYNC_BUILDDIR (set by `make check`), else ../../build beside this source tree; the
library comes from $CUASYNC_LIB, else that build tree (cuasync._ffi looks there too).
"""
import os
import select
import signal
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILDDIR = os.environ.get("CUASYNC_BUILDDIR") or os.path.normpath(os.path.join(HERE, os.pardir, os.pardir, "build"))
os.environ.setdefault("CUASYNC_LIB", os.path.join(BUILDDIR, "client", ".libs", "libcuasync.so.0"))


def pytest_sessionstart(session):
    """The package under test is the installed one (python/tests/run.sh installs it), not the source tree."""
    where = os.environ.get("CUASYNC_TEST_INSTALLED")
    if where:
        import cuasync

        assert os.path.abspath(cuasync.__file__).startswith(os.path.abspath(where) + os.sep), cuasync.__file__


# The emulated device's kernel list (what tests/integration/harness.c loads without nvcc).
EMU_IMAGE = b"cuasync-emu-module\naxpy\nfill_u32\nempty_kernel\nspin\npdl_count\nbad_write\n"


def _read_ready(fd, log):
    """Reads the --ready-fd pipe to its end (the daemon writes "ready <url>" and closes it)."""
    data = b""
    while True:
        r, _, _ = select.select([fd], [], [], 30)
        assert r, "cuasyncd did not say ready within 30 s (have %r); see %s" % (data, log)
        chunk = os.read(fd, 512)
        if not chunk:
            break
        data += chunk
    assert data.startswith(b"ready "), "cuasyncd did not start; see %s" % log


def start_daemon(url, log, *extra):
    """Starts cuasyncd (--backend emu) listening on url, logging to log; returns its Popen when it serves."""
    exe = os.path.join(BUILDDIR, "daemon", "cuasyncd")
    assert os.access(exe, os.X_OK), "no daemon at %s (set CUASYNC_BUILDDIR)" % exe
    rfd, wfd = os.pipe()
    with open(log, "ab") as logf:
        proc = subprocess.Popen(
            [exe, "--listen", url, "--ready-fd", str(wfd), "--backend", "emu", "--emu-mem", "256M",
             "--staging", "96M", "--ring", "4M",
             # more emulated-device threads than any test has streams, so streams run concurrently, as on a GPU
             "--emu-threads", "16", *extra],
            pass_fds=(wfd,), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
    os.close(wfd)
    try:
        _read_ready(rfd, log)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        os.close(rfd)
    return proc


def stop_daemon(proc, log):
    """SIGTERM, which must end it with exit status 0."""
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("cuasyncd did not stop within 60 s of SIGTERM; see %s" % log)
    with open(log, errors="replace") as f:
        tail = f.read()[-3000:]
    assert rc == 0, "cuasyncd exited %d:\n%s" % (rc, tail)


@pytest.fixture(scope="session")
def daemon():
    """The URL of a running cuasyncd (--backend emu); stopped with SIGTERM at the end, which must exit 0."""
    tmp = tempfile.mkdtemp(prefix="cuasync-pytest.")
    url = "ipc://%s/d.sock" % tmp
    log = os.path.join(tmp, "daemon.log")
    proc = start_daemon(url, log)
    yield url
    stop_daemon(proc, log)
    subprocess.run(["rm", "-rf", tmp], check=False)


@pytest.fixture
def client(daemon):
    import cuasync

    with cuasync.connect(daemon, timeout_ms=60000) as c:
        yield c


@pytest.fixture
def kernels(client):
    """The test kernels: the nvcc-built fatbin when the build has one, else the emulated device's list."""
    fatbin = os.path.join(BUILDDIR, "tests", "kernels", "test_kernels.fatbin")
    return client.load_module(fatbin if os.path.exists(fatbin) else EMU_IMAGE)
