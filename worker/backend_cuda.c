/*
 * backend_cuda.c — the worker's real GPU (backend.h) through the CUDA driver API (cuda_drv.c loads it at run
 * time): the device and its context, modules and functions, memory, streams and the stream work issued on them.
 * Completions are the reactor's (cuda_reactor.c); events, graphs, globals and function attributes have files of
 * their own. The top of the CUDA backend's files (cuda_impl.h, "Layers").
 */
#include "config.h"

#include "cua_clock.h"
#include "cua_log.h"
#include "cuda_impl.h"

#include <cuda.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A new stream: pool stream *sid when pool (init), else one with a fresh id of C->streams' range in *sid. */
static int
new_stream(struct cu *C, int prio, bool pool, uint32_t *sid, cua_err *e)
{
	CUstream s;
	uint64_t id = *sid;
	CUresult r = drv.cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, prio);
	if (r != CUDA_SUCCESS)
		return cerr(e, r, "cuStreamCreateWithPriority");
	pthread_rwlock_wrlock(&C->slock);
	int rc = pool ? cua_idmap_set(&C->streams, id, s) : cua_idmap_alloc(&C->streams, &id, s);
	pthread_rwlock_unlock(&C->slock);
	if (rc != 0) {
		drv.cuStreamDestroy(s);
		return rc == CUA_EQUOTA
			       ? cua_err_set(e, rc, "more than %u streams on this device", WK_STREAM_ID_MAX + 1)
			       : cua_err_set(e, rc, "out of host memory");
	}
	*sid = (uint32_t)id;
	return 0;
}

static int
cu_init(struct wk *w, const struct wk_host *host, struct wdev_info *info, cua_err *e)
{
	/* Each step's time at debug level: a restart after a fault waits for all of it unless a spare worker
	 * (--spare-worker) did it beforehand (docs/OPERATIONS.md, "Faults"). */
	uint64_t t0 = cua_now_ms(), t1, t2, t3;
	int r = cu_load_driver(e);
	if (r != 0)
		return r;
	t1 = cua_now_ms();
	struct cu *C = calloc(1, sizeof(*C));
	if (C == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	C->w = w;
	C->host = host;
	w->be_state = C;
	pthread_rwlock_init(&C->slock, NULL);
	cua_idmap_init(&C->modules, 1, UINT32_MAX);
	cua_idmap_init(&C->events, 1, UINT32_MAX);
	wk_idtab_init(&C->graphs, 1, UINT32_MAX);
	CUresult cr;
	if ((cr = drv.cuDeviceGet(&C->dev, w->opts.device)) != CUDA_SUCCESS)
		return cua_err_set(e, CUA_ENO_DEVICE, "device %d: %s", w->opts.device, errname(cr));
	if ((cr = drv.cuDevicePrimaryCtxRetain(&C->ctx, C->dev)) != CUDA_SUCCESS ||
	    (cr = drv.cuCtxSetCurrent(C->ctx)) != CUDA_SUCCESS)
		return cua_err_set(e, CUA_ENO_DEVICE, "device %d: primary context: %s: %s", w->opts.device, errname(cr),
				   errstr(cr));
	t2 = cua_now_ms();
	memset(info, 0, sizeof(*info));
	drv.cuDeviceGetName(info->name, sizeof(info->name) - 1, C->dev);
	snprintf(info->backend, sizeof(info->backend), "cuda");
	int major = 0, minor = 0, mp = 0;
	drv.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, C->dev);
	drv.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, C->dev);
	drv.cuDeviceGetAttribute(&mp, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, C->dev);
	info->sm_major = (uint32_t)major;
	info->sm_minor = (uint32_t)minor;
	info->multiprocessors = (uint32_t)mp;
	C->sm = major * 10 + minor;
	size_t total = 0;
	drv.cuDeviceTotalMem(&total, C->dev);
	info->total_mem = total;
	int least = 0, greatest = 0;
	drv.cuCtxGetStreamPriorityRange(&least, &greatest);
	info->prio_least = least;
	info->prio_greatest = greatest;
	/* CUDA 12.1+ (this backend needs 12.4) passes up to 32764 bytes of kernel parameters on sm_70+ */
	info->max_param_bytes = C->sm >= 70 ? CUA_MAX_PARAM_BYTES : CUA_MAX_PARAM_BYTES_OLD;
	int optin = 0;
	drv.cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, C->dev);
	info->max_shared_optin = optin > 0 ? (uint32_t)optin : 49152u;
	int cluster = 0, coop = 0;
	drv.cuDeviceGetAttribute(&cluster, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, C->dev);
	drv.cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, C->dev);
	info->cluster_launch = cluster != 0;
	info->cooperative_launch = coop != 0;
	/* every attribute the driver answers, for the drop-in libraries' cuDeviceGetAttribute and
	 * cudaGetDeviceProperties: a program's device queries see the real device */
	for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX && info->nattrs < CUA_MAX_DEV_ATTRS; a++) {
		int v = 0;
		if (drv.cuDeviceGetAttribute(&v, (CUdevice_attribute)a, C->dev) == CUDA_SUCCESS)
			info->attrs[info->nattrs++] = (cua_wire_dev_attr){(uint32_t)a, v};
	}
	info->pool_streams = w->opts.pool_streams ? w->opts.pool_streams : 4;
	cua_idmap_init(&C->streams, info->pool_streams, WK_STREAM_ID_MAX);
	for (uint32_t sid = 0; sid < info->pool_streams; sid++) {
		uint32_t id = sid;
		if ((r = new_stream(C, 0, true, &id, e)) != 0)
			return r;
	}
	if (w->opts.scrub &&
	    (cr = drv.cuStreamCreateWithPriority(&C->scrub, CU_STREAM_NON_BLOCKING, greatest)) != CUDA_SUCCESS)
		return cerr(e, cr, "cuStreamCreateWithPriority (the scrub stream)");
	t3 = cua_now_ms();
	/* Page-lock the staging area shared with the front-end: copies then run at pinned-memory speed. */
	cr = drv.cuMemHostRegister(w->staging, w->staging_size, CU_MEMHOSTREGISTER_PORTABLE);
	if (cr == CUDA_SUCCESS)
		C->staging_registered = 1;
	else
		log_warn("cannot page-lock the %llu-byte staging area (%s); copies will be slower (raise LimitMEMLOCK)",
			 (unsigned long long)w->staging_size, errname(cr));
	pthread_mutex_init(&C->lock, NULL);
	pthread_mutex_init(&C->evlock, NULL);
	pthread_cond_init(&C->cond, NULL);
	TAILQ_INIT(&C->pending);
	TAILQ_INIT(&C->free_markers);
	if (cu_reactor_start(C) != 0)
		return cua_err_set(e, CUA_EINTERNAL, "cannot start the completion reactor");
	log_debug("device %d: cuInit %llu ms, primary context %llu ms, %u pool streams %llu ms, staging of %llu "
		  "bytes page-locked %llu ms",
		  w->opts.device, (unsigned long long)(t1 - t0), (unsigned long long)(t2 - t1), info->pool_streams,
		  (unsigned long long)(t3 - t2), (unsigned long long)w->staging_size,
		  (unsigned long long)(cua_now_ms() - t3));
	return 0;
}

static void
cu_fini(struct wk *w)
{
	struct cu *C = w->be_state;
	cu_reactor_stop(C);
	void *s;
	for (size_t k = 0; cua_idmap_next(&C->streams, &k, NULL, &s);) /* no other thread is left */
		drv.cuStreamSynchronize(s);
	cu_events_fini(C);
	if (C->staging_registered)
		drv.cuMemHostUnregister(w->staging);
	cu_graphs_fini(C);
	free(C->globals);
}

static int
cu_module_load(struct wk *w, const void *img, size_t len, uint32_t fmt, uint64_t *id, cua_err *e)
{
	struct cu *C = w->be_state;
	const unsigned char *p = img;
	if (fmt == CUA_IMAGE_AUTO)
		fmt = len >= 4 && p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba ? CUA_IMAGE_FATBIN
		      : len >= 4 && memcmp(p,
					   "\x7f"
					   "ELF",
					   4) == 0
			      ? CUA_IMAGE_CUBIN
			      : CUA_IMAGE_PTX;
	if (fmt == CUA_IMAGE_EMU)
		return cua_err_set(e, CUA_EMODULE, "an emulated-device module image cannot load on a GPU");
	char *copy = NULL;
	if (fmt == CUA_IMAGE_PTX && (len == 0 || p[len - 1] != '\0')) { /* PTX must be NUL-terminated */
		copy = malloc(len + 1);
		if (copy == NULL)
			return cua_err_set(e, CUA_ENOMEM, "out of host memory");
		memcpy(copy, img, len);
		copy[len] = '\0';
		img = copy;
	}
	static char log_err[8192], log_info[2048];
	log_err[0] = log_info[0] = '\0';
	CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
			       CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
	void *vals[] = {log_err, (void *)(uintptr_t)sizeof(log_err), log_info, (void *)(uintptr_t)sizeof(log_info)};
	CUmodule m;
	CUresult r = drv.cuModuleLoadDataEx(&m, img, 4, opts, vals);
	free(copy);
	if (r != CUDA_SUCCESS) {
		if (is_sticky(r))
			return cerr(e, r, "cuModuleLoadDataEx");
		return cua_err_set(e, CUA_EMODULE, "%s: %s%s%s", errname(r), errstr(r), log_err[0] ? "; JIT log: " : "",
				   log_err);
	}
	int rc = cua_idmap_alloc(&C->modules, id, m);
	if (rc != 0) {
		drv.cuModuleUnload(m);
		return cua_err_set(e, rc, rc == CUA_EQUOTA ? "too many modules" : "out of host memory");
	}
	return 0;
}

static int
cu_module_unload(struct wk *w, uint64_t id, cua_err *e)
{
	struct cu *C = w->be_state;
	CUmodule m = cua_idmap_find(&C->modules, id);
	if (m == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)id);
	int kept = cu_globals_release(C, id) != 0; /* kept loaded (and leaked) rather than freed uncleared */
	cua_idmap_remove(&C->modules, id);
	if (kept)
		return 0;
	CUresult r = drv.cuModuleUnload(m);
	return r == CUDA_SUCCESS ? 0 : cerr(e, r, "cuModuleUnload");
}

static int
cu_function_get(struct wk *w, uint64_t mod, const char *name, uint64_t *fn, cua_param_info **params, uint32_t *nparams,
		cua_err *e)
{
	struct cu *C = w->be_state;
	CUmodule m = cua_idmap_find(&C->modules, mod);
	if (m == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)mod);
	CUfunction f;
	CUresult r = drv.cuModuleGetFunction(&f, m, name);
	if (r == CUDA_ERROR_NOT_FOUND)
		return cua_err_set(e, CUA_ENOT_FOUND, "CUDA_ERROR_NOT_FOUND: no kernel named '%s' in the module", name);
	if (r != CUDA_SUCCESS)
		return cerr(e, r, "cuModuleGetFunction");
	cua_param_info *p = NULL;
	uint32_t n = 0;
	for (;;) {
		size_t off, size;
		r = drv.cuFuncGetParamInfo(f, n, &off, &size);
		if (r != CUDA_SUCCESS)
			break;
		cua_param_info *np = realloc(p, (n + 1) * sizeof(*np));
		if (np == NULL) {
			free(p);
			return cua_err_set(e, CUA_ENOMEM, "out of host memory");
		}
		p = np;
		p[n++] = (cua_param_info){(uint32_t)off, (uint32_t)size};
		if (n > CUA_MAX_PARAMS) {
			free(p);
			return cua_err_set(e, CUA_ETOO_LARGE, "kernel '%s' has more than %u parameters", name,
					   CUA_MAX_PARAMS);
		}
	}
	size_t nf = atomic_load_explicit(&C->nfunctions, memory_order_relaxed); /* only this thread stores it */
	CUfunction **chunk = nf / FN_CHUNK < FN_CHUNKS ? &C->fn_chunks[nf / FN_CHUNK] : NULL;
	if (chunk && *chunk == NULL)
		*chunk = calloc(FN_CHUNK, sizeof(**chunk));
	if (chunk == NULL || *chunk == NULL) {
		free(p);
		if (chunk == NULL)
			return cua_err_set(e, CUA_EQUOTA, "more than %u functions on this device",
					   FN_CHUNK * FN_CHUNKS);
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	}
	(*chunk)[nf % FN_CHUNK] = f;
	atomic_store_explicit(&C->nfunctions, nf + 1, memory_order_release);
	*fn = nf + 1;
	*params = p;
	*nparams = n;
	return 0;
}

static int
cu_mem_alloc(struct wk *w, uint64_t bytes, uint64_t *addr, cua_err *e)
{
	CUdeviceptr p;
	CUresult r = drv.cuMemAlloc(&p, bytes);
	if (r != CUDA_SUCCESS)
		return cerr(e, r, "cuMemAlloc");
	*addr = p;
	return 0;
}

/*
 * Clears the allocation at addr (--scrub on) and waits for it. 0: it reads as zeros, or it could not be
 * cleared and *kept is set (logged; the caller keeps it allocated). Else an error in e: addr is not the start of
 * an allocation (nothing was done). A sticky fault ends the worker under tag.
 *
 * Ordering: when the core frees, every earlier command of the owning session has completed (backend.h), so
 * nothing queued on any stream still uses the memory; the memset goes on the worker's own scrub stream
 * (CU_STREAM_NON_BLOCKING, so it neither waits for nor holds up the other sessions' streams, unlike the legacy
 * NULL stream), and only the main thread waits for it, about as long as the memset runs. cuMemFree follows.
 */
static int
scrub(struct cu *C, uint64_t addr, struct wk_tag tag, bool *kept, cua_err *e)
{
	CUdeviceptr base = 0;
	size_t size = 0;
	CUresult r = drv.cuMemGetAddressRange(&base, &size, (CUdeviceptr)addr);
	if (r != CUDA_SUCCESS && is_sticky(r))
		cu_fatal(C, r, &tag, NULL);
	if (r != CUDA_SUCCESS)
		return cerr(e, r, "cuMemGetAddressRange");
	if (base != (CUdeviceptr)addr) /* the front-end frees only what it allocated */
		return cua_err_set(e, CUA_EINTERNAL, "0x%llx is inside the allocation at 0x%llx",
				   (unsigned long long)addr, (unsigned long long)base);
	/* 32-bit words (faster), then the odd tail bytes */
	r = size >= 4 ? drv.cuMemsetD32Async(base, 0, size / 4, C->scrub) : CUDA_SUCCESS;
	if (r == CUDA_SUCCESS && size % 4)
		r = drv.cuMemsetD8Async(base + size / 4 * 4, 0, size % 4, C->scrub);
	if (r == CUDA_SUCCESS)
		r = drv.cuStreamSynchronize(C->scrub);
	if (r == CUDA_SUCCESS)
		return 0;
	if (is_sticky(r))
		cu_fatal(C, r, &tag, NULL);
	C->leaked_bytes += size;
	log_error("cannot clear freed device memory at 0x%llx (%zu bytes): %s: %s; keeping it allocated rather than "
		  "handing it out uncleared (%llu bytes kept so far)",
		  (unsigned long long)addr, size, errname(r), errstr(r), (unsigned long long)C->leaked_bytes);
	*kept = true;
	return 0;
}

static int
cu_mem_free(struct wk *w, uint64_t addr, struct wk_tag tag, cua_err *e)
{
	struct cu *C = w->be_state;
	bool kept = false;
	int rc = w->opts.scrub ? scrub(C, addr, tag, &kept, e) : 0;
	if (rc != 0 || kept) /* kept: gone from the session's view, never handed out again */
		return rc;
	CUresult r = drv.cuMemFree((CUdeviceptr)addr);
	if (r != CUDA_SUCCESS && is_sticky(r))
		cu_fatal(C, r, &tag, NULL);
	return r == CUDA_SUCCESS ? 0 : cerr(e, r, "cuMemFree");
}

static int
cu_stream_create(struct wk *w, int priority, uint32_t *sid, cua_err *e)
{
	return new_stream(w->be_state, priority, false, sid, e);
}

static int
cu_stream_destroy(struct wk *w, uint32_t sid, cua_err *e)
{
	struct cu *C = w->be_state;
	pthread_rwlock_wrlock(&C->slock);
	CUstream s = sid < w->info.pool_streams ? NULL : cua_idmap_remove(&C->streams, sid);
	pthread_rwlock_unlock(&C->slock);
	if (s == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	CUresult r = drv.cuStreamDestroy(s); /* returns at once; pending work still completes */
	return r == CUDA_SUCCESS ? 0 : cerr(e, r, "cuStreamDestroy");
}

/* ------------------------------------------------------------------ stream work (the stream's owner thread) */

/* A submit thread issues into the worker's context. */
static void
cu_thread_init(struct wk *w)
{
	struct cu *C = w->be_state;
	CUresult r = drv.cuCtxSetCurrent(C->ctx);
	if (r != CUDA_SUCCESS)
		cu_fatal(C, r, NULL, NULL); /* the context is unusable: nothing else could issue either */
}

#define NEED_STREAM(C, sid, s, e)                                                                                      \
	CUstream s = cu_stream_of((C), (sid));                                                                         \
	if (s == NULL)                                                                                                 \
		return cua_err_set((e), CUA_ENOT_FOUND, "no stream %u", (sid));

static int
cu_htod(struct wk *w, uint32_t sid, uint64_t dst, const void *src, uint64_t bytes, struct wk_tag tag, cua_err *e)
{
	struct cu *C = w->be_state;
	NEED_STREAM(C, sid, s, e)
	return issued(C, drv.cuMemcpyHtoDAsync((CUdeviceptr)dst, src, bytes, s), tag, e);
}

static int
cu_dtoh(struct wk *w, uint32_t sid, void *dst, uint64_t src, uint64_t bytes, struct wk_tag tag, cua_err *e)
{
	struct cu *C = w->be_state;
	NEED_STREAM(C, sid, s, e)
	return issued(C, drv.cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, bytes, s), tag, e);
}

static int
cu_dtod(struct wk *w, uint32_t sid, uint64_t dst, uint64_t src, uint64_t bytes, struct wk_tag tag, cua_err *e)
{
	struct cu *C = w->be_state;
	NEED_STREAM(C, sid, s, e)
	return issued(C, drv.cuMemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, bytes, s), tag, e);
}

static int
cu_memset(struct wk *w, uint32_t sid, uint64_t dst, uint32_t value, uint32_t width, uint64_t count, struct wk_tag tag,
	  cua_err *e)
{
	struct cu *C = w->be_state;
	NEED_STREAM(C, sid, s, e)
	CUresult r = width == 1   ? drv.cuMemsetD8Async((CUdeviceptr)dst, (unsigned char)value, count, s)
		     : width == 2 ? drv.cuMemsetD16Async((CUdeviceptr)dst, (unsigned short)value, count, s)
				  : drv.cuMemsetD32Async((CUdeviceptr)dst, (unsigned int)value, count, s);
	return issued(C, r, tag, e);
}

/* The launch's attributes for cuLaunchKernelEx (at most 4); returns how many. */
static unsigned
launch_attrs(const struct wk_launch *l, CUlaunchAttribute a[4])
{
	unsigned n = 0;
	memset(a, 0, 4 * sizeof(*a));
	if (l->flags & WREC_LAUNCH_PDL) {
		a[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
		a[n++].value.programmaticStreamSerializationAllowed = 1;
	}
	if (l->flags & WREC_LAUNCH_COOPERATIVE) {
		a[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
		a[n++].value.cooperative = 1;
	}
	if (l->flags & WREC_LAUNCH_PRIORITY) {
		a[n].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
		a[n++].value.priority = l->priority;
	}
	if ((l->cluster[0] | l->cluster[1] | l->cluster[2]) != 0) {
		a[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
		a[n].value.clusterDim.x = l->cluster[0];
		a[n].value.clusterDim.y = l->cluster[1];
		a[n++].value.clusterDim.z = l->cluster[2];
	}
	return n;
}

/* cuLaunchKernel, or cuLaunchKernelEx with the launch's attributes (PDL, cooperative, priority, cluster). */
static CUresult
launch_kernel(CUfunction f, const struct wk_launch *l, CUstream s)
{
	CUlaunchAttribute attr[4];
	unsigned nattr = launch_attrs(l, attr);
	if (nattr == 0)
		return drv.cuLaunchKernel(f, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
					  l->shared_mem, s, l->params, NULL);
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = l->grid[0];
	cfg.gridDimY = l->grid[1];
	cfg.gridDimZ = l->grid[2];
	cfg.blockDimX = l->block[0];
	cfg.blockDimY = l->block[1];
	cfg.blockDimZ = l->block[2];
	cfg.sharedMemBytes = l->shared_mem;
	cfg.hStream = s;
	cfg.attrs = attr;
	cfg.numAttrs = nattr;
	return drv.cuLaunchKernelEx(&cfg, f, l->params, NULL);
}

static int
cu_launch(struct wk *w, uint32_t sid, const struct wk_launch *l, struct wk_tag tag, cua_err *e)
{
	struct cu *C = w->be_state;
	NEED_STREAM(C, sid, s, e)
	CUfunction f = function_of(C, l->fn);
	if (f == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no function %llu", (unsigned long long)l->fn);
	if ((l->flags & WREC_LAUNCH_PDL) && C->sm < 90)
		return cua_err_set(e, CUA_EPDL_UNSUPPORTED,
				   "programmatic dependent launch requires sm_90 or newer; target sm_%d", C->sm);
	return issued(C, launch_kernel(f, l, s), tag, e);
}

/* Page-locks a client's shared buffer: copies from and to it then run at pinned-memory speed. */
static int
cu_host_register(struct wk *w, void *p, size_t len, cua_err *e)
{
	CUresult r = drv.cuMemHostRegister(p, len, CU_MEMHOSTREGISTER_PORTABLE);
	if (r != CUDA_SUCCESS)
		log_warn("cannot page-lock a %zu-byte host buffer (%s); its copies will be slower", len, errname(r));
	return 0;
}

static void
cu_host_unregister(struct wk *w, void *p)
{
	drv.cuMemHostUnregister(p); /* fails harmlessly when registration had failed */
}

const struct wk_backend backend_cuda = {
	.name = "cuda",
	.init = cu_init,
	.fini = cu_fini,
	.thread_init = cu_thread_init,
	.module_load = cu_module_load,
	.module_unload = cu_module_unload,
	.function_get = cu_function_get,
	.module_get_global = cu_module_get_global,
	.func_get_attr = cu_func_get_attr,
	.func_set_attr = cu_func_set_attr,
	.occupancy = cu_occupancy,
	.mem_alloc = cu_mem_alloc,
	.mem_free = cu_mem_free,
	.stream_create = cu_stream_create,
	.stream_destroy = cu_stream_destroy,
	.host_register = cu_host_register,
	.host_unregister = cu_host_unregister,
	.htod = cu_htod,
	.dtoh = cu_dtoh,
	.dtod = cu_dtod,
	.memset = cu_memset,
	.launch = cu_launch,
	.notify = cu_notify,
	.graph_create = cu_graph_create,
	.graph_set_args = cu_graph_set_args,
	.graph_destroy = cu_graph_destroy,
	.graph_launch = cu_graph_launch,
	.event_create = cu_event_create,
	.event_destroy = cu_event_destroy,
	.event_record = cu_event_record,
	.stream_wait_event = cu_stream_wait_event,
	.event_notify = cu_event_notify,
	.event_elapsed = cu_event_elapsed,
	.event_query = cu_event_query,
};
