/* A session ends under a connected client (issue 21, point 2): the daemon restarts, or an operator disconnects
 * it (cuasyncctl disconnect). libcuasync must never send a request on a connection that did not say HELLO (NNG
 * re-dials by itself): the next call, and every later one, fails at once with SESSION_LOST, whose message says
 * what happened and what to do; a launch in flight ends with it too; and a new connection (cua_disconnect,
 * then cua_connect) is served. The restarted daemon sees no connection of the old client (no ghost). Status
 * checks only: a call that waited out a timeout would answer TIMEOUT or PROTOCOL, not SESSION_LOST. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct daemon D, D2;
static char dir[64], url[128]; /* a socket of the test's own, which a restarted daemon listens on again */

static void
up(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cuasync-lost.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(url, sizeof(url), "ipc://%s/s.sock", dir);
	daemon_start(&D, (const char *const[]){"--listen", url, NULL});
	memset(&D2, 0, sizeof(D2));
}

static void
down(void)
{
	daemon_stop(&D);
	daemon_stop(&D2);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* c's call failed with SESSION_LOST, and its message says the session is gone and how to reconnect. */
static void
assert_lost(int r, const char *what)
{
	ck_assert_msg(r == CUA_ESESSION_LOST, "%s: %s (%s), not SESSION_LOST", what, cua_strerror_name(r),
		      cua_last_error());
	ck_assert_msg(strstr(cua_last_error(), "session is gone") && strstr(cua_last_error(), "cua_connect"), "%s: %s",
		      what, cua_last_error());
}

/* The calls a program makes after its session went: each fails at once with SESSION_LOST. */
static void
assert_every_call_lost(cua_client *c)
{
	cua_deviceptr p;
	cua_daemon_status st;
	assert_lost(cua_ping(c), "ping");
	assert_lost(cua_mem_alloc(c, 0, 4096, &p), "mem_alloc");
	assert_lost(cua_status(c, &st), "status");
	assert_lost(cua_synchronize(c), "synchronize");
	assert_lost(cua_ping(c), "ping again");
}

/* The status of daemon d through its operator endpoint (which counts every session, the operator's own too). */
static cua_daemon_status
status_of(const struct daemon *d)
{
	cua_client *op = connect_operator(d);
	cua_daemon_status st;
	CK(cua_status(op, &st));
	cua_disconnect(op);
	return st;
}

START_TEST(daemon_restart_loses_the_session_and_reconnecting_works)
{
	cua_client *c;
	CK(cua_connect(url, &c));
	cua_set_timeout(c, 60000);
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 4096, &p));
	daemon_stop(&D); /* exits 0: the session is gone with the daemon */
	daemon_start(&D2, (const char *const[]){"--listen", url, NULL});
	assert_every_call_lost(c);
	/* The new daemon got no request from the lost client: on main NNG's re-dial made a ghost there, a
	 * connection that never said HELLO and sent the client's next requests (answered PROTOCOL, then
	 * NO_SESSION: errors). A re-dialed connection is now closed by the client before it sends anything. */
	cua_daemon_status st = status_of(&D2);
	ck_assert_msg(st.errors == 0, "a ghost session: %llu request(s) failed; see %s", (unsigned long long)st.errors,
		      D2.log);
	ck_assert_uint_eq(st.sessions, 1); /* the operator's own */
	cua_disconnect(c);
	CK(cua_connect(url, &c));
	cua_set_timeout(c, 60000);
	CK(cua_ping(c));
	CK(cua_mem_alloc(c, 0, 4096, &p));
	cua_disconnect(c);
}
END_TEST

/* The id of the session of the only other client of d, through the operator connection op. */
static uint64_t
other_session(cua_client *op)
{
	cua_session_info *ss = NULL;
	uint32_t n = 0;
	uint64_t id = 0;
	CK(cua_sessions(op, &ss, &n));
	for (uint32_t i = 0; i < n; i++)
		if (!ss[i].operator_endpoint)
			id = ss[i].id;
	free(ss);
	ck_assert_uint_ne(id, 0);
	return id;
}

START_TEST(operator_disconnect_loses_the_session_and_reconnecting_works)
{
	cua_client *c, *bystander, *op = connect_operator(&D);
	CK(cua_connect(url, &c));
	cua_set_timeout(c, 60000);
	uint64_t id = other_session(op);
	CK(cua_connect(url, &bystander));
	CK(cua_disconnect_session(op, id));
	/* The daemon closes the connection within a second: until then the session is served, from then on
	 * every call fails at once. Anything else (TIMEOUT, PROTOCOL, NO_SESSION) is the bug. */
	int r = CUA_OK;
	for (long i = 0; i < 10000000 && r == CUA_OK; i++)
		r = cua_ping(c);
	assert_lost(r, "ping after DISCONNECT");
	assert_every_call_lost(c);
	CK(cua_ping(bystander)); /* the others are still served */
	cua_disconnect(c);
	CK(cua_connect(url, &c));
	CK(cua_ping(c));
	cua_disconnect(c);
	cua_disconnect(bystander);
	cua_disconnect(op);
}
END_TEST

/* A launch in flight when the session goes ends with SESSION_LOST instead of waiting for a reply that will
 * never come. */
START_TEST(launch_in_flight_ends_with_session_lost)
{
	cua_client *c, *op = connect_operator(&D);
	CK(cua_connect(url, &c));
	cua_set_timeout(c, 60000);
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin");
	cua_future *f = submit_spin(c, spin, 20000, CUA_STREAM_POOL); /* the disconnect comes first */
	CK(cua_disconnect_session(op, other_session(op)));
	int r = cua_future_wait(f, -1);
	ck_assert_msg(r == CUA_ESESSION_LOST, "the launch ended with %s (%s)", cua_strerror_name(r),
		      cua_future_error(f) ? cua_future_error(f) : "");
	cua_future_free(f);
	assert_every_call_lost(c);
	cua_disconnect(c);
	cua_disconnect(op);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("session_lost");
	TCase *tc = tcase_create("lost");
	tcase_add_checked_fixture(tc, up, down);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, daemon_restart_loses_the_session_and_reconnecting_works);
	tcase_add_test(tc, operator_disconnect_loses_the_session_and_reconnecting_works);
	tcase_add_test(tc, launch_in_flight_ends_with_session_lost);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
