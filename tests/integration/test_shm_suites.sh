#!/bin/sh
# test_shm_suites.sh — existing integration suites run again with libcuasync's shared-memory channel on
# (CUASYNC_SHM=1, issue 19; PROTOCOL.md §10): the same calls must give the same results through the rings as
# through the socket (make check runs them with the channel off, the default). test_shm_hostile checks that
# the channel is really used and attacks it.
set -e
for t in test_requests test_submit test_completion test_session_lost; do
	echo "== $t with CUASYNC_SHM=1"
	CUASYNC_SHM=1 ./tests/integration/$t
done
