// CUDA graphs, stream capture, launch attributes and registered host memory through libcuasync-cudart
// (tests/dropin/test_cudart.sh): built with `nvcc -cudart shared`, run through tools/cuasync-run against cuasyncd
// on the emulated device. Its kernels have the names and parameter lists of the emulated device's built-ins
// (worker/emu_kernels.c), so they run there; natively on a GPU all but the checks of what the drop-in refuses
// pass. Prints "ok - ..." per check, "FAIL - ..." and exits 1 on a failure.
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_check.h"

namespace cg = cooperative_groups;

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

// As tests/kernels/feature_kernels.cu's: the grid's sum of in[] into *out, through grid.sync() (cooperative only).
extern "C" __global__ void coop_reduce(const uint32_t *in, uint64_t n, unsigned long long *partial,
				       unsigned long long *out)
{
	cg::grid_group grid = cg::this_grid();
	cg::thread_block block = cg::this_thread_block();
	__shared__ unsigned long long sums[1024];
	unsigned long long sum = 0;
	for (unsigned long long i = grid.thread_rank(); i < n; i += grid.num_threads())
		sum += in[i];
	sums[block.thread_rank()] = sum;
	block.sync();
	if (block.thread_rank() == 0) {
		unsigned long long t = 0;
		for (unsigned j = 0; j < block.num_threads(); j++)
			t += sums[j];
		partial[grid.block_rank()] = t;
	}
	grid.sync();
	if (grid.thread_rank() == 0) {
		unsigned long long t = 0;
		for (unsigned long long b = 0; b < grid.num_blocks(); b++)
			t += partial[b];
		*out = t;
	}
}

enum { N = 4096 };

// What a host node sees: the host buffer the graph copied into just before it, summed, and how often it ran.
struct host_ctx {
	const uint32_t *buf;
	size_t n;
	uint64_t sum;
	int runs;
};

static void CUDART_CB
host_sum(void *arg)
{
	host_ctx *h = (host_ctx *)arg;
	h->sum = 0;
	for (size_t i = 0; i < h->n; i++)
		h->sum += h->buf[i];
	h->runs++;
}

static bool
all_equal(const uint32_t *p, size_t n, uint32_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

// Stream capture across three streams with fork/join events, as simpleCudaGraphs does: an HtoD copy on s1; a
// memset and a kernel on s2 and a memset on s4, both forked from s1; two kernels on s1 joined with s2, then s4
// joined; a DtoH copy and a host function on s1.
static void
capture(uint32_t *a, uint32_t *b, uint32_t *c)
{
	cudaStream_t s1, s2, s3, s4;
	cudaEvent_t fork, join, join4;
	uint32_t *hin, *hout, *r;
	OK(cudaStreamCreate(&s1));
	OK(cudaStreamCreate(&s2));
	OK(cudaStreamCreate(&s4));
	OK(cudaEventCreate(&join4));
	OK(cudaMalloc(&r, 8));
	OK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
	OK(cudaEventCreate(&fork));
	OK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
	OK(cudaMallocHost(&hin, N * 4));
	OK(cudaMallocHost(&hout, N * 4));
	host_ctx ctx = {hout, N, 0, 0};

	OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
	cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
	OK(cudaStreamIsCapturing(s1, &cs));
	CHECK(cs == cudaStreamCaptureStatusActive, "s1 is capturing");
	OK(cudaStreamIsCapturing(s2, &cs));
	CHECK(cs == cudaStreamCaptureStatusNone, "s2 is not capturing before the fork");
	OK(cudaEventRecord(fork, s1));
	OK(cudaStreamWaitEvent(s2, fork, 0));
	OK(cudaStreamWaitEvent(s4, fork, 0));
	OK(cudaStreamIsCapturing(s2, &cs));
	CHECK(cs == cudaStreamCaptureStatusActive, "s2 joined the capture by waiting on an event recorded in it");
	OK(cudaMemcpyAsync(a, hin, N * 4, cudaMemcpyDefault, s1));
	OK(cudaMemsetAsync(b, 0, N * 4, s2));
	fill_u32<<<4, 128, 0, s2>>>(b, 5, N / 2);
	OK(cudaGetLastError());
	OK(cudaEventRecord(join, s2));
	OK(cudaMemsetAsync(r, 0x11, 8, s4));
	OK(cudaEventRecord(join4, s4));
	copy_u32<<<4, 128, 0, s1>>>(c, a, N);
	OK(cudaStreamWaitEvent(s1, join, 0));
	copy_u32<<<4, 128, 0, s1>>>(c, b, N / 2);
	OK(cudaStreamWaitEvent(s1, join4, 0));
	OK(cudaMemcpyAsync(hout, c, N * 4, cudaMemcpyDeviceToHost, s1));
	OK(cudaLaunchHostFunc(s1, host_sum, &ctx));
	unsigned long long id = 0;
	cudaGraph_t capturing = NULL;
	const cudaGraphNode_t *deps = NULL;
	size_t ndeps = 0;
	OK(cudaStreamGetCaptureInfo(s1, &cs, &id, &capturing, &deps, NULL, &ndeps));
	CHECK(cs == cudaStreamCaptureStatusActive && id != 0 && capturing != NULL && ndeps == 1 && deps && deps[0],
	      "cudaStreamGetCaptureInfo: active, an id, the graph, one dependency (the host node)");
	CHECK(ctx.runs == 0, "nothing captured ran");
	cudaGraph_t g = NULL;
	OK(cudaStreamEndCapture(s1, &g));
	CHECK(g != NULL, "cudaStreamEndCapture gives the graph");
	OK(cudaStreamIsCapturing(s1, &cs));
	CHECK(cs == cudaStreamCaptureStatusNone, "s1 no longer capturing");
	OK(cudaStreamIsCapturing(s2, &cs));
	CHECK(cs == cudaStreamCaptureStatusNone, "s2 left the capture with it");

	size_t n = 0;
	OK(cudaGraphGetNodes(g, NULL, &n));
	CHECK(n == 8, "captured graph: 8 nodes (2 copies, 2 memsets, 3 kernels, host; events make edges, not nodes)");
	cudaGraphNode_t roots[4] = {0};
	size_t nroots = 4;
	OK(cudaGraphGetRootNodes(g, roots, &nroots));
	CHECK(nroots == 3 && roots[0] && roots[1] && roots[2] && !roots[3],
	      "three roots (the HtoD copy and the memsets), rest NULL");

	cudaGraphExec_t x;
	OK(cudaGraphInstantiate(&x, g, 0));
	bool good = true;
	for (int it = 0; it < 3; it++) {
		uint64_t want = 5ull * (N / 2);
		for (int i = 0; i < N; i++) {
			hin[i] = (uint32_t)(i + it * 1000);
			if (i >= N / 2)
				want += hin[i];
		}
		uint32_t rh[2] = {0};
		OK(cudaMemsetAsync(r, 0, 8, s3)); // ordered before the launch on s3
		OK(cudaGraphLaunch(x, s3));
		OK(cudaStreamSynchronize(s3));
		OK(cudaMemcpy(rh, r, 8, cudaMemcpyDeviceToHost));
		good = good && ctx.runs == it + 1 && ctx.sum == want && all_equal(hout, N / 2, 5) &&
		       hout[N - 1] == (uint32_t)(N - 1 + it * 1000) && all_equal(rh, 2, 0x11111111u);
	}
	CHECK(good, "captured graph launched 3 times on a third stream: copies, memset, kernels, host node in order");

	cudaGraph_t clone;
	cudaGraphExec_t cx;
	OK(cudaGraphClone(&clone, g));
	OK(cudaGraphDestroy(g)); // the clone and the exec are independent of it
	OK(cudaGraphInstantiate(&cx, clone, 0));
	for (int i = 0; i < N; i++)
		hin[i] = 2;
	OK(cudaGraphLaunch(cx, s1));
	OK(cudaGraphLaunch(x, s1));
	OK(cudaStreamSynchronize(s1));
	CHECK(ctx.runs == 5 && ctx.sum == 5ull * (N / 2) + 2ull * (N / 2), "clone and original launched after the original graph was destroyed");

	OK(cudaGraphExecDestroy(x));
	OK(cudaGraphExecDestroy(cx));
	OK(cudaGraphDestroy(clone));
	CHECK_ERR(cudaGraphLaunch(x, s1), cudaErrorInvalidValue);
	CHECK_ERR(cudaGetLastError(), cudaErrorInvalidValue);
	CHECK_ERR(cudaGraphExecDestroy(x), cudaErrorInvalidValue);
	CHECK_ERR(cudaGraphDestroy(clone), cudaErrorInvalidValue);
	cudaGetLastError();

	// capture's errors, as CUDA defines them
	cudaGraph_t none = (cudaGraph_t)0x1;
	CHECK_ERR(cudaStreamEndCapture(s1, &none), cudaErrorIllegalState);
	CHECK_ERR(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
	OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
	CHECK_ERR(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed), cudaErrorIllegalState);
	fill_u32<<<1, 32, 0, s1>>>(a, 1, N);
	CHECK_ERR(cudaStreamSynchronize(s1), cudaErrorStreamCaptureUnsupported);
	OK(cudaStreamIsCapturing(s1, &cs));
	CHECK(cs == cudaStreamCaptureStatusInvalidated, "synchronizing a capturing stream invalidates the capture");
	none = (cudaGraph_t)0x1;
	CHECK_ERR(cudaStreamEndCapture(s1, &none), cudaErrorStreamCaptureInvalidated);
	CHECK(none == NULL, "an invalidated capture gives no graph");
	OK(cudaStreamIsCapturing(s1, &cs));
	CHECK(cs == cudaStreamCaptureStatusNone, "and ends");
	// a fork never joined back
	OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
	OK(cudaEventRecord(fork, s1));
	OK(cudaStreamWaitEvent(s2, fork, 0));
	fill_u32<<<1, 32, 0, s2>>>(b, 1, N);
	CHECK_ERR(cudaStreamEndCapture(s2, &none), cudaErrorStreamCaptureUnmatched);
	CHECK_ERR(cudaStreamEndCapture(s1, &none), cudaErrorStreamCaptureInvalidated);
	OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
	OK(cudaEventRecord(fork, s1));
	OK(cudaStreamWaitEvent(s2, fork, 0));
	fill_u32<<<1, 32, 0, s2>>>(b, 1, N);
	CHECK_ERR(cudaStreamEndCapture(s1, &none), cudaErrorStreamCaptureUnjoined);
	OK(cudaStreamIsCapturing(s2, &cs));
	CHECK(cs == cudaStreamCaptureStatusNone, "an unjoined capture ends for every stream");
	// the default stream cannot be forked into a capture (its synchronous copies would be captured, not run)
	OK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
	OK(cudaEventRecord(fork, s1));
	CHECK_ERR(cudaStreamWaitEvent(0, fork, 0), cudaErrorStreamCaptureImplicit);
	OK(cudaStreamIsCapturing(0, &cs));
	CHECK(cs == cudaStreamCaptureStatusNone, "the default stream stays out of the capture");
	CHECK_ERR(cudaStreamEndCapture(s1, &none), cudaErrorStreamCaptureInvalidated);
	cudaGetLastError();
	// nothing captured ran: a still holds what the graphs left
	OK(cudaMemcpy(hout, b, N * 4, cudaMemcpyDeviceToHost));
	CHECK(all_equal(hout, N / 2, 5), "work captured by failed captures never ran");

	OK(cudaEventDestroy(fork));
	OK(cudaEventDestroy(join));
	OK(cudaEventDestroy(join4));
	OK(cudaFree(r));
	OK(cudaStreamDestroy(s4));
	OK(cudaStreamDestroy(s1));
	OK(cudaStreamDestroy(s2));
	OK(cudaStreamDestroy(s3));
	OK(cudaFreeHost(hin));
	OK(cudaFreeHost(hout));
}

// A graph built node by node: every node type, edges given at creation and with cudaGraphAddDependencies.
static void
explicit_graph(uint32_t *a, uint32_t *b, uint32_t *c)
{
	cudaStream_t s;
	uint32_t *hin, *hout;
	OK(cudaStreamCreate(&s));
	OK(cudaMallocHost(&hin, N * 4));
	OK(cudaMallocHost(&hout, N * 4));
	host_ctx ctx = {hout, N, 0, 0};
	for (int i = 0; i < N; i++)
		hin[i] = 3;

	cudaGraph_t g;
	OK(cudaGraphCreate(&g, 0));
	cudaGraphNode_t htod, set, set2d, kern, dtod, dtoh, host, empty;
	cudaMemcpy3DParms p = {0};
	p.srcPtr = make_cudaPitchedPtr(hin, N * 4, N, 1);
	p.dstPtr = make_cudaPitchedPtr(a, N * 4, N, 1);
	p.extent = make_cudaExtent(N * 4, 1, 1);
	p.kind = cudaMemcpyHostToDevice;
	OK(cudaGraphAddMemcpyNode(&htod, g, NULL, 0, &p)); // a := 3
	cudaMemsetParams m = {0};
	m.dst = b;
	m.value = 0x01020304;
	m.elementSize = 4;
	m.width = N;
	m.height = 1;
	OK(cudaGraphAddMemsetNode(&set, g, NULL, 0, &m)); // b := 0x01020304
	// 4 rows of 128 2-byte elements (64 words) at a pitch of 128 words: b[128r .. 128r+63] := 0x09090909
	cudaMemsetParams m2 = {0};
	m2.dst = b;
	m2.pitch = 128 * 4;
	m2.value = 0x0909;
	m2.elementSize = 2;
	m2.width = 128;
	m2.height = 4;
	OK(cudaGraphAddMemsetNode(&set2d, g, &set, 1, &m2));
	uint64_t half = N / 2;
	uint32_t seven = 7;
	void *kargs[3] = {&c, &seven, &half};
	cudaKernelNodeParams k = {0};
	k.func = (void *)fill_u32;
	k.gridDim = dim3(4);
	k.blockDim = dim3(128);
	k.kernelParams = kargs;
	OK(cudaGraphAddKernelNode(&kern, g, NULL, 0, &k)); // c[0..N/2) := 7
	seven = 99;                                        // the node copied its arguments
	OK(cudaGraphAddMemcpyNode1D(&dtod, g, &htod, 1, c + N / 2, a + N / 2, N / 2 * 4, cudaMemcpyDeviceToDevice));
	OK(cudaGraphAddEmptyNode(&empty, g, NULL, 0));
	cudaGraphNode_t from[3] = {kern, set2d, dtod}, to[3] = {empty, empty, empty};
	OK(cudaGraphAddDependencies(g, from, to, NULL, 3));
	CHECK_ERR(cudaGraphAddDependencies(g, from, to, NULL, 1), cudaErrorInvalidValue); // already there
	// c (the kernel's half, then the DtoD copy's) into hout, summed by the host node
	OK(cudaGraphAddMemcpyNode1D(&dtoh, g, &empty, 1, hout, c, N * 4, cudaMemcpyDefault));
	cudaHostNodeParams hp = {0};
	hp.fn = host_sum;
	hp.userData = &ctx;
	OK(cudaGraphAddHostNode(&host, g, &dtoh, 1, &hp));
	size_t n = 0;
	OK(cudaGraphGetNodes(g, NULL, &n));
	CHECK(n == 8, "8 nodes");
	cudaGraphNode_t all[8];
	n = 3;
	OK(cudaGraphGetNodes(g, all, &n));
	CHECK(n == 3 && all[0] == htod && all[1] == set && all[2] == set2d, "cudaGraphGetNodes fills what it is given");
	n = 8;
	cudaGraphNode_t roots[8];
	OK(cudaGraphGetRootNodes(g, roots, &n));
	CHECK(n == 3, "three roots: the HtoD copy, the memset, the kernel");

	cudaGraphExec_t x;
	OK(cudaGraphInstantiateWithFlags(&x, g, 0));
	bool good = true;
	for (int it = 0; it < 3; it++) {
		OK(cudaGraphLaunch(x, s));
		OK(cudaStreamSynchronize(s));
		good = good && ctx.runs == it + 1 && ctx.sum == 7ull * (N / 2) + 3ull * (N / 2);
	}
	CHECK(good, "explicit graph launched 3 times: kernel with its copied arguments, DtoD, DtoH, host node");
	OK(cudaMemcpy(hout, b, N * 4, cudaMemcpyDeviceToHost));
	good = true;
	for (int i = 0; i < N; i++) {
		uint32_t want = (i % 128 < 64 && i < 4 * 128) ? 0x09090909u : 0x01020304u;
		good = good && hout[i] == want;
	}
	CHECK(good, "memset node, then a pitched 2D memset node of 2-byte elements after it");

	// new arguments for the instantiated kernel node
	seven = 11;
	OK(cudaGraphExecKernelNodeSetParams(x, kern, &k));
	OK(cudaGraphLaunch(x, s));
	OK(cudaStreamSynchronize(s));
	CHECK(ctx.runs == 4 && ctx.sum == 11ull * (N / 2) + 3ull * (N / 2), "cudaGraphExecKernelNodeSetParams");

	// what is refused, and what makes no graph
	p.extent = make_cudaExtent(64, 4, 1); // 4 rows of 64 bytes at pitch N*4: a real 2D copy
	cudaGraphNode_t no;
	CHECK_ERR(cudaGraphAddMemcpyNode(&no, g, NULL, 0, &p), cudaErrorNotSupported);
	CHECK_ERR(cudaGraphAddKernelNode(&no, g, &host, 1, NULL), cudaErrorInvalidValue);
	cudaGraphNode_t twice[2] = {host, host};
	CHECK_ERR(cudaGraphAddEmptyNode(&no, g, twice, 2), cudaErrorInvalidValue);
	cudaGraphNode_t back_from[1] = {host}, back_to[1] = {htod};
	OK(cudaGraphAddDependencies(g, back_from, back_to, NULL, 1)); // a cycle: host -> htod -> ... -> host
	cudaGraphExec_t cyc = NULL;
	CHECK_ERR(cudaGraphInstantiate(&cyc, g, 0), cudaErrorInvalidValue);
	cudaGetLastError();

	OK(cudaGraphExecDestroy(x));
	OK(cudaGraphDestroy(g));
	OK(cudaStreamDestroy(s));
	OK(cudaFreeHost(hin));
	OK(cudaFreeHost(hout));
}

// cudaLaunchKernelExC with attributes, cudaLaunchCooperativeKernel.
static void
launch_attributes(uint32_t *a)
{
	cudaStream_t s;
	OK(cudaStreamCreate(&s));
	unsigned long long *partial, *out, sum = 0;
	OK(cudaMalloc(&partial, 64 * 8));
	OK(cudaMalloc(&out, 8));
	fill_u32<<<4, 128, 0, s>>>(a, 2, N);
	const uint32_t *in = a;
	uint64_t n = N;
	void *args[4] = {&in, &n, &partial, &out};
	cudaLaunchAttribute attrs[2];
	attrs[0].id = cudaLaunchAttributeCooperative;
	attrs[0].val.cooperative = 1;
	int lo = 0, hi = 0;
	OK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
	attrs[1].id = cudaLaunchAttributePriority;
	attrs[1].val.priority = hi;
	cudaLaunchConfig_t cfg = {0};
	cfg.gridDim = dim3(2);
	cfg.blockDim = dim3(64);
	cfg.stream = s;
	cfg.attrs = attrs;
	cfg.numAttrs = 2;
	OK(cudaLaunchKernelExC(&cfg, (const void *)coop_reduce, args));
	OK(cudaMemcpyAsync(&sum, out, 8, cudaMemcpyDeviceToHost, s));
	OK(cudaStreamSynchronize(s));
	CHECK(sum == 2ull * N, "cudaLaunchKernelExC, cooperative and priority attributes: grid.sync() works");
	OK(cudaMemset(out, 0, 8));
	OK(cudaLaunchCooperativeKernel((const void *)coop_reduce, dim3(4), dim3(32), args, 0, s));
	OK(cudaMemcpyAsync(&sum, out, 8, cudaMemcpyDeviceToHost, s));
	OK(cudaStreamSynchronize(s));
	CHECK(sum == 2ull * N, "cudaLaunchCooperativeKernel");
	// the C++ template over cudaLaunchKernelExC, with a plain configuration
	cfg.numAttrs = 0;
	cfg.attrs = NULL;
	OK(cudaLaunchKernelEx(&cfg, fill_u32, (uint32_t *)a, (uint32_t)9, (uint64_t)N));
	uint32_t h[4] = {0};
	OK(cudaMemcpyAsync(h, a + N - 4, 16, cudaMemcpyDeviceToHost, s));
	OK(cudaStreamSynchronize(s));
	CHECK(all_equal(h, 4, 9), "cudaLaunchKernelEx without attributes");
	// thread-block clusters and programmatic stream serialization (sm_90: the emulated device's default)
	int clusters = 0;
	OK(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, 0));
	if (clusters) {
		attrs[0].id = cudaLaunchAttributeClusterDimension;
		attrs[0].val.clusterDim.x = 2;
		attrs[0].val.clusterDim.y = 1;
		attrs[0].val.clusterDim.z = 1;
		attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
		attrs[1].val.programmaticStreamSerializationAllowed = 1;
		cfg.gridDim = dim3(4);
		cfg.attrs = attrs;
		cfg.numAttrs = 2;
		uint32_t v = 13;
		void *fargs[3] = {&a, &v, &n};
		OK(cudaLaunchKernelExC(&cfg, (const void *)fill_u32, fargs));
		OK(cudaMemcpyAsync(h, a, 16, cudaMemcpyDeviceToHost, s));
		OK(cudaStreamSynchronize(s));
		CHECK(all_equal(h, 4, 13), "cudaLaunchKernelExC with a cluster dimension and programmatic serialization");
	}
	// an attribute cuasyncd does not carry: an error, not a crash, and the launch does not happen
	attrs[0].id = cudaLaunchAttributeCooperative;
	attrs[0].val.cooperative = 1;
	attrs[1].id = cudaLaunchAttributeAccessPolicyWindow;
	memset(&attrs[1].val, 0, sizeof(attrs[1].val));
	cfg.attrs = attrs;
	cfg.numAttrs = 2;
	CHECK_ERR(cudaLaunchKernelExC(&cfg, (const void *)coop_reduce, args), cudaErrorNotSupported);
	CHECK_ERR(cudaGetLastError(), cudaErrorNotSupported);
	OK(cudaFree(partial));
	OK(cudaFree(out));
	OK(cudaStreamDestroy(s));
}

// cudaHostRegister: ordinary memory stays usable for copies; mapping it into the device is refused.
static void
host_register(uint32_t *a)
{
	uint32_t *buf = (uint32_t *)malloc(N * 4);
	for (int i = 0; i < N; i++)
		buf[i] = (uint32_t)i;
	OK(cudaHostRegister(buf, N * 4, cudaHostRegisterPortable));
	CHECK_ERR(cudaHostRegister(buf + 16, 64, 0), cudaErrorHostMemoryAlreadyRegistered);
	unsigned flags = 99;
	OK(cudaHostGetFlags(&flags, buf + 8));
	CHECK(flags == cudaHostRegisterPortable, "cudaHostGetFlags inside a registered range");
	OK(cudaMemcpy(a, buf, N * 4, cudaMemcpyHostToDevice));
	memset(buf, 0, N * 4);
	OK(cudaMemcpy(buf, a, N * 4, cudaMemcpyDeviceToHost));
	CHECK(buf[N - 1] == N - 1 && buf[1] == 1, "copies to and from registered memory");
	CHECK_ERR(cudaHostUnregister(buf + 8), cudaErrorHostMemoryNotRegistered);
	OK(cudaHostUnregister(buf));
	CHECK_ERR(cudaHostUnregister(buf), cudaErrorHostMemoryNotRegistered);
	CHECK_ERR(cudaHostGetFlags(&flags, buf), cudaErrorInvalidValue);
	CHECK_ERR(cudaHostRegister(buf, N * 4, cudaHostRegisterMapped), cudaErrorNotSupported);
	void *dev = NULL;
	CHECK_ERR(cudaHostGetDevicePointer(&dev, buf, 0), cudaErrorNotSupported);
	cudaGetLastError();
	free(buf);
}

int
main()
{
	uint32_t *a, *b, *c;
	OK(cudaMalloc(&a, N * 4));
	OK(cudaMalloc(&b, N * 4));
	OK(cudaMalloc(&c, N * 4));
	capture(a, b, c);
	explicit_graph(a, b, c);
	launch_attributes(a);
	host_register(a);
	OK(cudaFree(a));
	OK(cudaFree(b));
	OK(cudaFree(c));
	OK(cudaDeviceSynchronize());
	printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
