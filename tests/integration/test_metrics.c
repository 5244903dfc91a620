/* Monitoring (issue 14). The Prometheus endpoint (--metrics-listen): the daemon serves it on a port the kernel
 * chose (port 0, read back from its log); requests of every kind move the counters by exactly what was done,
 * /healthz answers 200, and `promtool check metrics` accepts the text when promtool is installed (CI installs
 * it). And the operator's view of sessions: `cuasyncctl sessions`, and --json of every cuasyncctl command. */
#include "config.h"

#include "harness.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct daemon D;
static int port;

static void
up(void)
{
	static const char *const args[] = {"--metrics-listen", "http://127.0.0.1:0", "--metrics-sessions", NULL};
	daemon_start(&D, args);
	port = daemon_metrics_port(&D);
	ck_assert_msg(port > 0, "no metrics address in %s", D.log);
}

static void
down(void)
{
	daemon_stop(&D);
}

static int
http_get(const char *path, char **body)
{
	return metrics_get(port, path, body);
}

static char *
scrape(void)
{
	char *text = NULL;
	ck_assert_int_eq(http_get("/metrics", &text), 200);
	return text;
}

static double
value(const char *text, const char *series)
{
	return metric_value(text, series);
}

/* How much series moved from before to after (a series absent before counts from 0). */
static double
delta(const char *before, const char *after, const char *series)
{
	double a = value(after, series), b = value(before, series);
	ck_assert_msg(a >= 0, "%s missing", series);
	return a - (b < 0 ? 0 : b);
}

#define N_BYTES 4096u

START_TEST(counters_move_by_what_was_done)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function empty = get_fn(c, m, "empty_kernel");
	char *before = scrape();
	cua_deviceptr a, b;
	static unsigned char host[N_BYTES];
	CK(cua_mem_alloc(c, 0, N_BYTES, &a));
	CK(cua_mem_alloc(c, 0, 2 * N_BYTES, &b));
	CK(cua_memcpy_htod(c, a, host, N_BYTES));
	CK(cua_memcpy_dtod(c, b, a, N_BYTES));
	CK(cua_memcpy_dtoh(c, host, b, N_BYTES / 2));
	for (int i = 0; i < 3; i++)
		launch_and_wait(launch_1d(c, empty, 1, 1));
	int bad = cua_mem_free(c, a + 1); /* not the start of an allocation: refused */
	ck_assert_int_ne(bad, CUA_OK);
	CK(cua_mem_free(c, a));
	char *after = scrape();

	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEM_ALLOC\",status=\"OK\"}"), 2);
	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEM_FREE\",status=\"OK\"}"), 1);
	char series[160];
	snprintf(series, sizeof(series), "cuasyncd_requests_total{op=\"MEM_FREE\",status=\"%s\"}",
		 cua_strerror_name(bad));
	ck_assert_double_eq(delta(before, after, series), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_errors_total"), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEMCPY_HTOD\",status=\"OK\"}"), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEMCPY_DTOD\",status=\"OK\"}"), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEMCPY_DTOH\",status=\"OK\"}"), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_copied_bytes_total{direction=\"htod\"}"), N_BYTES);
	ck_assert_double_eq(delta(before, after, "cuasyncd_copied_bytes_total{direction=\"dtod\"}"), N_BYTES);
	ck_assert_double_eq(delta(before, after, "cuasyncd_copied_bytes_total{direction=\"dtoh\"}"), N_BYTES / 2);
	ck_assert_double_eq(delta(before, after, "cuasyncd_request_duration_seconds_count{family=\"copy\"}"), 3);
	ck_assert_double_eq(delta(before, after, "cuasyncd_request_duration_seconds_count{family=\"memory\"}"), 4);
	/* the client sends a launch alone (LAUNCH) or with others in flight (BATCH): launches count either way */
	ck_assert_double_eq(delta(before, after, "cuasyncd_launches_total"), 3);
	ck_assert_double_eq(delta(before, after, "cuasyncd_messages_total"), 10);
	ck_assert_double_eq(value(after, "cuasyncd_device_memory_used_bytes{device=\"0\"}"), 2 * N_BYTES);
	ck_assert_double_eq(value(after, "cuasyncd_sessions"), 1);
	ck_assert_double_eq(value(after, "cuasyncd_sessions_opened_total"), 1);
	ck_assert_double_eq(value(after, "cuasyncd_requests_in_flight"), 0);
	ck_assert_double_eq(value(after, "cuasyncd_requests_queued"), 0);
	ck_assert_double_eq(value(after, "cuasyncd_device_ready{device=\"0\"}"), 1);
	ck_assert_double_eq(value(after, "cuasyncd_worker_generation{device=\"0\"}"), 1);
	ck_assert_double_eq(value(after, "cuasyncd_worker_restarts_total{device=\"0\"}"), 0);
	/* --metrics-sessions: the one session's series (its id is the first one, 1) */
	ck_assert_double_eq(value(after, "cuasyncd_session_device_memory_bytes{session=\"1\"}"), 2 * N_BYTES);
	ck_assert_double_gt(value(after, "cuasyncd_session_requests_total{session=\"1\"}"), 10);
	free(before);
	free(after);
	cua_disconnect(c);
}
END_TEST

START_TEST(healthz_ok_while_serving)
{
	char *body = NULL;
	ck_assert_int_eq(http_get("/healthz", &body), 200);
	ck_assert_str_eq(body, "ok\n");
	free(body);
	ck_assert_int_eq(http_get("/nothing-here", &body), 404);
	free(body);
}
END_TEST

/* promtool (Debian package prometheus) checks the text's syntax and naming; CI installs it. */
START_TEST(promtool_accepts_the_text)
{
	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		fprintf(stderr, "test_metrics: promtool not installed: format check skipped\n");
		return;
	}
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	launch_and_wait(launch_1d(c, get_fn(c, m, "empty_kernel"), 1, 1));
	ck_assert_int_ne(cua_mem_free(c, 12345), CUA_OK);
	char *text = scrape();
	char path[400], cmd[600];
	snprintf(path, sizeof(path), "%s/metrics.txt", D.dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s >&2", path);
	ck_assert_msg(system(cmd) == 0, "promtool check metrics rejected %s", path);
	free(text);
	cua_disconnect(c);
}
END_TEST

/* Runs `cuasyncctl --url OPERATOR args` and returns its stdout (malloc'd); asserts it exited 0. */
static char *
ctl(const char *args)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s %s", builddir(), D.op_url, args);
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	char *out = calloc(1, 65536);
	size_t n = fread(out, 1, 65535, f);
	out[n] = '\0';
	ck_assert_msg(pclose(f) == 0, "%s failed: %s", cmd, out);
	return out;
}

/* out is one JSON object on one line; python3 (when there) parses it. */
static void
assert_json(const char *what, const char *out)
{
	size_t n = strlen(out);
	ck_assert_msg(n > 2 && out[0] == '{' && out[n - 2] == '}' && out[n - 1] == '\n' &&
			      strchr(out, '\n') == out + n - 1,
		      "%s: not one JSON document on one line: %s", what, out);
	if (system("command -v python3 >/dev/null 2>&1") != 0)
		return;
	char path[400], cmd[600];
	snprintf(path, sizeof(path), "%s/ctl.json", D.dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(out, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 -m json.tool %s >/dev/null", path);
	ck_assert_msg(system(cmd) == 0, "%s: python3 rejects %s", what, out);
}

START_TEST(cuasyncctl_lists_sessions)
{
	cua_client *c = connect_to(&D);
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 3 << 20, &p));
	char want[160];
	char *out = ctl("sessions");
	snprintf(want, sizeof(want), " %d ", (int)getpid()); /* HELLO's pid and the kernel's both */
	ck_assert_msg(strstr(out, "SESSION") && strstr(out, "libcuasync") && strstr(out, want), "%s", out);
	ck_assert_msg(strstr(out, "3.0") && strstr(out, "(operator)"), "%s", out);
	free(out);
	out = ctl("--json sessions");
	assert_json("sessions", out);
	snprintf(want, sizeof(want), "\"pid\":%d,\"peer_pid\":%d,", (int)getpid(), (int)getpid());
	ck_assert_msg(strstr(out, want) && strstr(out, "\"alloc_bytes\":3145728,"), "%s", out);
	ck_assert_msg(strstr(out, "\"operator\":true") && strstr(out, "\"operator\":false"), "%s", out);
	free(out);
	static const char *const verbs[] = {"--json status", "--json devices", "--json ping"};
	for (int v = 0; v < 3; v++) {
		out = ctl(verbs[v]);
		assert_json(verbs[v], out);
		free(out);
	}
	cua_disconnect(c);
}
END_TEST

/* cuasyncctl top: usage by tenant over an interval (every session here is in the default tenant). */
START_TEST(cuasyncctl_top_by_tenant)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_deviceptr p;
	CK(cua_mem_alloc(a, 0, 1 << 20, &p));
	CK(cua_mem_alloc(b, 0, 1 << 20, &p));
	char *out = ctl("--json --interval 0.2 top");
	assert_json("top", out);
	ck_assert_msg(strstr(out, "\"tenant\":\"default\",\"sessions\":2,") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "\"alloc_bytes\":2097152,") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "\"tenant\":\"(operator)\",\"sessions\":1,") != NULL, "%s", out);
	free(out);
	out = ctl("--interval 0.1 --count 2 top");
	ck_assert_msg(strstr(out, "TENANT") && strstr(out, "default") && strstr(out, "2.0"), "%s", out);
	free(out);
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

/* Whether the operator's SESSIONS lists session id. */
static bool
listed(cua_client *op, uint64_t id)
{
	cua_session_info *rows;
	uint32_t n;
	bool found = false;
	CK(cua_sessions(op, &rows, &n));
	for (uint32_t i = 0; i < n; i++)
		found |= rows[i].id == id;
	free(rows);
	return found;
}

START_TEST(cuasyncctl_disconnects_a_session)
{
	cua_client *c = connect_to(&D), *op = connect_operator(&D);
	cua_session_info *own;
	uint32_t n;
	CK(cua_sessions(c, &own, &n)); /* a client sees its own row only */
	ck_assert_uint_eq(n, 1);
	uint64_t id = own[0].id;
	free(own);
	ck_assert_int_eq(cua_disconnect_session(c, id), CUA_EPERMISSION_DENIED); /* the operator's alone */
	ck_assert(listed(op, id));
	char args[64], want[64];
	snprintf(args, sizeof(args), "--json disconnect %llu", (unsigned long long)id);
	char *out = ctl(args);
	snprintf(want, sizeof(want), "{\"disconnected\":%llu}\n", (unsigned long long)id);
	ck_assert_str_eq(out, want);
	free(out);
	int k = 0; /* the edge closes it within a second */
	while (k++ < 500 && listed(op, id))
		usleep(10000);
	ck_assert_msg(k < 500, "session %llu still listed 5 s after DISCONNECT", (unsigned long long)id);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s disconnect %llu 2>/dev/null", builddir(), D.op_url,
		 (unsigned long long)id);
	ck_assert_int_ne(system(cmd), 0); /* gone: NOT_FOUND */
	cua_disconnect(op);
	cua_disconnect(c);
}
END_TEST

/* drain: no new objects on the device, what is held works on, /healthz says 503 (the one device is drained),
 * the metrics say drained; undrain undoes it all. */
START_TEST(cuasyncctl_drains_a_device)
{
	cua_client *c = connect_to(&D);
	cua_deviceptr p, q;
	CK(cua_mem_alloc(c, 0, 4096, &p));
	char *out = ctl("--json drain 0"), *body = NULL;
	ck_assert_str_eq(out, "{\"device\":0,\"drained\":true,\"holding\":1,\"in_flight\":0}\n");
	free(out);
	ck_assert_int_eq(cua_mem_alloc(c, 0, 4096, &q), CUA_ENO_DEVICE);
	ck_assert_msg(strstr(cua_last_error(), "drained"), "%s", cua_last_error());
	static unsigned char host[4096];
	CK(cua_memcpy_htod(c, p, host, sizeof(host))); /* what it holds works on */
	ck_assert_int_eq(http_get("/healthz", &body), 503);
	ck_assert_msg(strstr(body, "no device ready"), "%s", body);
	free(body);
	body = scrape();
	ck_assert_double_eq(value(body, "cuasyncd_device_drained{device=\"0\"}"), 1);
	free(body);
	CK(cua_mem_free(c, p));
	out = ctl("drain 0"); /* again: nothing held any more but the session's pool streams */
	ck_assert_msg(strstr(out, "device 0 drained"), "%s", out);
	free(out);
	out = ctl("--json undrain 0");
	ck_assert_msg(strstr(out, "\"drained\":false"), "%s", out);
	free(out);
	CK(cua_mem_alloc(c, 0, 4096, &q));
	ck_assert_int_eq(http_get("/healthz", &body), 200);
	free(body);
	cua_disconnect(c);
}
END_TEST

static Suite *
metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("endpoint");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, counters_move_by_what_was_done);
	tcase_add_test(tc, healthz_ok_while_serving);
	tcase_add_test(tc, promtool_accepts_the_text);
	tcase_add_test(tc, cuasyncctl_lists_sessions);
	tcase_add_test(tc, cuasyncctl_top_by_tenant);
	tcase_add_test(tc, cuasyncctl_disconnects_a_session);
	tcase_add_test(tc, cuasyncctl_drains_a_device);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(metrics_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
