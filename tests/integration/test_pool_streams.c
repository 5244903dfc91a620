/*
 * test_pool_streams.c — --pool-streams with the real daemon: a session's pool on a device has as many streams
 * as the option says, up to its top of 64 (the session's pool table once held 16 and cut larger pools silently),
 * and the pool counts against --session-streams, so a pool larger than that limit is refused at start.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { POOL = 64, SPIN_MS = 1500 };

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The pool is created at the first launch on it: all 64 streams count against --session-streams, so 80 leave
 * room for 16 streams of the session's own (with the pool cut to 16 there was room for 64). */
START_TEST(pool_of_64_streams_is_created_whole)
{
	struct daemon d;
	const char *args[] = {"--pool-streams", "64", "--session-streams", "80", NULL};
	daemon_start(&d, args);
	cua_client *c = connect_to(&d);
	cua_function spin = get_fn(c, load_kernels(c), "spin");
	cua_future *f = submit_spin(c, spin, 1, CUA_STREAM_POOL);
	CK(cua_future_wait(f, -1));
	cua_future_free(f);
	cua_stream s;
	int made = 0, rc;
	while ((rc = cua_stream_create(c, 0, 0, &s)) == CUA_OK && made < 100)
		made++;
	fprintf(stderr, "  --pool-streams 64 --session-streams 80: %d streams of its own after the pool\n", made);
	ck_assert_int_eq(rc, CUA_EQUOTA);
	ck_assert_msg(made == 80 - POOL, "%d streams fit beside the pool: it has %d streams, not %d", made, 80 - made,
		      POOL);
	cua_disconnect(c);
	daemon_stop(&d);
}
END_TEST

/* 64 long kernels on the pool run at once, one on each pool stream: they all finish in about one kernel's time
 * (the emulated device sleeps through a spin kernel and has a thread for each stream; with 16 pool streams they
 * take four). */
START_TEST(pool_of_64_streams_runs_64_kernels_at_once)
{
	struct daemon d;
	const char *args[] = {"--pool-streams",
			      "64",
			      "--emu-threads",
			      "128",
			      "--session-window",
			      "128",
			      "--session-streams",
			      "64",
			      NULL};
	daemon_start(&d, args);
	cua_client *c = connect_to(&d);
	cua_function spin = get_fn(c, load_kernels(c), "spin");
	cua_future *f = submit_spin(c, spin, 1, CUA_STREAM_POOL); /* creates the pool */
	CK(cua_future_wait(f, -1));
	cua_future_free(f);
	cua_future *k[POOL];
	double t0 = now_ms();
	for (int i = 0; i < POOL; i++)
		k[i] = submit_spin(c, spin, SPIN_MS, CUA_STREAM_POOL);
	for (int i = 0; i < POOL; i++) {
		CK(cua_future_wait(k[i], -1));
		cua_future_free(k[i]);
	}
	double t = now_ms() - t0;
	fprintf(stderr, "  %d kernels of %d ms on a pool of %d streams: %.0f ms\n", POOL, SPIN_MS, POOL, t);
	ck_assert_msg(t < 2.0 * SPIN_MS, "%d kernels of %d ms took %.0f ms: they did not all run at once", POOL,
		      SPIN_MS, t);
	cua_disconnect(c);
	daemon_stop(&d);
}
END_TEST

/* Runs cuasyncd with args (and a socket that is never served); its exit status, its stderr in err. */
static int
run_daemon(const char *const *args, char *err, size_t len)
{
	char exe[512];
	const char *argv[16];
	int n = 0, fds[2];
	snprintf(exe, sizeof(exe), "%s/daemon/cuasyncd", builddir());
	argv[n++] = exe;
	argv[n++] = "--listen";
	argv[n++] = "ipc:///tmp/cuasync-never-served.sock";
	argv[n++] = "--backend";
	argv[n++] = "emu";
	for (int i = 0; args[i] != NULL && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		close(fds[1]);
		execv(exe, (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	size_t have = 0;
	ssize_t r;
	while (have < len - 1 && (r = read(fds[0], err + have, len - 1 - have)) > 0)
		have += (size_t)r;
	err[have] = '\0';
	close(fds[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A pool larger than --session-streams could never be created: refused at start, saying why; and past the
 * pool table's 64 the option itself is out of range. */
START_TEST(pool_larger_than_session_streams_is_refused_at_start)
{
	char err[1024];
	const char *over[] = {"--pool-streams", "64", "--session-streams", "32", NULL};
	ck_assert_int_eq(run_daemon(over, err, sizeof(err)), 2);
	ck_assert_msg(strstr(err, "--pool-streams 64 is more than --session-streams 32") != NULL, "%s", err);
	const char *big[] = {"--pool-streams", "65", NULL};
	ck_assert_int_eq(run_daemon(big, err, sizeof(err)), 2);
	ck_assert_msg(strstr(err, "invalid value '65' for --pool-streams") != NULL, "%s", err);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("pool_streams");
	TCase *tc = tcase_create("pool_streams");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, pool_of_64_streams_is_created_whole);
	tcase_add_test(tc, pool_of_64_streams_runs_64_kernels_at_once);
	tcase_add_test(tc, pool_larger_than_session_streams_is_refused_at_start);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
