#!/usr/bin/env bash
# bench/run-gpu.sh [BUILD_DIR] [cuasync-bench options] — cuasync-bench against a daemon on this machine's GPU
# (see BENCHMARKS.md). $CUASYNCD_ARGS: extra daemon options, e.g. CUASYNCD_ARGS="--scrub off".
# The side-by-side comparison of issue 11 (native threads, processes, MPS, cuasyncd), e.g.:
#   bench/run-gpu.sh build-gpu --compare --kernel spin:20000 --tenants 1,4,8 --launches 100000
# (the bench starts and stops its own private MPS daemon when nvidia-cuda-mps-control is on PATH). --compare
# also takes the large-argument row's feature_kernels.fatbin from beside the --module given below, and
# --copy-bytes B for its async copy rows.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
b=$PWD/${1:-build-gpu}
dir=$(mktemp -d /tmp/cuasyncd-bench.XXXXXX)
pid=
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkfifo "$dir/ready"
# shellcheck disable=SC2086 # CUASYNCD_ARGS is a list of words
"$b/daemon/cuasyncd" --listen "ipc://$dir/d.sock" --ready-fd 3 ${CUASYNCD_ARGS:-} 3>"$dir/ready" 2>"$dir/daemon.log" &
pid=$!
read -r _ < "$dir/ready" || { cat "$dir/daemon.log"; exit 1; }
date -u +"%Y-%m-%d %H:%M UTC"; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "daemon: cuasyncd ${CUASYNCD_ARGS:-}"
CUASYNC_URL="ipc://$dir/d.sock" "$b/bench/cuasync-bench" --module "$b/tests/kernels/test_kernels.fatbin" "${@:2}"
rc=$?
kill -TERM "$pid"; wait "$pid"; pid=
exit $rc
