/* common/cua_clock.h: condition-variable deadlines are on CLOCK_MONOTONIC, so a wall-clock step (NTP, an
 * operator's date) neither fires a client's or the daemon's timeout early nor holds it back by the step. Before,
 * the deadlines were CLOCK_REALTIME (condvars with default attributes). */
#include "config.h"

#include "cua_clock.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

static int64_t
ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * CUA_NS_PER_S + ts->tv_nsec;
}

START_TEST(deadlines_are_on_the_monotonic_clock)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	struct timespec ms = cua_deadline_ts(250), us = cua_deadline_ts_us(250000);
	/* 250 ms ahead of CLOCK_MONOTONIC, give or take a stalled machine; CLOCK_REALTIME is decades away */
	for (int i = 0; i < 2; i++) {
		int64_t ahead = ns_of(i ? &us : &ms) - ns_of(&now);
		ck_assert_msg(ahead >= 250 * 1000000LL && ahead < 60 * CUA_NS_PER_S,
			      "a deadline %lld ns from CLOCK_MONOTONIC's now", (long long)ahead);
	}
}
END_TEST

/* A condvar of cua_cond_init waits out a cua_deadline_ts deadline: with the condvar on another clock than its
 * deadline the wait would end at once (or in decades). Only the lower bound is checked: a loaded machine may
 * wake it later. */
START_TEST(a_condvar_waits_until_its_deadline)
{
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv;
	cua_cond_init(&cv);
	pthread_mutex_lock(&m);
	uint64_t t0 = cua_now_ns();
	struct timespec dl = cua_deadline_ts(100);
	int rc = 0;
	while (rc != ETIMEDOUT) /* a spurious wake-up waits again */
		rc = pthread_cond_timedwait(&cv, &m, &dl);
	uint64_t waited = cua_now_ns() - t0;
	pthread_mutex_unlock(&m);
	pthread_cond_destroy(&cv);
	ck_assert_msg(waited >= 100u * 1000000u, "the 100 ms wait ended after %llu ns", (unsigned long long)waited);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("clock");
	TCase *tc = tcase_create("deadlines");
	tcase_add_test(tc, deadlines_are_on_the_monotonic_clock);
	tcase_add_test(tc, a_condvar_waits_until_its_deadline);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
