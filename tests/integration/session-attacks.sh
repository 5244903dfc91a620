#!/bin/sh
# The issue-9 attacks (test_isolation) against a daemon in --isolation session: every one is refused there too.
CUA_TEST_ISOLATION=session exec "${CUA_TEST_BUILDDIR:-.}/tests/integration/test_isolation"
