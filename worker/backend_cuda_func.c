/*
 * backend_cuda_func.c — the CUDA backend's module globals (cuModuleGetGlobal), function attributes
 * (cuFuncGetAttribute, cuFuncSetAttribute) and occupancy (cuOccupancyMaxActiveBlocksPerMultiprocessor). The same
 * semantics as the emulated device's (emu_module.c); the front-end has range-checked every value.
 */
#include "config.h"

#include "cuda_impl.h"

#include "cua_log.h"

#include <stdlib.h>

/* A refused value (CUDA_ERROR_INVALID_VALUE) is the caller's mistake: BAD_ARGUMENT; sticky errors cannot come
 * from these calls' arguments but are reported as DEVICE all the same (the next stream work ends the worker). */
static int
ferr(cua_err *e, CUresult r, const char *what)
{
	if (r == CUDA_ERROR_INVALID_VALUE)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "%s: %s: %s", errname(r), what, errstr(r));
	return cerr(e, r, what);
}

int
cu_module_get_global(struct wk *w, uint64_t mod, const char *name, uint64_t *addr, uint64_t *bytes, cua_err *e)
{
	struct cu *C = w->be_state;
	CUmodule m = cua_idmap_find(&C->modules, mod);
	if (m == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)mod);
	CUdeviceptr p = 0;
	size_t n = 0;
	CUresult r = drv.cuModuleGetGlobal(&p, &n, m, name);
	if (r == CUDA_ERROR_NOT_FOUND)
		return cua_err_set(e, CUA_ENOT_FOUND, "CUDA_ERROR_NOT_FOUND: no global named '%s' in the module", name);
	if (r != CUDA_SUCCESS)
		return cerr(e, r, "cuModuleGetGlobal");
	for (size_t i = 0; i < C->nglobals; i++)
		if (C->globals[i].module == mod && C->globals[i].p == p)
			goto out;
	if (C->nglobals == C->globals_cap) {
		size_t cap = C->globals_cap ? 2 * C->globals_cap : 16;
		struct cu_global *g = realloc(C->globals, cap * sizeof(*g));
		if (g == NULL)
			return cua_err_set(e, CUA_ENOMEM, "out of host memory");
		C->globals = g;
		C->globals_cap = cap;
	}
	C->globals[C->nglobals++] = (struct cu_global){mod, p, n};
out:
	*addr = (uint64_t)p;
	*bytes = (uint64_t)n;
	return 0;
}

int
cu_globals_release(struct cu *C, uint64_t mod)
{
	int rc = 0;
	for (size_t i = 0; i < C->nglobals;) {
		struct cu_global g = C->globals[i];
		if (g.module != mod) {
			i++;
			continue;
		}
		C->globals[i] = C->globals[--C->nglobals];
		if (!C->w->opts.scrub || rc != 0)
			continue;
		CUresult r = g.bytes >= 4 ? drv.cuMemsetD32Async(g.p, 0, g.bytes / 4, C->scrub) : CUDA_SUCCESS;
		if (r == CUDA_SUCCESS && g.bytes % 4)
			r = drv.cuMemsetD8Async(g.p + g.bytes / 4 * 4, 0, g.bytes % 4, C->scrub);
		if (r == CUDA_SUCCESS)
			r = drv.cuStreamSynchronize(C->scrub);
		if (r != CUDA_SUCCESS) {
			log_error("cannot clear module global at 0x%llx (%zu bytes): %s: %s; keeping its module loaded",
				  (unsigned long long)g.p, g.bytes, errname(r), errstr(r));
			rc = -1;
		}
	}
	return rc;
}

int
cu_func_get_attr(struct wk *w, uint64_t fn, uint32_t attr, int32_t *value, cua_err *e)
{
	CUfunction f = function_of(w->be_state, fn);
	if (f == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no function %llu", (unsigned long long)fn);
	int v = 0;
	CUresult r = drv.cuFuncGetAttribute(&v, (CUfunction_attribute)attr, f);
	if (r != CUDA_SUCCESS)
		return ferr(e, r, "cuFuncGetAttribute");
	*value = v;
	return 0;
}

int
cu_func_set_attr(struct wk *w, uint64_t fn, uint32_t attr, int32_t value, cua_err *e)
{
	CUfunction f = function_of(w->be_state, fn);
	if (f == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no function %llu", (unsigned long long)fn);
	if (attr != CUA_FATTR_MAX_DYNAMIC_SHARED && attr != CUA_FATTR_PREFERRED_CARVEOUT &&
	    (attr < CUA_FATTR_REQUIRED_CLUSTER_WIDTH || attr > CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED))
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "attribute %u cannot be set", attr);
	CUresult r = drv.cuFuncSetAttribute(f, (CUfunction_attribute)attr, value);
	if (r == CUDA_ERROR_NOT_PERMITTED) /* REQUIRED_CLUSTER_* of a kernel compiled with __cluster_dims__ */
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "%s: cuFuncSetAttribute: attribute %u is fixed by the kernel's "
				   "compile-time cluster dimensions",
				   errname(r), attr);
	return r == CUDA_SUCCESS ? 0 : ferr(e, r, "cuFuncSetAttribute");
}

int
cu_occupancy(struct wk *w, uint64_t fn, uint32_t block_size, uint32_t shared_mem, uint32_t *blocks, cua_err *e)
{
	CUfunction f = function_of(w->be_state, fn);
	if (f == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no function %llu", (unsigned long long)fn);
	int n = 0;
	CUresult r = drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, (int)block_size, (size_t)shared_mem);
	if (r != CUDA_SUCCESS)
		return ferr(e, r, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
	*blocks = n > 0 ? (uint32_t)n : 0;
	return 0;
}
