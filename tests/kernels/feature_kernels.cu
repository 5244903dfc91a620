// Kernels of the module-global, large-parameter and dynamic-shared-memory tests (issue 13). The emulated
// device (worker/emu_kernels.c) implements the same names and parameter layouts; keep the two in step. A
// separate module from test_kernels.cu: it has a global (const_data), which the emulated device's fatbin
// reader cannot declare, so only the GPU loads this file (the emulated device gets an image that declares it).
#include <stdint.h>

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
