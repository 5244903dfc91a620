/*
 * cua_clock.h — the one clock of the project: monotonic time, deadlines for condition variables, sleeping.
 *
 * Header-only (static inline): the daemon, the link, the client library and the tools all use it, and it
 * adds no link dependency between them. Any thread may call any of these.
 *
 * Durations and time stamps are CLOCK_MONOTONIC (never steps with the wall clock), deadlines of condition
 * variables too: pthread_cond_timedwait measures its absolute deadline against the condition variable's clock,
 * so every condvar waited on with a deadline is initialised with cua_cond_init (CLOCK_MONOTONIC), never with default
 * attributes (CLOCK_REALTIME, where a wall-clock step back would hold a 1 s timeout back by as long as the step,
 * and a step forward would fire it at once).
 */
#ifndef CUA_CLOCK_H
#define CUA_CLOCK_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define CUA_NS_PER_MS 1000000L
#define CUA_NS_PER_S 1000000000L

/* Monotonic nanoseconds (a vDSO call: cheap enough for every request). */
static inline uint64_t
cua_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * (uint64_t)CUA_NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Monotonic milliseconds. */
static inline uint64_t
cua_now_ms(void)
{
	return cua_now_ns() / (uint64_t)CUA_NS_PER_MS;
}

/* The duration of ms milliseconds as a relative struct timespec (nanosleep, futex, sigtimedwait). */
static inline struct timespec
cua_ms_ts(uint64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * CUA_NS_PER_MS};
	return ts;
}

/* Seconds between two monotonic time stamps in ns (later minus earlier), for reporting. */
static inline double
cua_elapsed_s(uint64_t from_ns, uint64_t to_ns)
{
	return (double)(to_ns - from_ns) / 1e9;
}

/* The absolute time, on clock `clock`, timeout_us microseconds from now. */
static inline struct timespec
cua_deadline_ts_clock_us(clockid_t clock, uint64_t timeout_us)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	ts.tv_sec += (time_t)(timeout_us / 1000000u);
	ts.tv_nsec += (long)(timeout_us % 1000000u) * 1000L;
	if (ts.tv_nsec >= CUA_NS_PER_S) {
		ts.tv_sec++;
		ts.tv_nsec -= CUA_NS_PER_S;
	}
	return ts;
}

/* Initialises cv for deadlines from cua_deadline_ts (CLOCK_MONOTONIC). */
static inline void
cua_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

/* The pthread_cond_timedwait deadline timeout_ms from now, for a condvar of cua_cond_init. */
static inline struct timespec
cua_deadline_ts(uint64_t timeout_ms)
{
	return cua_deadline_ts_clock_us(CLOCK_MONOTONIC, timeout_ms * 1000u);
}

/* The same, timeout_us microseconds from now. */
static inline struct timespec
cua_deadline_ts_us(uint64_t timeout_us)
{
	return cua_deadline_ts_clock_us(CLOCK_MONOTONIC, timeout_us);
}

/* Sleeps ms milliseconds (the whole of it: a signal does not cut it short). */
static inline void
cua_sleep_ms(uint64_t ms)
{
	struct timespec ts = cua_ms_ts(ms);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

#endif
