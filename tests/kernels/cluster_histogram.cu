// Ours, not NVIDIA's: cuda-samples has no kernel that uses thread-block clusters or distributed shared memory (see
// tests/kernels/samples/README.md), so test_samples launches this one instead: a histogram whose bins are split
// across the shared memory of the blocks of a cluster, the use of distributed shared memory that the CUDA C++
// Programming Guide describes. Each block holds bins_per_block counters; a thread adds each element into
// whichever block of its cluster holds that bin, then every block adds its slice into the global histogram.
#include <cooperative_groups.h>
#include <stddef.h>

namespace cg = cooperative_groups;

// bins: nbins = bins_per_block × cluster size counters, zeroed by the caller; input values are clamped to
// [0, nbins - 1]. Dynamic shared memory: bins_per_block × sizeof(int). A 1-D grid of 1-D clusters: cluster_size[0]
// receives the cluster size the kernel ran with.
extern "C" __global__ void cluster_histogram(int *bins, int nbins, int bins_per_block, const int *input, size_t n,
					     unsigned *cluster_size)
{
	extern __shared__ int slice[];
	cg::cluster_group cluster = cg::this_cluster();
	for (int i = threadIdx.x; i < bins_per_block; i += blockDim.x)
		slice[i] = 0;
	cluster.sync(); // every slice of the cluster is zero before any block adds into it
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		int bin = min(max(input[i], 0), nbins - 1);
		int *owner = cluster.map_shared_rank(slice, bin / bins_per_block);
		atomicAdd(owner + bin % bins_per_block, 1);
	}
	cluster.sync(); // the other blocks have finished adding into this block's slice
	int *mine = bins + cluster.block_rank() * bins_per_block;
	for (int i = threadIdx.x; i < bins_per_block; i += blockDim.x)
		atomicAdd(&mine[i], slice[i]);
	if (blockIdx.x == 0 && threadIdx.x == 0)
		*cluster_size = cluster.num_blocks();
}
