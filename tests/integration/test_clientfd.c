/*
 * test_clientfd.c — cua_client_fd: the eventfd that event loops (epoll, libuv, Python's asyncio) wait on
 * instead of blocking in cua_future_wait.
 *
 * No sleeping: a launch is held back by stopping the GPU worker (SIGSTOP) before it is submitted, and the
 * session's STATUS says when the daemon has it in flight; only then is the fd checked to be unreadable, and it
 * must become readable once the worker runs again. The harness's --watchdog-timeout (30 s) is far above the
 * time the worker stays stopped.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORDS 64
#define MARK 0x600df00du

static struct daemon D;

static void
up(void)
{
	daemon_start(&D, NULL);
}

static void
down(void)
{
	daemon_stop(&D);
}

/* poll(2) on fd for up to timeout_ms: 1 when readable, 0 when not. */
static int
readable(int fd, int timeout_ms)
{
	struct pollfd p = {fd, POLLIN, 0};
	int n = poll(&p, 1, timeout_ms);
	ck_assert_int_ge(n, 0);
	ck_assert_msg(n == 0 || p.revents == POLLIN, "revents 0x%x", (unsigned)p.revents);
	return n;
}

static bool
one_in_flight(const cua_daemon_status *s, void *ud)
{
	(void)ud;
	return s->session.in_flight == 1;
}

/* Whether a test may stop the worker: in session isolation daemon_worker_pid cannot tell the session's
 * worker from the idle ones. */
static bool
can_stop_worker(void)
{
	const char *iso = getenv("CUA_TEST_ISOLATION");
	return !(iso && strcmp(iso, "session") == 0);
}

START_TEST(fd_is_one_nonblocking_cloexec_eventfd)
{
	cua_client *c = connect_to(&D);
	int fd = cua_client_fd(c);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(cua_client_fd(c), fd);
	ck_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
	ck_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	ck_assert_int_eq(readable(fd, 0), 0);
	cua_client_fd_clear(c); /* nothing to clear: stays unreadable */
	ck_assert_int_eq(readable(fd, 0), 0);
	CK(cua_ping(c)); /* synchronous calls complete no future */
	ck_assert_int_eq(readable(fd, 0), 0);
	cua_disconnect(c);
}
END_TEST

/* The fd stays unreadable while the launch is held in the stopped worker, becomes readable when it completes
 * (the future is then complete already), stays readable until cleared, and is unreadable after the clear. */
START_TEST(fd_becomes_readable_when_the_launch_completes)
{
	if (!can_stop_worker())
		return;
	cua_client *c = connect_to(&D);
	cua_function fill = get_fn(c, load_kernels(c), "fill_u32");
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, WORDS * 4, &p));
	/* the session's first launch on the pool also creates its pool streams, work of its own in STATUS's
	 * in_flight: done before, so that in_flight == 1 below is the launch */
	cua_launch *warm = launch_1d(c, fill, 1, 1);
	cua_launch_push_device_ptr(warm, p);
	cua_launch_push_u32(warm, 0);
	cua_launch_push_u64(warm, WORDS);
	launch_and_wait(warm);
	int fd = cua_client_fd(c);
	ck_assert_int_ge(fd, 0);

	pid_t w = daemon_worker_pid(&D, 0);
	ck_assert_int_gt(w, 0);
	ck_assert_int_eq(kill(w, SIGSTOP), 0);
	cua_launch *l = launch_1d(c, fill, 1, WORDS);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, MARK);
	cua_launch_push_u64(l, WORDS);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	cua_daemon_status st;
	ck_assert_msg(wait_status(c, one_in_flight, NULL, &st), "the launch never reached the daemon (in flight: %llu)",
		      (unsigned long long)st.session.in_flight);
	ck_assert_int_eq(readable(fd, 0), 0);
	ck_assert_int_eq(cua_future_poll(f), 0); /* so the check above came before the completion */

	ck_assert_int_eq(kill(w, SIGCONT), 0);
	ck_assert_msg(readable(fd, 20000) == 1, "no wake-up within 20 s of the worker's resumption");
	ck_assert_int_eq(cua_future_poll(f), 1);
	ck_assert_int_eq(cua_future_status(f), CUA_OK);
	ck_assert_int_eq(readable(fd, 0), 1); /* level-triggered: still readable */
	cua_client_fd_clear(c);
	ck_assert_int_eq(readable(fd, 0), 0);
	cua_future_free(f);

	uint32_t out[WORDS];
	CK(cua_memcpy_dtoh(c, out, p, sizeof(out)));
	for (unsigned i = 0; i < WORDS; i++)
		ck_assert_uint_eq(out[i], MARK);
	cua_disconnect(c);
}
END_TEST

/* An event loop of clear-then-poll over launches completing at different times never misses one: each wait
 * must end in a wake-up, and the loop ends only when every future was seen complete. */
START_TEST(clear_then_poll_misses_no_completion)
{
	enum { N = 24 };
	cua_client *c = connect_to(&D);
	cua_function spin = get_fn(c, load_kernels(c), "spin");
	int fd = cua_client_fd(c);
	ck_assert_int_ge(fd, 0);
	cua_future *f[N];
	bool seen[N] = {false};
	for (unsigned i = 0; i < N; i++)
		f[i] = submit_spin(c, spin, 1 + i % 5, CUA_STREAM_DEFAULT);
	unsigned left = N, wakeups = 0;
	while (left > 0) {
		ck_assert_msg(readable(fd, 20000) == 1, "%u of %d futures never woke the loop", left, N);
		wakeups++;
		cua_client_fd_clear(c);
		for (unsigned i = 0; i < N; i++) {
			if (!seen[i] && cua_future_poll(f[i])) {
				ck_assert_int_eq(cua_future_status(f[i]), CUA_OK);
				seen[i] = true;
				left--;
			}
		}
	}
	ck_assert_uint_le(wakeups, N); /* one write per clear, each caused by a completion */
	for (unsigned i = 0; i < N; i++)
		cua_future_free(f[i]);
	cua_disconnect(c);
}
END_TEST

/* A launch the daemon refuses completes its future with the error, and that wakes the loop too. */
START_TEST(a_failed_launch_wakes_the_loop)
{
	cua_client *c = connect_to(&D);
	cua_function fill = get_fn(c, load_kernels(c), "fill_u32");
	int fd = cua_client_fd(c);
	ck_assert_int_ge(fd, 0);
	cua_launch *l = launch_1d(c, fill, 1, 1);
	cua_launch_push_u32(l, 1); /* fill_u32 takes three arguments */
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	ck_assert_msg(readable(fd, 20000) == 1, "no wake-up for the refused launch");
	ck_assert_int_eq(cua_future_poll(f), 1);
	ck_assert_int_eq(cua_future_status(f), CUA_EBAD_ARGUMENT);
	cua_future_free(f);
	cua_disconnect(c);
}
END_TEST

static Suite *
clientfd_suite(void)
{
	Suite *s = suite_create("clientfd");
	TCase *tc = tcase_create("clientfd");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, fd_is_one_nonblocking_cloexec_eventfd);
	tcase_add_test(tc, fd_becomes_readable_when_the_launch_completes);
	tcase_add_test(tc, clear_then_poll_misses_no_completion);
	tcase_add_test(tc, a_failed_launch_wakes_the_loop);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(clientfd_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
