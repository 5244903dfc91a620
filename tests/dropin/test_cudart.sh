#!/bin/sh
# libcuasync-cudart end to end: tests/dropin/rt_basic.cu and rt_graphs.cu (graphs, stream capture, launch
# attributes, registered host memory), compiled here with `nvcc -cudart shared` (so it imports
# the real runtime's versioned names), runs unchanged through tools/cuasync-run against this build's cuasyncd on
# the emulated device: every check passes, a device fault is sticky, the drop-in exports every name the program
# imports with the runtime's symbol version, a refused call says so on stderr, CUASYNC_RUN_VERBOSE=1 prints the
# summary, and without a daemon the program gets errors instead of crashing.
# SKIP (77) without nvcc, without the drop-in (no cuda_runtime_api.h at configure), or in a sanitizer build (an
# nvcc-built program does not load libasan, which the ASan-built drop-in needs first).
srcdir=${CUASYNC_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${CUASYNC_BUILDDIR:-$srcdir/build}
case "${CUA_SAN_CFLAGS:-}" in
*sanitize=address*)
  echo "SKIP: drop-in runtime: sanitizer build (nvcc-built programs do not preload libasan)"
  exit 77 ;;
esac
shim=$(ls "$builddir"/shim/cudart/.libs/libcudart.so.[0-9]* 2>/dev/null | grep -E 'libcudart\.so\.[0-9]+$' | head -n 1)
if [ -z "$shim" ]; then
  echo "SKIP: drop-in runtime: not built (configure found no cuda_runtime_api.h)"
  exit 77
fi
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
if [ ! -x "$nvcc" ]; then
  echo "SKIP: drop-in runtime: no nvcc (set NVCC, or put the CUDA toolkit's bin in PATH)"
  exit 77
fi

fail() {
  echo "FAIL: $*"
  [ -f "$tmp/daemon.log" ] && tail -n 20 "$tmp/daemon.log"
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid"
  exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuasync-dropin.XXXXXX") || exit 1
pid=""
trap 'rm -rf "$tmp"' EXIT

# the programs, rebuilt when their source changed (nvcc is slow: kept in the build tree)
for prog in rt_basic rt_graphs; do
  out=$builddir/tests/dropin/$prog
  if [ ! -x "$out" ] || [ "$srcdir/tests/dropin/$prog.cu" -nt "$out" ] || [ "$srcdir/tests/dropin/rt_check.h" -nt "$out" ]; then
    mkdir -p "$builddir/tests/dropin"
    "$nvcc" -cudart shared -o "$out" "$srcdir/tests/dropin/$prog.cu" || fail "nvcc -cudart shared $prog.cu"
  fi
done
bin=$builddir/tests/dropin/rt_basic
graphs=$builddir/tests/dropin/rt_graphs

# the soname is the toolkit runtime's, and every runtime name the program imports is exported, same version
soname=$(objdump -p "$shim" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "$(basename "$shim")" ] || fail "soname $soname, not $(basename "$shim")"
nm -D --with-symbol-versions "$bin" "$graphs" | awk '$1 == "U" && /@libcudart/ { print $2 }' | sort -u >"$tmp/imports"
[ -s "$tmp/imports" ] || fail "the program imports nothing from libcudart (nvcc did not use -cudart shared?)"
nm -D --with-symbol-versions --defined-only "$shim" | awk '{ sub("@@", "@", $3); print $3 }' | sort -u >"$tmp/exports"
missing=$(comm -23 "$tmp/imports" "$tmp/exports")
[ -z "$missing" ] || fail "the drop-in does not export: $missing"
echo "ok - $soname exports the $(wc -l <"$tmp/imports") versioned names the program imports"

# the real daemon on the emulated device
url="ipc://$tmp/d.sock"
mkfifo "$tmp/ready" || fail "mkfifo"
"$builddir/daemon/cuasyncd" --listen "$url" --ready-fd 3 --backend emu --emu-mem 256M --emu-threads 8 \
  3>"$tmp/ready" >"$tmp/daemon.log" 2>&1 </dev/null &
pid=$!
read -r ready <"$tmp/ready"
case "$ready" in
ready*) ;;
*) fail "cuasyncd did not start" ;;
esac

run=$builddir/tools/cuasync-run
CUASYNC_URL=$url CUASYNC_RUN_VERBOSE=1 "$run" "$bin" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
[ $rc -eq 0 ] || { cat "$tmp/err"; fail "rt_basic exited $rc"; }
grep -q "^PASS" "$tmp/out" || fail "rt_basic did not pass"
grep -q "cudaMallocManaged is not supported through cuasyncd (unified memory)" "$tmp/err" ||
  { cat "$tmp/err"; fail "no refusal line for cudaMallocManaged on stderr"; }
[ "$(grep -c "cudaMallocManaged is not supported" "$tmp/err")" -eq 1 ] || fail "the refusal is not told once"
grep -Eq "^cuasync-run: [0-9]+ runtime calls, [0-9]+ bytes copied, [0-9.]+ s waiting on cuasyncd$" "$tmp/err" ||
  { cat "$tmp/err"; fail "no CUASYNC_RUN_VERBOSE summary line"; }
echo "ok - rt_basic passes through cuasync-run; refusals and the summary on stderr"

CUASYNC_URL=$url "$run" "$bin" sticky >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
[ $rc -eq 0 ] || { cat "$tmp/err"; fail "rt_basic sticky exited $rc"; }
grep -q "cuasync-run:" "$tmp/err" && fail "a summary without CUASYNC_RUN_VERBOSE"
echo "ok - an illegal address is sticky"

CUASYNC_URL=$url "$run" "$graphs" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
[ $rc -eq 0 ] || { cat "$tmp/err"; fail "rt_graphs exited $rc"; }
grep -q "^PASS" "$tmp/out" || fail "rt_graphs did not pass"
for refused in "cudaLaunchKernelExC(cudaLaunchAttributeAccessPolicyWindow)" \
  "cudaGraphAddMemcpyNode with a pitched 2D or 3D copy" "cudaHostRegister(cudaHostRegisterMapped)" \
  "cudaHostGetDevicePointer"; do
  grep -qF "$refused is not supported through cuasyncd" "$tmp/err" ||
    { cat "$tmp/err"; fail "no refusal line for $refused on stderr"; }
done
echo "ok - rt_graphs passes: capture, graphs, launch attributes, registered memory; refusals on stderr"

# no daemon there: errors, a line that says what to do, no crash (exit 1 from the program's own checks)
CUASYNC_URL="ipc://$tmp/nobody.sock" "$run" "$bin" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/out" "$tmp/err"; fail "without a daemon rt_basic exited $rc, not 1"; }
grep -q "cannot reach cuasyncd" "$tmp/err" || { cat "$tmp/err"; fail "no 'cannot reach cuasyncd' line"; }
echo "ok - without a daemon: cudaErrorNoDevice and a line saying what to do, no crash"

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
[ $rc -eq 0 ] || fail "cuasyncd exited $rc after SIGTERM"
echo "PASS"
