/* The worker watchdog and the emulated device's bounded stream threads: a stopped worker is killed and
 * replaced (its requests answer DEVICE_HUNG) while another client keeps being served; a long kernel is not
 * mistaken for a hang; a thousand streams run on a few threads. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct daemon D;

static void
up_watchdog(void)
{
	static const char *const args[] = {"--watchdog-timeout", "1", NULL};
	daemon_start(&D, args);
}

static void
up_threads(void)
{
	/* the submit threads are fixed too: their default follows the cores */
	static const char *const args[] =
		{"--emu-threads", "4", "--session-streams", "2000", "--submit-threads", "4", NULL};
	daemon_start(&D, args);
}

static void
down(void)
{
	daemon_stop(&D);
}

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A well-behaved client PINGing every 20 ms on its own connection until told to stop. */
struct pinger {
	cua_client *c;
	pthread_t thread;
	atomic_int stop;
	unsigned pings, failures;
	double worst_s;
};

static void *
pinger_main(void *arg)
{
	struct pinger *p = arg;
	const struct timespec gap = {0, 20 * 1000000L};
	while (!atomic_load(&p->stop)) {
		double t = now_s();
		if (cua_ping(p->c) != CUA_OK)
			p->failures++;
		t = now_s() - t;
		if (t > p->worst_s)
			p->worst_s = t;
		p->pings++;
		nanosleep(&gap, NULL);
	}
	return NULL;
}

static void
pinger_start(struct pinger *p)
{
	memset(p, 0, sizeof(*p));
	p->c = connect_to(&D);
	ck_assert_int_eq(pthread_create(&p->thread, NULL, pinger_main, p), 0);
}

/* Stops p and asserts it was served throughout. */
static void
pinger_stop(struct pinger *p)
{
	atomic_store(&p->stop, 1);
	pthread_join(p->thread, NULL);
	ck_assert_msg(p->failures == 0, "%u of %u pings failed", p->failures, p->pings);
	ck_assert_uint_gt(p->pings, 10);
	fprintf(stderr, "watchdog: %u pings, the slowest %.1f ms\n", p->pings, p->worst_s * 1e3);
	cua_disconnect(p->c);
}

/* SIGSTOP the worker with a kernel in flight: the kernel's request answers DEVICE_HUNG within the watchdog's
 * timeout and a bound, the worker is replaced, a new request runs, and another client is served throughout. */
START_TEST(stopped_worker_is_killed_and_replaced)
{
	const char *iso = getenv("CUA_TEST_ISOLATION");
	if (iso && strcmp(iso, "session") == 0)
		return; /* daemon_worker_pid cannot tell the session's worker from the idle ones */
	struct pinger p;
	pinger_start(&p);
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin");
	cua_stream s;
	CK(cua_stream_create(c, 0, 0, &s));
	cua_future *f = submit_spin(c, spin, 10000, s);
	cua_daemon_status st;
	CK(cua_status(c, &st)); /* the launch has reached the daemon */
	usleep(200 * 1000);     /* and the worker */
	pid_t w = daemon_worker_pid(&D, 0);
	ck_assert_int_gt(w, 0);
	double t0 = now_s();
	ck_assert_int_eq(kill(w, SIGSTOP), 0);
	int rc = cua_future_wait(f, 8000);
	double took = now_s() - t0;
	ck_assert_msg(rc == CUA_EDEVICE_HUNG, "%s: %s", cua_strerror_name(rc), cua_future_error(f));
	ck_assert_msg(strstr(cua_future_error(f), "stopped making progress"), "%s", cua_future_error(f));
	ck_assert_msg(took >= 0.9 && took < 4.0, "answered after %.2f s (--watchdog-timeout 1)", took);
	cua_future_free(f);

	cua_client *op = connect_operator(&D);
	uint32_t one = 1;
	ck_assert(wait_status(op, status_restarted, &one, &st));
	ck_assert_uint_eq(st.devices[0].restarts, 1);
	ck_assert_int_ne(daemon_worker_pid(&D, 0), w);
	cua_client *n = connect_to(&D);
	cua_module mn = load_kernels(n);
	launch_and_wait(launch_1d(n, get_fn(n, mn, "empty_kernel"), 1, 1));
	ck_assert_int_eq(cua_stream_synchronize(c, s), CUA_ECONTEXT_LOST); /* the old generation's handle */
	pinger_stop(&p);
	cua_disconnect(op);
	cua_disconnect(n);
	cua_disconnect(c);
}
END_TEST

/* A kernel that runs three times the watchdog's timeout: the worker's heartbeat thread beats meanwhile, so
 * the kernel completes and the worker is not restarted. */
START_TEST(long_kernel_is_not_killed)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin");
	cua_stream s;
	CK(cua_stream_create(c, 0, 0, &s));
	pid_t w = daemon_worker_pid(&D, 0);
	cua_future *f = submit_spin(c, spin, 3000, s);
	CK(cua_future_wait(f, -1));
	cua_future_free(f);
	cua_daemon_status st;
	cua_client *op = connect_operator(&D);
	CK(cua_status(op, &st));
	ck_assert_uint_eq(st.devices[0].restarts, 0);
	ck_assert_int_eq(daemon_worker_pid(&D, 0), w);
	cua_disconnect(op);
	cua_disconnect(c);
}
END_TEST

/* A stopped worker without work in flight is left alone (an operator's debugger costs nobody anything), and
 * the daemon still stops cleanly with it stopped (the teardown asserts a clean exit). */
START_TEST(idle_stopped_worker_is_left_alone)
{
	const char *iso = getenv("CUA_TEST_ISOLATION");
	if (iso && strcmp(iso, "session") == 0)
		return;
	cua_client *op = connect_operator(&D);
	pid_t w = daemon_worker_pid(&D, 0);
	ck_assert_int_gt(w, 0);
	ck_assert_int_eq(kill(w, SIGSTOP), 0);
	usleep(2500 * 1000); /* 2.5 × --watchdog-timeout */
	cua_daemon_status st;
	CK(cua_status(op, &st));
	ck_assert_uint_eq(st.devices[0].restarts, 0);
	ck_assert_int_eq(daemon_worker_pid(&D, 0), w);
	cua_disconnect(op);
}
END_TEST

/* Threads of process pid, or -1. */
static int
thread_count(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* 1000 streams, a kernel on each: all complete, and the worker runs its --emu-threads 4 stream threads, its
 * --submit-threads 4 submit threads, its main thread and its heartbeat, not a thread per stream. */
START_TEST(thousand_streams_run_on_a_few_threads)
{
	enum { N = 1000, MAX_THREADS = 12 };
	if (strcmp(test_backend(), "emu") != 0)
		return;
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function fill = get_fn(c, m, "fill_u32");
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, N * sizeof(uint32_t), &p));
	CK(cua_memset(c, p, 0, 4, N));
	static cua_stream s[N];
	static cua_future *f[N];
	for (int i = 0; i < N; i++)
		CK(cua_stream_create(c, 0, 0, &s[i]));
	for (int i = 0; i < N; i++) { /* stream i writes i + 1 into word i */
		cua_launch *l = launch_1d(c, fill, 1, 1);
		cua_launch_push_device_ptr(l, p + (cua_deviceptr)i * 4);
		cua_launch_push_u32(l, (uint32_t)i + 1);
		cua_launch_push_u64(l, 1);
		cua_launch_set_stream(l, s[i]);
		CK(cua_launch_submit(l, &f[i]));
	}
	pid_t w = daemon_worker_pid(&D, 0);
	int busy = thread_count(w);
	for (int i = 0; i < N; i++) {
		CK(cua_future_wait(f[i], -1));
		cua_future_free(f[i]);
	}
	int after = thread_count(w);
	ck_assert_msg(busy > 0 && busy <= MAX_THREADS, "%d worker threads with %d streams busy", busy, N);
	ck_assert_msg(after > 0 && after <= MAX_THREADS, "%d worker threads with %d streams", after, N);
	static uint32_t v[N];
	CK(cua_memcpy_dtoh(c, v, p, sizeof(v)));
	for (int i = 0; i < N; i++)
		ck_assert_uint_eq(v[i], (uint32_t)i + 1);
	for (int i = 0; i < N; i++)
		CK(cua_stream_destroy(c, s[i]));
	cua_disconnect(c);
}
END_TEST

static Suite *
watchdog_suite(void)
{
	Suite *s = suite_create("watchdog");
	TCase *tc = tcase_create("watchdog");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_watchdog, down);
	tcase_add_test(tc, stopped_worker_is_killed_and_replaced);
	tcase_add_test(tc, long_kernel_is_not_killed);
	tcase_add_test(tc, idle_stopped_worker_is_left_alone);
	suite_add_tcase(s, tc);
	tc = tcase_create("threads");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_threads, down);
	tcase_add_test(tc, thousand_streams_run_on_a_few_threads);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(watchdog_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
