#!/bin/sh
# LOG_COMPILER for the Check suites: the full output goes to the test's .log as usual, and Check's
# summary lines also go to the console (fd 9, see AM_TESTS_FD_REDIRECT) so `make check` shows them.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -E '^(Running suite|[0-9]+%: Checks:|.*:[FE]:)' >&9 2>/dev/null
exit $rc
