/* Replies built without fe->lock (CMD_REPLY_UNLOCKED: MEMCPY_DTOH and BATCH carry their bulk bytes out of the
 * staging area while the completion thread holds no lock), attacked: hostile sessions doing large DTOH copies
 * and batches from many threads, killed mid-flight (SIGKILL), some faulting their worker (bad_write, a sticky
 * fault), with session isolation; one well-behaved client copies and checks its bytes and pings throughout and
 * must be served. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1024u * 1024u)

static struct daemon D;

static void
up_session(void)
{
	static const char *const args[] = {"--isolation", "session", "--isolation-pool", "4", NULL};
	daemon_start(&D, args);
}

static void
down(void)
{
	daemon_stop(&D);
}

/* The bytes of buffer `seed` at offset i. */
static void
pattern(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 12)) & 0xff);
}

/* Allocates n bytes on device 0 and fills them with pattern(seed); the expected bytes in *want (malloc'd). */
static cua_deviceptr
alloc_filled(cua_client *c, size_t n, unsigned seed, unsigned char **want)
{
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, n, &p));
	*want = malloc(n);
	ck_assert_ptr_nonnull(*want);
	pattern(*want, n, seed);
	CK(cua_memcpy_htod(c, p, *want, n));
	return p;
}

/* ------------------------------------------------------------------ the well-behaved client */

struct bystander {
	const struct daemon *d;
	atomic_int stop;
	atomic_uint rounds, failures;
	char first_failure[512];
};

static void
by_fail(struct bystander *b, const char *what, int rc)
{
	if (atomic_fetch_add(&b->failures, 1) == 0)
		snprintf(b->first_failure, sizeof(b->first_failure), "%s: %s: %s", what, cua_strerror_name(rc),
			 cua_last_error());
}

static void *
bystander_main(void *arg)
{
	struct bystander *b = arg;
	enum { N = 8 * MIB };
	cua_client *c = connect_to(b->d);
	unsigned char *want, *got = malloc(N);
	cua_deviceptr p = alloc_filled(c, N, 1, &want);
	while (!atomic_load(&b->stop)) {
		memset(got, 0, N);
		int rc = cua_memcpy_dtoh(c, got, p, N);
		if (rc != CUA_OK)
			by_fail(b, "cua_memcpy_dtoh", rc);
		else if (memcmp(got, want, N) != 0)
			by_fail(b, "cua_memcpy_dtoh: wrong bytes", CUA_OK);
		if ((rc = cua_ping(c)) != CUA_OK)
			by_fail(b, "cua_ping", rc);
		atomic_fetch_add(&b->rounds, 1);
	}
	cua_mem_free(c, p);
	cua_disconnect(c);
	free(want);
	free(got);
	return NULL;
}

/* ------------------------------------------------------------------ hostile children */

struct hostile_arg {
	cua_client *c;
	cua_deviceptr p;
	size_t n;
	unsigned k;
};

/* Submits batches of DTOH copies (and plain DTOH copies) and never waits for them. */
static void *
hostile_thread(void *arg)
{
	struct hostile_arg *h = arg;
	void *dst = malloc(h->n);
	for (unsigned i = 0; i < 4; i++) {
		cua_batch *b = cua_batch_new(h->c);
		size_t half = h->n / 2;
		cua_batch_add_memcpy_dtoh(b, dst, h->p, half, CUA_STREAM_DEFAULT);
		cua_batch_add_memcpy_dtoh(b, (char *)dst + half, h->p + half, half, CUA_STREAM_DEFAULT);
		cua_future *f;
		if (cua_batch_submit(b, &f) != CUA_OK)
			_exit(3);
	}
	return NULL; /* dst stays: the replies land in it until this process is killed */
}

/* A child: a session with large DTOH copies in flight from 4 threads (and, with fault, a sticky fault queued
 * behind a spin kernel), which says so on fd and waits to be killed. */
static _Noreturn void
hostile_child(const char *url, int fd, unsigned k, bool fault)
{
	cua_client *c;
	if (cua_connect(url, &c) != CUA_OK)
		_exit(2);
	size_t n = (k % 2 ? 16 : 32) * MIB;
	cua_deviceptr p;
	if (cua_mem_alloc(c, 0, n, &p) != CUA_OK || cua_memset(c, p, 0x5a, 1, n) != CUA_OK)
		_exit(2);
	cua_module m;
	if (load_kernels_rc(c, &m) != CUA_OK)
		_exit(2);
	cua_function spin, bad;
	if (cua_module_get_function(c, m, "spin", &spin) != CUA_OK ||
	    cua_module_get_function(c, m, "bad_write", &bad) != CUA_OK)
		_exit(2);
	cua_stream s;
	if (cua_stream_create(c, 0, 0, &s) != CUA_OK)
		_exit(2);
	if (fault) {                                     /* the worker dies after this process was killed */
		cua_launch *l = cua_launch_new(c, spin); /* no Check calls in here: not a test process */
		cua_launch_set_config(l, (cua_launch_config){{1, 1, 1}, {1, 1, 1}, 0});
		cua_launch_push_i64(l, spin_cycles(300));
		cua_launch_set_stream(l, s);
		cua_future *f;
		if (cua_launch_submit(l, &f) != CUA_OK)
			_exit(2);
		l = cua_launch_new(c, bad);
		cua_launch_set_config(l, (cua_launch_config){{1, 1, 1}, {1, 1, 1}, 0});
		cua_launch_push_device_ptr(l, p);
		cua_launch_set_stream(l, s);
		if (cua_launch_submit(l, &f) != CUA_OK)
			_exit(2);
	}
	pthread_t t[4];
	struct hostile_arg a[4];
	for (unsigned i = 0; i < 4; i++) {
		a[i] = (struct hostile_arg){c, p, n, k};
		pthread_create(&t[i], NULL, hostile_thread, &a[i]);
	}
	for (unsigned i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	cua_daemon_status st;
	if (cua_status(c, &st) != CUA_OK) /* what was submitted reached the daemon */
		_exit(2);
	char one = 1;
	if (write(fd, &one, 1) != 1)
		_exit(2);
	for (;;)
		pause();
}

static bool
only_sessions(const cua_daemon_status *s, void *ud)
{
	return s->sessions <= *(uint32_t *)ud;
}

/* Several rounds of hostile sessions killed mid-flight, one of them faulting its worker each round, while the
 * bystander copies and pings. */
START_TEST(bystander_served_through_hostile_dtoh)
{
	struct bystander by = {.d = &D};
	pthread_t bt;
	pthread_create(&bt, NULL, bystander_main, &by);
	cua_client *op = connect_operator(&D);
	enum { ROUNDS = 4, KIDS = 3 };
	for (unsigned round = 0; round < ROUNDS; round++) {
		int fds[2];
		ck_assert_int_eq(pipe(fds), 0);
		pid_t kids[KIDS];
		for (unsigned k = 0; k < KIDS; k++) {
			kids[k] = fork();
			ck_assert_int_ge(kids[k], 0);
			if (kids[k] == 0) { /* NNG is not fork-safe: the child is this program again */
				char fd_s[16], k_s[16];
				snprintf(fd_s, sizeof(fd_s), "%d", fds[1]);
				snprintf(k_s, sizeof(k_s), "%u", k + round);
				close(fds[0]);
				execl("/proc/self/exe", "test_unlocked_reply", "hostile", D.url, fd_s, k_s,
				      k == 0 ? "1" : "0", (char *)NULL);
				_exit(127);
			}
		}
		close(fds[1]);
		for (unsigned k = 0; k < KIDS; k++) {
			char one;
			ck_assert_int_eq(read(fds[0], &one, 1), 1);
		}
		close(fds[0]);
		for (unsigned k = 0; k < KIDS; k++)
			kill(kids[k], SIGKILL);
		for (unsigned k = 0; k < KIDS; k++) {
			int st;
			ck_assert_int_eq(waitpid(kids[k], &st, 0), kids[k]);
			ck_assert_msg(WIFSIGNALED(st), "hostile child %u exited with %d", k, WEXITSTATUS(st));
		}
		/* their sessions are gone (the bystander's and the operator's remain) */
		uint32_t two = 2;
		cua_daemon_status st;
		ck_assert(wait_status(op, only_sessions, &two, &st));
		ck_assert_msg(atomic_load(&by.failures) == 0, "round %u: the bystander failed %u time(s): first %s",
			      round, atomic_load(&by.failures), by.first_failure);
	}
	atomic_store(&by.stop, 1);
	pthread_join(bt, NULL);
	ck_assert_msg(atomic_load(&by.failures) == 0, "the bystander failed %u time(s): first %s",
		      atomic_load(&by.failures), by.first_failure);
	ck_assert_uint_gt(atomic_load(&by.rounds), 0);
	cua_disconnect(op);
}
END_TEST

static Suite *
unlocked_reply_suite(void)
{
	Suite *s = suite_create("unlocked_reply");
	TCase *tc = tcase_create("hostile");
	tcase_add_checked_fixture(tc, up_session, down);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, bystander_served_through_hostile_dtoh);
	suite_add_tcase(s, tc);
	return s;
}

int
main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "hostile") == 0)
		hostile_child(argv[2], atoi(argv[3]), (unsigned)atoi(argv[4]), argv[5][0] == '1');
	SRunner *sr = srunner_create(unlocked_reply_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
