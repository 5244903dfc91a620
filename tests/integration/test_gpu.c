/* GPU-only checks (CUA_TEST_BACKEND=cuda on the H200; see tests/gpu/run.sh): every case measures or exercises the
 * real hardware (exact FMA results, PDL, sticky faults, concurrent kernels, the PTX JIT, every device). On the
 * emulated device none of them runs and the program exits 77, which automake reports as SKIP. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct daemon D;
static void
up(void)
{
	daemon_start(&D, NULL);
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
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

START_TEST(axpy_2_24_matches_host_exactly)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function axpy = get_fn(c, m, "axpy");
	const size_t N = (size_t)1 << 24;
	float *x = malloc(N * 4), *y = malloc(N * 4), *out = malloc(N * 4);
	unsigned seed = (unsigned)time(NULL);
	for (size_t i = 0; i < N; i++) {
		x[i] = (float)rand_r(&seed) / (float)RAND_MAX * 100.0f - 50.0f;
		y[i] = (float)rand_r(&seed) / (float)RAND_MAX * 100.0f - 50.0f;
	}
	cua_deviceptr dx, dy;
	CK(cua_mem_alloc(c, 0, N * 4, &dx));
	CK(cua_mem_alloc(c, 0, N * 4, &dy));
	CK(cua_memcpy_htod(c, dx, x, N * 4));
	CK(cua_memcpy_htod(c, dy, y, N * 4));
	memset(out, 0xff, N * 4); /* poison */
	const float a = 1.7f;
	cua_launch *l = launch_1d(c, axpy, 4096, 256);
	cua_launch_push_f32(l, a);
	cua_launch_push_device_ptr(l, dx);
	cua_launch_push_device_ptr(l, dy);
	cua_launch_push_u64(l, N);
	launch_and_wait(l);
	CK(cua_memcpy_dtoh(c, out, dy, N * 4));
	size_t bad = 0;
	for (size_t i = 0; i < N; i++)
		bad += out[i] != fmaf(a, x[i], y[i]);
	ck_assert_msg(bad == 0, "%zu of %zu elements differ from the host's fmaf", bad, N);
	free(x);
	free(y);
	free(out);
	cua_disconnect(c);
}
END_TEST

START_TEST(pdl_chain_of_1000_counts_1000)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function f = get_fn(c, m, "pdl_count");
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 4, &p));
	CK(cua_memset(c, p, 0, 4, 1));
	cua_stream s;
	CK(cua_stream_create(c, 0, 0, &s));
	cua_batch *b = cua_batch_new(c);
	for (int i = 0; i < 1000; i++) {
		cua_launch *l = launch_1d(c, f, 1, 32);
		cua_launch_push_device_ptr(l, p);
		cua_launch_set_stream(l, s);
		cua_launch_programmatic_dependent_launch(l);
		CK(cua_batch_add_launch(b, l));
	}
	cua_future *fut;
	CK(cua_batch_submit(b, &fut));
	CK(cua_future_wait(fut, -1));
	cua_future_free(fut);
	int32_t count = 0;
	CK(cua_memcpy_dtoh_on(c, &count, p, 4, s));
	ck_assert_int_eq(count, 1000);
	cua_disconnect(c);
}
END_TEST

START_TEST(fault_recovery_is_fast)
{
	/* The spare worker (--spare-worker, the default) is started after the daemon: measure with it ready, as in a
	 * daemon that has run a while (bounded: 60 s; a spare that cannot start is logged and recovery then starts
	 * a fresh worker). */
	for (int i = 0;
	     i < 6000 && !file_has(D.log, "(generation 2) ready in") && !file_has(D.log, "cannot keep a spare worker");
	     i++)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	printf("spare worker ready before the fault: %s\n", file_has(D.log, "(generation 2) ready in") ? "yes" : "no");
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_module ma = load_kernels(a);
	cua_function bad = get_fn(a, ma, "bad_write");
	cua_deviceptr pa, pb;
	CK(cua_mem_alloc(a, 0, 64, &pa));
	CK(cua_mem_alloc(b, 0, 64, &pb));
	cua_launch *l = launch_1d(a, bad, 1, 1);
	cua_launch_push_device_ptr(l, pa);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	ck_assert_int_eq(cua_future_wait(f, -1), CUA_EDEVICE);
	double t0 = now_s();
	ck_assert_msg(strncmp(cua_future_error(f), "CUDA_ERROR_", 11) == 0, "%s", cua_future_error(f));
	printf("faulting session got: %s\n", cua_future_error(f));
	cua_future_free(f);
	char v[4];
	ck_assert_int_eq(cua_memcpy_dtoh(b, v, pb, 4), CUA_ECONTEXT_LOST);
	double t_lost = now_s() - t0; /* each step's end, for where the time went (the daemon's debug log has more) */
	cua_client *n = connect_to(&D);
	double t_conn = now_s() - t0;
	cua_module mn = load_kernels(n);
	cua_function fill = get_fn(n, mn, "fill_u32");
	double t_mod = now_s() - t0;
	cua_deviceptr p;
	CK(cua_mem_alloc(n, 0, 4096, &p));
	double t_alloc = now_s() - t0;
	l = launch_1d(n, fill, 4, 256);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, 11);
	cua_launch_push_u64(l, 1024);
	launch_and_wait(l);
	double dt = now_s() - t0;
	uint32_t w[1024];
	CK(cua_memcpy_dtoh(n, w, p, sizeof(w)));
	ck_assert_uint_eq(w[1023], 11);
	printf("fresh module/alloc/launch succeeded %.3f s after the fault was reported (CONTEXT_LOST to another "
	       "session at %.3f s, connected %.3f, module loaded %.3f, allocated %.3f, launch done %.3f)\n",
	       dt, t_lost, t_conn, t_mod, t_alloc, dt);
	FILE *lf = fopen(D.log, "r"); /* the daemon's side: how the next generation came (spare or fresh), when */
	char line[1024];
	while (lf != NULL && fgets(line, sizeof(line), lf) != NULL)
		if (strstr(line, "worker generation") || strstr(line, "spare worker") || strstr(line, "sticky fault"))
			printf("  daemon: %s", line);
	if (lf != NULL)
		fclose(lf);
	cua_disconnect(a);
	cua_disconnect(b);
	cua_disconnect(n);
}
END_TEST

/* 4 sessions (processes) each launch one long spin at the same time: on one shared context they overlap. */
static double
run_spins(int sessions, unsigned ms)
{
	int go[2], done[2];
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(done), 0);
	pid_t pids[8];
	for (int k = 0; k < sessions; k++) {
		pids[k] = fork();
		if (pids[k] == 0) {
			close(go[1]);
			cua_client *c;
			cua_module m;
			cua_function spin;
			char fatbin[512];
			snprintf(fatbin, sizeof(fatbin), "%s/tests/kernels/test_kernels.fatbin", builddir());
			if (cua_connect(D.url, &c) || cua_module_load_file(c, 0, fatbin, &m) ||
			    cua_module_get_function(c, m, "spin", &spin))
				_exit(1);
			char x;
			if (write(done[1], "r", 1) != 1 || read(go[0], &x, 1) != 1) /* ready; wait for go */
				_exit(2);
			cua_launch *l = cua_launch_new(c, spin);
			cua_launch_set_config(l, (cua_launch_config){{1, 1, 1}, {1, 1, 1}, 0});
			cua_launch_push_i64(l, spin_cycles(ms));
			cua_future *f;
			if (cua_launch_submit(l, &f) || cua_future_wait(f, -1))
				_exit(3);
			cua_future_free(f);
			cua_disconnect(c);
			_exit(0);
		}
	}
	close(go[0]);
	for (int k = 0; k < sessions; k++) {
		char x;
		ck_assert_int_eq(read(done[0], &x, 1), 1);
	}
	double t0 = now_s();
	char gos[8] = "gggggggg";
	ck_assert_int_eq(write(go[1], gos, (size_t)sessions), sessions);
	for (int k = 0; k < sessions; k++) {
		int st;
		waitpid(pids[k], &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "session %d failed (0x%x)", k, st);
	}
	double dt = now_s() - t0;
	close(go[1]);
	close(done[0]);
	close(done[1]);
	return dt;
}

START_TEST(four_sessions_overlap)
{
	double one = run_spins(1, 500);
	double four = run_spins(4, 500);
	printf("one 500 ms spin: %.3f s; four concurrent from four sessions: %.3f s (%.2fx)\n", one, four, four / one);
	ck_assert_msg(four < 2.0 * one, "4 sessions' kernels did not overlap: %.3f s vs %.3f s for one", four, one);
}
END_TEST

START_TEST(ptx_module_is_jit_compiled)
{
	cua_client *c = connect_to(&D);
	cua_module m;
	char ptx[512];
	snprintf(ptx, sizeof(ptx), "%s/tests/kernels/test_kernels.ptx", builddir());
	if (access(ptx, R_OK) != 0) {
		printf("no %s (built without nvcc): skipped\n", ptx);
		cua_disconnect(c);
		return;
	}
	CK(cua_module_load_file(c, 0, ptx, &m));
	cua_function fill = get_fn(c, m, "fill_u32");
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 1024, &p));
	cua_launch *l = launch_1d(c, fill, 1, 256);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, 0xc0ffee);
	cua_launch_push_u64(l, 256);
	launch_and_wait(l);
	uint32_t v[256];
	CK(cua_memcpy_dtoh(c, v, p, sizeof(v)));
	for (int i = 0; i < 256; i++)
		ck_assert_uint_eq(v[i], 0xc0ffee);
	/* a broken PTX image is refused with the JIT log */
	static const char broken[] = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus; }\n";
	ck_assert_int_eq(cua_module_load(c, 0, broken, sizeof(broken) - 1, &m), CUA_EMODULE);
	printf("broken PTX refused: %.200s\n", cua_last_error());
	cua_disconnect(c);
}
END_TEST

START_TEST(every_device_gets_a_worker)
{
	cua_client *c = connect_to(&D);
	int n;
	CK(cua_device_count(c, &n));
	printf("%d device(s)\n", n);
	cua_daemon_status st;
	CK(cua_status(c, &st));
	ck_assert_uint_eq(st.ndevices, (uint32_t)n);
	for (int d = 0; d < n; d++) {
		cua_device_info info;
		CK(cua_device_get_info(c, d, &info));
		printf("device %d: %s sm_%d%d\n", d, info.name, info.sm_major, info.sm_minor);
		cua_module m;
		char fatbin[512];
		snprintf(fatbin, sizeof(fatbin), "%s/tests/kernels/test_kernels.fatbin", builddir());
		CK(cua_module_load_file(c, d, fatbin, &m));
		cua_function fill = get_fn(c, m, "fill_u32");
		cua_deviceptr p;
		CK(cua_mem_alloc(c, d, 4096, &p));
		cua_launch *l = launch_1d(c, fill, 4, 256);
		cua_launch_push_device_ptr(l, p);
		cua_launch_push_u32(l, (uint32_t)d + 100);
		cua_launch_push_u64(l, 1024);
		launch_and_wait(l);
		uint32_t v[1024];
		CK(cua_memcpy_dtoh(c, v, p, sizeof(v)));
		ck_assert_uint_eq(v[1023], (uint32_t)d + 100);
	}
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ issue 13: globals, big parameters, attributes */

START_TEST(constant_array_filled_through_get_global)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_features(c, NULL);
	cua_deviceptr g, out;
	size_t bytes = 0;
	CK(cua_module_get_global(c, m, "const_data", &g, &bytes));
	ck_assert_uint_eq(bytes, 1024); /* __constant__ uint32_t const_data[256] */
	uint32_t host[256], got[256];
	for (uint32_t i = 0; i < 256; i++)
		host[i] = i * 40503u + 3;
	CK(cua_memcpy_htod(c, g, host, sizeof(host)));
	CK(cua_mem_alloc(c, 0, sizeof(got), &out));
	cua_launch *l = launch_1d(c, get_fn(c, m, "const_copy"), 2, 128);
	cua_launch_push_device_ptr(l, out);
	cua_launch_push_u64(l, 256);
	launch_and_wait(l);
	CK(cua_memcpy_dtoh(c, got, out, sizeof(got)));
	ck_assert_mem_eq(got, host, sizeof(host));
	cua_disconnect(c);
}
END_TEST

START_TEST(struct_parameter_of_32000_bytes)
{
	cua_client *c = connect_to(&D);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_uint_eq(info.max_param_bytes, 32764);
	static uint32_t s[8000], got[8000];
	for (uint32_t i = 0; i < 8000; i++)
		s[i] = i * 2246822519u;
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, sizeof(got), &out));
	cua_launch *l = launch_1d(c, get_fn(c, load_features(c, NULL), "big_param_copy"), 8, 256);
	CK(cua_launch_push_device_ptr(l, out));
	CK(cua_launch_push_arg(l, s, sizeof(s)));
	launch_and_wait(l);
	CK(cua_memcpy_dtoh(c, got, out, sizeof(got)));
	ck_assert_mem_eq(got, s, sizeof(s));
	cua_disconnect(c);
}
END_TEST

START_TEST(dynamic_shared_64k_after_set_attribute)
{
	enum { N = 16384 }; /* words: 64 KiB */
	cua_client *c = connect_to(&D);
	cua_function f = get_fn(c, load_features(c, NULL), "dyn_shared_copy");
	static uint32_t in[N], got[N];
	for (uint32_t i = 0; i < N; i++)
		in[i] = i ^ 0x5a5a5a5au;
	cua_deviceptr din, dout;
	CK(cua_mem_alloc(c, 0, sizeof(in), &din));
	CK(cua_mem_alloc(c, 0, sizeof(in), &dout));
	CK(cua_memcpy_htod(c, din, in, sizeof(in)));
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, N * 4));
		cua_launch *l = cua_launch_new(c, f);
		cua_launch_set_config(l, (cua_launch_config){{1, 1, 1}, {1024, 1, 1}, N * 4});
		cua_launch_push_device_ptr(l, dout);
		cua_launch_push_device_ptr(l, din);
		cua_launch_push_u64(l, N);
		cua_future *fu;
		CK(cua_launch_submit(l, &fu));
		int st = cua_future_wait(fu, -1);
		ck_assert_msg(pass == 1 ? st == CUA_OK : st == CUA_EBAD_ARGUMENT, "pass %d: %s: %s", pass,
			      cua_strerror_name(st), cua_future_error(fu));
		cua_future_free(fu);
	}
	CK(cua_memcpy_dtoh(c, got, dout, sizeof(got)));
	for (uint32_t i = 0; i < N; i++)
		ck_assert_uint_eq(got[i], in[N - 1 - i]);
	cua_disconnect(c);
}
END_TEST

START_TEST(num_regs_attribute_is_positive)
{
	cua_client *c = connect_to(&D);
	cua_function f = get_fn(c, load_features(c, NULL), "copy_u32");
	int regs = 0, blocks = 0;
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_NUM_REGS, &regs));
	ck_assert_int_gt(regs, 0);
	CK(cua_occupancy_max_active_blocks(c, f, 256, 0, &blocks));
	ck_assert_int_gt(blocks, 0);
	cua_disconnect(c);
}
END_TEST

/* automake's exit status for a test that was skipped (SKIP, not PASS or FAIL) */
#define EXIT_SKIP 77

static Suite *
gpu_suite(void)
{
	Suite *s = suite_create("gpu");
	TCase *tc = tcase_create("gpu");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, ptx_module_is_jit_compiled);
	tcase_add_test(tc, axpy_2_24_matches_host_exactly);
	tcase_add_test(tc, pdl_chain_of_1000_counts_1000);
	tcase_add_test(tc, fault_recovery_is_fast);
	tcase_add_test(tc, four_sessions_overlap);
	tcase_add_test(tc, every_device_gets_a_worker);
	tcase_add_test(tc, constant_array_filled_through_get_global);
	tcase_add_test(tc, struct_parameter_of_32000_bytes);
	tcase_add_test(tc, dynamic_shared_64k_after_set_attribute);
	tcase_add_test(tc, num_regs_attribute_is_positive);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	/* The harness starts the daemon with --backend test_backend(), and test_requests asserts that the device
	 * reports that backend: anything but cuda is the emulated device, where no case here means anything. */
	if (strcmp(test_backend(), "cuda") != 0) {
		printf("Skipped suite gpu: every case needs the GPU (backend %s; tests/gpu/run.sh runs them with "
		       "CUA_TEST_BACKEND=cuda)\n",
		       test_backend());
		return EXIT_SKIP;
	}
	SRunner *sr = srunner_create(gpu_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
