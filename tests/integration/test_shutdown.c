/* Graceful shutdown, SIGHUP and the handshake deadline, against the real daemon on the emulated device.
 *
 * SIGTERM: the requests inside the worker are answered with their real completion, those still queued in the
 * front-end SHUTTING_DOWN, and the daemon exits 0 having removed its socket files. A second SIGTERM, or
 * --drain-timeout, ends the wait at once. SIGHUP keeps every session. --hello-timeout closes connections that
 * never say HELLO (NNG closes those that never finish the SP handshake after its own 10 s), while a
 * well-behaved client keeps being served, and the daemon's descriptors return to their baseline. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double
ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Waits up to timeout_ms for the daemon to exit; its wait status, or -1 when it did not. */
static int
wait_exit(struct daemon *d, unsigned timeout_ms)
{
	double until = ms_now() + timeout_ms;
	int st;
	while (ms_now() < until) {
		pid_t p = waitpid(d->pid, &st, WNOHANG);
		ck_assert_int_ge(p, 0);
		if (p == d->pid) {
			d->pid = 0;
			return st;
		}
		sleep_ms(5);
	}
	return -1;
}

/* The daemon exited 0 and took its socket files along; its directory is removed. */
static void
assert_clean_exit(struct daemon *d, int st)
{
	ck_assert_msg(st != -1, "cuasyncd did not exit; see %s", d->log);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cuasyncd exited with status 0x%x; see %s", st, d->log);
	ck_assert_msg(access(d->url + 6, F_OK) != 0 && errno == ENOENT, "%s is still there", d->url + 6);
	ck_assert_msg(access(d->op_url + 6, F_OK) != 0 && errno == ENOENT, "%s is still there", d->op_url + 6);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* One spin kernel of ms as its own request (an explicit batch goes out at once, alone). */
static cua_future *
submit_spin_alone(cua_client *c, cua_function spin, unsigned ms)
{
	cua_batch *b = cua_batch_new(c);
	ck_assert_ptr_nonnull(b);
	cua_launch *l = launch_1d(c, spin, 1, 1);
	cua_launch_push_i64(l, spin_cycles(ms));
	CK(cua_batch_add_launch(b, l));
	cua_future *f;
	CK(cua_batch_submit(b, &f));
	return f;
}

static bool
in_flight_is(const cua_daemon_status *s, void *ud)
{
	return s->devices[0].in_flight == *(uint32_t *)ud;
}

/* Two 500 ms spins run (--session-window 2), four more wait in the front-end: SIGTERM answers the two with their
 * completion and the four SHUTTING_DOWN, a request sent meanwhile SHUTTING_DOWN, and the daemon exits 0. */
START_TEST(sigterm_drains_in_flight_and_refuses_queued)
{
	struct daemon d;
	static const char *const args[] = {"--session-window", "2", NULL};
	daemon_start(&d, args);
	cua_client *c = connect_to(&d), *op = connect_operator(&d), *late = connect_to(&d);
	cua_function spin = get_fn(c, load_kernels(c), "spin");
	cua_future *f[6];
	double t0 = ms_now();
	for (int i = 0; i < 6; i++)
		f[i] = submit_spin_alone(c, spin, 500);
	cua_daemon_status st;
	uint32_t two = 2;
	ck_assert(wait_status(op, in_flight_is, &two, &st));
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	sleep_ms(100);
	ck_assert_int_eq(cua_ping(late), CUA_ESHUTTING_DOWN); /* a new request on an open connection */
	int ok = 0, down = 0;
	for (int i = 0; i < 6; i++) {
		int rc = cua_future_wait(f[i], 10000);
		if (rc == CUA_OK) {
			ok++;
			ck_assert_msg(ms_now() - t0 >= 490, "answered OK before its kernel could end");
		} else {
			ck_assert_msg(rc == CUA_ESHUTTING_DOWN, "launch %d: %s: %s", i, cua_strerror_name(rc),
				      cua_future_error(f[i]));
			down++;
		}
		cua_future_free(f[i]);
	}
	ck_assert_int_eq(ok, 2);
	ck_assert_int_eq(down, 4);
	assert_clean_exit(&d, wait_exit(&d, 10000));
	cua_disconnect(late);
	cua_disconnect(op);
	cua_disconnect(c);
}
END_TEST

/* A 20 s kernel: the drain would last 20 s, a second SIGTERM ends it at once. */
START_TEST(second_sigterm_stops_at_once)
{
	struct daemon d;
	daemon_start(&d, NULL);
	cua_client *c = connect_to(&d), *op = connect_operator(&d);
	cua_function spin = get_fn(c, load_kernels(c), "spin");
	cua_future *f = submit_spin_alone(c, spin, 20000);
	cua_daemon_status st;
	uint32_t one = 1;
	ck_assert(wait_status(op, in_flight_is, &one, &st));
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	sleep_ms(300);
	ck_assert_int_eq(waitpid(d.pid, NULL, WNOHANG), 0); /* still draining */
	double t0 = ms_now();
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	int rc = wait_exit(&d, 5000);
	double took = ms_now() - t0;
	assert_clean_exit(&d, rc);
	ck_assert_msg(took < 3000, "the second SIGTERM took %.0f ms to stop the daemon", took);
	/* abandoned: the connection closes unanswered */
	ck_assert_int_ne(cua_future_wait(f, 10000), CUA_OK);
	cua_future_free(f);
	cua_disconnect(op);
	cua_disconnect(c);
}
END_TEST

/* --drain-timeout 1 with a 5 s kernel in flight: the daemon exits after about a second. */
START_TEST(drain_timeout_ends_the_wait)
{
	struct daemon d;
	static const char *const args[] = {"--drain-timeout", "1", NULL};
	daemon_start(&d, args);
	cua_client *c = connect_to(&d), *op = connect_operator(&d);
	cua_function spin = get_fn(c, load_kernels(c), "spin");
	cua_future *f = submit_spin_alone(c, spin, 5000);
	cua_daemon_status st;
	uint32_t one = 1;
	ck_assert(wait_status(op, in_flight_is, &one, &st));
	double t0 = ms_now();
	ck_assert_int_eq(kill(d.pid, SIGTERM), 0);
	int rc = wait_exit(&d, 10000);
	double took = ms_now() - t0;
	assert_clean_exit(&d, rc);
	ck_assert_msg(took >= 900 && took < 3500, "exited %.0f ms after SIGTERM with --drain-timeout 1", took);
	ck_assert_int_ne(cua_future_wait(f, 10000), CUA_OK);
	cua_future_free(f);
	cua_disconnect(op);
	cua_disconnect(c);
}
END_TEST

/* SIGHUP reloads nothing (there is no configuration file yet) and drops nobody. */
START_TEST(sighup_keeps_every_session)
{
	struct daemon d;
	daemon_start(&d, NULL);
	cua_client *a = connect_to(&d), *b = connect_to(&d), *op = connect_operator(&d);
	cua_function spin = get_fn(a, load_kernels(a), "spin");
	cua_future *f = submit_spin_alone(a, spin, 300);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
		sleep_ms(50);
	}
	CK(cua_future_wait(f, 10000));
	cua_future_free(f);
	CK(cua_ping(a));
	CK(cua_ping(b));
	launch_and_wait(launch_1d(b, get_fn(b, load_kernels(b), "empty_kernel"), 1, 1));
	cua_daemon_status st;
	CK(cua_status(op, &st));
	ck_assert_uint_eq(st.sessions, 3);
	ck_assert_int_eq(access(d.url + 6, F_OK), 0);
	cua_disconnect(a);
	cua_disconnect(b);
	cua_disconnect(op);
	daemon_stop(&d);
}
END_TEST

static int
fd_count(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(path);
	ck_assert_ptr_nonnull(dir);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dir)) != NULL)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

static int
unix_connect(const char *url)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", url + 6);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Completes the SP handshake of a REQ peer on fd (and says nothing more). */
static void
sp_handshake(int fd)
{
	static const unsigned char hdr[8] = {0x00, 'S', 'P', 0x00, 0x00, 0x30, 0x00, 0x00};
	ck_assert_int_eq(write(fd, hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
	unsigned char got[8];
	size_t have = 0;
	while (have < sizeof(got)) {
		struct pollfd p = {fd, POLLIN, 0};
		ck_assert_int_eq(poll(&p, 1, 5000), 1);
		ssize_t n = read(fd, got + have, sizeof(got) - have);
		ck_assert_int_gt(n, 0);
		have += (size_t)n;
	}
	ck_assert(got[1] == 'S' && got[2] == 'P');
}

/* How many of fds[0..n) the daemon has closed (EOF); those are closed here and set to -1. */
static int
count_closed(int *fds, int n)
{
	int closed = 0;
	for (int i = 0; i < n; i++) {
		if (fds[i] < 0) {
			closed++;
			continue;
		}
		char b;
		struct pollfd p = {fds[i], POLLIN, 0};
		if (poll(&p, 1, 0) == 1 && read(fds[i], &b, 1) <= 0) {
			close(fds[i]);
			fds[i] = -1;
			closed++;
		}
	}
	return closed;
}

#define NRAW 200
#define NSP 50

/* 200 connections that never say anything and 50 that finish the SP handshake but send no HELLO: with
 * --hello-timeout 1 the 50 are closed within a few seconds, the 200 by NNG's 10 s negotiation deadline; a
 * client that PINGs throughout is always served, and the daemon's descriptors come back to their baseline. */
START_TEST(connections_without_hello_are_closed)
{
	struct daemon d;
	static const char *const args[] = {"--hello-timeout", "1", NULL};
	daemon_start(&d, args);
	cua_client *good = connect_to(&d);
	cua_set_timeout(good, 2000);
	CK(cua_ping(good));
	sleep_ms(600); /* the listener watchdog's first probes have come and gone */
	int base = fd_count(d.pid);
	int raw[NRAW], sp[NSP];
	for (int i = 0; i < NRAW; i++)
		raw[i] = unix_connect(d.url);
	for (int i = 0; i < NSP; i++) {
		sp[i] = unix_connect(d.url);
		sp_handshake(sp[i]);
	}
	double t0 = ms_now(), sp_done = 0, raw_done = 0;
	int fds = -1;
	while (ms_now() - t0 < 25000) {
		CK(cua_ping(good));
		if (sp_done == 0 && count_closed(sp, NSP) == NSP)
			sp_done = ms_now() - t0;
		if (raw_done == 0 && count_closed(raw, NRAW) == NRAW)
			raw_done = ms_now() - t0;
		if (sp_done > 0 && raw_done > 0 && (fds = fd_count(d.pid)) <= base)
			break;
		sleep_ms(20);
	}
	fprintf(stderr,
		"hello-timeout: handshaken connections closed after %.0f ms, silent ones after %.0f ms, %d fds (%d "
		"before)\n",
		sp_done, raw_done, fds, base);
	ck_assert_msg(sp_done > 0 && sp_done < 4000,
		      "the handshaken connections without HELLO were closed after %.0f ms", sp_done);
	ck_assert_msg(raw_done > 0 && raw_done < 15000, "the silent connections were closed after %.0f ms", raw_done);
	ck_assert_msg(fds <= base, "the daemon has %d descriptors, %d before", fds, base);
	for (int i = 0; i < 50; i++)
		CK(cua_ping(good));
	cua_disconnect(good);
	daemon_stop(&d);
}
END_TEST

static Suite *
shutdown_suite(void)
{
	Suite *s = suite_create("shutdown");
	TCase *tc = tcase_create("sigterm");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sigterm_drains_in_flight_and_refuses_queued);
	tcase_add_test(tc, second_sigterm_stops_at_once);
	tcase_add_test(tc, drain_timeout_ends_the_wait);
	suite_add_tcase(s, tc);
	tc = tcase_create("sighup");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, sighup_keeps_every_session);
	suite_add_tcase(s, tc);
	tc = tcase_create("hello-timeout");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, connections_without_hello_are_closed);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(shutdown_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
