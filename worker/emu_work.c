/*
 * emu_work.c — the emulated device's stream work: copies, memsets and kernel launches, each a job queued on its
 * stream (emu_stream.c) that runs on a pool thread: a copy engine's for copies, a kernel thread's for the rest. A fault (an illegal address, bad_write) ends the worker
 * exactly as a sticky CUDA fault does, through the host's fatal_many.
 */
#include "config.h"

#include "cua_arena.h"
#include "emu_impl.h"

#include <stdlib.h>
#include <string.h>

static const char unmapped[] = "CUDA_ERROR_ILLEGAL_ADDRESS: copy touches unmapped device memory";

/* ------------------------------------------------------------------ jobs' runs, on a pool thread */

struct launch_ctx {
	struct emu *E;
	const struct emu_kernel *k;
	const struct emu_dims *d;
	char fault[256];
};

static int
call_kernel(void **params, size_t n, void *ud)
{
	struct launch_ctx *L = ud;
	return L->k->fn(L->E, L->d, params, L->fault, sizeof(L->fault)) == 0 ? 0 : -1;
}

/* Runs a kernel over its copied argument buffer, on a pool thread. */
static void
run_launch(struct emu *E, struct emu_job *j)
{
	struct launch_ctx L = {E, j->u.launch.k, &j->u.launch.dims, ""};
	int r = cua_arena_with_params(&j->u.launch.args, call_kernel, &L);
	if (r == -1)
		wk_host_fatal(E->host, E->w, j->tag, L.fault);
	if (r != 0)
		E->host->report(E->w, j->tag, (uint32_t)r, L.fault);
}

static void
launch_fini(struct emu *E, struct emu_job *j)
{
	(void)E;
	cua_arena_fini(&j->u.launch.args);
}

static void
run_memset(struct emu *E, struct emu_job *j)
{
	uint32_t width = j->u.set.width;
	uint64_t count = j->u.set.count;
	unsigned char *dst = count <= UINT64_MAX / width ? emu_ptr(E, j->u.set.dst, count * width) : NULL;
	if (dst == NULL)
		wk_host_fatal(E->host, E->w, j->tag, "CUDA_ERROR_ILLEGAL_ADDRESS: memset of unmapped device memory");
	if (width == 1)
		memset(dst, (int)j->u.set.value, count);
	else
		for (uint64_t i = 0; i < count; i++)
			memcpy(dst + i * width, &j->u.set.value, width); /* little-endian low bytes */
}

/* The copies' device side, or a fault that ends the worker. */
static void *
copy_dev(struct emu *E, const struct emu_job *j)
{
	void *dev = emu_ptr(E, j->u.copy.dev, j->u.copy.bytes);
	if (dev == NULL)
		wk_host_fatal(E->host, E->w, j->tag, unmapped);
	return dev;
}

static void
run_htod(struct emu *E, struct emu_job *j)
{
	memcpy(copy_dev(E, j), j->u.copy.host, j->u.copy.bytes);
}

static void
run_dtoh(struct emu *E, struct emu_job *j)
{
	memcpy(j->u.copy.host, copy_dev(E, j), j->u.copy.bytes);
}

static void
run_dtod(struct emu *E, struct emu_job *j)
{
	void *dst = emu_ptr(E, j->u.dtod.dst, j->u.dtod.bytes), *src = emu_ptr(E, j->u.dtod.src, j->u.dtod.bytes);
	if (dst == NULL || src == NULL)
		wk_host_fatal(E->host, E->w, j->tag, unmapped);
	memmove(dst, src, j->u.dtod.bytes);
}

/* Copies on the copy engines; memsets, which a GPU runs as kernels, and launches on the kernel threads. */
static const struct emu_job_ops htod_ops = {EMU_ENGINE_COPY, run_htod, NULL, NULL},
				dtoh_ops = {EMU_ENGINE_COPY, run_dtoh, NULL, NULL},
				dtod_ops = {EMU_ENGINE_COPY, run_dtod, NULL, NULL},
				memset_ops = {EMU_ENGINE_KERNEL, run_memset, NULL, NULL},
				launch_ops = {EMU_ENGINE_KERNEL, run_launch, launch_fini, NULL};

/* ------------------------------------------------------------------ queueing, on the stream's owner */

static int
emu_copy(struct wk *w, const struct emu_job_ops *ops, uint32_t sid, uint64_t dev, void *host, uint64_t bytes,
	 struct wk_tag tag, cua_err *e)
{
	struct emu_job *j = emu_job_new(ops, tag, e);
	if (j == NULL)
		return e->code;
	j->u.copy.dev = dev;
	j->u.copy.host = host;
	j->u.copy.bytes = bytes;
	return emu_enqueue(w->be_state, sid, j, e);
}

int
emu_htod(struct wk *w, uint32_t sid, uint64_t dst, const void *src, uint64_t bytes, struct wk_tag tag, cua_err *e)
{
	return emu_copy(w, &htod_ops, sid, dst, (void *)(uintptr_t)src, bytes, tag, e);
}

int
emu_dtoh(struct wk *w, uint32_t sid, void *dst, uint64_t src, uint64_t bytes, struct wk_tag tag, cua_err *e)
{
	return emu_copy(w, &dtoh_ops, sid, src, dst, bytes, tag, e);
}

int
emu_dtod(struct wk *w, uint32_t sid, uint64_t dst, uint64_t src, uint64_t bytes, struct wk_tag tag, cua_err *e)
{
	struct emu_job *j = emu_job_new(&dtod_ops, tag, e);
	if (j == NULL)
		return e->code;
	j->u.dtod.dst = dst;
	j->u.dtod.src = src;
	j->u.dtod.bytes = bytes;
	return emu_enqueue(w->be_state, sid, j, e);
}

int
emu_memset(struct wk *w, uint32_t sid, uint64_t dst, uint32_t value, uint32_t width, uint64_t count, struct wk_tag tag,
	   cua_err *e)
{
	struct emu_job *j = emu_job_new(&memset_ops, tag, e);
	if (j == NULL)
		return e->code;
	j->u.set.dst = dst;
	j->u.set.count = count;
	j->u.set.value = value;
	j->u.set.width = width;
	return emu_enqueue(w->be_state, sid, j, e);
}

/* The cluster a launch runs with, as CUDA picks it: the launch's (checked against the kernel's attributes by
 * launch_attr.c), else the kernel's REQUIRED_CLUSTER_* when all three are set (the grid must be a multiple of
 * it), else 1x1x1. */
static int
emu_cluster_of(const struct wk_launch *l, const struct emu_fattr *a, uint32_t cluster[3], cua_err *e)
{
	const int32_t *q = a->req_cluster;
	for (int i = 0; i < 3; i++)
		cluster[i] = l->cluster[i] ? l->cluster[i] : 1;
	if ((l->cluster[0] | l->cluster[1] | l->cluster[2]) != 0 || (q[0] | q[1] | q[2]) == 0)
		return 0;
	/* partly set (2x0x0): CUDA checks the required cluster at launch and refuses it; with a cluster given,
	 * launch_attr.c said so already */
	if (q[0] <= 0 || q[1] <= 0 || q[2] <= 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "CUDA_ERROR_INVALID_CLUSTER_SIZE: the kernel's REQUIRED_CLUSTER_WIDTH/HEIGHT/DEPTH "
				   "are "
				   "%dx%dx%d: set all three or none",
				   q[0], q[1], q[2]);
	uint32_t size = (uint32_t)q[0] * (uint32_t)q[1] * (uint32_t)q[2]; /* each at most 16 (FUNC_SET_ATTRIBUTE) */
	uint32_t limit = a->nonportable ? CUA_MAX_CLUSTER_SIZE : CUA_MAX_CLUSTER_PORTABLE;
	if (size > limit)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "CUDA_ERROR_INVALID_CLUSTER_SIZE: the kernel's required cluster %dx%dx%d has %u "
				   "blocks, more than %u",
				   q[0], q[1], q[2], size, limit);
	for (int i = 0; i < 3; i++) {
		if (l->grid[i] % (uint32_t)q[i] != 0)
			return cua_err_set(e, CUA_EBAD_ARGUMENT,
					   "CUDA_ERROR_INVALID_CLUSTER_SIZE: grid %ux%ux%u is not a multiple of the "
					   "kernel's required cluster %dx%dx%d",
					   l->grid[0], l->grid[1], l->grid[2], q[0], q[1], q[2]);
		cluster[i] = (uint32_t)q[i];
	}
	return 0;
}

/* Copies the arguments (they live only during this call) and queues the kernel. Dynamic shared memory over the
 * function's maximum fails the launch as cuLaunchKernel does (CUDA_ERROR_INVALID_VALUE), without a fault. */
int
emu_launch(struct wk *w, uint32_t sid, const struct wk_launch *l, struct wk_tag tag, cua_err *e)
{
	struct emu *E = w->be_state;
	const struct emu_kernel *k;
	struct emu_fattr attr;
	uint64_t global;
	int r = emu_fn_resolve(E, l->fn, &k, &attr, &global, e);
	if (r != 0)
		return r;
	if (l->nparams != k->nparams)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "CUDA_ERROR_INVALID_VALUE: %zu arguments for %u parameters",
				   l->nparams, k->nparams);
	if (l->shared_mem > (uint32_t)attr.max_dyn_shared)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "CUDA_ERROR_INVALID_VALUE: %u bytes of dynamic shared memory, more than kernel '%s' "
				   "may use (%d; raise its MAX_DYNAMIC_SHARED_SIZE_BYTES attribute)",
				   l->shared_mem, k->name, attr.max_dyn_shared);
	uint32_t cluster[3];
	if ((r = emu_cluster_of(l, &attr, cluster, e)) != 0)
		return r;
	struct emu_job *j = emu_job_new(&launch_ops, tag, e);
	if (j == NULL)
		return e->code;
	cua_arena_init(&j->u.launch.args);
	j->u.launch.k = k;
	memcpy(j->u.launch.dims.cluster, cluster, sizeof(cluster));
	j->u.launch.dims.cooperative = (l->flags & WREC_LAUNCH_COOPERATIVE) != 0;
	memcpy(j->u.launch.dims.grid, l->grid, sizeof(l->grid));
	memcpy(j->u.launch.dims.block, l->block, sizeof(l->block));
	j->u.launch.dims.shared_mem = l->shared_mem;
	j->u.launch.dims.global = global;
	for (size_t i = 0; i < l->nparams; i++)
		if (cua_arena_push(&j->u.launch.args, l->params[i], l->sizes[i]) != 0) {
			emu_job_free(E, j);
			return cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory for arguments");
		}
	return emu_enqueue(w->be_state, sid, j, e);
}
