#!/usr/bin/env bash
# bench/hops.sh [BUILD_DIR] — where the time of one launch + completion goes, hop by hop (issue 19).
# Starts a daemon on a private socket with --metrics-listen on loopback, runs `cuasync-bench --latency-only`
# (2000 PINGs, then 2000 empty kernels each launched and waited for) with the shared-memory channel on, then
# off, and prints for each the mean µs per lone launch of every hop the daemon stamps
# (cuasyncd_launch_hop_seconds_total over cuasyncd_launch_hops_total, read before and after). The transport
# both ways is the client's latency minus the sum of the hops. On the GPU machine, from a build carried as for
# tests/gpu/run.sh; elsewhere it runs on the emulated device.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
b=$PWD/${1:-build}
dir=$(mktemp -d /tmp/cuasyncd-hops.XXXXXX)
port=$((20000 + $$ % 20000))
pid=
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
	[ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid"
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkfifo "$dir/ready"
"$b/daemon/cuasyncd" --listen "ipc://$dir/d.sock" --metrics-listen "http://127.0.0.1:$port" --ready-fd 3 \
	3>"$dir/ready" 2>"$dir/daemon.log" &
pid=$!
read -r _ <"$dir/ready" || { cat "$dir/daemon.log"; exit 1; }

# The hop counters, one "NAME VALUE" per line (bash's /dev/tcp: no HTTP client needed).
scrape() {
	exec 5<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&5
	sed -n 's/^cuasyncd_launch_hop_seconds_total{hop="\([a-z_]*\)"} \(.*\)$/\1 \2/p;
		s/^cuasyncd_launch_hops_total \(.*\)$/count \1/p' <&5 | tr -d '\r'
	exec 5>&-
}

date -u +"%Y-%m-%d %H:%M UTC"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for shm in 1 0; do
	scrape >"$dir/before" || { echo "cannot read http://127.0.0.1:$port/metrics"; exit 1; }
	echo "== CUASYNC_SHM=$shm"
	CUASYNC_SHM=$shm CUASYNC_URL="ipc://$dir/d.sock" "$b/bench/cuasync-bench" --latency-only \
		--module "$b/tests/kernels/test_kernels.fatbin" || exit 1
	scrape >"$dir/after" || exit 1
	awk 'NR == FNR { before[$1] = $2; next }
	     { d[$1] = $2 - before[$1]; order[++n] = $1 }
	     END {
		if (d["count"] <= 0) { print "no lone launch was counted"; exit 1 }
		printf "%-10s %10s   (%d lone launches)\n", "hop", "µs mean", d["count"]
		for (i = 1; i <= n; i++) if (order[i] != "count") {
			printf "%-10s %10.2f\n", order[i], d[order[i]] / d["count"] * 1e6; sum += d[order[i]]
		}
		printf "%-10s %10.2f\n", "sum", sum / d["count"] * 1e6
	     }' "$dir/before" "$dir/after" || exit 1
done
