/* NVIDIA's cuda-samples through cuasyncd, unmodified (issue 13): the kernels of convolutionSeparable,
 * LargeKernelParameter, cudaTensorCoreGemm and reductionMultiBlockCG, byte-identical copies under
 * tests/kernels/samples/ compiled to fatbins by the build, are loaded through the daemon and launched through
 * libcuasync the way the samples' host code launches them through the runtime (constant memory through
 * cua_module_get_global, a 32000-byte struct by value, 64 KiB of dynamic shared memory after
 * cua_func_set_attribute, a cooperative launch); the results are checked against CPU references with the
 * tolerance each sample uses. cuda-samples has no cluster kernel, so the cluster case runs ours
 * (tests/kernels/cluster_histogram.cu). Only the GPU runs them: on the emulated device the program exits 77 (SKIP),
 * like test_gpu; tests/gpu/run.sh runs it with CUA_TEST_BACKEND=cuda. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* tests/kernels/<name>.fatbin from the build. */
static cua_module
load_fatbin(cua_client *c, const char *name)
{
	cua_module m;
	char path[512];
	snprintf(path, sizeof(path), "%s/tests/kernels/%s.fatbin", builddir(), name);
	CK(cua_module_load_file(c, 0, path, &m));
	return m;
}

static cua_launch *
launch_2d(cua_client *c, cua_function f, unsigned gx, unsigned gy, unsigned bx, unsigned by, unsigned smem)
{
	cua_launch *l = cua_launch_new(c, f);
	ck_assert_ptr_nonnull(l);
	CK(cua_launch_set_config(l, (cua_launch_config){{gx, gy, 1}, {bx, by, 1}, smem}));
	return l;
}

static cua_deviceptr
alloc_copy(cua_client *c, const void *host, size_t bytes)
{
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, bytes, &p));
	if (host)
		CK(cua_memcpy_htod(c, p, host, bytes));
	return p;
}

/* ------------------------------------------------------------------ convolutionSeparable: __constant__ c_Kernel */

/* convolutionSeparable_common.h and convolutionSeparable.cu */
#define KERNEL_RADIUS 8
#define KERNEL_LENGTH (2 * KERNEL_RADIUS + 1)
#define ROWS_BLOCKDIM_X 16
#define ROWS_BLOCKDIM_Y 4
#define ROWS_RESULT_STEPS 8
#define COLUMNS_BLOCKDIM_X 16
#define COLUMNS_BLOCKDIM_Y 8
#define COLUMNS_RESULT_STEPS 8
#define IMAGE_W 3072 /* main.cpp's image */
#define IMAGE_H 3072

/* convolutionSeparable_gold.cpp: rows (dx = 1, dy = 0) or columns (dx = 0, dy = 1), zero outside the image. */
static void
convolution_cpu(float *dst, const float *src, const float *kernel, int dx, int dy)
{
	for (int y = 0; y < IMAGE_H; y++)
		for (int x = 0; x < IMAGE_W; x++) {
			float sum = 0;
			for (int k = -KERNEL_RADIUS; k <= KERNEL_RADIUS; k++) {
				int sx = x + k * dx, sy = y + k * dy;
				if (sx >= 0 && sx < IMAGE_W && sy >= 0 && sy < IMAGE_H)
					sum += src[sy * IMAGE_W + sx] * kernel[KERNEL_RADIUS - k];
			}
			dst[y * IMAGE_W + x] = sum;
		}
}

/* main.cpp's check: the relative L2 norm of the difference. */
static double
relative_l2(const float *got, const float *want, size_t n)
{
	double sum = 0, delta = 0;
	for (size_t i = 0; i < n; i++) {
		delta += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
		sum += (double)want[i] * want[i];
	}
	return sqrt(delta / sum);
}

/* convolutionRowsGPU / convolutionColumnsGPU: the kernel (mangled: it is not extern "C") with the samples' grid,
 * arguments (d_Dst, d_Src, imageW, imageH, pitch = imageW). */
static void
convolution_launch(cua_client *c, cua_function f, bool rows, cua_deviceptr dst, cua_deviceptr src)
{
	cua_launch *l;
	if (rows)
		l = launch_2d(c, f, IMAGE_W / (ROWS_RESULT_STEPS * ROWS_BLOCKDIM_X), IMAGE_H / ROWS_BLOCKDIM_Y,
			      ROWS_BLOCKDIM_X, ROWS_BLOCKDIM_Y, 0);
	else
		l = launch_2d(c, f, IMAGE_W / COLUMNS_BLOCKDIM_X, IMAGE_H / (COLUMNS_RESULT_STEPS * COLUMNS_BLOCKDIM_Y),
			      COLUMNS_BLOCKDIM_X, COLUMNS_BLOCKDIM_Y, 0);
	CK(cua_launch_push_device_ptr(l, dst));
	CK(cua_launch_push_device_ptr(l, src));
	CK(cua_launch_push_i32(l, IMAGE_W));
	CK(cua_launch_push_i32(l, IMAGE_H));
	CK(cua_launch_push_i32(l, IMAGE_W));
	launch_and_wait(l);
}

START_TEST(convolution_separable_reads_c_kernel_set_through_get_global)
{
	const size_t n = (size_t)IMAGE_W * IMAGE_H, bytes = n * sizeof(float);
	cua_client *c = connect_to(&D);
	cua_module m = load_fatbin(c, "samples/convolutionSeparable");
	float kernel[KERNEL_LENGTH];
	float *in = malloc(bytes), *buf = malloc(bytes), *out = malloc(bytes), *got = malloc(bytes);
	ck_assert(in && buf && out && got);
	unsigned seed = 200; /* main.cpp: srand(200), values rand() % 16 */
	for (int i = 0; i < KERNEL_LENGTH; i++)
		kernel[i] = (float)(rand_r(&seed) % 16);
	for (size_t i = 0; i < n; i++)
		in[i] = (float)(rand_r(&seed) % 16);

	cua_deviceptr g;
	size_t gbytes = 0;
	CK(cua_module_get_global(c, m, "c_Kernel", &g, &gbytes)); /* setConvolutionKernel's cudaMemcpyToSymbol */
	ck_assert_uint_eq(gbytes, sizeof(kernel));
	CK(cua_memcpy_htod(c, g, kernel, sizeof(kernel)));
	cua_deviceptr din = alloc_copy(c, in, bytes);
	cua_deviceptr dbuf = alloc_copy(c, NULL, bytes), dout = alloc_copy(c, NULL, bytes);
	convolution_launch(c, get_fn(c, m, "_Z21convolutionRowsKernelPfS_iii"), true, dbuf, din);
	convolution_launch(c, get_fn(c, m, "_Z24convolutionColumnsKernelPfS_iii"), false, dout, dbuf);

	convolution_cpu(buf, in, kernel, 1, 0);
	convolution_cpu(out, buf, kernel, 0, 1);
	CK(cua_memcpy_dtoh(c, got, dbuf, bytes));
	double l2 = relative_l2(got, buf, n);
	ck_assert_msg(l2 <= 1e-6, "rows: relative L2 norm %g > 1e-6", l2);
	CK(cua_memcpy_dtoh(c, got, dout, bytes));
	l2 = relative_l2(got, out, n);
	ck_assert_msg(l2 <= 1e-6, "rows then columns: relative L2 norm %g > 1e-6", l2);
	free(in);
	free(buf);
	free(out);
	free(got);
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ LargeKernelParameter: 32000 bytes by value */

#define TOTAL_PARAMS 8000 /* LargeKernelParameter.cu */
#define KERNEL_PARAM_LIMIT 1024
#define CONST_COPIED_PARAMS (TOTAL_PARAMS - KERNEL_PARAM_LIMIT)

/* Launches f<<<1, 1>>>(struct of param_bytes, d_result) on a zeroed result and returns what it wrote. */
static int
large_param_run(cua_client *c, cua_function f, const int32_t *param, size_t param_bytes, cua_deviceptr result)
{
	CK(cua_memset(c, result, 0, 4, 1));
	cua_launch *l = launch_1d(c, f, 1, 1);
	CK(cua_launch_push_arg(l, param, param_bytes));
	CK(cua_launch_push_device_ptr(l, result));
	launch_and_wait(l);
	int32_t got;
	CK(cua_memcpy_dtoh(c, &got, result, sizeof(got)));
	return got;
}

START_TEST(large_kernel_parameter_both_kernels)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_fatbin(c, "samples/LargeKernelParameter");
	static int32_t p[TOTAL_PARAMS]; /* p_large; its first KERNEL_PARAM_LIMIT are p, the rest excess_params */
	int32_t expected = 0;
	for (int i = 0; i < TOTAL_PARAMS; i++) {
		p[i] = i & 0xFF;
		expected += i & 0xFF;
	}
	cua_deviceptr excess, result = alloc_copy(c, NULL, 4);
	size_t bytes = 0;
	CK(cua_module_get_global(c, m, "excess_params", &excess, &bytes));
	ck_assert_uint_eq(bytes, CONST_COPIED_PARAMS * 4);
	CK(cua_memcpy_htod(c, excess, p + KERNEL_PARAM_LIMIT, bytes));

	/* kernelDefault(__grid_constant__ const param_t p, int *result): 4096 + 8 bytes of parameters */
	int got = large_param_run(c, get_fn(c, m, "_Z13kernelDefault7param_tPi"), p, KERNEL_PARAM_LIMIT * 4, result);
	ck_assert_int_eq(got, expected);
	/* kernelLargeParam(__grid_constant__ const param_large_t p, int *result): 32000 + 8 bytes */
	got = large_param_run(c, get_fn(c, m, "_Z16kernelLargeParam13param_large_tPi"), p, sizeof(p), result);
	ck_assert_int_eq(got, expected);
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ cudaTensorCoreGemm: 64 KiB dynamic shared */

#define GEMM_N 4096      /* M_GLOBAL = N_GLOBAL = K_GLOBAL: 16 × 256 tiles */
#define GEMM_THREADS 256 /* THREADS_PER_BLOCK */
#define GEMM_SHMEM 65536 /* SHMEM_SZ with SHARED_MEMORY_LIMIT_64K: MAX(40960, 65536) */
#define GEMM_STRIDE 997  /* the CPU checks every 997th element of D: about 16 in each 128 × 128 tile */

struct gemm {
	uint8_t *a, *b; /* A (M × K row-major) and B (N × K: column-major K × N) as the sample fills them */
	float *c, *d;
	cua_deviceptr da, db, dc, dd;
};

/* init_host_matrices: rand() % 3 each; A and B go to the device as half (0, 1, 2 are exact). */
static void
gemm_setup(cua_client *c, struct gemm *g)
{
	const size_t nn = (size_t)GEMM_N * GEMM_N;
	static const uint16_t half_of[3] = {0x0000, 0x3c00, 0x4000};
	uint16_t *h = malloc(nn * 2);
	g->a = malloc(nn), g->b = malloc(nn), g->c = malloc(nn * 4), g->d = malloc(nn * 4);
	ck_assert(h && g->a && g->b && g->c && g->d);
	unsigned seed = 1;
	for (size_t i = 0; i < nn; i++)
		g->a[i] = (uint8_t)(rand_r(&seed) % 3);
	for (size_t i = 0; i < nn; i++)
		g->b[i] = (uint8_t)(rand_r(&seed) % 3);
	for (size_t i = 0; i < nn; i++)
		g->c[i] = (float)(rand_r(&seed) % 3);
	for (size_t i = 0; i < nn; i++)
		h[i] = half_of[g->a[i]];
	g->da = alloc_copy(c, h, nn * 2);
	for (size_t i = 0; i < nn; i++)
		h[i] = half_of[g->b[i]];
	g->db = alloc_copy(c, h, nn * 2);
	g->dc = alloc_copy(c, g->c, nn * 4);
	g->dd = alloc_copy(c, NULL, nn * 4);
	CK(cua_memset(c, g->dd, 0xffffffffu, 4, nn)); /* NaN: every element must be written */
	free(h);
}

/* compute_gemm<<<multiProcessorCount, THREADS_PER_BLOCK, SHMEM_SZ>>>(A, B, C, D, alpha, beta); the status. */
static int
gemm_launch(cua_client *c, cua_function f, const struct gemm *g, unsigned sms, char *err, size_t errlen)
{
	cua_launch *l = launch_2d(c, f, sms, 1, GEMM_THREADS, 1, GEMM_SHMEM);
	CK(cua_launch_push_device_ptr(l, g->da));
	CK(cua_launch_push_device_ptr(l, g->db));
	CK(cua_launch_push_device_ptr(l, g->dc));
	CK(cua_launch_push_device_ptr(l, g->dd));
	CK(cua_launch_push_f32(l, 1.1f));
	CK(cua_launch_push_f32(l, 1.2f));
	cua_future *fu;
	CK(cua_launch_submit(l, &fu));
	int st = cua_future_wait(fu, -1);
	snprintf(err, errlen, "%s", st == CUA_OK ? "" : cua_future_error(fu));
	cua_future_free(fu);
	return st;
}

/* matMultiplyOnHost for element (i, j), and the sample's CPU_DEBUG check: |D - host| <= 0.1. */
static size_t
gemm_check(const struct gemm *g)
{
	size_t bad = 0;
	for (size_t e = 0; e < (size_t)GEMM_N * GEMM_N; e++) {
		if (isnan(g->d[e])) {
			bad++;
			continue;
		}
		if (e % GEMM_STRIDE != 0)
			continue;
		size_t i = e / GEMM_N, j = e % GEMM_N;
		float temp = 0;
		for (size_t k = 0; k < GEMM_N; k++)
			temp += (float)g->a[i * GEMM_N + k] * (float)g->b[j * GEMM_N + k];
		float want = temp * 1.1f + 1.2f * g->c[e];
		if (fabsf(g->d[e] - want) > 0.1f && bad++ < 5)
			fprintf(stderr, "mismatch i=%zu j=%zu D=%f host=%f\n", i, j, g->d[e], want);
	}
	return bad;
}

START_TEST(tensor_core_gemm_with_64k_dynamic_shared_after_set_attribute)
{
	cua_client *c = connect_to(&D);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_uint_ge(info.max_shared_optin, GEMM_SHMEM);
	/* compute_gemm(const half *A, const half *B, const float *C, float *D, float alpha, float beta) */
	cua_function f = get_fn(c, load_fatbin(c, "samples/cudaTensorCoreGemm"), "_Z12compute_gemmPK6__halfS1_PKfPfff");
	struct gemm g;
	gemm_setup(c, &g);
	char err[512];
	/* without the sample's cudaFuncSetAttribute the launch is refused: 64 KiB is past the default 48 */
	int st = gemm_launch(c, f, &g, (unsigned)info.multiprocessors, err, sizeof(err));
	ck_assert_msg(st == CUA_EBAD_ARGUMENT, "before set_attribute: %s: %s", cua_strerror_name(st), err);
	CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, GEMM_SHMEM));
	st = gemm_launch(c, f, &g, (unsigned)info.multiprocessors, err, sizeof(err));
	ck_assert_msg(st == CUA_OK, "compute_gemm: %s: %s", cua_strerror_name(st), err);
	CK(cua_memcpy_dtoh(c, g.d, g.dd, (size_t)GEMM_N * GEMM_N * 4));
	size_t bad = gemm_check(&g);
	ck_assert_msg(bad == 0, "%zu elements of D unwritten or off by more than 0.1", bad);
	free(g.a);
	free(g.b);
	free(g.c);
	free(g.d);
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ reductionMultiBlockCG: cooperative launch */

#define REDUCE_SIZE (1u << 25) /* runTest's default */

/* reduceCPU: Kahan summation in float. */
static float
reduce_cpu(const float *data, size_t n)
{
	float sum = data[0], comp = 0;
	for (size_t i = 1; i < n; i++) {
		float y = data[i] - comp, t = sum + y;
		comp = (t - sum) - y;
		sum = t;
	}
	return sum;
}

/* getNumBlocksAndThreads and runTest's occupancy cap. The sample takes threads from
 * cudaOccupancyMaxPotentialBlockSize; any multiple of 32 is valid for the kernel, so this takes the kernel's
 * limit (at most 1024). Blocks: multiprocessors × (2048 / 1024) (sm_90's maxThreadsPerMultiProcessor /
 * maxThreadsPerBlock), capped at what is co-resident with threads × sizeof(double) of dynamic shared memory. */
static void
reduce_shape(cua_client *c, cua_function f, unsigned *blocks, unsigned *threads)
{
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_int_eq(info.cooperative_launch, 1);
	int max_threads = 0, per_sm = 0;
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &max_threads));
	*threads = (unsigned)(max_threads < 1024 ? max_threads : 1024) & ~31u;
	ck_assert_uint_ge(*threads, 32);
	CK(cua_occupancy_max_active_blocks(c, f, *threads, *threads * sizeof(double), &per_sm));
	ck_assert_int_gt(per_sm, 0);
	*blocks = (unsigned)info.multiprocessors * 2;
	if (*blocks > (unsigned)(per_sm * info.multiprocessors))
		*blocks = (unsigned)(per_sm * info.multiprocessors);
}

START_TEST(reduction_multi_block_cg_syncs_the_grid_under_a_cooperative_launch)
{
	cua_client *c = connect_to(&D);
	/* extern "C" reduceSinglePassMultiBlockCG(const float *g_idata, float *g_odata, unsigned int n) */
	cua_function f = get_fn(c, load_fatbin(c, "samples/reductionMultiBlockCG"), "reduceSinglePassMultiBlockCG");
	unsigned blocks, threads;
	reduce_shape(c, f, &blocks, &threads);
	float *in = malloc((size_t)REDUCE_SIZE * 4);
	ck_assert_ptr_nonnull(in);
	unsigned seed = 1;
	for (size_t i = 0; i < REDUCE_SIZE; i++)
		in[i] = (float)(rand_r(&seed) & 0xFF) / (float)RAND_MAX; /* small: no truncation in the sum */
	cua_deviceptr din = alloc_copy(c, in, (size_t)REDUCE_SIZE * 4);
	cua_deviceptr dout = alloc_copy(c, in, (size_t)blocks * 4); /* runTest fills d_odata from h_idata too */

	cua_launch *l = launch_2d(c, f, blocks, 1, threads, 1, threads * (unsigned)sizeof(double));
	CK(cua_launch_cooperative(l, true)); /* call_reduceSinglePassMultiBlockCG: cudaLaunchCooperativeKernel */
	CK(cua_launch_push_device_ptr(l, din));
	CK(cua_launch_push_device_ptr(l, dout));
	CK(cua_launch_push_u32(l, REDUCE_SIZE));
	launch_and_wait(l);
	float gpu = 0;
	CK(cua_memcpy_dtoh(c, &gpu, dout, sizeof(gpu)));
	float cpu = reduce_cpu(in, REDUCE_SIZE);
	double threshold = 1e-8 * REDUCE_SIZE, diff = fabs((double)gpu - (double)cpu);
	ck_assert_msg(diff < threshold, "%u blocks of %u threads: GPU %.12f, CPU %.12f, |diff| %g >= %g", blocks,
		      threads, gpu, cpu, diff, threshold);
	/* the sample's threshold is 17% of this sum (about 2.0): a grid that lost a few blocks' partials would pass
	 * it. The kernel sums in double and the CPU compensates, so they agree to float precision. */
	ck_assert_msg(diff <= 1e-5 * fabs((double)cpu), "GPU %.12f, CPU %.12f: |diff| %g > 1e-5 relative", gpu, cpu,
		      diff);
	free(in);
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ clusters (ours: cuda-samples has none) */

#define HIST_CLUSTER 4
#define HIST_BINS_PER_BLOCK 2048 /* 8 KiB of shared memory per block */
#define HIST_BINS (HIST_CLUSTER * HIST_BINS_PER_BLOCK)
#define HIST_N (1u << 22)

START_TEST(cluster_histogram_over_distributed_shared_memory)
{
	cua_client *c = connect_to(&D);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_int_eq(info.cluster_launch, 1);
	cua_function f = get_fn(c, load_fatbin(c, "cluster_histogram"), "cluster_histogram");
	int32_t *in = malloc(HIST_N * 4);
	static int32_t want[HIST_BINS], got[HIST_BINS];
	ck_assert_ptr_nonnull(in);
	unsigned seed = 7;
	memset(want, 0, sizeof(want));
	for (size_t i = 0; i < HIST_N; i++) { /* some below 0 and past the last bin: clamped */
		in[i] = rand_r(&seed) % (HIST_BINS + 200) - 100;
		want[in[i] < 0 ? 0 : in[i] >= HIST_BINS ? HIST_BINS - 1 : in[i]]++;
	}
	cua_deviceptr din = alloc_copy(c, in, HIST_N * 4), dbins = alloc_copy(c, NULL, sizeof(got));
	cua_deviceptr dsize = alloc_copy(c, NULL, 4);
	CK(cua_memset(c, dbins, 0, 4, HIST_BINS));
	CK(cua_memset(c, dsize, 0, 4, 1));
	/* cluster_histogram(int *bins, int nbins, int bins_per_block, const int *input, size_t n, unsigned *size) */
	cua_launch *l = launch_2d(c, f, 33 * HIST_CLUSTER, 1, 256, 1, HIST_BINS_PER_BLOCK * 4);
	CK(cua_launch_set_cluster_dims(l, HIST_CLUSTER, 1, 1));
	CK(cua_launch_push_device_ptr(l, dbins));
	CK(cua_launch_push_i32(l, HIST_BINS));
	CK(cua_launch_push_i32(l, HIST_BINS_PER_BLOCK));
	CK(cua_launch_push_device_ptr(l, din));
	CK(cua_launch_push_u64(l, HIST_N));
	CK(cua_launch_push_device_ptr(l, dsize));
	launch_and_wait(l);
	uint32_t size = 0;
	CK(cua_memcpy_dtoh(c, &size, dsize, 4));
	ck_assert_uint_eq(size, HIST_CLUSTER);
	CK(cua_memcpy_dtoh(c, got, dbins, sizeof(got)));
	for (int b = 0; b < HIST_BINS; b++)
		ck_assert_msg(got[b] == want[b], "bin %d: %d, the CPU counts %d", b, got[b], want[b]);
	free(in);
	cua_disconnect(c);
}
END_TEST

/* automake's exit status for a test that was skipped */
#define EXIT_SKIP 77

static Suite *
samples_suite(void)
{
	Suite *s = suite_create("samples");
	TCase *tc = tcase_create("samples");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, convolution_separable_reads_c_kernel_set_through_get_global);
	tcase_add_test(tc, large_kernel_parameter_both_kernels);
	tcase_add_test(tc, tensor_core_gemm_with_64k_dynamic_shared_after_set_attribute);
	tcase_add_test(tc, reduction_multi_block_cg_syncs_the_grid_under_a_cooperative_launch);
	tcase_add_test(tc, cluster_histogram_over_distributed_shared_memory);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	if (strcmp(test_backend(), "cuda") != 0) {
		printf("Skipped suite samples: the kernels of NVIDIA's cuda-samples need the GPU (backend %s; "
		       "tests/gpu/run.sh runs them with CUA_TEST_BACKEND=cuda)\n",
		       test_backend());
		return EXIT_SKIP;
	}
	SRunner *sr = srunner_create(samples_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
