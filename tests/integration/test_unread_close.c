/*
 * test_unread_close.c — clients that close with their replies unread (issue 22, point 4), with the real daemon.
 *
 * What a client killed mid-call does: HELLO, MEM_ALLOC and STREAM_CREATE sent back to back, and the connection
 * closed before any reply is read. With NNG 1.5.2 a handful of these used to leave NNG's reaper thread waiting
 * forever: no connection was finished again, so closed sessions kept their memory, and every probe of the
 * listener watchdog leaked a descriptor until the daemon ran out of them. Here 100 such clients close beside a
 * well-behaved one; then every session must be gone, a new client must get the memory they held, and the
 * daemon's descriptors must be back to what they were before.
 *
 * Where NNG waited (found with a daemon linked against libnng.a): the reaper in pipe_destroy → rep0_pipe_stop →
 * nni_aio_stop(&p->aio_recv) → nni_task_wait, with no callback running: the REP pipe's receive aio was counted
 * busy forever. NNG 1.5.2's ipc_pipe_recv_cb re-submits rx_aio for the rest of a message without checking
 * p->closed; when the pipe is closed on another thread (rep0_pipe_send_cb, after a reply could not be written to
 * the client that left) while its next pipelined request is being read, nni_aio_begin refuses the stopped rx_aio
 * silently and the REP aio stays queued. daemon/nngfix.c finishes such a refused submit with NNG_ECLOSED. This
 * test failed on every run before that fix (the daemon's descriptors never came back).
 */
#include "config.h"

#include "cua_proto.h"
#include "harness.h"
#include "rawsp.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLIENTS 100
#define BIG (200ull << 20) /* of the emulated device's 256 MiB: no two such allocations fit at once */

static struct daemon D;

static bool
no_client_sessions(const cua_daemon_status *s, void *ud)
{
	(void)ud;
	return s->sessions <= 2 && s->devices[0].alloc_bytes <= 4096; /* the operator and the well-behaved client */
}

/* The daemon's descriptors, once they settle at or below want (bounded: 200 × 100 ms); the last count seen. */
static int
fds_settle(int want)
{
	int n = proc_fd_count(D.pid);
	for (int i = 0; i < 200 && n > want; i++) {
		usleep(100 * 1000);
		n = proc_fd_count(D.pid);
	}
	return n;
}

/* One hostile client: the three requests, then close without reading. */
static void
send_and_vanish(void)
{
	struct raw r;
	raw_connect(&r, D.url);
	struct cua_req_hello h = {1, 1, {"vanishing", 9}, (uint32_t)getpid(), {"", 0}};
	struct cua_req_mem_alloc a = {0, BIG};
	struct cua_req_stream_create sc = {0, 0, 0};
	ck_assert_int_eq(raw_write(&r, CUA_OP_HELLO, 0, &h, 5000), 0);
	ck_assert_int_eq(raw_write(&r, CUA_OP_MEM_ALLOC, 1, &a, 5000), 0);
	ck_assert_int_eq(raw_write(&r, CUA_OP_STREAM_CREATE, 2, &sc, 5000), 0);
	raw_close(&r);
}

START_TEST(closing_with_replies_unread_releases_everything)
{
	static const char *const args[] = {"--session-mem", "100%", NULL};
	daemon_start(&D, args);
	/* a warm-up client, so that what NNG opens once (its poller, the first pipe's) is in the baseline */
	cua_client *w = connect_to(&D);
	cua_deviceptr p;
	CK(cua_mem_alloc(w, 0, 4096, &p));
	cua_client *op = connect_operator(&D);
	int base = fds_settle(0x7fffffff);
	ck_assert_int_gt(base, 0);

	for (int i = 0; i < CLIENTS; i++) {
		send_and_vanish();
		if (i % 10 == 9)
			CK(cua_ping(w)); /* the well-behaved client is served meanwhile */
	}

	cua_daemon_status st;
	ck_assert_msg(wait_status(op, no_client_sessions, NULL, &st),
		      "the vanished clients' sessions were not cleaned up: %u sessions, %llu bytes allocated on device "
		      "0 "
		      "(see %s)",
		      st.sessions, (unsigned long long)st.devices[0].alloc_bytes, D.log);
	/* the memory they held is back: a new client gets it */
	cua_client *c = connect_to(&D);
	cua_deviceptr big;
	CK(cua_mem_alloc(c, 0, BIG, &big));
	CK(cua_mem_free(c, big));
	cua_disconnect(c);
	CK(cua_ping(w));
	int now = fds_settle(base);
	ck_assert_msg(now <= base, "the daemon holds %d descriptors, %d before the %d clients (see %s)", now, base,
		      CLIENTS, D.log);
	cua_disconnect(op);
	cua_disconnect(w);
	daemon_stop(&D);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("unread_close");
	TCase *tc = tcase_create("unread_close");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, closing_with_replies_unread_releases_everything);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
