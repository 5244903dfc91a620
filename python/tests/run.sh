#!/bin/sh
# make check's entry for the Python client: python/tests (pytest) against this build tree's daemon and
# libcuasync. Exit 77 (SKIP) with the reason when it cannot run here:
#   - a sanitizer build (--enable-asan): its libcuasync needs libasan loaded first, which python3 is not
#     built with, so dlopen would fail; the C suites cover the library under ASan;
#   - a build without the shared library (--disable-shared): ABI mode dlopens libcuasync.so;
#   - no python3 with cffi, numpy and pytest ($PYTHON, else python3, else /usr/bin/python3) — unless
#     CUA_REQUIRE_PYTHON=1 (CI), where that is a failure.
srcdir=${CUASYNC_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
builddir=${CUASYNC_BUILDDIR:-$srcdir/build}
lib=$builddir/client/.libs/libcuasync.so.0

case "${CUA_SAN_CFLAGS:-}" in
*sanitize=address*)
  echo "SKIP: python tests: sanitizer build (python3 cannot dlopen an ASan-built libcuasync without preloading libasan)"
  exit 77 ;;
esac
if [ ! -e "$lib" ]; then
  echo "SKIP: python tests: no shared library $lib (built with --disable-shared?)"
  exit 77
fi
py=""
for cand in ${PYTHON:-python3 /usr/bin/python3}; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import cffi, numpy, pytest' 2>/dev/null; then
    py=$cand
    break
  fi
done
if [ -z "$py" ]; then
  why="no python3 with cffi, numpy and pytest (apt-get install python3-cffi python3-numpy python3-pytest)"
  if [ "${CUA_REQUIRE_PYTHON:-}" = 1 ]; then
    echo "FAIL: python tests: $why, and CUA_REQUIRE_PYTHON=1 requires them"
    exit 1
  fi
  echo "SKIP: python tests: $why"
  exit 77
fi

CUASYNC_BUILDDIR=$builddir CUASYNC_LIB=$lib PYTHONPATH=$srcdir/python${PYTHONPATH:+:$PYTHONPATH} \
  PYTHONDONTWRITEBYTECODE=1
export CUASYNC_BUILDDIR CUASYNC_LIB PYTHONPATH PYTHONDONTWRITEBYTECODE
# (the source tree may be read-only, as in distcheck: no bytecode, no pytest cache)
exec "$py" -m pytest -p no:cacheprovider -ra "$srcdir/python/tests"
