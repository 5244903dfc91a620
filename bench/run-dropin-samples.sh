#!/usr/bin/env bash
# Unmodified NVIDIA cuda-samples through cuasyncd's drop-in CUDA runtime (issue 20, docs/DROPIN.md): each program
# is built with `nvcc -cudart shared`, run natively, then with the drop-in first in LD_LIBRARY_PATH against a
# cuasyncd of BUILDDIR; prints exit statuses and whole-process times, then each run's last lines.
#
#   bench/run-dropin-samples.sh SAMPLES BUILDDIR [LIBDIR]
#     SAMPLES   a checkout of github.com/NVIDIA/cuda-samples (Common/ and Samples/ inside)
#     BUILDDIR  a cuasyncd build with the drop-ins (shim/cudart/.libs, client/.libs, daemon/cuasyncd)
#     LIBDIR    more libraries the drop-in needs (libnng, libmsgpackc, mbedTLS) where they are not installed
set -u
samples=$1 b=$(cd "$2" && pwd) extra=${3:-}
out=$(mktemp -d)
export PATH=/usr/local/cuda/bin:$PATH
progs="vectorAdd matrixMul asyncAPI simpleStreams simpleCallback"
for s in $progs; do
  src=$samples/Samples/0_Introduction/$s
  more=""
  [ -f "$src/multithreading.cpp" ] && more=$src/multithreading.cpp
  # shellcheck disable=SC2086 # $more is empty or one path
  nvcc -cudart shared -arch=sm_90 -O2 -I"$samples/Common" -o "$out/$s" "$src/$s.cu" $more || exit 1
done
dir=$(mktemp -d)
url=ipc://$dir/d.sock
"$b/daemon/cuasyncd" --listen "$url" --log-level warn >"$dir/daemon.log" 2>&1 &
dpid=$!
for _ in $(seq 100); do [ -S "$dir/d.sock" ] && break; sleep 0.1; done
libs=$b/shim/cudart/.libs:$b/client/.libs${extra:+:$extra}
printf '%-16s %-9s %9s %-9s %9s\n' program native_rc native_s cua_rc cua_s
for s in $progs; do
  t0=$(date +%s.%N)
  "$out/$s" >"$out/$s.native.out" 2>&1
  nrc=$?
  t1=$(date +%s.%N)
  LD_LIBRARY_PATH=$libs CUASYNC_URL=$url CUASYNC_DEFAULT_STREAM=ordered CUASYNC_RUN_VERBOSE=1 \
    "$out/$s" >"$out/$s.cua.out" 2>&1
  crc=$?
  t2=$(date +%s.%N)
  awk -v s="$s" -v n=$nrc -v c=$crc -v a="$t0" -v m="$t1" -v d="$t2" \
    'BEGIN { printf "%-16s %-9s %9.3f %-9s %9.3f\n", s, n, m - a, c, d - m }'
done
for s in $progs; do
  echo "=== $s native"; tail -n 6 "$out/$s.native.out"
  echo "=== $s through cuasyncd"; tail -n 8 "$out/$s.cua.out"
done
kill $dpid
wait $dpid
rm -rf "$out" "$dir"
