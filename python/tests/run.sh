#!/bin/sh
# make check's entry for the Python client: python/tests (pytest) against this build tree's daemon and
# libcuasync. Exit 77 (SKIP) with the reason when it cannot run here:
#   - a sanitizer build (--enable-asan): its libcuasync needs libasan loaded first, which python3 is not
#     built with, so dlopen would fail; the C suites cover the library under ASan;
#   - a build without the shared library (--disable-shared): ABI mode dlopens libcuasync.so;
#   - no python3 with cffi, numpy, pytest and pip ($PYTHON, else python3, else /usr/bin/python3) — unless
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
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import cffi, numpy, pytest' 2>/dev/null &&
    "$cand" -c 'import setuptools' 2>/dev/null && "$cand" -m pip --version >/dev/null 2>&1; then
    py=$cand
    break
  fi
done
if [ -z "$py" ]; then
  why="no python3 with cffi, numpy, pytest, pip and setuptools (apt-get install python3-cffi python3-numpy python3-pytest python3-pip python3-setuptools)"
  if [ "${CUA_REQUIRE_PYTHON:-}" = 1 ]; then
    echo "FAIL: python tests: $why, and CUA_REQUIRE_PYTHON=1 requires them"
    exit 1
  fi
  echo "SKIP: python tests: $why"
  exit 77
fi

# The tests run the installed package, as a user gets it: python/ is built and installed into a temporary
# directory (offline: Debian's setuptools, no build isolation, no index), from a copy, since the source tree may
# be read-only (distcheck). Then mypy checks the package's types where python3-mypy is installed (CI: required).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuasync-py.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
cp -R "$srcdir/python" "$tmp/src" && chmod -R u+w "$tmp/src" && rm -rf "$tmp/src/tests"
if ! "$py" -m pip install -q --no-build-isolation --no-index --no-deps --target "$tmp/site" "$tmp/src" \
  >"$tmp/pip.log" 2>&1; then
  cat "$tmp/pip.log"
  echo "FAIL: python tests: pip install ./python failed (python3-pip and python3-setuptools installed?)"
  exit 1
fi
if "$py" -m mypy --version >/dev/null 2>&1; then
  (cd "$tmp/src" && "$py" -m mypy --config-file pyproject.toml cuasync) || {
    echo "FAIL: python tests: mypy finds type errors in the package"
    exit 1
  }
elif [ "${CUA_REQUIRE_PYTHON:-}" = 1 ]; then
  echo "FAIL: python tests: no mypy (apt-get install python3-mypy), and CUA_REQUIRE_PYTHON=1 requires it"
  exit 1
else
  echo "note: no mypy (python3-mypy): the package's types are not checked"
fi

CUASYNC_BUILDDIR=$builddir CUASYNC_LIB=$lib PYTHONPATH=$tmp/site${PYTHONPATH:+:$PYTHONPATH} \
  PYTHONDONTWRITEBYTECODE=1 CUASYNC_TEST_INSTALLED=$tmp/site
export CUASYNC_BUILDDIR CUASYNC_LIB PYTHONPATH PYTHONDONTWRITEBYTECODE CUASYNC_TEST_INSTALLED
# (no bytecode, no pytest cache in the source tree); not exec: the trap removes $tmp afterwards
"$py" -m pytest -p no:cacheprovider -ra "$srcdir/python/tests"
