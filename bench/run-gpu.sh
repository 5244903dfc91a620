#!/usr/bin/env bash
# bench/run-gpu.sh [BUILD_DIR] [cuasync-bench options] — cuasync-bench against a daemon on this machine's GPU
# (see BENCHMARKS.md). $CUASYNCD_ARGS: extra daemon options, e.g. CUASYNCD_ARGS="--scrub off".
set -uo pipefail
cd "$(dirname "$0")/.."
b=$PWD/${1:-build-gpu}
dir=$(mktemp -d /tmp/cuasyncd-bench.XXXXXX)
mkfifo "$dir/ready"
# shellcheck disable=SC2086 # CUASYNCD_ARGS is a list of words
"$b/daemon/cuasyncd" --listen "ipc://$dir/d.sock" --ready-fd 3 ${CUASYNCD_ARGS:-} 3>"$dir/ready" 2>"$dir/daemon.log" &
pid=$!
read -r line < "$dir/ready" || { cat "$dir/daemon.log"; exit 1; }
date -u +"%Y-%m-%d %H:%M UTC"; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
CUASYNC_URL="ipc://$dir/d.sock" "$b/bench/cuasync-bench" --module "$b/tests/kernels/test_kernels.fatbin" "${@:2}"
rc=$?
kill -TERM $pid; wait $pid
rm -rf "$dir"
exit $rc
