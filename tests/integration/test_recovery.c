/* Recovery of the shared worker after a sticky fault (issue 19): a ready spare worker (--spare-worker yes, the
 * default) replaces the faulted one at once, twice in a row; without it a fresh worker does. Either way the
 * sessions of the lost context are told CONTEXT_LOST and new sessions are served. Each case prints how long
 * recovery took on this device (from the faulting session's error to a fresh session's module load, allocation
 * and launch), as test_gpu does on a GPU; nothing asserts a time. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct daemon D;

static void
up_spare(void)
{
	static const char *const args[] = {"--metrics-listen", "http://127.0.0.1:0", "--log-level", "debug", NULL};
	daemon_start(&D, args);
}

static void
up_no_spare(void)
{
	static const char *const args[] =
		{"--spare-worker", "no", "--metrics-listen", "http://127.0.0.1:0", "--log-level", "debug", NULL};
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
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The value of metric name's series of device 0, whatever other labels it carries (model, UUID); -1 if none. */
static double
dev0_metric(const char *name)
{
	int port = daemon_metrics_port(&D);
	ck_assert_msg(port > 0, "no metrics address in %s", D.log);
	char *text = NULL, prefix[128];
	ck_assert_int_eq(metrics_get(port, "/metrics", &text), 200);
	snprintf(prefix, sizeof(prefix), "\n%s{device=\"0\"", name);
	double v = -1;
	const char *at = strstr(text, prefix), *end;
	if (at != NULL && (end = strchr(at + 1, '\n')) != NULL) {
		const char *sp = end;
		while (sp > at && sp[-1] != ' ')
			sp--;
		v = strtod(sp, NULL);
	}
	free(text);
	return v;
}

/* Prints the daemon's log lines about recovery (the phases, each worker's start-up), the evidence of where the
 * time went, and forgets them (the next call prints what came after). */
static void
print_phases(const char *title)
{
	static long printed;
	FILE *f = fopen(D.log, "r");
	if (f == NULL)
		return;
	printf("  %s — the daemon's recovery log:\n", title);
	char line[1024];
	long at = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (at++ < printed)
			continue;
		if (strstr(line, "recovery +") || strstr(line, "spare worker") || strstr(line, "ready: ") ||
		    strstr(line, "cuInit ") || strstr(line, "worker generation"))
			printf("    %s", line);
	}
	printed = at;
	fclose(f);
}

/* Waits (bounded: 20 s) until device 0 has a ready spare worker. */
static void
await_spare(void)
{
	for (int i = 0; i < 2000; i++) {
		if (dev0_metric("cuasyncd_worker_spare_ready") == 1)
			return;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	ck_abort_msg("device 0 has no spare worker after 20 s; see %s", D.log);
}

/* One round: a session faults the shared worker; a bystander's memory answers CONTEXT_LOST; a fresh session loads
 * a module, allocates, launches and reads its result back. Returns the seconds from the fault's report to the
 * fresh session's result. */
static double
fault_and_recover(cua_client *bystander, int round, double *lost_s)
{
	cua_client *a = connect_to(&D);
	cua_function bad = get_fn(a, load_kernels(a), "bad_write");
	cua_deviceptr pa, pb;
	CK(cua_mem_alloc(a, 0, 64, &pa));
	CK(cua_mem_alloc(bystander, 0, 64, &pb));
	CK(cua_memset(bystander, pb, 0x5a, 1, 64));
	cua_launch *l = launch_1d(a, bad, 1, 1);
	cua_launch_push_device_ptr(l, pa);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	ck_assert_int_eq(cua_future_wait(f, -1), CUA_EDEVICE);
	double t0 = now_s();
	ck_assert_msg(strstr(cua_future_error(f), "CUDA_ERROR_") != NULL, "%s", cua_future_error(f));
	cua_future_free(f);
	char v4[4];
	ck_assert_int_eq(cua_memcpy_dtoh(bystander, v4, pb, 4), CUA_ECONTEXT_LOST);
	*lost_s = now_s() - t0;
	cua_client *n = connect_to(&D);
	cua_function fill = get_fn(n, load_kernels(n), "fill_u32");
	cua_deviceptr p;
	CK(cua_mem_alloc(n, 0, 4096, &p));
	l = launch_1d(n, fill, 4, 256);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, 0x1900u + (uint32_t)round);
	cua_launch_push_u64(l, 1024);
	launch_and_wait(l);
	uint32_t w[1024];
	CK(cua_memcpy_dtoh(n, w, p, sizeof(w)));
	double dt = now_s() - t0;
	ck_assert_uint_eq(w[0], 0x1900u + (uint32_t)round);
	ck_assert_uint_eq(w[1023], 0x1900u + (uint32_t)round);
	cua_daemon_status st;
	CK(cua_status(n, &st));
	ck_assert_uint_eq(st.devices[0].restarts, (uint32_t)round);
	ck_assert_uint_eq(st.devices[0].generation, (uint32_t)round + 1);
	/* the session that faulted lost its objects too, and is served again once it recreates them */
	ck_assert_int_eq(cua_memset(a, pa, 0, 1, 64), CUA_ECONTEXT_LOST);
	CK(cua_mem_alloc(a, 0, 64, &pa));
	cua_disconnect(a);
	cua_disconnect(n);
	return dt;
}

/* The shared worker faults twice in a row; each time the spare started beforehand serves the next generation (its
 * process is the one that then serves), the bystander is told CONTEXT_LOST and fresh sessions are served; the next
 * spare is started behind it. The recovery's phases are in the daemon's debug log. */
START_TEST(spare_worker_replaces_a_faulted_worker_twice)
{
	cua_client *b = connect_to(&D);
	for (int round = 1; round <= 2; round++) {
		await_spare();
		pid_t serving = daemon_worker_pid(&D, 0), spare = daemon_worker_pid_of_gen(&D, 0, (unsigned)round + 1);
		ck_assert_int_gt(serving, 0);
		ck_assert_msg(spare > 0 && spare != serving, "no spare worker process of generation %d", round + 1);
		double lost, dt = fault_and_recover(b, round, &lost);
		printf("spare worker, fault %d: the bystander was told CONTEXT_LOST %.1f ms and a fresh session served "
		       "%.1f ms after the fault was reported\n",
		       round, lost * 1e3, dt * 1e3);
		ck_assert_double_eq(dev0_metric("cuasyncd_worker_spare_swaps_total"), round);
		ck_assert_double_eq(dev0_metric("cuasyncd_worker_restarts_total"), round);
		await_spare(); /* the next one: started after the faulted worker was reaped */
		print_phases("spare worker");
		ck_assert_int_eq(daemon_worker_pid(&D, 0), spare);
		ck_assert_int_gt(daemon_worker_pid_of_gen(&D, 0, (unsigned)round + 2), 0);
	}
	/* the bystander recovers by recreating, on the second spare's context */
	cua_deviceptr p;
	CK(cua_mem_alloc(b, 0, 64, &p));
	CK(cua_memset(b, p, 1, 1, 64));
	cua_disconnect(b);
	ck_assert_msg(file_has(D.log, "recovery +0 ms: worker") && file_has(D.log, "a spare swapped in") &&
			      file_has(D.log, "first completion from generation 3; recovered") &&
			      file_has(D.log, "(generation 2) exited and was reaped"),
		      "the recovery's phases are not in %s", D.log);
}
END_TEST

/* Waits (bounded: 20 s) until process pid, killed, has exited: a zombie, as nobody has reaped it yet. */
static void
await_exited(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 2000; i++) {
		FILE *f = fopen(path, "r");
		if (f == NULL)
			return;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		const char *rp = strrchr(buf, ')');
		if (rp != NULL && rp[1] == ' ' && rp[2] == 'Z')
			return;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	ck_abort_msg("process %d did not exit within 20 s of SIGKILL", (int)pid);
}

/* A spare that died idle is not swapped in: the fault is recovered with a fresh worker, and a new spare follows. */
START_TEST(dead_spare_is_not_swapped_in)
{
	cua_client *b = connect_to(&D);
	await_spare();
	pid_t spare = daemon_worker_pid_of_gen(&D, 0, 2);
	ck_assert_int_gt(spare, 0);
	ck_assert_int_eq(kill(spare, SIGKILL), 0);
	await_exited(spare); /* dead before the fault, not dying during it */
	double lost, dt = fault_and_recover(b, 1, &lost);
	printf("dead spare, fault 1: fresh session served %.1f ms after the fault was reported\n", dt * 1e3);
	ck_assert_double_eq(dev0_metric("cuasyncd_worker_spare_swaps_total"), 0);
	ck_assert_int_ne(daemon_worker_pid(&D, 0), spare);
	await_spare();
	cua_disconnect(b);
}
END_TEST

/* --spare-worker no: no spare process, and recovery still works twice in a row with a fresh worker each time. */
START_TEST(without_a_spare_recovery_starts_a_fresh_worker)
{
	cua_client *b = connect_to(&D);
	for (int round = 1; round <= 2; round++) {
		ck_assert_int_eq(daemon_worker_pid_of_gen(&D, 0, (unsigned)round + 1), -1);
		double lost, dt = fault_and_recover(b, round, &lost);
		printf("no spare worker, fault %d: the bystander was told CONTEXT_LOST %.1f ms and a fresh session "
		       "served "
		       "%.1f ms after the fault was reported\n",
		       round, lost * 1e3, dt * 1e3);
		ck_assert_double_eq(dev0_metric("cuasyncd_worker_spare_ready"), 0);
		ck_assert_double_eq(dev0_metric("cuasyncd_worker_spare_swaps_total"), 0);
		print_phases("no spare worker");
	}
	cua_disconnect(b);
	ck_assert_msg(file_has(D.log, "a fresh worker") && file_has(D.log, "first completion from generation 3"),
		      "the recovery's phases are not in %s", D.log);
}
END_TEST

static Suite *
recovery_suite(void)
{
	Suite *s = suite_create("recovery");
	TCase *tc = tcase_create("spare");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_spare, down);
	tcase_add_test(tc, spare_worker_replaces_a_faulted_worker_twice);
	tcase_add_test(tc, dead_spare_is_not_swapped_in);
	suite_add_tcase(s, tc);
	tc = tcase_create("no_spare");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_no_spare, down);
	tcase_add_test(tc, without_a_spare_recovery_starts_a_fresh_worker);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(recovery_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
