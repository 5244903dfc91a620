#!/usr/bin/env bash
# tests/gpu/run.sh [BUILD_DIR] — the whole test suite on a GPU machine, from a build made elsewhere with
#   ../configure --enable-static-deps --disable-shared   (NNG, mbedTLS, msgpack-c, Check linked in)
# and carried along (default BUILD_DIR: build-gpu). The daemon loads libcuda at run time. Prints the Check
# summaries, then runs examples/vector_add through the daemon on the GPU.
set -uo pipefail
cd "$(dirname "$0")/../.."
top=$PWD
b=$top/${1:-build-gpu}
export CUA_TEST_BUILDDIR=$b CUA_TEST_SRCDIR=$top CUA_TEST_BACKEND=cuda CK_VERBOSITY=normal CK_DEFAULT_TIMEOUT=600
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi failed"
"$b/daemon/cuasyncd" --cuda-probe
rc=0
summary=""
for t in unit/test_arena unit/test_wire unit/test_ring integration/test_requests integration/test_faults integration/test_recovery integration/test_completion integration/test_session_mode integration/test_isolation integration/test_isolation@session integration/test_scrub \
    integration/test_watchdog integration/test_shutdown integration/test_flow integration/test_submit \
    integration/test_kernel_features integration/test_launch_attrs integration/test_events integration/test_graphs integration/test_weights integration/test_gpu \
    integration/test_samples; do
  echo "===== $t"
  iso=${t#*@}; [ "$iso" = "$t" ] && iso= # name@session: the suite against --isolation session
  out=$(CUA_TEST_ISOLATION=$iso "$b/tests/${t%@*}" 2>&1); r=$?
  printf '%s\n' "$out"
  case $r in
  0) summary+="$t: $(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks' | tail -n1)"$'\n' ;;
  77) # automake's SKIP: the program ran none of its cases. Here, with the GPU, that means they were lost.
    summary+="$t: SKIP (exit 77) — on the GPU machine every case must run"$'\n'
    rc=1 ;;
  *) summary+="$t: FAIL (exit $r) $(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks' | tail -n1)"$'\n'
    rc=1 ;;
  esac
done

echo "===== examples/vector_add through cuasyncd"
dir=$(mktemp -d /tmp/cuasyncd-gpu.XXXXXX)
mkfifo "$dir/ready"
"$b/daemon/cuasyncd" --listen "ipc://$dir/d.sock" --ready-fd 3 3>"$dir/ready" 2>"$dir/daemon.log" &
pid=$!
if read -r line < "$dir/ready"; then
  echo "cuasyncd: $line"
  CUASYNC_URL="ipc://$dir/d.sock" "$b/examples/vector_add" "$b/tests/kernels/test_kernels.fatbin" $((1 << 24)) || rc=1
else
  echo "cuasyncd did not start"; cat "$dir/daemon.log"; rc=1
fi
kill -TERM $pid; wait $pid || { echo "cuasyncd exited uncleanly"; rc=1; }
grep -E "warn|error" "$dir/daemon.log" | head -20
rm -rf "$dir"

echo "===== summary"
printf '%s' "$summary"
[ $rc -eq 0 ] && echo "GPU SUITE PASSED" || echo "GPU SUITE FAILED"
exit $rc
