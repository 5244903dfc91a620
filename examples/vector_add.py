#!/usr/bin/env python3
"""vector_add.py — examples/vector_add.c from Python: load the test kernels, allocate, copy, launch axpy
(y = a*x + y) through the daemon, copy back and check every element.

usage: vector_add.py [module-file] [n]    (the daemon is found through $CUASYNC_URL)

Run from a build tree (libcuasync is found through $CUASYNC_LIB, else build/client/.libs, else the system):
    PYTHONPATH=python CUASYNC_URL=ipc:///tmp/d.sock python3 examples/vector_add.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python"))
import cuasync  # noqa: E402

# For the emulated device without nvcc: an image that names the built-in kernels.
EMU_IMAGE = b"cuasync-emu-module\naxpy\nfill_u32\nempty_kernel\nspin\npdl_count\nbad_write\n"


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    module = argv[1] if len(argv) > 1 else os.path.normpath(os.path.join(here, os.pardir, "build", "tests", "kernels", "test_kernels.fatbin"))
    n = int(argv[2]) if len(argv) > 2 else 1 << 20
    with cuasync.connect() as client:
        info = client.device_info(0)
        print("device 0: %s (sm_%d%d, %d MiB, %s backend)" % (info["name"], *info["sm"], info["total_mem"] >> 20, info["backend"]))
        if os.path.exists(module):
            mod = client.load_module(module)
            print("loaded %s" % module)
        elif info["backend"] == "emu":
            mod = client.load_module(EMU_IMAGE)
            print("no %s: loaded the emulated device's kernel list" % module)
        else:
            print("vector_add.py: module %s not found (build with nvcc to get it)" % module, file=sys.stderr)
            return 1
        axpy = mod.function("axpy")

        i = np.arange(n)
        x = ((i % 1000) * 0.5).astype(np.float32)
        y = (i % 7).astype(np.float32)
        a = np.float32(2.0)
        with client.mem_alloc(x.nbytes) as dx, client.mem_alloc(y.nbytes) as dy:
            dx.copy_from(x)
            dy.copy_from(y)
            grid = min((n + 255) // 256, 65535)
            axpy.launch(grid, 256, a, dx, dy, np.uint64(n)).result()
            out = dy.to_numpy(np.float32)
        # the device computes one fused multiply-add per element; for these values (whole numbers below 2^24)
        # every product and sum is exact, so plain binary32 arithmetic gives the same bits
        want = a * x + y
        bad = int(np.count_nonzero(out != want))
        print("axpy on %d elements through cuasyncd: %s (%d mismatches)" % (n, "WRONG" if bad else "correct", bad))
        mod.unload()
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except cuasync.Error as e:
        print("vector_add.py: %s" % e, file=sys.stderr)
        sys.exit(1)
