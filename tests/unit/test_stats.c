/* The monitoring counters (daemon/stats.c) without a daemon: latencies land in the right histogram buckets
 * (cumulative in the text, +Inf and _count equal), statuses and ops become labels, the health verdict says why. */
#include "config.h"

#include "daemon.h"
#include "stats.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static struct fe fe;

/* The value of series (exactly as written) in text; -1 when absent. */
static double
value(const char *text, const char *series)
{
	size_t n = strlen(series);
	for (const char *p = text; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

static char *
format(void)
{
	struct stats_snap snap;
	size_t len = 0;
	ck_assert_int_eq(stats_snapshot(&fe, true, &snap), 0);
	char *text = stats_format(&snap, &len);
	stats_snap_free(&snap);
	ck_assert_ptr_nonnull(text);
	ck_assert_uint_eq(strlen(text), len);
	return text;
}

START_TEST(latency_buckets_and_labels)
{
	fe_init(&fe);
	/* bounds are inclusive: 50 µs is in the first bucket, 50.001 µs in the second; past 10 s only +Inf */
	static const uint64_t ns[] = {0, 50000, 50001, 10000000000ull, 10000000001ull};
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		do_stats_request(&fe, CUA_OP_LAUNCH, SF_LAUNCH, CUA_OK, ns[i]);
	do_stats_request(&fe, CUA_OP_MEM_FREE, SF_MEMORY, CUA_ENOT_FOUND, UINT64_MAX); /* no latency observed */
	do_stats_request(&fe, 200, SF_INFO, CUA_EUNKNOWN_OP, UINT64_MAX);
	do_stats_request(&fe, CUA_OP_PING, SF_INFO, 999, UINT64_MAX); /* an unknown status counts as INTERNAL */
	char *t = format();
	ck_assert_double_eq(value(t, "cuasyncd_request_duration_seconds_bucket{family=\"launch\",le=\"5e-05\"}"), 2);
	ck_assert_double_eq(value(t, "cuasyncd_request_duration_seconds_bucket{family=\"launch\",le=\"0.0001\"}"), 3);
	ck_assert_double_eq(value(t, "cuasyncd_request_duration_seconds_bucket{family=\"launch\",le=\"10\"}"), 4);
	ck_assert_double_eq(value(t, "cuasyncd_request_duration_seconds_bucket{family=\"launch\",le=\"+Inf\"}"), 5);
	ck_assert_double_eq(value(t, "cuasyncd_request_duration_seconds_count{family=\"launch\"}"), 5);
	ck_assert_double_eq(value(t, "cuasyncd_request_duration_seconds_count{family=\"memory\"}"), 0);
	ck_assert_double_eq(value(t, "cuasyncd_requests_total{op=\"LAUNCH\",status=\"OK\"}"), 5);
	ck_assert_double_eq(value(t, "cuasyncd_requests_total{op=\"MEM_FREE\",status=\"NOT_FOUND\"}"), 1);
	ck_assert_double_eq(value(t, "cuasyncd_requests_total{op=\"UNKNOWN\",status=\"UNKNOWN_OP\"}"), 1);
	ck_assert_double_eq(value(t, "cuasyncd_requests_total{op=\"PING\",status=\"INTERNAL\"}"), 1);
	ck_assert_double_eq(value(t, "cuasyncd_requests_total{op=\"HELLO\",status=\"OK\"}"),
			    0); /* there from the start */
	ck_assert_ptr_nonnull(strstr(t, "# TYPE cuasyncd_request_duration_seconds histogram\n"));
	free(t);
}
END_TEST

/* Per-tenant counters by family and error name, the tenant's name escaped; a scrape that is not an operator's
 * (stats_snap_aggregate) gets none of them. */
START_TEST(tenant_counters_and_aggregate)
{
	fe_init(&fe);
	do_stats_tenant(&fe, "a\"b", SF_MEMORY, CUA_OK);
	do_stats_tenant(&fe, "a\"b", SF_MEMORY, CUA_ENOT_FOUND);
	do_stats_tenant(&fe, "c", SF_LAUNCH, CUA_OK);
	do_stats_tenant(&fe, NULL, SF_LAUNCH, CUA_OK); /* before HELLO: no tenant, not counted */
	char *t = format();
	ck_assert_double_eq(value(t, "cuasyncd_tenant_requests_total{tenant=\"a\\\"b\",family=\"memory\"}"), 2);
	ck_assert_double_eq(value(t, "cuasyncd_tenant_errors_total{tenant=\"a\\\"b\",error=\"NOT_FOUND\"}"), 1);
	ck_assert_double_eq(value(t, "cuasyncd_tenant_requests_total{tenant=\"c\",family=\"launch\"}"), 1);
	ck_assert_double_eq(value(t, "cuasyncd_tenant_requests_total{tenant=\"c\",family=\"memory\"}"), 0);
	ck_assert_ptr_null(strstr(t, "cuasyncd_tenant_errors_total{tenant=\"c\""));
	ck_assert_double_eq(value(t, "cuasyncd_build_info{version=\"" PACKAGE_VERSION "\"}"), 1);
	ck_assert_double_gt(value(t, "process_open_fds"), 0);
	free(t);
	struct stats_snap snap;
	size_t len = 0;
	ck_assert_int_eq(stats_snapshot(&fe, true, &snap), 0);
	stats_snap_aggregate(&snap);
	t = stats_format(&snap, &len);
	stats_snap_free(&snap);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_null(strstr(t, "tenant="));
	ck_assert_ptr_null(strstr(t, "session="));
	free(t);
	stats_fini(&fe.stats);
}
END_TEST

START_TEST(health_says_why)
{
	fe_init(&fe);
	struct stats_snap snap;
	char why[160];
	ck_assert_int_eq(stats_snapshot(&fe, false, &snap), 0);
	ck_assert(!stats_healthy(&snap, why, sizeof(why))); /* no devices at all */
	ck_assert_ptr_nonnull(strstr(why, "no device ready"));
	snap.ndevs = 1;
	snap.dev[0].ready = true;
	ck_assert(stats_healthy(&snap, why, sizeof(why)));
	ck_assert_str_eq(why, "ok");
	snap.dev[0].drained = true;
	ck_assert(!stats_healthy(&snap, why, sizeof(why)));
	snap.dev[0].drained = false;
	snap.draining = true;
	ck_assert(!stats_healthy(&snap, why, sizeof(why)));
	ck_assert_str_eq(why, "shutting down");
	stats_snap_free(&snap);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("stats");
	tcase_add_test(tc, latency_buckets_and_labels);
	tcase_add_test(tc, health_says_why);
	tcase_add_test(tc, tenant_counters_and_aggregate);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
