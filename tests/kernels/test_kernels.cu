// Test kernels of cuasyncd. The emulated device (daemon/worker/emu_kernels.c) implements the same names and
// parameter layouts; keep the two in step. extern "C": the names are looked up unmangled.
#include <stdint.h>

extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void axpy(float a, const float *x, float *y, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = a * x[i] + y[i];
}

extern "C" __global__ void fill_u32(uint32_t *p, uint32_t v, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		p[i] = v;
}

extern "C" __global__ void spin(int64_t cycles)
{
	long long start = clock64();
	while (clock64() - start < cycles)
		;
}

// With programmatic dependent launch, this kernel may start before its predecessor on the stream has
// finished; griddepcontrol.wait holds it until the predecessor's memory is visible.
extern "C" __global__ void pdl_count(int *counter)
{
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
	if (blockIdx.x == 0 && threadIdx.x == 0)
		*counter += 1;
#if __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.launch_dependents;");
#endif
}

// Writes 2^40 bytes past p: never mapped, so the context takes a sticky illegal-address fault.
extern "C" __global__ void bad_write(int *p)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		*(volatile int *)((char *)p + (1ull << 40)) = 1;
}
