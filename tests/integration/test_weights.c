/*
 * test_weights.c — tenants' weights: two busy tenants with weights 3:1 get device time near 3:1; with equal
 * weights, equal time. Real daemon (the emulated device, or the GPU under tests/gpu/run.sh), tenants named by
 * bearer tokens, four client connections driven by four threads of this process.
 *
 * The measure. Each client keeps two 10 ms spin kernels queued on a stream of its own for 3 s. The emulated
 * device sleeps through a spin kernel (no CPU) and has more threads than there are streams (--emu-threads 16);
 * on a GPU each one-thread spin kernel has a multiprocessor to itself. So nothing but the daemon's dispatch decides how much each tenant runs: unweighted, every stream is busy all
 * the time and the tenants get equal time. The daemon charges each tenant the time its work kept its streams
 * busy (the worker's measure) and holds back a tenant whose time over weight runs more than 5 ms ahead of
 * the other's. So the light tenant's streams idle about two thirds of the time, and both the kernels each
 * tenant completed and its busy time on /metrics come out near 3:1.
 *
 * The tolerance. Two clients per tenant complete about 300 (heavy) and 100 (light) kernels each run; the
 * lead a tenant may keep is one slack (5 ms) plus the kernels it had in flight when it was held back (two per
 * client, 40 ms in all), about 20 kernels' worth of the light tenant's 100 per client pair: 3:1 lands within
 * 2.2..4.0 even with a loaded CI machine adding dispatch jitter to both tenants alike. Equal weights land
 * within 0.7..1.4.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HEAVY_TOKEN "heavy-0123456789abcdef0123456789"
#define LIGHT_TOKEN "light-0123456789abcdef0123456789"
#define RUN_MS 3000
#define KERNEL_MS 10
#define DEPTH 2

struct client {
	cua_client *c;
	unsigned completed;
};

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Keeps DEPTH spin kernels queued on a stream of its own until RUN_MS passed; counts those that completed. */
static void *
drive(void *arg)
{
	struct client *k = arg;
	cua_stream s;
	if (cua_stream_create(k->c, 0, 0, &s) != CUA_OK)
		return NULL;
	cua_function spin;
	if (cua_module_get_function(k->c, load_kernels(k->c), "spin", &spin) != CUA_OK)
		return NULL;
	cua_future *f[DEPTH] = {NULL};
	double end = now_s() + RUN_MS / 1000.0;
	for (unsigned i = 0;; i++) {
		cua_future **slot = &f[i % DEPTH];
		if (*slot != NULL) {
			if (cua_future_wait(*slot, -1) == CUA_OK)
				k->completed++;
			cua_future_free(*slot);
			*slot = NULL;
		}
		if (now_s() >= end)
			break;
		*slot = submit_spin(k->c, spin, KERNEL_MS, s);
	}
	for (unsigned i = 0; i < DEPTH; i++)
		if (f[i] != NULL) {
			cua_future_wait(f[i], -1); /* past the deadline: not counted */
			cua_future_free(f[i]);
		}
	return NULL;
}

static char dir[64], tokens[128], conf[128], mtoken[128];

static void
write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static cua_client *
connect_as(const struct daemon *d, const char *token)
{
	cua_client *c;
	setenv("CUASYNC_TOKEN", token, 1);
	int rc = cua_connect(d->url, &c);
	unsetenv("CUASYNC_TOKEN");
	ck_assert_msg(rc == CUA_OK, "connect as %.5s: %s: %s", token, cua_strerror_name(rc), cua_last_error());
	return c;
}

/* Runs the two tenants side by side under heavy_weight:1; their ratios (heavy over light) of completed
 * kernels and of busy time as /metrics reports it. */
static void
run(unsigned heavy_weight, double *kernels, double *busy)
{
	char text[512];
	snprintf(dir, sizeof(dir), "/tmp/cuasync-weights.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
	snprintf(conf, sizeof(conf), "%s/c.conf", dir);
	write_file(tokens, "heavy:" HEAVY_TOKEN "\nlight:" LIGHT_TOKEN "\n", 0600);
	snprintf(mtoken, sizeof(mtoken), "%s/metrics-token", dir);
	write_file(mtoken, "operator-scrape-token\n", 0600); /* per-tenant series are for operators' scrapes */
	snprintf(text, sizeof(text),
		 "[tenant heavy]\ntoken = heavy\nweight = %u\n[tenant light]\ntoken = light\nweight = 1\n",
		 heavy_weight);
	write_file(conf, text, 0644);
	const char *args[] = {"--config",
			      conf,
			      "--token-file",
			      tokens,
			      "--metrics-listen",
			      "http://127.0.0.1:0",
			      "--metrics-token-file",
			      mtoken,
			      "--emu-threads",
			      "16",
			      NULL};
	struct daemon d;
	daemon_start(&d, args);
	struct client k[4] = {{connect_as(&d, HEAVY_TOKEN), 0},
			      {connect_as(&d, HEAVY_TOKEN), 0},
			      {connect_as(&d, LIGHT_TOKEN), 0},
			      {connect_as(&d, LIGHT_TOKEN), 0}};
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, drive, &k[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	char *m = NULL;
	ck_assert_int_eq(metrics_get_as(daemon_metrics_port(&d), "/metrics", "operator-scrape-token", &m), 200);
	double bh = metric_value(m, "cuasyncd_tenant_busy_seconds_total{tenant=\"heavy\"}"),
	       bl = metric_value(m, "cuasyncd_tenant_busy_seconds_total{tenant=\"light\"}");
	free(m);
	unsigned ch = k[0].completed + k[1].completed, cl = k[2].completed + k[3].completed;
	fprintf(stderr, "weights %u:1  kernels heavy %u light %u (%.2f)  busy heavy %.2f s light %.2f s (%.2f)\n",
		heavy_weight, ch, cl, cl ? (double)ch / cl : 0.0, bh, bl, bl > 0 ? bh / bl : 0.0);
	ck_assert_msg(ch > 0 && cl > 0 && bh > 0 && bl > 0, "both tenants ran (kernels %u/%u, busy %.2f/%.2f s)", ch,
		      cl, bh, bl);
	*kernels = (double)ch / cl;
	*busy = bh / bl;
	for (int i = 0; i < 4; i++)
		cua_disconnect(k[i].c);
	daemon_stop(&d);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(weights_three_to_one)
{
	double kernels, busy;
	run(3, &kernels, &busy);
	ck_assert_msg(kernels >= 2.2 && kernels <= 4.0, "kernels heavy:light %.2f, want 3 (2.2..4.0)", kernels);
	ck_assert_msg(busy >= 2.2 && busy <= 4.0, "busy time heavy:light %.2f, want 3 (2.2..4.0)", busy);
}
END_TEST

START_TEST(equal_weights_equal_time)
{
	double kernels, busy;
	run(1, &kernels, &busy);
	ck_assert_msg(kernels >= 0.7 && kernels <= 1.4, "kernels heavy:light %.2f, want 1 (0.7..1.4)", kernels);
	ck_assert_msg(busy >= 0.7 && busy <= 1.4, "busy time heavy:light %.2f, want 1 (0.7..1.4)", busy);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("weights");
	TCase *tc = tcase_create("weights");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, weights_three_to_one);
	tcase_add_test(tc, equal_weights_equal_time);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
