/*
 * backend_cuda.c — the worker's real GPU: the CUDA driver API, loaded at run time (dlopen libcuda.so.1 and
 * cuGetProcAddress for every entry point), so cuasyncd builds and starts on machines without a driver.
 *
 * Completion: after a request's commands are issued, one event is recorded on every stream the request used;
 * a reactor thread polls those events (spinning briefly, then sleeping in short steps) and completes the
 * request when all have fired. No host callbacks on the hot path (they cost ~8 µs more per completion).
 * A sticky error (illegal address, launch failure, …) is reported with the request it surfaced in, and the
 * worker exits: the context is unusable and only a new process gets a working one.
 */
#include "config.h"

#include "cua_arena.h"
#include "cua_log.h"
#include "worker.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CUDA_API_VERSION 12040 /* cuFuncGetParamInfo appeared in 12.4 */
#define MAX_STREAMS 4096u

/* Every driver entry point used: one row each. */
#define CUDA_FNS(X)                                                                                          \
	X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)               \
	X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent)            \
	X(cuCtxGetStreamPriorityRange) X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction)        \
	X(cuFuncGetParamInfo) X(cuMemAlloc) X(cuMemFree) X(cuMemHostRegister) X(cuMemHostUnregister)        \
	X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async)                   \
	X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuStreamCreateWithPriority) X(cuStreamDestroy)            \
	X(cuStreamSynchronize) X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuEventCreate) X(cuEventRecord)       \
	X(cuEventQuery) X(cuEventDestroy) X(cuGetErrorName) X(cuGetErrorString)

static struct {
#define CUDA_FN_FIELD(name) __typeof__(name) *name;
	CUDA_FNS(CUDA_FN_FIELD)
#undef CUDA_FN_FIELD
} drv;

static const char *
errname(CUresult r)
{
	const char *n = NULL;
	if (drv.cuGetErrorName == NULL || drv.cuGetErrorName(r, &n) != CUDA_SUCCESS || n == NULL)
		return "CUDA_ERROR_UNKNOWN";
	return n;
}

static const char *
errstr(CUresult r)
{
	const char *s = NULL;
	if (drv.cuGetErrorString == NULL || drv.cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL)
		return "";
	return s;
}

/* Errors after which the context is unusable (the process must go). */
static int
is_sticky(CUresult r)
{
	switch ((int)r) {
	case CUDA_ERROR_ILLEGAL_ADDRESS:
	case CUDA_ERROR_LAUNCH_TIMEOUT:
	case CUDA_ERROR_ASSERT:
	case CUDA_ERROR_HARDWARE_STACK_ERROR:
	case CUDA_ERROR_ILLEGAL_INSTRUCTION:
	case CUDA_ERROR_MISALIGNED_ADDRESS:
	case CUDA_ERROR_INVALID_ADDRESS_SPACE:
	case CUDA_ERROR_INVALID_PC:
	case CUDA_ERROR_LAUNCH_FAILED:
	case CUDA_ERROR_ECC_UNCORRECTABLE:
	case CUDA_ERROR_CONTEXT_IS_DESTROYED:
	case CUDA_ERROR_UNKNOWN:
		return 1;
	default:
		return 0;
	}
}

/* Loads the driver and resolves every entry point. 0, or an error with the reason in e. */
static int
load_driver(cua_err *e)
{
	static int loaded;
	if (loaded)
		return 0;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		return cua_err_set(e, CUA_ENO_DEVICE, "no NVIDIA driver: cannot load libcuda.so.1 (%s)", dlerror());
	__typeof__(cuGetProcAddress) *gpa = (__typeof__(cuGetProcAddress) *)dlsym(h, "cuGetProcAddress_v2");
	if (gpa == NULL)
		return cua_err_set(e, CUA_ENO_DEVICE, "NVIDIA driver too old: no cuGetProcAddress_v2 (need CUDA 12.4+)");
	CUdriverProcAddressQueryResult q;
#define CUDA_FN_LOAD(name)                                                                                   \
	if (gpa(#name, (void **)&drv.name, CUDA_API_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS || \
	    drv.name == NULL)                                                                                \
		return cua_err_set(e, CUA_ENO_DEVICE, "NVIDIA driver too old: no %s (need CUDA 12.4+)", #name);
	CUDA_FNS(CUDA_FN_LOAD)
#undef CUDA_FN_LOAD
	CUresult r = drv.cuInit(0);
	if (r != CUDA_SUCCESS)
		return cua_err_set(e, CUA_ENO_DEVICE, "cuInit failed: %s (%s)", errname(r), errstr(r));
	int ver = 0;
	drv.cuDriverGetVersion(&ver);
	if (ver < CUDA_API_VERSION)
		return cua_err_set(e, CUA_ENO_DEVICE, "NVIDIA driver too old: supports CUDA %d.%d, need 12.4", ver / 1000,
				   ver % 1000 / 10);
	loaded = 1;
	return 0;
}

int
cuda_probe(int *count, cua_err *e)
{
	int r = load_driver(e);
	if (r != 0)
		return r;
	CUresult cr = drv.cuDeviceGetCount(count);
	if (cr != CUDA_SUCCESS)
		return cua_err_set(e, CUA_ENO_DEVICE, "cuDeviceGetCount: %s", errname(cr));
	if (*count == 0)
		return cua_err_set(e, CUA_ENO_DEVICE, "the NVIDIA driver sees no GPU");
	return 0;
}

/* ------------------------------------------------------------------ worker state */

struct marker {
	CUevent ev;
	struct tracker *t;
	uint32_t idx; /* item blamed if the stream faulted */
	struct marker *next;
};

struct cu {
	struct wk *w;
	CUdevice dev;
	CUcontext ctx;
	int sm;
	CUstream streams[MAX_STREAMS];
	uint32_t nstreams;
	CUmodule *modules;
	size_t nmodules;
	CUfunction *functions;
	size_t nfunctions;
	int staging_registered;
	/* streams used by the request being issued (main thread only) */
	uint32_t touched[64];
	uint32_t touched_idx[64];
	uint32_t ntouched;
	/* reactor */
	pthread_t reactor;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct marker *pending;
	struct marker *free_markers;
	int stop;
};

static int
cerr(cua_err *e, CUresult r, const char *what)
{
	return cua_err_set(e, r == CUDA_ERROR_OUT_OF_MEMORY ? CUA_ENOMEM : CUA_EDEVICE, "%s: %s: %s", errname(r), what,
			   errstr(r));
}

static struct marker *
marker_get(struct cu *C, cua_err *e)
{
	pthread_mutex_lock(&C->lock);
	struct marker *m = C->free_markers;
	if (m)
		C->free_markers = m->next;
	pthread_mutex_unlock(&C->lock);
	if (m)
		return m;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	CUresult r = drv.cuEventCreate(&m->ev, CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS) {
		cerr(e, r, "cuEventCreate");
		free(m);
		return NULL;
	}
	return m;
}

/* A sticky error surfaced (in a marker query or a call): blame every request with work in flight, since
 * the device does not say whose kernel faulted, then exit. extra is the work that saw it, if any.
 * `held` markers (taken off the pending list by the caller) are blamed too. */
_Noreturn static void
cu_fatal(struct cu *C, CUresult r, struct tracker *t, uint32_t idx, struct marker *held)
{
	char d[512];
	snprintf(d, sizeof(d),
		 "%s: %s (the GPU does not say which kernel in flight faulted; this request had work on the device)",
		 errname(r), errstr(r));
	pthread_mutex_lock(&C->lock);
	size_t n = 0, cap = 1;
	for (struct marker *m = C->pending; m; m = m->next)
		cap++;
	for (struct marker *m = held; m; m = m->next)
		cap++;
	struct tracker **ts = calloc(cap, sizeof(*ts));
	uint32_t *ix = calloc(cap, sizeof(*ix));
	if (ts == NULL || ix == NULL)
		wk_fatal(C->w, t, idx, d);
	if (t) {
		ts[n] = t;
		ix[n++] = idx;
	}
	for (struct marker *m = held; m; m = m->next) {
		ts[n] = m->t;
		ix[n++] = m->idx;
	}
	for (struct marker *m = C->pending; m; m = m->next) {
		ts[n] = m->t;
		ix[n++] = m->idx;
	}
	wk_fatal_many(C->w, ts, ix, n, d); /* keeps C->lock: nothing else completes now */
}

static void *
reactor_main(void *arg)
{
	struct cu *C = arg;
	drv.cuCtxSetCurrent(C->ctx);
	int idle = 0;
	pthread_mutex_lock(&C->lock);
	for (;;) {
		while (C->pending == NULL && !C->stop) {
			idle = 0;
			pthread_cond_wait(&C->cond, &C->lock);
		}
		if (C->pending == NULL && C->stop)
			break;
		struct marker *list = C->pending;
		C->pending = NULL;
		pthread_mutex_unlock(&C->lock);
		struct marker *keep = NULL, *done = NULL;
		while (list) {
			struct marker *m = list;
			list = m->next;
			CUresult r = drv.cuEventQuery(m->ev);
			if (r == CUDA_ERROR_NOT_READY) {
				m->next = keep;
				keep = m;
			} else if (r == CUDA_SUCCESS) {
				m->next = done;
				done = m;
			} else {
				for (struct marker *k = done; k; k = k->next) /* those finished before the fault */
					tracker_put(C->w, k->t);
				m->next = list; /* m, the rest of this pass and the ones still running */
				struct marker **tail = &m->next;
				while (*tail)
					tail = &(*tail)->next;
				*tail = keep;
				cu_fatal(C, r, NULL, 0, m);
			}
		}
		for (struct marker *m = done; m; m = m->next)
			tracker_put(C->w, m->t);
		pthread_mutex_lock(&C->lock);
		while (done) {
			struct marker *m = done;
			done = m->next;
			m->next = C->free_markers;
			C->free_markers = m;
		}
		/* put back what is still running, ahead of newer markers */
		while (keep) {
			struct marker *m = keep;
			keep = m->next;
			m->next = C->pending;
			C->pending = m;
		}
		if (C->pending != NULL && done == NULL) {
			/* nothing finished this pass: spin a little, then sleep in short steps */
			if (++idle > 64) {
				pthread_mutex_unlock(&C->lock);
				struct timespec ts = {0, idle > 4096 ? 200000L : 20000L};
				nanosleep(&ts, NULL);
				pthread_mutex_lock(&C->lock);
			}
		} else {
			idle = 0;
		}
	}
	pthread_mutex_unlock(&C->lock);
	return NULL;
}

static int
new_stream(struct cu *C, int prio, uint32_t *sid, cua_err *e)
{
	uint32_t slot = C->nstreams;
	for (uint32_t i = C->w->info.pool_streams; i < C->nstreams; i++)
		if (C->streams[i] == NULL) {
			slot = i;
			break;
		}
	if (slot == MAX_STREAMS)
		return cua_err_set(e, CUA_EQUOTA, "more than %u streams on this device", MAX_STREAMS);
	CUresult r = drv.cuStreamCreateWithPriority(&C->streams[slot], CU_STREAM_NON_BLOCKING, prio);
	if (r != CUDA_SUCCESS)
		return cerr(e, r, "cuStreamCreateWithPriority");
	if (slot == C->nstreams)
		C->nstreams++;
	*sid = slot;
	return 0;
}

static int
cu_init(struct wk *w, struct wdev_info *info, cua_err *e)
{
	int r = load_driver(e);
	if (r != 0)
		return r;
	struct cu *C = calloc(1, sizeof(*C));
	if (C == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	C->w = w;
	w->be_state = C;
	CUresult cr;
	if ((cr = drv.cuDeviceGet(&C->dev, w->opts.device)) != CUDA_SUCCESS)
		return cua_err_set(e, CUA_ENO_DEVICE, "device %d: %s", w->opts.device, errname(cr));
	if ((cr = drv.cuDevicePrimaryCtxRetain(&C->ctx, C->dev)) != CUDA_SUCCESS ||
	    (cr = drv.cuCtxSetCurrent(C->ctx)) != CUDA_SUCCESS)
		return cua_err_set(e, CUA_ENO_DEVICE, "device %d: primary context: %s: %s", w->opts.device, errname(cr),
				   errstr(cr));
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
	info->pool_streams = w->opts.pool_streams ? w->opts.pool_streams : 4;
	for (uint32_t i = 0; i < info->pool_streams; i++) {
		uint32_t sid;
		if ((r = new_stream(C, 0, &sid, e)) != 0)
			return r;
	}
	/* Page-lock the staging area shared with the front-end: copies then run at pinned-memory speed. */
	cr = drv.cuMemHostRegister(w->staging, w->staging_size, CU_MEMHOSTREGISTER_PORTABLE);
	if (cr == CUDA_SUCCESS)
		C->staging_registered = 1;
	else
		log_warn("cannot page-lock the %llu-byte staging area (%s); copies will be slower (raise LimitMEMLOCK)",
			 (unsigned long long)w->staging_size, errname(cr));
	pthread_mutex_init(&C->lock, NULL);
	pthread_cond_init(&C->cond, NULL);
	if (pthread_create(&C->reactor, NULL, reactor_main, C) != 0)
		return cua_err_set(e, CUA_EINTERNAL, "cannot start the completion reactor");
	return 0;
}

static void
cu_fini(struct wk *w)
{
	struct cu *C = w->be_state;
	pthread_mutex_lock(&C->lock);
	C->stop = 1;
	pthread_cond_signal(&C->cond);
	pthread_mutex_unlock(&C->lock);
	pthread_join(C->reactor, NULL);
	for (uint32_t i = 0; i < C->nstreams; i++)
		if (C->streams[i])
			drv.cuStreamSynchronize(C->streams[i]);
	if (C->staging_registered)
		drv.cuMemHostUnregister(w->staging);
}

static int
cu_module_load(struct wk *w, const void *img, size_t len, uint32_t fmt, uint64_t *id, cua_err *e)
{
	struct cu *C = w->be_state;
	const unsigned char *p = img;
	if (fmt == CUA_IMAGE_AUTO)
		fmt = len >= 4 && p[0] == 0x50 && p[1] == 0xed && p[2] == 0x55 && p[3] == 0xba ? CUA_IMAGE_FATBIN
		      : len >= 4 && memcmp(p, "\x7f" "ELF", 4) == 0                           ? CUA_IMAGE_CUBIN
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
	CUmodule *n = realloc(C->modules, (C->nmodules + 1) * sizeof(*n));
	if (n == NULL) {
		drv.cuModuleUnload(m);
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	}
	C->modules = n;
	C->modules[C->nmodules++] = m;
	*id = C->nmodules;
	return 0;
}

static int
cu_module_unload(struct wk *w, uint64_t id, cua_err *e)
{
	struct cu *C = w->be_state;
	if (id == 0 || id > C->nmodules || C->modules[id - 1] == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)id);
	CUresult r = drv.cuModuleUnload(C->modules[id - 1]);
	C->modules[id - 1] = NULL;
	return r == CUDA_SUCCESS ? 0 : cerr(e, r, "cuModuleUnload");
}

static int
cu_function_get(struct wk *w, uint64_t mod, const char *name, uint64_t *fn, cua_param_info **params, uint32_t *nparams,
		cua_err *e)
{
	struct cu *C = w->be_state;
	if (mod == 0 || mod > C->nmodules || C->modules[mod - 1] == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)mod);
	CUfunction f;
	CUresult r = drv.cuModuleGetFunction(&f, C->modules[mod - 1], name);
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
			return cua_err_set(e, CUA_ETOO_LARGE, "kernel '%s' has more than %u parameters", name, CUA_MAX_PARAMS);
		}
	}
	CUfunction *nf = realloc(C->functions, (C->nfunctions + 1) * sizeof(*nf));
	if (nf == NULL) {
		free(p);
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	}
	C->functions = nf;
	C->functions[C->nfunctions++] = f;
	*fn = C->nfunctions;
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

static int
cu_mem_free(struct wk *w, uint64_t addr, cua_err *e)
{
	CUresult r = drv.cuMemFree((CUdeviceptr)addr);
	if (r != CUDA_SUCCESS && is_sticky(r))
		return cerr(e, r, "cuMemFree");
	return r == CUDA_SUCCESS ? 0 : cerr(e, r, "cuMemFree");
}

static int
cu_stream_create(struct wk *w, int priority, uint32_t *sid, cua_err *e)
{
	return new_stream(w->be_state, priority, sid, e);
}

static int
cu_stream_destroy(struct wk *w, uint32_t sid, cua_err *e)
{
	struct cu *C = w->be_state;
	if (sid < w->info.pool_streams || sid >= C->nstreams || C->streams[sid] == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	CUresult r = drv.cuStreamDestroy(C->streams[sid]); /* returns at once; pending work still completes */
	C->streams[sid] = NULL;
	return r == CUDA_SUCCESS ? 0 : cerr(e, r, "cuStreamDestroy");
}

struct cu_launch {
	CUfunction f;
	const struct wlaunch_dims *d;
	uint32_t smem;
	CUstream s;
	int pdl;
	CUresult r;
};

static int
do_launch(void **params, size_t n, void *ud)
{
	struct cu_launch *L = ud;
	if (!L->pdl) {
		L->r = drv.cuLaunchKernel(L->f, L->d->grid[0], L->d->grid[1], L->d->grid[2], L->d->block[0], L->d->block[1],
					  L->d->block[2], L->smem, L->s, params, NULL);
		return 0;
	}
	CUlaunchAttribute attr;
	memset(&attr, 0, sizeof(attr));
	attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attr.value.programmaticStreamSerializationAllowed = 1;
	CUlaunchConfig cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.gridDimX = L->d->grid[0];
	cfg.gridDimY = L->d->grid[1];
	cfg.gridDimZ = L->d->grid[2];
	cfg.blockDimX = L->d->block[0];
	cfg.blockDimY = L->d->block[1];
	cfg.blockDimZ = L->d->block[2];
	cfg.sharedMemBytes = L->smem;
	cfg.hStream = L->s;
	cfg.attrs = &attr;
	cfg.numAttrs = 1;
	L->r = drv.cuLaunchKernelEx(&cfg, L->f, params, NULL);
	return 0;
}

static void
touch(struct cu *C, uint32_t sid, uint32_t idx)
{
	for (uint32_t i = 0; i < C->ntouched; i++)
		if (C->touched[i] == sid)
			return;
	if (C->ntouched < sizeof(C->touched) / sizeof(C->touched[0])) {
		C->touched_idx[C->ntouched] = idx;
		C->touched[C->ntouched++] = sid;
	}
}

/* Issues one stream operation (asynchronously). Runs on the worker's main thread. */
static void
cu_submit(struct wk *w, struct wop *op)
{
	struct cu *C = w->be_state;
	const struct wcmd *c = op->cmd;
	CUresult r = CUDA_SUCCESS;
	char detail[256] = "";
	uint32_t status = CUA_OK;
	CUstream s = c->stream < C->nstreams ? C->streams[c->stream] : NULL;
	if (s == NULL) {
		status = CUA_ENOT_FOUND;
		snprintf(detail, sizeof(detail), "no stream %u", c->stream);
		goto out;
	}
	switch (c->op) {
	case W_STREAM_SYNC: break;
	case W_HTOD:
	case W_DTOH: {
		void *stg = wk_copy_host(w, c);
		if (stg == NULL) {
			status = CUA_EINTERNAL;
			snprintf(detail, sizeof(detail), "copy outside the staging area or host buffer");
			goto out;
		}
		r = c->op == W_HTOD ? drv.cuMemcpyHtoDAsync((CUdeviceptr)c->a, stg, c->c, s)
				    : drv.cuMemcpyDtoHAsync(stg, (CUdeviceptr)c->a, c->c, s);
		break;
	}
	case W_DTOD: r = drv.cuMemcpyDtoDAsync((CUdeviceptr)c->a, (CUdeviceptr)c->b, c->c, s); break;
	case W_MEMSET:
		r = c->format == 1   ? drv.cuMemsetD8Async((CUdeviceptr)c->a, (unsigned char)c->b, c->c, s)
		    : c->format == 2 ? drv.cuMemsetD16Async((CUdeviceptr)c->a, (unsigned short)c->b, c->c, s)
				     : drv.cuMemsetD32Async((CUdeviceptr)c->a, (unsigned int)c->b, c->c, s);
		break;
	case W_LAUNCH: {
		if (c->a == 0 || c->a > C->nfunctions) {
			status = CUA_ENOT_FOUND;
			snprintf(detail, sizeof(detail), "no function %llu", (unsigned long long)c->a);
			goto out;
		}
		if ((c->format & CUA_LAUNCH_PDL) && C->sm < 90) {
			status = CUA_EPDL_UNSUPPORTED;
			snprintf(detail, sizeof(detail), "programmatic dependent launch requires sm_90 or newer; target sm_%d",
				 C->sm);
			goto out;
		}
		/* Rebuild the argument buffer (16-byte slots) that cuLaunchKernel reads. */
		const struct wlaunch_dims *d;
		cua_arena arena;
		cua_arena_init(&arena);
		if (wk_launch_args(c, &d, &arena) != 0) {
			cua_arena_fini(&arena);
			status = CUA_EINTERNAL;
			snprintf(detail, sizeof(detail), "malformed launch arguments");
			goto out;
		}
		struct cu_launch L = {C->functions[c->a - 1], d, (uint32_t)c->b, s, (c->format & CUA_LAUNCH_PDL) != 0,
				      CUDA_SUCCESS};
		int ar = cua_arena_with_params(&arena, do_launch, &L);
		cua_arena_fini(&arena);
		if (ar != 0) {
			status = (uint32_t)ar;
			snprintf(detail, sizeof(detail), "out of host memory for arguments");
			goto out;
		}
		r = L.r;
		break;
	}
	default:
		status = CUA_EINTERNAL;
		snprintf(detail, sizeof(detail), "not a stream command: %u", c->op);
		goto out;
	}
	if (r != CUDA_SUCCESS) {
		snprintf(detail, sizeof(detail), "%s: %s", errname(r), errstr(r));
		if (is_sticky(r))
			cu_fatal(C, r, op->t, op->idx, NULL);
		status = r == CUDA_ERROR_OUT_OF_MEMORY ? CUA_ENOMEM
			 : r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ? CUA_EBAD_ARGUMENT
												   : CUA_EDEVICE;
	} else {
		touch(C, c->stream, op->idx);
	}
out:
	tracker_set(op->t, op->idx, status, 0, status ? detail : NULL);
	free(op->cmd);
	free(op);
}

/* One completion marker per stream the request used. */
static void
cu_flush(struct wk *w, struct tracker *t)
{
	struct cu *C = w->be_state;
	for (uint32_t i = 0; i < C->ntouched; i++) {
		cua_err e;
		cua_err_clear(&e);
		struct marker *m = marker_get(C, &e);
		CUresult r = m ? drv.cuEventRecord(m->ev, C->streams[C->touched[i]]) : CUDA_ERROR_OUT_OF_MEMORY;
		if (r != CUDA_SUCCESS) {
			char d[256];
			snprintf(d, sizeof(d), "%s: cuEventRecord: %s", errname(r), errstr(r));
			if (is_sticky(r))
				cu_fatal(C, r, t, C->touched_idx[i], NULL);
			/* cannot watch this stream: wait for it here instead */
			drv.cuStreamSynchronize(C->streams[C->touched[i]]);
			if (m) {
				pthread_mutex_lock(&C->lock);
				m->next = C->free_markers;
				C->free_markers = m;
				pthread_mutex_unlock(&C->lock);
			}
			continue;
		}
		m->t = t;
		m->idx = C->touched_idx[i];
		tracker_hold(t);
		pthread_mutex_lock(&C->lock);
		m->next = C->pending;
		C->pending = m;
		pthread_cond_signal(&C->cond);
		pthread_mutex_unlock(&C->lock);
	}
	C->ntouched = 0;
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

const struct backend backend_cuda = {
	.name = "cuda",
	.init = cu_init,
	.module_load = cu_module_load,
	.module_unload = cu_module_unload,
	.function_get = cu_function_get,
	.mem_alloc = cu_mem_alloc,
	.mem_free = cu_mem_free,
	.stream_create = cu_stream_create,
	.stream_destroy = cu_stream_destroy,
	.submit = cu_submit,
	.flush = cu_flush,
	.fini = cu_fini,
	.host_register = cu_host_register,
	.host_unregister = cu_host_unregister,
};
