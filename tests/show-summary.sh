#!/bin/sh
# LOG_COMPILER for the Check suites (and the pytest one): the full output goes to the test's .log as usual, and Check's
# summary lines (and a suite's reason for skipping) also go to the console (fd 9, see AM_TESTS_FD_REDIRECT)
# so `make check` shows them. The exit status is the test's own: 77 is automake's SKIP.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
printf '%s\n' "$out" | grep -E '^(Running suite|Skipped suite|[0-9]+%: Checks:|.*:[FE]:|SKIP: |=+ .*(passed|failed|error).* =+$)' >&9 2>/dev/null
exit $rc
