#!/usr/bin/env bash
# quickstart.sh — from a fresh checkout: install dependencies, build, then
#   ./quickstart.sh          start cuasyncd on a private socket (GPU if present, else the emulated device),
#                            run examples/vector_add through it, print what happened, stop the daemon
#   ./quickstart.sh test     run the whole test suite (make check)
set -euo pipefail
cd "$(dirname "$0")"
mode=${1:-run}
deps="build-essential autoconf automake libtool pkg-config libnng-dev libmbedtls-dev libmsgpack-dev uthash-dev libinih-dev libsystemd-dev libjansson-dev check libsubunit-dev openssl python3 python3-cffi python3-numpy python3-pytest python3-pip python3-setuptools python3-wheel"

missing=""
for p in $deps; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "quickstart: installing$missing"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $missing
fi

[ -x configure ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure -q
make -j"$(nproc)" >/dev/null

case "$mode" in
test)
  # Build everything in parallel, then run the suites one at a time: each starts real daemons and measures
  # that clients are served within deadlines, which a machine of two cores running several suites (each
  # with its daemon's threads and workers) cannot promise.
  make -j"$(nproc)" check TESTS= >/dev/null
  exec make check
  ;;
run)
  make -j"$(nproc)" examples/vector_add >/dev/null
  rundir=$(mktemp -d /tmp/cuasyncd-quickstart.XXXXXX)
  url="ipc://$rundir/cuasyncd.sock"
  echo "quickstart: starting cuasyncd on $url"
  # The daemon tells us when it listens (--ready-fd); no sleeping.
  mkfifo "$rundir/ready"
  ./daemon/cuasyncd --listen "$url" --ready-fd 4 4>"$rundir/ready" &
  pid=$!
  trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$rundir"' EXIT
  read -r ready < "$rundir/ready" || { echo "quickstart: cuasyncd did not start"; exit 1; }
  echo "quickstart: cuasyncd is $ready"
  CUASYNC_URL="$url" ./examples/vector_add
  echo "quickstart: stopping cuasyncd"
  kill -TERM $pid
  wait $pid || true
  trap - EXIT
  rm -rf "$rundir"
  ;;
*)
  echo "usage: $0 [run|test]" >&2
  exit 2
  ;;
esac
