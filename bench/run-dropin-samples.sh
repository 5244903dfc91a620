#!/usr/bin/env bash
# Unmodified NVIDIA cuda-samples through cuasyncd's drop-in CUDA libraries (issue 20, docs/DROPIN.md).
#
#   bench/run-dropin-samples.sh build SAMPLES OUT
#       builds every program below from a checkout of github.com/NVIDIA/cuda-samples (Common/ and Samples/
#       inside) into OUT with `nvcc -cudart shared -arch=sm_90` (no GPU needed; the *Drv programs' kernels
#       become OUT/<name>64.fatbin, where the programs look for them).
#   bench/run-dropin-samples.sh run OUT BUILDDIR [LIBDIR]
#       runs each program natively, then with BUILDDIR/tools/cuasync-run against a cuasyncd of BUILDDIR, the
#       drop-ins taken from BUILDDIR/shim/cudart/.libs, shim/cuda/.libs, client/.libs (LIBDIR: more libraries
#       they need, e.g. libnng, libmsgpackc and mbedTLS where they are not installed), compares the outputs with every number
#       masked, prints a table (exit statuses, whole-process seconds, ratio, outputs same or not); then runs
#       four of them at once natively, under MPS (when nvidia-cuda-mps-control is on PATH) and through cuasyncd
#       and prints each gang's wall time.
set -u
progs="vectorAdd matrixMul asyncAPI simpleStreams simpleCallback simpleCooperativeGroups simpleCudaGraphs
reduction scan histogram transpose BlackScholes vectorAddDrv matrixMulDrv"
gang=(matrixMul reduction transpose BlackScholes)

sample_dir() {
	local d
	d=$(find "$1/Samples" -mindepth 2 -maxdepth 2 -type d -name "$2" | head -n 1)
	[ -n "$d" ] || { echo "run-dropin-samples: no sample $2 under $1/Samples" >&2; return 1; }
	echo "$d"
}

build() {
	local samples=$1 out=$2 s src srcs f
	mkdir -p "$out"
	export PATH=/usr/local/cuda/bin:$PATH
	for s in $progs; do
		src=$(sample_dir "$samples" "$s") || return 1
		srcs=()
		case $s in
		*Drv)
			# the kernel file becomes the fatbin the program loads by name; the host code links libcuda
			for f in "$src"/*_kernel.cu; do
				nvcc -fatbin -arch=sm_90 -I"$samples/Common" -o "$out/$(basename "$f" .cu)64.fatbin" "$f" ||
					return 1
			done
			for f in "$src"/*.cpp; do srcs+=("$f"); done
			nvcc -arch=sm_90 -O2 -I"$samples/Common" -o "$out/$s" "${srcs[@]}" -lcuda || return 1
			;;
		*)
			for f in "$src"/*.cu "$src"/*.cpp; do
				[ -f "$f" ] && srcs+=("$f")
			done
			nvcc -cudart shared -arch=sm_90 -O2 -I"$samples/Common" -o "$out/$s" "${srcs[@]}" || return 1
			;;
		esac
		echo "built $s"
	done
}

now() { date +%s.%N; }

# one program (or a gang of them, concurrently) with the environment given; prints the wall seconds
timed_gang() {
	local tag=$1 t0 s pids=()
	shift
	t0=$(now)
	for s in "$@"; do
		case $tag in
		*cua) $runner "./$s" >"$s.$tag.out" 2>&1 & ;; # through cuasyncd: cuasync-run PROGRAM
		*) "./$s" >"$s.$tag.out" 2>&1 & ;;
		esac
		pids+=($!)
	done
	local rc=0 p
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	awk -v a="$t0" -v b="$(now)" -v r=$rc 'BEGIN { printf "%.3f %d\n", b - a, r }'
}

run() {
	local out b extra dir url dpid libs s same nt nrc ct crc g rc
	out=$(cd "$1" && pwd) b=$(cd "$2" && pwd) extra=${3:+$(cd "$3" && pwd)}
	cd "$out" || return 1
	dir=$(mktemp -d)
	url=ipc://$dir/d.sock
	"$b/daemon/cuasyncd" --listen "$url" --log-level warn >"$dir/daemon.log" 2>&1 &
	dpid=$!
	for _ in $(seq 100); do [ -S "$dir/d.sock" ] && break; sleep 0.1; done
	libs=$b/shim/cudart/.libs:$b/shim/cuda/.libs:$b/client/.libs${extra:+:$extra}
	[ -x "$b/tools/cuasync-run" ] || { echo "run-dropin-samples: no $b/tools/cuasync-run" >&2; return 1; }
	runner="$b/tools/cuasync-run"
	printf '%-24s %9s %9s %7s  %s\n' program native_s cua_s ratio "outputs (numbers masked)"
	for s in $progs; do
		read -r nt nrc < <(timed_gang native "$s")
		read -r ct crc < <(CUASYNC_RUN_LIBDIR=$libs CUASYNC_URL=$url CUASYNC_RUN_VERBOSE=1 timed_gang cua "$s")
		if diff <(sed -E 's/[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?/#/g' "$s.native.out") \
			<(grep -v '^cuasync-' "$s.cua.out" | sed -E 's/[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?/#/g') \
			>"$s.diff"; then
			same=same
		else
			same="differ ($(grep -c '^[<>]' "$s.diff") lines, $s.diff)"
		fi
		[ "$nrc" = 0 ] || same="$same; native exit $nrc"
		[ "$crc" = 0 ] || same="$same; cuasyncd exit $crc"
		awk -v s="$s" -v n="$nt" -v c="$ct" -v m="$same" \
			'BEGIN { printf "%-24s %9.3f %9.3f %7.2f  %s\n", s, n, c, c / n, m }'
	done
	echo
	echo "four at once (${gang[*]}): wall seconds, any failure"
	read -r g rc < <(timed_gang gang-native "${gang[@]}")
	echo "  native processes:   $g s, failed=$rc"
	if command -v nvidia-cuda-mps-control >/dev/null; then
		local mps
		mps=$(mktemp -d)
		mkdir -p "$mps/pipe" "$mps/log"
		export CUDA_MPS_PIPE_DIRECTORY=$mps/pipe CUDA_MPS_LOG_DIRECTORY=$mps/log
		nvidia-cuda-mps-control -d
		for _ in $(seq 100); do [ -e "$mps/pipe/control" ] && break; sleep 0.1; done
		read -r g rc < <(timed_gang gang-mps "${gang[@]}")
		echo "  under MPS:          $g s, failed=$rc"
		echo quit | nvidia-cuda-mps-control
		for _ in $(seq 100); do [ -e "$mps/pipe/control" ] || break; sleep 0.1; done
		unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
		rm -rf "$mps"
	else
		echo "  under MPS:          not measured (nvidia-cuda-mps-control is not on PATH)"
	fi
	read -r g rc < <(CUASYNC_RUN_LIBDIR=$libs CUASYNC_URL=$url timed_gang gang-cua "${gang[@]}")
	echo "  through cuasyncd:   $g s, failed=$rc"
	for s in "${gang[@]}"; do
		grep -h -i -E 'pass|fail|error|result' "$s.gang-native.out" "$s.gang-cua.out" /dev/null | sort | uniq -c |
			sed "s/^/  $s: /" | head -n 4
	done
	kill "$dpid"
	wait "$dpid"
	echo "=== daemon log (last lines)"
	tail -n 15 "$dir/daemon.log"
	rm -rf "$dir"
}

case ${1:-} in
build) [ $# -eq 3 ] || { echo "usage: $0 build SAMPLES OUT" >&2; exit 2; }; build "$2" "$3" ;;
run) [ $# -ge 3 ] || { echo "usage: $0 run OUT BUILDDIR [LIBDIR]" >&2; exit 2; }; run "$2" "$3" "${4:-}" ;;
*) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
