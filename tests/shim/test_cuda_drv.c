/*
 * test_cuda_drv.c — libcuasync-cuda (shim/cuda, the driver API as libcuda.so.1) against the real daemon on the
 * emulated device. The program is written against cuda.h and linked with -lcuda resolved to the shim, as an
 * existing driver-API program would be. Each case runs in its own process (Check's fork mode), so each gets
 * the shim's one lazily connected session afresh; up() points $CUASYNC_URL at the case's daemon.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct daemon D;

static const char image[] = "cuasync-emu-module\nfill_u32\nspin\nbad_write\nconst_copy\nglobal const_data 1024\n";

#define CU(call)                                                                                                       \
	do {                                                                                                           \
		CUresult r_ = (call);                                                                                  \
		const char *n_ = NULL;                                                                                 \
		cuGetErrorName(r_, &n_);                                                                               \
		ck_assert_msg(r_ == CUDA_SUCCESS, "%s: %d %s", #call, (int)r_, n_ ? n_ : "?");                         \
	} while (0)
#define CU_IS(want, call) ck_assert_int_eq((int)(call), (int)(want))

static void
up(void)
{
	daemon_start(&D, NULL);
	setenv("CUASYNC_URL", D.url, 1);
}

static void
down(void)
{
	daemon_stop(&D);
}

/* cuInit, the primary context of device 0 made current, and the test image loaded. */
static CUmodule
setup(void)
{
	CUcontext ctx;
	CUmodule m;
	CU(cuInit(0));
	CU(cuDevicePrimaryCtxRetain(&ctx, 0));
	CU(cuCtxSetCurrent(ctx));
	CU(cuModuleLoadData(&m, image));
	return m;
}

static void
expect_u32(CUdeviceptr p, uint32_t want, size_t n)
{
	uint32_t *v = calloc(n, sizeof(*v));
	ck_assert_ptr_nonnull(v);
	CU(cuMemcpyDtoH(v, p, n * 4));
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(v[i] == want, "[%zu] = 0x%x, want 0x%x", i, v[i], want);
	free(v);
}

START_TEST(init_and_devices)
{
	int n = -1, v = 0, a = 0;
	CUdevice dev;
	char name[300];
	size_t total = 0;
	CUuuid u1, u2;

	CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
	CU(cuDriverGetVersion(&v));
	ck_assert_int_eq(v, CUDA_VERSION);
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuInit(1));
	CU(cuInit(0));
	CU(cuInit(0)); /* again: the same session */
	CU(cuDeviceGetCount(&n));
	ck_assert_int_ge(n, 1);
	CU(cuDeviceGet(&dev, 0));
	ck_assert_int_eq(dev, 0);
	CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, n));
	CU(cuDeviceGetName(name, sizeof(name), 0));
	ck_assert_int_gt(strlen(name), 0);
	CU(cuDeviceTotalMem(&total, 0));
	ck_assert_uint_gt(total, 0);
	CU(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	ck_assert_int_gt(a, 0);
	CU(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
	ck_assert_int_ge(a, 1);
	/* the device's own attributes, as the daemon reports them (the emulated device: PROTOCOL.md) */
	CU(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_MAX_PITCH, 0));
	ck_assert_int_eq(a, 2147483647);
	CU(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0));
	ck_assert_int_eq(a, 1000000);
	/* features a session does not offer read 0 whatever the device says (it reports 1) */
	CU(cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 0));
	ck_assert_int_eq(a, 0);
	/* an attribute the daemon does not report is refused, not guessed; one CUDA does not know is invalid */
	CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, 0));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_MAX, 0));
	CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 7));
	CU(cuDeviceGetUuid(&u1, 0));
	CU(cuDeviceGetUuid(&u2, 0));
	ck_assert_mem_eq(u1.bytes, u2.bytes, sizeof(u1.bytes));
}
END_TEST

START_TEST(contexts)
{
	CUcontext prim, cur, made, popped;
	CUdeviceptr p;
	CUdevice dev = -1;

	CU(cuInit(0));
	CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&p, 16)); /* no current context yet */
	CU(cuCtxGetCurrent(&cur));
	ck_assert_ptr_null(cur);
	CU(cuDevicePrimaryCtxRetain(&prim, 0));
	CU(cuCtxSetCurrent(prim));
	CU(cuCtxGetCurrent(&cur));
	ck_assert_ptr_eq(cur, prim);
	CU(cuCtxCreate(&made, NULL, 0, 0));
	CU(cuCtxGetCurrent(&cur));
	ck_assert_ptr_eq(cur, made);
	CU(cuCtxGetDevice(&dev));
	ck_assert_int_eq(dev, 0);
	CU(cuCtxPopCurrent(&popped));
	ck_assert_ptr_eq(popped, made);
	CU(cuCtxGetCurrent(&cur));
	ck_assert_ptr_eq(cur, prim);
	CU(cuCtxPushCurrent(made));
	CU(cuMemAlloc(&p, 64));
	CU(cuCtxDestroy(made)); /* pops it: the primary is current again */
	CU(cuCtxGetCurrent(&cur));
	ck_assert_ptr_eq(cur, prim);
	CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy(made));
	CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuCtxSetCurrent((CUcontext)(uintptr_t)0xdead0));
	CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuCtxPushCurrent((CUcontext)(uintptr_t)0x12345678));
	CU(cuMemFree(p)); /* memory belongs to the session, not to the destroyed context */
	CU(cuDevicePrimaryCtxRelease(0));
	CU(cuCtxSynchronize());
}
END_TEST

/* fill_u32(uint32_t *p, uint32_t v, uint64_t n) through kernelParams, through extra, and the refusals. */
START_TEST(launches)
{
	CUmodule m = setup();
	CUfunction fill, missing;
	CUdeviceptr p;
	const size_t n = 1000;

	CU(cuModuleGetFunction(&fill, m, "fill_u32"));
	CU_IS(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&missing, m, "no_such_kernel"));
	CU(cuMemAlloc(&p, n * 4));

	uint32_t v = 0xabcd1234u;
	uint64_t count = n;
	void *params[] = {&p, &v, &count};
	CU(cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
	expect_u32(p, 0xabcd1234u, n);

	struct {
		uint64_t p;
		uint32_t v, pad;
		uint64_t n;
	} buf = {p, 0x600dcafeu, 0, n};
	size_t size = sizeof(buf);
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
	CU(cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, NULL, NULL, extra));
	expect_u32(p, 0x600dcafeu, n);

	size_t small = 12;
	void *short_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &small,
			       CU_LAUNCH_PARAM_END};
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, short_extra));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, extra));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(fill, 0, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
	CU_IS(CUDA_ERROR_INVALID_HANDLE,
	      cuLaunchKernel((CUfunction)(uintptr_t)0xbad0, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
	CU_IS(CUDA_ERROR_INVALID_HANDLE,
	      cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, (CUstream)(uintptr_t)0xbad0, params, NULL));

	v = 7;
	CUlaunchConfig cfg = {2, 1, 1, 512, 1, 1, 0, NULL, NULL, 0};
	CU(cuLaunchKernelEx(&cfg, fill, params, NULL));
	expect_u32(p, 7, n);
	CUlaunchAttribute odd = {.id = CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW};
	cfg.attrs = &odd;
	cfg.numAttrs = 1;
	CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuLaunchKernelEx(&cfg, fill, params, NULL));

	int attr = 0, blocks = 0;
	CU(cuFuncGetAttribute(&attr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fill));
	ck_assert_int_gt(attr, 0);
	CU(cuFuncSetAttribute(fill, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024));
	CU(cuFuncSetCacheConfig(fill, CU_FUNC_CACHE_PREFER_L1));
	CU(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fill, 256, 0));
	ck_assert_int_gt(blocks, 0);

	CUdeviceptr g;
	size_t gbytes = 0;
	CU(cuModuleGetGlobal(&g, &gbytes, m, "const_data"));
	ck_assert_uint_eq(gbytes, 1024);
	CU_IS(CUDA_ERROR_NOT_FOUND, cuModuleGetGlobal(&g, &gbytes, m, "no_such_global"));

	CU(cuCtxSynchronize());
	CU(cuModuleUnload(m));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(m));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&missing, m, "fill_u32"));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
	CU(cuMemFree(p));
}
END_TEST

START_TEST(module_from_file)
{
	CUcontext ctx;
	CUmodule m;
	CUfunction f;
	char path[] = "/tmp/cuasync-drv-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, image, strlen(image)), (int)strlen(image));
	close(fd);
	CU(cuInit(0));
	CU(cuDevicePrimaryCtxRetain(&ctx, 0));
	CU(cuCtxSetCurrent(ctx));
	CU(cuModuleLoad(&m, path));
	CU(cuModuleGetFunction(&f, m, "spin"));
	CU(cuModuleUnload(m));
	unlink(path);
	CU_IS(CUDA_ERROR_FILE_NOT_FOUND, cuModuleLoad(&m, path));
	static const char bad[] = "cuasync-emu-module\nno_such_builtin\n";
	CU_IS(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, bad));
	char log[256] = "";
	CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[] = {log, (void *)(uintptr_t)sizeof(log)};
	CU_IS(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadDataEx(&m, bad, 2, opts, vals));
	ck_assert_msg(strlen(log) > 0, "the JIT error log holds the daemon's message");
}
END_TEST

START_TEST(memory)
{
	setup();
	CUdeviceptr p, q;
	const size_t n = 4096;
	size_t free_b = 0, total = 0, devtotal = 0;

	CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(&p, 0));
	CU(cuMemAlloc(&p, n * 4));
	CU(cuMemAlloc(&q, n * 4));
	CU(cuMemGetInfo(&free_b, &total));
	CU(cuDeviceTotalMem(&devtotal, 0));
	ck_assert_uint_eq(total, devtotal);
	ck_assert_uint_le(free_b + n * 8, total);

	CU(cuMemsetD32(p, 0x01020304u, n));
	expect_u32(p, 0x01020304u, n);
	CU(cuMemsetD16(p, 0xbeef, n * 2));
	expect_u32(p, 0xbeefbeefu, n);
	CU(cuMemsetD8(p, 0x5a, n * 4));
	expect_u32(p, 0x5a5a5a5au, n);
	CU(cuMemcpyDtoD(q, p, n * 4));
	expect_u32(q, 0x5a5a5a5au, n);

	uint32_t *h = NULL;
	CU(cuMemAllocHost((void **)&h, n * 4));
	for (size_t i = 0; i < n; i++)
		h[i] = 0x77777777u;
	CU(cuMemcpyHtoD(p, h, n * 4));
	expect_u32(p, 0x77777777u, n);
	memset(h, 0, n * 4);
	CU(cuMemcpyDtoH(h, p, n * 4));
	ck_assert_uint_eq(h[n - 1], 0x77777777u);
	CU(cuMemFreeHost(h));
	void *hp = NULL;
	CU(cuMemHostAlloc(&hp, 4096, CU_MEMHOSTALLOC_PORTABLE));
	CU(cuMemFreeHost(hp));
	CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuMemHostAlloc(&hp, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
	int local;
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(&local));

	CU(cuMemFree(p));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemFree(p)); /* not an allocation any more */
	CU(cuMemFree(q));
}
END_TEST

START_TEST(streams_and_events)
{
	CUmodule m = setup();
	CUfunction fill, spin;
	CUstream s, blocking;
	CUevent a, b, notime;
	CUdeviceptr p;
	const size_t n = 256;
	int prio = 99;

	CU(cuModuleGetFunction(&fill, m, "fill_u32"));
	CU(cuModuleGetFunction(&spin, m, "spin"));
	CU(cuMemAlloc(&p, n * 4));
	CU(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -1));
	CU(cuStreamGetPriority(s, &prio));
	ck_assert_int_eq(prio, -1);
	CU(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
	CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
	CU(cuEventCreate(&b, CU_EVENT_BLOCKING_SYNC));
	CU(cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));

	long long cycles = spin_cycles(20);
	void *spin_args[] = {&cycles};
	uint32_t v = 42;
	uint64_t count = n;
	void *fill_args[] = {&p, &v, &count};
	CU(cuEventRecord(a, s));
	CU(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, spin_args, NULL));
	CU(cuMemsetD32Async(p, 5, n, s));
	CU(cuEventRecord(b, s));
	CU(cuEventRecord(notime, s));
	/* the blocking stream waits for b, then fills: the fill comes after the memset */
	CU(cuStreamWaitEvent(blocking, b, 0));
	CU(cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, blocking, fill_args, NULL));
	CU(cuEventSynchronize(b));
	CU(cuEventQuery(b));
	float ms = -1;
	CU(cuEventElapsedTime(&ms, a, b));
	ck_assert_msg(ms >= 0, "elapsed %f", ms);
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, notime));
	CU(cuStreamSynchronize(blocking));
	CU(cuStreamQuery(blocking));
	CU(cuStreamQuery(s));
	CU(cuStreamQuery(NULL));
	expect_u32(p, 42, n);

	CU(cuMemsetD8Async(p, 0x11, n * 4, NULL));
	CU(cuMemsetD16Async(p, 0x2222, n * 2, blocking));
	CU(cuStreamSynchronize(NULL));
	expect_u32(p, 0x22222222u, n);
	CUdeviceptr q;
	CU(cuMemAlloc(&q, n * 4));
	uint32_t host[256];
	for (size_t i = 0; i < n; i++)
		host[i] = (uint32_t)i;
	CU(cuMemcpyHtoDAsync(q, host, sizeof(host), s));
	CU(cuMemcpyDtoDAsync(p, q, sizeof(host), s));
	memset(host, 0, sizeof(host));
	CU(cuMemcpyDtoHAsync(host, p, sizeof(host), s));
	CU(cuStreamSynchronize(s));
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(host[i], i);

	CU(cuEventDestroy(a));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy(a));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(a, s));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuEventRecord((CUevent)(uintptr_t)0xfeed, s));
	CU(cuStreamDestroy(s));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(s));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuStreamSynchronize(s));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuMemsetD32Async(p, 0, n, s));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(&s, 0x80));
	CU(cuStreamDestroy(blocking));
	CU(cuEventDestroy(b));
	CU(cuEventDestroy(notime));
}
END_TEST

/* A kernel's fault surfaces at the next synchronisation as the CUDA error the device reported. */
START_TEST(device_fault)
{
	CUmodule m = setup();
	CUfunction bad;
	CUdeviceptr p;
	CU(cuModuleGetFunction(&bad, m, "bad_write"));
	CU(cuMemAlloc(&p, 64));
	void *args[] = {&p};
	CU(cuLaunchKernel(bad, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
	CU_IS(CUDA_ERROR_ILLEGAL_ADDRESS, cuCtxSynchronize());
}
END_TEST

/* What the cuda-samples' *Drv programs ask before anything else (helper_cuda_drvapi.h's findCudaDeviceDRV ranks
 * devices by multiprocessors × clock, each query checked with checkCudaErrors, which exits on any error; then
 * cuCtxCreate with zeroed CUctxCreateParams): every answer is a success. */
START_TEST(sample_device_choice)
{
	int n = 0, v = -1;
	CU(cuInit(0));
	CU(cuDeviceGetCount(&n));
	for (CUdevice d = 0; d < n; d++) {
		CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
		ck_assert_int_gt(v, 0);
		CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, d));
		ck_assert_int_gt(v, 0);
		CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
		CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d));
		CU(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, d));
		ck_assert_int_ne(v, CU_COMPUTEMODE_PROHIBITED);
	}
	CU_IS(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, n));

	CUctxCreateParams params = {0};
	CUcontext ctx;
	CUdevice dev = -1;
	CU(cuCtxCreate(&ctx, &params, 0, 0));
	CU(cuCtxGetDevice(&dev));
	ck_assert_int_eq(dev, 0);
	CU(cuCtxDestroy(ctx));
}
END_TEST

/* Callbacks for cuOccupancyMaxPotentialBlockSize: each records the sizes it was asked about, and answers
 * no dynamic shared memory for the sizes that fit, too_big for the others. */
static int asked[64], nasked;

static size_t
record(int block_size, bool fits, size_t too_big)
{
	if (nasked < 64)
		asked[nasked++] = block_size;
	return fits ? 0 : too_big;
}

/* Sizes above 256 ask for more memory than any device has: no block fits. */
static size_t
smem_none_above_256(int block_size)
{
	return record(block_size, block_size <= 256, (size_t)1 << 30);
}

/* Only 224 and 96 fit (65536 bytes is more than the kernel's 48 KiB maximum, within the device's opt-in): 9
 * blocks of 7 warps and 21 blocks of 3 warps are both 63 warps per multiprocessor, and the tie goes to the
 * larger. */
static size_t
smem_tie(int block_size)
{
	return record(block_size, block_size == 224 || block_size == 96, 65536);
}

/* cuOccupancyMaxPotentialBlockSize's cases on the emulated device, whose occupancy model (PROTOCOL.md) holds at
 * most 32 blocks, 64 warps and 232448 bytes of dynamic shared memory per multiprocessor (2048 threads), of a
 * kernel of 1024 threads at most and 48 KiB of dynamic shared memory per block. */
static const struct potential_case {
	const char *what;
	CUoccupancyB2DSize smem; /* the callback, or NULL */
	size_t dyn;
	int limit;
	int block, blocks_per_mp;    /* the answer: blockSize, and minGridSize / multiprocessors */
	int first_asked, last_asked; /* the sizes the callback was asked about first and last (0: none) */
} potential_cases[] = {
	{"no callback, no limit: the function's 1024 threads fill a multiprocessor twice", NULL, 0, 0, 1024, 2, 0, 0},
	{"dynamicSMemSize without a callback: 49152 bytes fit 4 blocks", NULL, 49152, 512, 512, 4, 0, 0},
	{"more dynamic shared memory than the kernel may use: nothing fits", NULL, 65536, 0, 0, 0, 0, 0},
	{"matrixMulDrv's call: 2 × 32 × 32 floats of dynamic shared memory", NULL, 8192, 0, 1024, 2, 0, 0},
	{"blockSizeLimit 100 is tried as it is (16 × 4 warps), then 96 (21 × 3), then 64 (32 × 2 fill it)",
	 smem_none_above_256, 0, 100, 64, 32, 100, 64},
	{"the callback's size for each block size, dynamicSMemSize ignored; more than the device has fits no block; "
	 "the search stops at a full multiprocessor",
	 smem_none_above_256, 4096, 0, 256, 8, 1024, 256},
	{"equal occupancy (63 warps at 224 and at 96): the larger; every size asked", smem_tie, 0, 0, 224, 9, 1024, 32},
};

START_TEST(occupancy_potential_block_size)
{
	CUmodule m = setup();
	CUfunction fill;
	int grid = -1, block = -1, mps = 0, blocks = -1;
	CU(cuModuleGetFunction(&fill, m, "fill_u32"));
	CU(cuDeviceGetAttribute(&mps, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));

	for (size_t i = 0; i < sizeof(potential_cases) / sizeof(potential_cases[0]); i++) {
		const struct potential_case *k = &potential_cases[i];
		for (unsigned flags = 0; flags <= CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE; flags++) {
			nasked = 0;
			CU(flags == 0 ? cuOccupancyMaxPotentialBlockSize(&grid, &block, fill, k->smem, k->dyn, k->limit)
				      : cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, fill, k->smem, k->dyn,
										  k->limit, flags));
			ck_assert_msg(block == k->block && grid == k->blocks_per_mp * mps,
				      "%s (flags %u): block %d grid %d, want %d and %d", k->what, flags, block, grid,
				      k->block, k->blocks_per_mp * mps);
			if (k->first_asked == 0)
				continue;
			ck_assert_int_ge(nasked, 2);
			ck_assert_int_eq(asked[0], k->first_asked);
			ck_assert_int_eq(asked[1], (k->first_asked + 31) / 32 * 32 - 32); /* then down by a warp */
			for (int j = 2; j < nasked; j++)
				ck_assert_int_eq(asked[j], asked[j - 1] - 32);
			ck_assert_int_eq(asked[nasked - 1], k->last_asked);
		}
	}

	CU(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, fill, 96, 0, CU_OCCUPANCY_DEFAULT));
	ck_assert_int_eq(blocks, 21);

	/* errors */
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuOccupancyMaxPotentialBlockSize(NULL, &block, fill, NULL, 0, 0));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuOccupancyMaxPotentialBlockSize(&grid, NULL, fill, NULL, 0, 0));
	CU_IS(CUDA_ERROR_INVALID_VALUE,
	      cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, fill, NULL, 0, 0, 0x4));
	CU_IS(CUDA_ERROR_INVALID_VALUE,
	      cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, fill, 96, 0, 0x4));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, fill, 0, 0, 0));
	CU_IS(CUDA_ERROR_INVALID_HANDLE,
	      cuOccupancyMaxPotentialBlockSize(&grid, &block, (CUfunction)(uintptr_t)0xbad0, NULL, 0, 0));
	CU_IS(CUDA_ERROR_INVALID_HANDLE,
	      cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, (CUfunction)(uintptr_t)0xbad0, 96, 0, 0));
	void *fn = NULL;
	CUdriverProcAddressQueryResult st;
	CU(cuGetProcAddress("cuOccupancyMaxPotentialBlockSize", &fn, CUDA_VERSION, 0, &st));
	ck_assert_ptr_eq(fn, (void *)cuOccupancyMaxPotentialBlockSize);
	CU(cuGetProcAddress("cuOccupancyMaxPotentialBlockSizeWithFlags", &fn, CUDA_VERSION, 0, &st));
	ck_assert_ptr_eq(fn, (void *)cuOccupancyMaxPotentialBlockSizeWithFlags);
	CU(cuCtxSetCurrent(NULL));
	CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuOccupancyMaxPotentialBlockSize(&grid, &block, fill, NULL, 0, 0));
}
END_TEST

/* The copies' and memsets' checks, in CUDA's order: the context, the stream, then the arguments; a zero-byte copy
 * succeeds without looking at its pointers. */
START_TEST(copy_errors)
{
	setup();
	CUdeviceptr p;
	uint32_t h[16] = {0};
	CUstream bad = (CUstream)(uintptr_t)0xbad0;
	CU(cuMemAlloc(&p, sizeof(h)));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(p, NULL, sizeof(h)));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(NULL, p, sizeof(h)));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoDAsync(p, NULL, sizeof(h), NULL));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoHAsync(NULL, p, sizeof(h), NULL));
	CU(cuMemcpyHtoD(p, NULL, 0));
	CU(cuMemcpyDtoHAsync(NULL, p, 0, NULL));
	CU(cuMemsetD32(p, 0, 0));
	CU(cuMemcpyDtoD(p, p, 0));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuMemcpyHtoDAsync(p, h, sizeof(h), bad));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuMemcpyDtoHAsync(h, p, sizeof(h), bad));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuMemcpyDtoDAsync(p, p, sizeof(h), bad));
	CU_IS(CUDA_ERROR_INVALID_HANDLE, cuMemsetD8Async(p, 0, sizeof(h), bad));
	/* a synchronous copy or memset of memory that is not allocated fails at once */
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(0x10, 0, 4));
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoD(p, 0x10, 4));
	CU(cuMemFree(p));
	CU(cuCtxSetCurrent(NULL));
	CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyHtoD(p, h, sizeof(h)));
	CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyDtoHAsync(h, p, sizeof(h), bad)); /* the context first */
	CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuMemsetD16Async(p, 0, 8, NULL));
	CU_IS(CUDA_ERROR_INVALID_CONTEXT, cuStreamSynchronize(NULL));
}
END_TEST

START_TEST(error_names)
{
	const char *s = NULL;
	CU(cuGetErrorName(CUDA_SUCCESS, &s));
	ck_assert_str_eq(s, "CUDA_SUCCESS");
	CU(cuGetErrorName(CUDA_ERROR_INVALID_HANDLE, &s));
	ck_assert_str_eq(s, "CUDA_ERROR_INVALID_HANDLE");
	CU(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
	ck_assert_str_eq(s, "invalid argument");
	CU(cuGetErrorString(CUDA_ERROR_NOT_SUPPORTED, &s));
	ck_assert_str_eq(s, "operation not supported");
	CU(cuGetErrorString(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
	ck_assert_str_eq(s, "an illegal memory access was encountered");
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuGetErrorName((CUresult)12345, &s));
	ck_assert_ptr_null(s);
	CU_IS(CUDA_ERROR_INVALID_VALUE, cuGetErrorString((CUresult)12345, &s));
	ck_assert_ptr_null(s);
}
END_TEST

/* Unimplemented calls answer NOT_SUPPORTED (never crash), with one stderr line per call naming it. */
START_TEST(unsupported_calls)
{
	char path[] = "/tmp/cuasync-drv-err-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(dup2(fd, 2), 0);
	setup();

	const void *table = (const void *)1;
	CUuuid id = {{0}};
	CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuGetExportTable(&table, &id));
	ck_assert_ptr_null(table);
	CUdeviceptr p;
	CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuMemAllocManaged(&p, 64, CU_MEM_ATTACH_GLOBAL));
	CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuMemAllocManaged(&p, 64, CU_MEM_ATTACH_GLOBAL));
	CU_IS(CUDA_ERROR_NOT_SUPPORTED, cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
	/* the unversioned legacy entry (32-bit device pointers) is exported and refused */
	CUresult (*legacy)(unsigned *, unsigned) = (CUresult(*)(unsigned *, unsigned))dlsym(RTLD_DEFAULT, "cuMemAlloc");
	ck_assert_ptr_nonnull(legacy);
	unsigned small;
	CU_IS(CUDA_ERROR_NOT_SUPPORTED, legacy(&small, 64));

	fsync(2);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	char line[512];
	int managed = 0, export = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		managed += strstr(line, "cuMemAllocManaged is not supported") != NULL;
		export += strstr(line, "cuGetExportTable") != NULL && strstr(line, "-cudart shared") != NULL;
	}
	fclose(f);
	unlink(path);
	ck_assert_int_eq(managed, 1);
	ck_assert_int_eq(export, 1);
}
END_TEST

START_TEST(proc_address)
{
	void *fn = NULL;
	CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;

	CU(cuGetProcAddress("cuMemAlloc", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st));
	ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
	ck_assert_ptr_eq(fn, (void *)cuMemAlloc); /* cuda.h's cuMemAlloc is cuMemAlloc_v2 */
	CU(cuGetProcAddress("cuCtxCreate", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st));
	ck_assert_ptr_eq(fn, (void *)cuCtxCreate); /* cuCtxCreate_v4 */
	CU(cuGetProcAddress("cuLaunchKernel", &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	ck_assert_ptr_nonnull(fn);
	CU_IS(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuMemAlloc", &fn, 3000, 0, &st));
	ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CU_IS(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuNoSuchCall", &fn, CUDA_VERSION, 0, &st));
	ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	ck_assert_ptr_null(fn);

	/* what is resolved works: allocate through the pointer */
	CU(cuGetProcAddress("cuInit", &fn, CUDA_VERSION, 0, &st));
	CU(((CUresult(*)(unsigned))fn)(0));
	CUcontext ctx;
	CU(cuDevicePrimaryCtxRetain(&ctx, 0));
	CU(cuCtxSetCurrent(ctx));
	CU(cuGetProcAddress("cuMemAlloc", &fn, CUDA_VERSION, 0, &st));
	CUdeviceptr p = 0;
	CU(((CUresult(*)(CUdeviceptr *, size_t))fn)(&p, 256));
	ck_assert_uint_ne(p, 0);
	/* a known but unimplemented call resolves to a refusal, never to NULL */
	CU(cuGetProcAddress("cuMemAllocManaged", &fn, CUDA_VERSION, 0, &st));
	ck_assert_ptr_nonnull(fn);
	CU_IS(CUDA_ERROR_NOT_SUPPORTED, ((CUresult(*)(CUdeviceptr *, size_t, unsigned))fn)(&p, 64, 1));
}
END_TEST

START_TEST(no_daemon)
{
	setenv("CUASYNC_URL", "ipc:///nonexistent/cuasyncd.sock", 1);
	CU_IS(CUDA_ERROR_NO_DEVICE, cuInit(0));
	int n;
	CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGetCount(&n));
	CUdeviceptr p;
	CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuMemAlloc(&p, 16));
	/* the session is checked before any handle */
	CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuStreamDestroy((CUstream)(uintptr_t)0x1000));
	CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuEventRecord((CUevent)(uintptr_t)0x1000, NULL));
	CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuModuleUnload((CUmodule)(uintptr_t)0x1000));
	int grid, block;
	CU_IS(CUDA_ERROR_NOT_INITIALIZED,
	      cuOccupancyMaxPotentialBlockSize(&grid, &block, (CUfunction)(uintptr_t)0x1000, NULL, 0, 0));
	CU_IS(CUDA_ERROR_NOT_INITIALIZED, cuMemcpyHtoD(p, &n, sizeof(n)));
}
END_TEST

int
main(void)
{
	if (on_gpu()) {
		/* The cases load the emulated device's image; and a daemon on a GPU would dlopen libcuda.so.1, which
		 * in this test's library path is the shim itself. */
		printf("test_cuda_drv: emulated device only; skipped on %s\n", test_backend());
		return 77;
	}
	Suite *s = suite_create("cuda_drv");
	TCase *tc = tcase_create("driver_api");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, init_and_devices);
	tcase_add_test(tc, contexts);
	tcase_add_test(tc, launches);
	tcase_add_test(tc, module_from_file);
	tcase_add_test(tc, memory);
	tcase_add_test(tc, streams_and_events);
	tcase_add_test(tc, device_fault);
	tcase_add_test(tc, unsupported_calls);
	tcase_add_test(tc, proc_address);
	tcase_add_test(tc, sample_device_choice);
	tcase_add_test(tc, occupancy_potential_block_size);
	tcase_add_test(tc, copy_errors);
	suite_add_tcase(s, tc);
	TCase *plain = tcase_create("no_daemon");
	tcase_set_timeout(plain, 60);
	tcase_add_test(plain, error_names);
	tcase_add_test(plain, no_daemon);
	suite_add_tcase(s, plain);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
