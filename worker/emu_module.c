/*
 * emu_module.c — the emulated device's modules: the kernels an image names, the globals it declares (device
 * memory allocated at load, cleared and given back at unload), per-kernel attributes (what FUNC_SET_ATTRIBUTE
 * changes) and the occupancy model. State in struct emu (emu_impl.h), under E->lock.
 */
#include "config.h"

#include "emu_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Gives back the module's globals (cleared with --scrub on). Caller holds E->lock. */
static void
globals_free(struct emu *E, struct emu_module *m)
{
	for (uint32_t g = 0; g < m->nglobals; g++) {
		uint64_t off = m->globals[g].addr - E->base, len = m->globals[g].bytes;
		uint64_t ext = (len + EMU_ALIGN - 1) / EMU_ALIGN * EMU_ALIGN;
		if (E->w->opts.scrub)
			emu_clear(E, off, ext < E->size - off ? ext : E->size - off);
		extent_put(&E->alloc, off, len);
	}
	free(m->globals);
	m->globals = NULL;
	m->nglobals = 0;
}

/* Allocates and zeroes the globals info declares into m (as a CUDA module's globals start as their zero
 * initialisers). Caller holds E->lock. 0, or NO_MEMORY with m's globals given back. */
static int
globals_alloc(struct emu *E, struct emu_module *m, const struct emu_image_info *info, cua_err *e)
{
	m->globals = info->nglobals ? calloc(info->nglobals, sizeof(*m->globals)) : NULL;
	if (info->nglobals && m->globals == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	for (uint32_t g = 0; g < info->nglobals; g++) {
		uint64_t off, len = info->globals[g].bytes;
		if (extent_get(&E->alloc, len, &off) != 0) {
			globals_free(E, m);
			return cua_err_set(e, CUA_ENOMEM,
					   "CUDA_ERROR_OUT_OF_MEMORY: no room for global '%s' (%llu bytes)",
					   info->globals[g].name, (unsigned long long)len);
		}
		memset(E->mem + off, 0, len);
		memcpy(m->globals[g].name, info->globals[g].name, sizeof(m->globals[g].name));
		m->globals[g].addr = E->base + off;
		m->globals[g].bytes = len;
		m->nglobals++;
	}
	return 0;
}

/* Module id, or NULL. Caller holds E->lock. */
static struct emu_module *
module_at(struct emu *E, uint64_t id)
{
	return cua_idmap_find(&E->modules, id);
}

/* Frees module p (a struct emu_module *) but not its globals' memory, which goes with the device. */
static void
module_drop(void *ud, void *p)
{
	struct emu_module *m = p;
	(void)ud;
	free(m->globals);
	free(m);
}

void
emu_modules_fini(struct emu *E)
{
	wk_idmap_fini_each(&E->modules, module_drop, NULL);
}

/* Checks the image (emu_image.c: anything malformed is CUA_EMODULE), keeps the set of kernels it names and
 * allocates its globals. */
int
emu_module_load(struct wk *w, const void *img, size_t len, uint32_t fmt, uint64_t *id, cua_err *e)
{
	struct emu *E = w->be_state;
	struct emu_image_info *info = malloc(sizeof(*info));
	struct emu_module *m = calloc(1, sizeof(*m));
	int r;
	if (info == NULL || m == NULL) {
		r = cua_err_set(e, CUA_ENOMEM, "out of host memory");
		goto out;
	}
	if ((r = emu_image_parse(img, len, fmt, info, e)) != 0)
		goto out;
	for (size_t k = 0; k < 64; k++)
		m->attr[k] = (struct emu_fattr){EMU_DYN_SHARED_DEFAULT, -1, {0, 0, 0}, 0};
	m->kernels = info->kernels;
	pthread_mutex_lock(&E->lock);
	if ((r = globals_alloc(E, m, info, e)) == 0 && (r = cua_idmap_alloc(&E->modules, id, m)) != 0) {
		globals_free(E, m);
		r = r == CUA_EQUOTA ? cua_err_set(e, r, "emulated device: more than %u modules", EMU_MODULES_MAX)
				    : cua_err_set(e, r, "out of host memory");
	}
	pthread_mutex_unlock(&E->lock);
	if (r == 0)
		m = NULL; /* transferred */
out:
	free(m);
	free(info);
	return r;
}

int
emu_module_unload(struct wk *w, uint64_t id, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	struct emu_module *m = cua_idmap_remove(&E->modules, id);
	if (m != NULL)
		globals_free(E, m);
	free(m);
	pthread_mutex_unlock(&E->lock);
	return m != NULL ? 0 : cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)id);
}

int
emu_function_get(struct wk *w, uint64_t mod, const char *name, uint64_t *fn, cua_param_info **params, uint32_t *nparams,
		 cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	const struct emu_module *m = module_at(E, mod);
	uint64_t kernels = m != NULL ? m->kernels : 0;
	pthread_mutex_unlock(&E->lock);
	if (m == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)mod);
	int k = emu_kernel_find(name, strlen(name));
	/* The kernel must be named in the image, as it is in a real module. */
	if (k < 0 || !(kernels & (1ull << k)))
		return cua_err_set(e, CUA_ENOT_FOUND, "CUDA_ERROR_NOT_FOUND: no kernel named '%s' in the module", name);
	uint32_t n = emu_kernels[k].nparams;
	*params = malloc(n ? n * sizeof(cua_param_info) : 1);
	if (*params == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	memcpy(*params, emu_kernels[k].params, n * sizeof(cua_param_info));
	*nparams = n;
	*fn = mod << 8 | ((uint64_t)k + 1);
	return 0;
}

/* Function fn's kernel, its module's attributes for it and the address of the global it reads (0: none), or
 * NOT_FOUND. Any thread (takes E->lock). */
int
emu_fn_resolve(struct emu *E, uint64_t fn, const struct emu_kernel **K, struct emu_fattr *attr, uint64_t *global,
	       cua_err *e)
{
	uint64_t k = (fn & 0xff) - 1, mod = fn >> 8;
	int r = 0;
	pthread_mutex_lock(&E->lock);
	const struct emu_module *m = module_at(E, mod);
	if ((fn & 0xff) == 0 || k >= emu_nkernels || m == NULL || !(m->kernels & (1ull << k))) {
		r = cua_err_set(e, CUA_ENOT_FOUND, "no function %llu", (unsigned long long)fn);
		goto out;
	}
	*K = &emu_kernels[k];
	if (attr)
		*attr = m->attr[k];
	if (global)
		*global = 0;
	for (uint32_t g = 0; global && (*K)->global && g < m->nglobals; g++)
		if (strcmp(m->globals[g].name, (*K)->global) == 0)
			*global = m->globals[g].addr;
out:
	pthread_mutex_unlock(&E->lock);
	return r;
}

/* ------------------------------------------------------------------ globals, attributes, occupancy */

int
emu_module_get_global(struct wk *w, uint64_t mod, const char *name, uint64_t *addr, uint64_t *bytes, cua_err *e)
{
	struct emu *E = w->be_state;
	int r = 0;
	pthread_mutex_lock(&E->lock);
	const struct emu_module *m = module_at(E, mod);
	if (m == NULL) {
		r = cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)mod);
		goto out;
	}
	for (uint32_t g = 0; g < m->nglobals; g++)
		if (strcmp(m->globals[g].name, name) == 0) {
			*addr = m->globals[g].addr;
			*bytes = m->globals[g].bytes;
			goto out;
		}
	r = cua_err_set(e, CUA_ENOT_FOUND, "CUDA_ERROR_NOT_FOUND: no global named '%s' in the module", name);
out:
	pthread_mutex_unlock(&E->lock);
	return r;
}

/* Fixed values for what a compiler decides (documented in PROTOCOL.md §7), the stored ones for the rest. */
int
emu_func_get_attr(struct wk *w, uint64_t fn, uint32_t attr, int32_t *value, cua_err *e)
{
	struct emu *E = w->be_state;
	const struct emu_kernel *k;
	struct emu_fattr a;
	int r = emu_fn_resolve(E, fn, &k, &a, NULL, e);
	if (r != 0)
		return r;
	switch (attr) {
	case CUA_FATTR_MAX_THREADS_PER_BLOCK: *value = 1024; break;
	case CUA_FATTR_CONST_SIZE_BYTES: *value = (int32_t)k->global_bytes; break;
	case CUA_FATTR_NUM_REGS: *value = 32; break;
	case CUA_FATTR_PTX_VERSION:
	case CUA_FATTR_BINARY_VERSION: *value = w->opts.emu_sm; break;
	case CUA_FATTR_MAX_DYNAMIC_SHARED: *value = a.max_dyn_shared; break;
	case CUA_FATTR_PREFERRED_CARVEOUT: *value = a.carveout; break;
	case CUA_FATTR_REQUIRED_CLUSTER_WIDTH:
	case CUA_FATTR_REQUIRED_CLUSTER_HEIGHT:
	case CUA_FATTR_REQUIRED_CLUSTER_DEPTH: *value = a.req_cluster[attr - CUA_FATTR_REQUIRED_CLUSTER_WIDTH]; break;
	case CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: *value = a.nonportable; break;
	case CUA_FATTR_SHARED_SIZE_BYTES:
	case CUA_FATTR_LOCAL_SIZE_BYTES:
	case CUA_FATTR_CACHE_MODE_CA:
	case CUA_FATTR_CLUSTER_SIZE_MUST_BE_SET: /* no built-in kernel has compile-time cluster dimensions */
	case CUA_FATTR_CLUSTER_SCHEDULING_POLICY: *value = 0; break; /* CU_CLUSTER_SCHEDULING_POLICY_DEFAULT */
	default: return cua_err_set(e, CUA_EBAD_ARGUMENT, "CUDA_ERROR_INVALID_VALUE: attribute %u", attr);
	}
	return 0;
}

/* Whether value is in attr's range (the front-end checked it; the worker does not trust that). */
static bool
settable(const struct wk *w, uint32_t attr, int32_t value)
{
	switch (attr) {
	case CUA_FATTR_MAX_DYNAMIC_SHARED: return value >= 0 && (uint32_t)value <= w->info.max_shared_optin;
	case CUA_FATTR_PREFERRED_CARVEOUT: return value >= -1 && value <= 100;
	case CUA_FATTR_REQUIRED_CLUSTER_WIDTH:
	case CUA_FATTR_REQUIRED_CLUSTER_HEIGHT:
	case CUA_FATTR_REQUIRED_CLUSTER_DEPTH:
		return w->info.cluster_launch && value >= 0 && (uint32_t)value <= CUA_MAX_CLUSTER_SIZE;
	case CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: return w->info.cluster_launch && (value == 0 || value == 1);
	default: return false;
	}
}

int
emu_func_set_attr(struct wk *w, uint64_t fn, uint32_t attr, int32_t value, cua_err *e)
{
	struct emu *E = w->be_state;
	const struct emu_kernel *k;
	int r = emu_fn_resolve(E, fn, &k, NULL, NULL, e);
	if (r != 0)
		return r;
	if (!settable(w, attr, value))
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "CUDA_ERROR_INVALID_VALUE: attribute %u = %d", attr, value);
	pthread_mutex_lock(&E->lock);
	struct emu_module *m = module_at(E, fn >> 8);
	if (m == NULL) { /* unloaded since: unload and this call are both the main thread's, so never */
		pthread_mutex_unlock(&E->lock);
		return cua_err_set(e, CUA_ENOT_FOUND, "no function %llu", (unsigned long long)fn);
	}
	struct emu_fattr *a = &m->attr[(fn & 0xff) - 1];
	switch (attr) {
	case CUA_FATTR_MAX_DYNAMIC_SHARED: a->max_dyn_shared = value; break;
	case CUA_FATTR_PREFERRED_CARVEOUT: a->carveout = value; break;
	case CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED: a->nonportable = value; break;
	default: a->req_cluster[attr - CUA_FATTR_REQUIRED_CLUSTER_WIDTH] = value; break;
	}
	pthread_mutex_unlock(&E->lock);
	return 0;
}

/*
 * The occupancy model (PROTOCOL.md §7): a multiprocessor holds at most 32 blocks and 64 warps (2048 threads; every
 * kernel uses 32 registers per thread, so registers never limit sooner), and max_shared_optin bytes of shared
 * memory; a block takes ceil(block_size / 32) warps and shared_mem bytes. Over 1024 threads, or more dynamic
 * shared memory than the function may use: 0 blocks.
 */
int
emu_occupancy(struct wk *w, uint64_t fn, uint32_t block_size, uint32_t shared_mem, uint32_t *blocks, cua_err *e)
{
	const struct emu_kernel *k;
	struct emu_fattr a;
	int r = emu_fn_resolve(w->be_state, fn, &k, &a, NULL, e);
	if (r != 0)
		return r;
	uint32_t warps = (block_size + 31) / 32, n = 32;
	if (block_size == 0 || block_size > 1024 || shared_mem > (uint32_t)a.max_dyn_shared) {
		*blocks = 0;
		return 0;
	}
	if (64 / warps < n)
		n = 64 / warps;
	if (shared_mem > 0 && w->info.max_shared_optin / shared_mem < n)
		n = w->info.max_shared_optin / shared_mem;
	*blocks = n;
	return 0;
}
