// An ordinary CUDA runtime program for libcuasync-cudart's test (tests/dropin/test_cudart.sh): built with
// `nvcc -cudart shared`, run through tools/cuasync-run against cuasyncd on the emulated device. Its kernels have
// the names and parameter lists of the emulated device's built-ins (worker/emu_kernels.c), so they run there;
// natively on a GPU all but the checks of what the drop-in refuses pass. Prints "ok - ..." per check, "FAIL - ..." and exits 1 on a failure.
//   rt_basic          launches, copies, memsets, streams, events, symbols, host functions, errors
//   rt_basic sticky   a kernel's illegal address is sticky: every later call returns it
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rt_check.h"

__constant__ uint32_t const_data[256];
__device__ uint32_t dev_words[4];

extern "C" __global__ void fill_u32(uint32_t *p, uint32_t v, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		p[i] = v;
}

extern "C" __global__ void copy_u32(uint32_t *dst, const uint32_t *src, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		dst[i] = src[i];
}

extern "C" __global__ void const_copy(uint32_t *out, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		out[i] = const_data[i];
}

extern "C" __global__ void spin(int64_t cycles)
{
	long long start = clock64();
	while (clock64() - start < cycles)
		;
}

extern "C" __global__ void bad_write(int *p)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		*(volatile int *)((char *)p + (1ull << 40)) = 1;
}

static bool
all_equal(const uint32_t *p, size_t n, uint32_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

static volatile int host_fn_ran, callback_status = -1;

static void CUDART_CB
host_fn(void *arg)
{
	host_fn_ran = *(int *)arg;
}

static void CUDART_CB
stream_callback(cudaStream_t s, cudaError_t status, void *arg)
{
	callback_status = status;
}

static int
sticky(void)
{
	int *p;
	OK(cudaMalloc(&p, 64));
	bad_write<<<1, 1>>>(p);
	CHECK_ERR(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
	CHECK_ERR(cudaGetLastError(), cudaErrorIllegalAddress);
	CHECK_ERR(cudaGetLastError(), cudaErrorIllegalAddress); // sticky: not cleared
	CHECK_ERR(cudaMalloc(&p, 64), cudaErrorIllegalAddress);
	CHECK_ERR(cudaPeekAtLastError(), cudaErrorIllegalAddress);
	return failures ? 1 : 0;
}

int
main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "sticky") == 0)
		return sticky();
	enum { N = 4096 };
	static uint32_t h[N], h2[N];

	// devices and versions
	int n = 0, dev = -1, v = 0;
	OK(cudaGetDeviceCount(&n));
	CHECK(n >= 1, "at least one device");
	if (n < 1) {
		printf("FAIL: no device: nothing else to check\n");
		return 1;
	}
	OK(cudaSetDevice(0));
	OK(cudaGetDevice(&dev));
	CHECK(dev == 0, "cudaGetDevice gives 0");
	cudaDeviceProp prop;
	OK(cudaGetDeviceProperties(&prop, 0));
	CHECK(prop.name[0] != 0 && prop.multiProcessorCount > 0 && prop.totalGlobalMem > 0, "device properties filled");
	OK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, 0));
	CHECK(v == prop.multiProcessorCount, "cudaDevAttrMultiProcessorCount matches the properties");
	/* what the cuda-samples' helper_cuda.h asks before anything else (findCudaDevice) */
	OK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeMode, 0));
	CHECK(v == cudaComputeModeDefault, "a shared device is in the default compute mode");
	/* the device's own attributes through the daemon (the emulated device reports a 1 GHz clock) */
	OK(cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, 0));
	CHECK(v == 1000000, "cudaDevAttrClockRate is the device's");
	OK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxPitch, 0));
	CHECK(v == 2147483647 && prop.memPitch == 2147483647, "cudaDevAttrMaxPitch and memPitch are the device's");
	OK(cudaDeviceGetAttribute(&v, cudaDevAttrCanMapHostMemory, 0));
	CHECK(v == 0 && prop.canMapHostMemory == 0, "mapped host memory is not offered");
	CHECK(prop.asyncEngineCount == 2 && prop.memoryBusWidth == 64, "properties from the device's attributes");
	OK(cudaRuntimeGetVersion(&v));
	CHECK(v == CUDART_VERSION, "cudaRuntimeGetVersion is the toolkit's");
	OK(cudaDriverGetVersion(&v));
	CHECK(v >= CUDART_VERSION, "cudaDriverGetVersion at least the runtime's");
	CHECK_ERR(cudaGetDeviceProperties(&prop, 99), cudaErrorInvalidDevice);
	CHECK_ERR(cudaGetLastError(), cudaErrorInvalidDevice);
	size_t freeb = 0, total = 0;
	OK(cudaMemGetInfo(&freeb, &total));
	CHECK(total > 0 && freeb <= total, "cudaMemGetInfo");

	// memory, memset, launches on the default stream, copies of every kind
	uint32_t *a, *b;
	OK(cudaMalloc(&a, N * 4));
	OK(cudaMalloc(&b, N * 4));
	OK(cudaMemset(a, 0xab, N * 4));
	OK(cudaMemcpy(h, a, N * 4, cudaMemcpyDeviceToHost));
	CHECK(all_equal(h, N, 0xabababab), "cudaMemset then cudaMemcpy DtoH");
	fill_u32<<<8, 128>>>(a, 7, N);
	OK(cudaGetLastError());
	OK(cudaMemcpy(h, a, N * 4, cudaMemcpyDeviceToHost));
	CHECK(all_equal(h, N, 7), "fill_u32<<<8,128>>> on the default stream, ordered before the copy");
	for (int i = 0; i < N; i++)
		h[i] = (uint32_t)i * 3u;
	OK(cudaMemcpy(b, h, N * 4, cudaMemcpyHostToDevice));
	copy_u32<<<4, 256>>>(a, b, N);
	OK(cudaMemcpy(h2, a, N * 4, cudaMemcpyDefault));
	CHECK(memcmp(h, h2, sizeof(h)) == 0, "HtoD, copy_u32, cudaMemcpyDefault DtoH");
	OK(cudaMemcpy(a, b, N * 4, cudaMemcpyDeviceToDevice));
	fill_u32<<<1, 32>>>(b, 0, N);
	memset(h2, 0, sizeof(h2));
	OK(cudaMemcpy(h2, a, N * 4, cudaMemcpyDeviceToHost));
	CHECK(memcmp(h, h2, sizeof(h)) == 0, "cudaMemcpy DtoD");
	OK(cudaMemcpy(h2, h, 16, cudaMemcpyHostToHost));
	OK(cudaMemcpy(b, a, N * 4, cudaMemcpyDefault));
	OK(cudaMemcpy(h2, b, N * 4, cudaMemcpyDefault));
	CHECK(memcmp(h, h2, sizeof(h)) == 0, "cudaMemcpyDefault DtoD and DtoH");

	// streams, events, pinned host memory
	cudaStream_t s1, s2;
	OK(cudaStreamCreate(&s1));
	OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	int lo = 0, hi = 0;
	OK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
	cudaStream_t s3;
	OK(cudaStreamCreateWithPriority(&s3, cudaStreamNonBlocking, hi));
	uint32_t *pinned;
	OK(cudaMallocHost(&pinned, N * 4));
	cudaEvent_t start, stop, mark, notiming;
	OK(cudaEventCreate(&start));
	OK(cudaEventCreate(&stop));
	OK(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming));
	OK(cudaEventCreateWithFlags(&notiming, cudaEventDisableTiming));
	OK(cudaEventRecord(start, s1));
	fill_u32<<<2, 64, 0, s1>>>(a, 11, N);
	OK(cudaEventRecord(mark, s1));
	OK(cudaEventRecord(stop, s1));
	OK(cudaStreamWaitEvent(s2, mark, 0));
	copy_u32<<<2, 64, 0, s2>>>(b, a, N);
	OK(cudaMemcpyAsync(pinned, b, N * 4, cudaMemcpyDeviceToHost, s2));
	OK(cudaStreamSynchronize(s2));
	CHECK(all_equal(pinned, N, 11), "cudaStreamWaitEvent orders s2 after s1; async DtoH into cudaMallocHost memory");
	OK(cudaEventSynchronize(stop));
	OK(cudaEventQuery(stop));
	float ms = -1;
	OK(cudaEventElapsedTime(&ms, start, stop));
	CHECK(ms >= 0, "cudaEventElapsedTime");
	CHECK_ERR(cudaEventElapsedTime(&ms, start, notiming), cudaErrorInvalidResourceHandle);
	OK(cudaStreamQuery(s1));
	for (int i = 0; i < N; i++)
		pinned[i] = 5;
	OK(cudaMemcpyAsync(a, pinned, N * 4, cudaMemcpyHostToDevice, s3));
	OK(cudaMemsetAsync(b, 0, N * 4, s3));
	copy_u32<<<1, 1024, 0, s3>>>(b, a, N / 2);
	OK(cudaMemcpyAsync(h2, b, N * 4, cudaMemcpyDeviceToHost, s3));
	OK(cudaStreamSynchronize(s3));
	CHECK(all_equal(h2, N / 2, 5) && all_equal(h2 + N / 2, N / 2, 0), "HtoD, memset, launch, DtoH ordered on s3");

	// page-locked copies run in stream order, as CUDA's: the GPU reads the host bytes when the copy's turn
	// comes, so what the program writes there while a kernel ahead of the copy still runs is what arrives
	bool proven = false;
	for (int attempt = 0; attempt < 3 && !proven; attempt++) {
		for (int i = 0; i < N; i++)
			pinned[i] = 7;
		spin<<<1, 1, 0, s1>>>(1500000000LL);
		OK(cudaMemcpyAsync(a, pinned, N * 4, cudaMemcpyHostToDevice, s1));
		for (int i = 0; i < N; i++)
			pinned[i] = 9;
		proven = cudaStreamQuery(s1) == cudaErrorNotReady; // else the machine stalled past the kernel: again
		OK(cudaStreamSynchronize(s1));
	}
	OK(cudaMemcpy(h2, a, N * 4, cudaMemcpyDeviceToHost));
	CHECK(proven && all_equal(h2, N, 9), "async HtoD from cudaMallocHost memory reads it in stream order");

	// host functions run once the stream reaches them, before what follows
	int token = 42;
	fill_u32<<<1, 64, 0, s1>>>(a, 1, N);
	OK(cudaLaunchHostFunc(s1, host_fn, &token));
	OK(cudaStreamAddCallback(s1, stream_callback, NULL, 0));
	OK(cudaStreamSynchronize(s1));
	CHECK(host_fn_ran == 42, "cudaLaunchHostFunc ran");
	CHECK(callback_status == cudaSuccess, "cudaStreamAddCallback ran with cudaSuccess");
	OK(cudaLaunchHostFunc(0, host_fn, &token)); // on the default stream
	OK(cudaDeviceSynchronize());

	// __constant__ and __device__ variables
	for (int i = 0; i < 256; i++)
		h[i] = 1000u + (uint32_t)i;
	OK(cudaMemcpyToSymbol(const_data, h, 256 * 4));
	const_copy<<<1, 256>>>(a, 256);
	OK(cudaMemcpy(h2, a, 256 * 4, cudaMemcpyDeviceToHost));
	CHECK(memcmp(h, h2, 256 * 4) == 0, "cudaMemcpyToSymbol(__constant__), read by const_copy");
	uint32_t words[4] = {1, 2, 3, 4}, back[4] = {0};
	OK(cudaMemcpyToSymbol(dev_words, words, 8, 8));
	OK(cudaMemcpyFromSymbol(back, dev_words, 16));
	CHECK(back[0] == 0 && back[1] == 0 && back[2] == 1 && back[3] == 2, "cudaMemcpyToSymbol with an offset, FromSymbol");
	size_t sz = 0;
	OK(cudaGetSymbolSize(&sz, dev_words));
	CHECK(sz == 16, "cudaGetSymbolSize");
	void *sym = NULL;
	OK(cudaGetSymbolAddress(&sym, dev_words));
	OK(cudaMemcpy(back, sym, 16, cudaMemcpyDefault));
	CHECK(back[2] == 1, "cudaGetSymbolAddress, cudaMemcpyDefault from it");
	CHECK_ERR(cudaMemcpyToSymbol(dev_words, words, 16, 8), cudaErrorInvalidValue);

	// function attributes and occupancy
	cudaFuncAttributes fa;
	OK(cudaFuncGetAttributes(&fa, fill_u32));
	CHECK(fa.maxThreadsPerBlock > 0, "cudaFuncGetAttributes");
	int blocks = 0;
	OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fill_u32, 256, 0));
	CHECK(blocks > 0, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");

	// errors: non-sticky ones are returned once by cudaGetLastError, then cleared
	fill_u32<<<1, 2048>>>(a, 0, N);
	CHECK_ERR(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
	CHECK_ERR(cudaGetLastError(), cudaErrorInvalidConfiguration);
	OK(cudaGetLastError());
	CHECK_ERR(cudaFree((void *)0x1234), cudaErrorInvalidValue);
	CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
	CHECK(strcmp(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue") == 0 &&
		      strcmp(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument") == 0 &&
		      strcmp(cudaGetErrorString(cudaErrorNotSupported), "operation not supported") == 0,
	      "error names and strings as CUDA prints them");
	// what is not implemented answers cudaErrorNotSupported (and a line on stderr), never a crash
	void *managed = NULL;
	CHECK_ERR(cudaMallocManaged(&managed, 64), cudaErrorNotSupported);
	CHECK_ERR(cudaGetLastError(), cudaErrorNotSupported);
	CHECK_ERR(cudaMemcpy2D(a, 64, h, 64, 64, 2, cudaMemcpyHostToDevice), cudaErrorNotSupported);
	CHECK_ERR(cudaGraphAddChildGraphNode(NULL, NULL, NULL, 0, NULL), cudaErrorNotSupported);
	int can = -1;
	CHECK_ERR(cudaDeviceCanAccessPeer(&can, 0, 0), cudaErrorNotSupported);
	CHECK_ERR(cudaGetLastError(), cudaErrorNotSupported); // the last refusal, not sticky:
	OK(cudaGetLastError());

	OK(cudaEventDestroy(start));
	OK(cudaEventDestroy(stop));
	OK(cudaEventDestroy(mark));
	OK(cudaEventDestroy(notiming));
	OK(cudaStreamDestroy(s1));
	OK(cudaStreamDestroy(s2));
	OK(cudaStreamDestroy(s3));
	OK(cudaFreeHost(pinned));
	OK(cudaFree(a));
	OK(cudaFree(b));
	OK(cudaDeviceSynchronize());
	printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
