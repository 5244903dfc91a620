/* Ours, not NVIDIA's: a stand-in for cuda-samples' Common/helper_cuda.h so that the samples in
 * tests/kernels/samples/ compile to fatbins unmodified. nvcc -fatbin parses their host code but compiles only
 * the kernels, so declarations of what that host code names are enough; none of it is ever built or run
 * (tests/integration/test_samples.c is the host side). */
#ifndef CUA_SAMPLES_HELPER_CUDA_H
#define CUA_SAMPLES_HELPER_CUDA_H

#include <cuda_runtime.h>

#define EXIT_WAIVED 2
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

int findCudaDevice(int argc, const char **argv);
void checkCudaErrors(cudaError_t err);
void getLastCudaError(const char *msg);

#endif
