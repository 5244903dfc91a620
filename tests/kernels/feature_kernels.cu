// Kernels of the module-global, large-parameter, dynamic-shared-memory and launch-attribute tests (issue 13). The emulated
// device (worker/emu_kernels.c) implements the same names and parameter layouts; keep the two in step. A
// separate module from test_kernels.cu: it has a global (const_data). The emulated device reads it from the
// cubin's symbol table too (tests/dropin/rt_basic.cu relies on that); the harness gives it an image that declares it.
#include <cooperative_groups.h>
#include <stdint.h>

namespace cg = cooperative_groups;

__constant__ uint32_t const_data[256];

extern "C" __global__ void copy_u32(uint32_t *dst, const uint32_t *src, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		dst[i] = src[i];
}

// Reads the module's __constant__ array, which the client filled through MODULE_GET_GLOBAL + HTOD.
extern "C" __global__ void const_copy(uint32_t *out, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		out[i] = const_data[i];
}

// 32000 bytes by value: needs CUDA 12.1+ and sm_70+ (32764 bytes of parameters in all).
struct big_param {
	uint32_t w[8000];
};
extern "C" __global__ void big_param_copy(uint32_t *out, big_param s)
{
	for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < 8000; i += gridDim.x * blockDim.x)
		out[i] = s.w[i];
}

// One block reverses n words through n words of dynamic shared memory (launch it with shared_mem >= 4n:
// 64 KiB needs MAX_DYNAMIC_SHARED_SIZE_BYTES raised first).
extern "C" __global__ void dyn_shared_copy(uint32_t *out, const uint32_t *in, uint64_t n)
{
	extern __shared__ uint32_t buf[];
	if (blockIdx.x != 0)
		return;
	for (uint64_t i = threadIdx.x; i < n; i += blockDim.x)
		buf[i] = in[i];
	__syncthreads();
	for (uint64_t i = threadIdx.x; i < n; i += blockDim.x)
		out[i] = buf[n - 1 - i];
}

// A two-phase sum over a cooperative grid: every thread adds its grid-stride share of in, each block's sum goes to
// partial[block rank], and after grid.sync() (which needs a cooperative launch) the grid's first thread adds the
// partials into *out. Blocks of at most 1024 threads.
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

// Each block's first thread writes its rank in its cluster, the cluster's size, and the rank that the next
// block of its cluster keeps in shared memory, read through distributed shared memory (sm_90). Launched without
// a cluster, every block is a cluster of one.
extern "C" __global__ void cluster_rank(uint32_t *out)
{
	cg::cluster_group cluster = cg::this_cluster();
	__shared__ uint32_t mine;
	uint32_t rank = cluster.block_rank(), n = cluster.num_blocks();
	bool first = threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
	if (first)
		mine = rank;
	cluster.sync();
	uint32_t *peer = cluster.map_shared_rank(&mine, (rank + 1) % n);
	uint64_t b = blockIdx.x + (uint64_t)blockIdx.y * gridDim.x + (uint64_t)blockIdx.z * gridDim.x * gridDim.y;
	if (first) {
		out[3 * b] = rank;
		out[3 * b + 1] = n;
		out[3 * b + 2] = *peer;
	}
	cluster.sync(); // peers may still read this block's shared memory
}
