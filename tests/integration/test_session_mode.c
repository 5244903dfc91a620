/*
 * test_session_mode.c — `--isolation session`: every session gets a worker process (its own context) of its
 * own, so a kernel of one session cannot reach another's memory, and a fault ends only the faulting session's
 * worker. Real daemon, emulated device (the same suite runs on the GPU: tests/gpu/run.sh).
 *
 * In the shared mode a kernel given a valid pointer and a length past its allocation writes into whatever lies
 * behind it — a neighbour's data — and a fault costs every session its context: these are the two things the
 * session mode exists for, and what this suite checks it delivers.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS 4096u
#define PATTERN 0xa5a5a5a5u

static struct daemon D;

static void
up(void)
{
	const char *args[] = {"--isolation", "session", "--isolation-pool", "2", NULL};
	daemon_start(&D, args);
}

static void
down(void)
{
	daemon_stop(&D);
}

/* fill_u32(p, v, n) on c's pool, waited for. */
static int
fill(cua_client *c, cua_function f, cua_deviceptr p, uint32_t v, uint64_t n)
{
	cua_future *fu;
	cua_launch *l = launch_1d(c, f, 64, 256);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, v);
	cua_launch_push_u64(l, n);
	int rc = cua_launch_submit(l, &fu);
	if (rc == CUA_OK) {
		rc = cua_future_wait(fu, -1);
		cua_future_free(fu);
	}
	return rc;
}

/* Every word of p (WORDS of them) is v. */
static void
assert_words(cua_client *c, cua_deviceptr p, uint32_t v)
{
	uint32_t *back = malloc(WORDS * 4);
	ck_assert_ptr_nonnull(back);
	CK(cua_memcpy_dtoh(c, back, p, WORDS * 4));
	for (uint32_t i = 0; i < WORDS; i++)
		ck_assert_msg(back[i] == v, "word %u is 0x%x, want 0x%x", i, back[i], v);
	free(back);
}

/* B's kernel is handed a valid pointer and a length far past its allocation: in its own context it can only
 * reach its own memory; A's data is intact. */
START_TEST(a_kernel_cannot_reach_another_sessions_memory)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_function fa = get_fn(a, load_kernels(a), "fill_u32"), fb = get_fn(b, load_kernels(b), "fill_u32");
	cua_deviceptr pa, pb;
	/* B's block first, A's after it: in one shared context (the emulated device hands out addresses in order)
	 * B's overrun would run over A's block */
	CK(cua_mem_alloc(b, 0, WORDS * 4, &pb));
	CK(cua_mem_alloc(a, 0, WORDS * 4, &pa));
	CK(fill(a, fa, pa, PATTERN, WORDS));
	int rc = fill(b, fb, pb, 0x0bad0bad, 16 * WORDS);
	ck_assert_msg(rc == CUA_OK || rc == CUA_EDEVICE, "overrun launch: %s", cua_strerror_name(rc));
	assert_words(a, pa, PATTERN);
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

/* B faults (bad_write): B gets DEVICE and its context is lost; A's objects and data live on, and A keeps
 * launching. */
START_TEST(a_fault_leaves_other_sessions_intact)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_module ma = load_kernels(a), mb = load_kernels(b);
	cua_function fa = get_fn(a, ma, "fill_u32"), bad = get_fn(b, mb, "bad_write");
	cua_stream sa;
	CK(cua_stream_create(a, 0, 0, &sa));
	cua_deviceptr pa, pb;
	CK(cua_mem_alloc(a, 0, WORDS * 4, &pa));
	CK(fill(a, fa, pa, PATTERN, WORDS));
	CK(cua_mem_alloc(b, 0, 64, &pb));
	cua_launch *l = launch_1d(b, bad, 1, 1);
	cua_launch_push_device_ptr(l, pb);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	int rc = cua_future_wait(f, -1);
	ck_assert_msg(rc == CUA_EDEVICE, "B's bad_write launch: %s (%s), want DEVICE", cua_strerror_name(rc),
		      cua_future_error(f));
	cua_future_free(f);
	/* B's objects belong to the lost context; A's do not */
	uint32_t v;
	ck_assert_int_eq(cua_memcpy_dtoh(b, &v, pb, 4), CUA_ECONTEXT_LOST);
	assert_words(a, pa, PATTERN);
	CK(fill(a, fa, pa, PATTERN + 1, WORDS));
	assert_words(a, pa, PATTERN + 1);
	CK(cua_stream_synchronize(a, sa));
	cua_function again;
	CK(cua_module_get_function(a, ma, "fill_u32", &again));
	/* B recovers by recreating its objects, in its restarted worker */
	cua_function fb2 = get_fn(b, load_kernels(b), "fill_u32");
	cua_deviceptr pb2;
	CK(cua_mem_alloc(b, 0, WORDS * 4, &pb2));
	CK(fill(b, fb2, pb2, 7, WORDS));
	assert_words(b, pb2, 7);
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

/* Each session's memory is its own address space: two sessions may be handed the same device address, and
 * each reads its own data there. */
START_TEST(sessions_have_separate_address_spaces)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_function fa = get_fn(a, load_kernels(a), "fill_u32"), fb = get_fn(b, load_kernels(b), "fill_u32");
	cua_deviceptr pa, pb;
	CK(cua_mem_alloc(a, 0, WORDS * 4, &pa));
	CK(cua_mem_alloc(b, 0, WORDS * 4, &pb));
	CK(fill(a, fa, pa, 1, WORDS));
	CK(fill(b, fb, pb, 2, WORDS));
	assert_words(a, pa, 1);
	assert_words(b, pb, 2);
	/* what one session freed is gone with its worker: a new session starts from a fresh context */
	cua_disconnect(b);
	cua_client *c = connect_to(&D);
	cua_deviceptr pc;
	CK(cua_mem_alloc(c, 0, WORDS * 4, &pc));
	assert_words(c, pc, 0);
	cua_disconnect(a);
	cua_disconnect(c);
}
END_TEST

static bool
workers_back(const cua_daemon_status *s, void *ud)
{
	(void)ud;
	return s->sessions == 1 && s->total.allocations == 0;
}

/* Sessions come and go: their workers are stopped, the daemon stays serving. */
START_TEST(session_workers_come_and_go)
{
	for (int k = 0; k < 8; k++) {
		cua_client *c = connect_to(&D);
		cua_deviceptr p;
		CK(cua_mem_alloc(c, 0, 4096, &p));
		cua_disconnect(c);
	}
	cua_client *op = connect_operator(&D);
	cua_daemon_status st;
	ck_assert(wait_status(op, workers_back, NULL, &st));
	cua_disconnect(op);
	cua_client *c = connect_to(&D);
	CK(cua_ping(c));
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ restarts under session isolation */

static struct daemon R; /* a daemon of its own: the other cases fault workers too */

static void
restarts_up(void)
{
	const char *args[] = {"--isolation",        "session", "--isolation-pool", "2", "--metrics-listen",
			      "http://127.0.0.1:0", NULL};
	daemon_start(&R, args);
}

static void
restarts_down(void)
{
	daemon_stop(&R);
}

/* The value of metric name's series of device 0, whatever other labels it carries (model, UUID); -1 if none. */
static double
dev0_value(const char *text, const char *name)
{
	char prefix[128];
	snprintf(prefix, sizeof(prefix), "\n%s{device=\"0\"", name);
	const char *at = strstr(text, prefix), *end;
	if (at == NULL || (end = strchr(at + 1, '\n')) == NULL)
		return -1;
	const char *sp = end;
	while (sp > at && sp[-1] != ' ')
		sp--;
	return strtod(sp, NULL);
}

/* The operator's view (STATUS, `cuasyncctl status`, the metric) after b's worker was restarted once. */
static void
assert_operator_view(void)
{
	cua_client *op = connect_operator(&R);
	cua_daemon_status st;
	uint32_t one = 1;
	ck_assert(wait_status(op, status_restarted, &one, &st));
	ck_assert_uint_eq(st.devices[0].restarts, 1);
	ck_assert_uint_eq(st.devices[0].generation, 2);
	cua_disconnect(op);
	char cmd[1024], out[4096];
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s status", builddir(), R.op_url);
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	ck_assert_msg(pclose(f) == 0, "%s failed: %s", cmd, out);
	ck_assert_msg(strstr(out, "worker generation 2 (1 restarts)") != NULL, "cuasyncctl status: %s", out);
	int port = daemon_metrics_port(&R);
	ck_assert_msg(port > 0, "no metrics address in %s", R.log);
	char *text = NULL;
	ck_assert_int_eq(metrics_get(port, "/metrics", &text), 200);
	ck_assert_double_eq(dev0_value(text, "cuasyncd_worker_restarts_total"), 1);
	ck_assert_double_eq(dev0_value(text, "cuasyncd_worker_generation"), 2);
	free(text);
}

/* Session b's own worker faults and is restarted: b sees its worker's generation 2 and 1 restart (STATUS,
 * device info), a — whose worker never restarted — generation 1 and none, and the operator sees the device's
 * restart in STATUS, cuasyncctl and the metrics. a is served throughout. */
START_TEST(session_worker_restarts_are_shown)
{
	cua_client *a = connect_to(&R), *b = connect_to(&R);
	cua_function fa = get_fn(a, load_kernels(a), "fill_u32"), bad = get_fn(b, load_kernels(b), "bad_write");
	cua_deviceptr pa, pb;
	CK(cua_mem_alloc(a, 0, WORDS * 4, &pa));
	CK(cua_mem_alloc(b, 0, 64, &pb));
	cua_launch *l = launch_1d(b, bad, 1, 1);
	cua_launch_push_device_ptr(l, pb);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	ck_assert_int_eq(cua_future_wait(f, -1), CUA_EDEVICE);
	cua_future_free(f);
	ck_assert_int_eq(cua_memcpy_dtoh(b, &(uint32_t){0}, pb, 4), CUA_ECONTEXT_LOST);
	CK(cua_mem_alloc(b, 0, 64, &pb)); /* its restarted worker serves it */
	cua_daemon_status st;
	cua_device_info info;
	CK(cua_status(b, &st));
	ck_assert_uint_eq(st.devices[0].generation, 2);
	ck_assert_uint_eq(st.devices[0].restarts, 1);
	CK(cua_device_get_info(b, 0, &info));
	ck_assert_uint_eq(info.generation, 2);
	CK(fill(a, fa, pa, PATTERN, WORDS));
	assert_words(a, pa, PATTERN);
	CK(cua_status(a, &st));
	ck_assert_uint_eq(st.devices[0].generation, 1);
	ck_assert_uint_eq(st.devices[0].restarts, 0);
	CK(cua_device_get_info(a, 0, &info));
	ck_assert_uint_eq(info.generation, 1);
	assert_operator_view();
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

/* ------------------------------------------------------------------ a session worker's staging area */

static struct daemon S;

static void
staging_up(void)
{
	const char *args[] = {"--isolation", "session", "--isolation-staging", "1M", NULL};
	daemon_start(&S, args);
}

static void
staging_down(void)
{
	daemon_stop(&S);
}

/* --isolation-staging 1M: a copy whose bytes cannot fit a session worker's staging area is refused TOO_LARGE
 * naming the option (it never waits for room that cannot come); smaller ones run, and so do other sessions. A
 * synchronous copy of ordinary memory carries no bytes (libcuasync stages it through a host buffer of its own),
 * so it runs whatever its size; a batch item's bytes travel in the message. */
START_TEST(session_worker_staging_is_its_own)
{
	cua_client *a = connect_to(&S), *b = connect_to(&S);
	size_t big = 2u << 20, small = 512u << 10;
	unsigned char *buf = calloc(1, big);
	ck_assert_ptr_nonnull(buf);
	cua_deviceptr pa, pb;
	CK(cua_mem_alloc(a, 0, big, &pa));
	CK(cua_mem_alloc(b, 0, big, &pb));
	cua_batch *bt = cua_batch_new(a);
	CK(cua_batch_add_memcpy_htod(bt, pa, buf, big, CUA_STREAM_DEFAULT));
	cua_future *f;
	CK(cua_batch_submit(bt, &f));
	ck_assert_int_eq(cua_future_wait(f, -1), CUA_ETOO_LARGE);
	ck_assert_msg(strstr(cua_last_error(), "--isolation-staging") != NULL, "%s", cua_last_error());
	cua_future_free(f);
	CK(cua_memcpy_htod(a, pa, buf, big)); /* staged by the client: no bytes in the worker's area */
	memset(buf, 0x5a, small);
	CK(cua_memcpy_htod(a, pa, buf, small));
	CK(cua_memcpy_htod(b, pb, buf, small));
	unsigned char back[16];
	CK(cua_memcpy_dtoh(a, back, pa + small - sizeof(back), sizeof(back)));
	ck_assert_uint_eq(back[15], 0x5a);
	free(buf);
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

static Suite *
session_mode_suite(void)
{
	Suite *s = suite_create("session isolation");
	TCase *tc = tcase_create("session");
	tcase_add_unchecked_fixture(tc, up, down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, a_kernel_cannot_reach_another_sessions_memory);
	tcase_add_test(tc, a_fault_leaves_other_sessions_intact);
	tcase_add_test(tc, sessions_have_separate_address_spaces);
	tcase_add_test(tc, session_workers_come_and_go);
	suite_add_tcase(s, tc);
	TCase *rs = tcase_create("restarts");
	tcase_add_checked_fixture(rs, restarts_up, restarts_down);
	tcase_set_timeout(rs, 120);
	tcase_add_test(rs, session_worker_restarts_are_shown);
	suite_add_tcase(s, rs);
	TCase *st = tcase_create("staging");
	tcase_add_checked_fixture(st, staging_up, staging_down);
	tcase_set_timeout(st, 120);
	tcase_add_test(st, session_worker_staging_is_its_own);
	suite_add_tcase(s, st);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(session_mode_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
