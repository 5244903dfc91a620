/*
 * launch_attr.c — the worker's checks of a launch's attributes that depend on the function and on occupancy,
 * which only the worker knows (the front-end checked the rest: daemon/launch-attr.c). CUDA would refuse these
 * launches too (CUDA_ERROR_INVALID_CLUSTER_SIZE, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE), but without saying
 * why; here the refusal carries the numbers, and the emulated device gets CUDA's rules for free.
 */
#include "config.h"

#include "core.h"

static int
attr_of(struct wk *w, uint64_t fn, uint32_t attr, int32_t *v, cua_err *e)
{
	*v = 0;
	return w->be->func_get_attr ? w->be->func_get_attr(w, fn, attr, v, e) : 0;
}

/* A cluster over 8 blocks needs NON_PORTABLE_CLUSTER_SIZE_ALLOWED; REQUIRED_CLUSTER_* (all three or none set)
 * must equal the launch's cluster. */
static int
check_cluster(struct wk *w, const struct wk_launch *l, cua_err *e)
{
	const uint32_t *c = l->cluster;
	uint32_t size = c[0] * c[1] * c[2]; /* each 1..16, at most 16 blocks (the front-end's checks) */
	int32_t np, req[3];
	int r = attr_of(w, l->fn, CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, &np, e);
	if (r != 0)
		return r;
	if (size > CUA_MAX_CLUSTER_PORTABLE && np == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "cluster %ux%ux%u has %u blocks, more than the portable %u: set the kernel's "
				   "NON_PORTABLE_CLUSTER_SIZE_ALLOWED attribute (%u) to 1 for up to %u",
				   c[0], c[1], c[2], size, CUA_MAX_CLUSTER_PORTABLE,
				   CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, CUA_MAX_CLUSTER_SIZE);
	for (int i = 0; i < 3; i++)
		if ((r = attr_of(w, l->fn, CUA_FATTR_REQUIRED_CLUSTER_WIDTH + (uint32_t)i, &req[i], e)) != 0)
			return r;
	if ((req[0] | req[1] | req[2]) == 0)
		return 0;
	if (req[0] == 0 || req[1] == 0 || req[2] == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "the kernel's REQUIRED_CLUSTER_WIDTH/HEIGHT/DEPTH are %dx%dx%d: set all three or "
				   "none",
				   req[0], req[1], req[2]);
	if ((uint32_t)req[0] != c[0] || (uint32_t)req[1] != c[1] || (uint32_t)req[2] != c[2])
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "cluster %ux%ux%u differs from the kernel's required cluster %dx%dx%d "
				   "(REQUIRED_CLUSTER_WIDTH/HEIGHT/DEPTH)",
				   c[0], c[1], c[2], req[0], req[1], req[2]);
	return 0;
}

/* Every block of a cooperative grid must be resident at once: blocks <= active blocks per SM × SMs. */
static int
check_cooperative(struct wk *w, const struct wk_launch *l, cua_err *e)
{
	uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
	/* three 32-bit dimensions can make 2^96 blocks: past 2^64 the count would wrap (2^22 x 2^21 x 2^21 to 0) */
	uint64_t gxy = (uint64_t)l->grid[0] * l->grid[1];
	bool wraps = l->grid[2] != 0 && gxy > UINT64_MAX / l->grid[2];
	uint64_t blocks = wraps ? UINT64_MAX : gxy * l->grid[2];
	uint32_t per_sm = 0;
	if (w->be->occupancy == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "cooperative launch: the %s backend has no occupancy query",
				   w->be->name);
	if (threads <= CUA_MAX_BLOCK_THREADS) {
		int r = w->be->occupancy(w, l->fn, (uint32_t)threads, l->shared_mem, &per_sm, e);
		if (r != 0)
			return r;
	}
	uint64_t max = (uint64_t)per_sm * w->info.multiprocessors;
	if (!wraps && blocks <= max)
		return 0;
	if (wraps)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "cooperative launch of grid %ux%ux%u (more than 2^64 blocks) cannot be co-resident: "
				   "at most %llu blocks",
				   l->grid[0], l->grid[1], l->grid[2], (unsigned long long)max);
	return cua_err_set(e, CUA_EBAD_ARGUMENT,
			   "cooperative launch of %llu blocks cannot be co-resident: at most %u blocks of %llu threads "
			   "with %u bytes of dynamic shared memory fit a multiprocessor, x %u multiprocessors = %llu "
			   "(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)",
			   (unsigned long long)blocks, per_sm, (unsigned long long)threads, l->shared_mem,
			   w->info.multiprocessors, (unsigned long long)max);
}

int
wk_launch_attr_check(struct wk *w, const struct wk_launch *l, cua_err *e)
{
	int r;
	if ((l->cluster[0] | l->cluster[1] | l->cluster[2]) != 0 && (r = check_cluster(w, l, e)) != 0)
		return r;
	if ((l->flags & WREC_LAUNCH_COOPERATIVE) && (r = check_cooperative(w, l, e)) != 0)
		return r;
	return 0;
}
