#!/bin/sh
# make check's entry for tools/check-cycles.py (issue 18, STYLE.md 20): no circle of files, by calls (the
# symbols each object file of this build defines and uses) or by #include, in any folder of the daemon, the
# worker, the client, common/, link/, tools/ or bench/. SKIP (77) without python3 or nm.
srcdir=${CUASYNC_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
builddir=${CUASYNC_BUILDDIR:-$srcdir/build}
for tool in python3 nm; do
  command -v $tool >/dev/null 2>&1 || { echo "SKIP: check-cycles: no $tool"; exit 77; }
done
exec python3 "$srcdir/tools/check-cycles.py" "$srcdir" "$builddir"
