#!/bin/sh
# test_shm_suites.sh — existing integration suites run again with libcuasync's shared-memory channel off
# (CUASYNC_SHM=0, issue 19; PROTOCOL.md §10): the same calls must give the same results through the socket as
# through the rings (make check runs every suite with the channel on, the default). test_shm_hostile checks that
# the channel is really used and attacks it.
set -e
for t in test_requests test_submit test_completion test_session_lost test_unlocked_reply; do
	echo "== $t with CUASYNC_SHM=0"
	CUASYNC_SHM=0 ./tests/integration/$t
done
