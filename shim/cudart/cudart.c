/*
 * cudart.c — libcuasync-cudart: the CUDA runtime API (libcudart.so.N) over libcuasync, so that a program built
 * with `nvcc -cudart shared` runs unchanged on cuasyncd (tools/cuasync-run puts this library first).
 *
 * One cuasyncd session per process, opened by the first call ($CUASYNC_URL); CUDA's default streams (legacy and
 * per-thread) are the session's ordered stream. A fat binary the program registers becomes a MODULE_LOAD on its
 * first use; host stubs and __device__/__constant__ shadows map to kernels and module globals by name. Errors
 * follow CUDA: the calling thread's last error (cudaGetLastError clears it, cudaPeekAtLastError does not), and
 * faults of the device (illegal address, launch failure) are sticky: every later call returns them.
 * What is not implemented is refused by unsupported.c (docs/DROPIN.md lists both).
 */
#include "crt.h"
#include "cuasync.h"
#include "dropin_attrs.h"
#include "rt.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The entry points nvcc's generated host code calls (declared by crt/host_runtime.h, which is C++ only). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
char __cudaInitModule(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
			    int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext, size_t size,
		       int constant, int global);
void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress, const char *deviceName,
			      int ext, size_t size, int constant, int global);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
			       cudaStream_t stream);

#define EXPORT __attribute__((visibility("default")))
#define FATBIN_WRAPPER_MAGIC 0x466243b1u /* __fatBinC_Wrapper_t.magic (fatbinary_section.h) */
#define FATBIN_MAGIC 0xba55ed50u
#define MAX_PARAMS CRT_MAX_PARAMS

/* ---- registered objects ---- */
struct crt_fatbin {
	void *handle_slot; /* the program holds &handle_slot as its void ** handle */
	const void *image;
	size_t len;
	cua_module mod;
	int load_status; /* cudaSuccess once loaded; else the load's error (retried on the next use) */
	bool loaded;
};

struct crt_var {
	const void *host; /* the shadow variable's address */
	const char *name;
	struct crt_fatbin *fb;
	size_t size;
	cua_deviceptr ptr;
	bool resolved;
};

struct crt_range {
	uintptr_t base;
	size_t len;
	bool shared; /* host: cua_host_alloc's (else malloc's) */
};

struct crt_table {
	void **v;
	size_t n, cap;
};

static struct {
	pthread_mutex_t mu;
	cua_client *c;
	int connect_status;
	bool connected;
	struct crt_table fatbins, funcs, vars, dev_ranges, host_ranges, registered;
	struct CUstream_st deflt; /* legacy and per-thread default streams: the session's ordered stream */
	_Atomic int sticky;       /* a sticky device error: every call returns it from now on */
	int device;               /* cudaSetDevice's (only 0.. of cua_device_count) */
	/* CUASYNC_RUN_VERBOSE's summary */
	atomic_ullong calls, bytes, wait_ns;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER, .deflt = {.s = {1}, .mu = PTHREAD_MUTEX_INITIALIZER}};

static _Thread_local int last_error;

struct crt_config {
	dim3 grid, block;
	size_t shmem;
	void *stream;
};
#define CONFIG_STACK 16
static _Thread_local struct crt_config config_stack[CONFIG_STACK];
static _Thread_local unsigned config_depth;

static int
table_add(struct crt_table *t, void *p)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		void **v = realloc(t->v, cap * sizeof(*v));
		if (!v)
			return -1;
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n++] = p;
	return 0;
}

/* ---- errors ---- */
struct crt_error_row {
	int code;
	const char *name, *string;
};
static const struct crt_error_row crt_errors[] = {
#define X(code, name, string) {code, name, string},
#include "errors.def"
#undef X
};

static const struct crt_error_row *
error_row(int code)
{
	for (size_t i = 0; i < sizeof(crt_errors) / sizeof(crt_errors[0]); i++)
		if (crt_errors[i].code == code)
			return &crt_errors[i];
	return NULL;
}

/* The device faults CUDA keeps for the rest of the context. */
static bool
is_sticky(int e)
{
	static const int sticky[] =
		{cudaErrorIllegalAddress,      cudaErrorLaunchTimeout,      cudaErrorAssert,
		 cudaErrorHardwareStackError,  cudaErrorIllegalInstruction, cudaErrorMisalignedAddress,
		 cudaErrorInvalidAddressSpace, cudaErrorInvalidPc,          cudaErrorLaunchFailure};
	for (size_t i = 0; i < sizeof(sticky) / sizeof(sticky[0]); i++)
		if (sticky[i] == e)
			return true;
	return false;
}

/* Records e as the thread's last error (and the process's sticky one when it is a device fault); returns e. */
static int
record(int e)
{
	if (e != cudaSuccess) {
		last_error = e;
		int none = cudaSuccess;
		if (is_sticky(e))
			atomic_compare_exchange_strong(&G.sticky, &none, e);
	}
	return e;
}

/* libcuasync's status as CUDA's error; the daemon's words for a device fault name the CUDA error. */
static const struct {
	int cua, cuda;
} status_map[] = {
	{CUA_OK, cudaSuccess},
	{CUA_EBAD_ARGUMENT, cudaErrorInvalidValue},
	{CUA_ETOO_LARGE, cudaErrorInvalidValue},
	{CUA_ENOT_FOUND, cudaErrorInvalidResourceHandle},
	{CUA_ENOMEM, cudaErrorMemoryAllocation},
	{CUA_EQUOTA, cudaErrorMemoryAllocation},
	{CUA_EUNSUPPORTED, cudaErrorNotSupported},
	{CUA_EPDL_UNSUPPORTED, cudaErrorNotSupported},
	{CUA_EMODULE, cudaErrorInvalidKernelImage},
	{CUA_EBUSY, cudaErrorNotReady},
	{CUA_ENO_DEVICE, cudaErrorNoDevice},
	{CUA_EPERMISSION_DENIED, cudaErrorNotPermitted},
	{CUA_EUNAUTHENTICATED, cudaErrorNotPermitted},
	{CUA_ETRANSPORT, cudaErrorDevicesUnavailable},
	{CUA_ETIMEOUT, cudaErrorDevicesUnavailable},
	{CUA_ECLOSED, cudaErrorDevicesUnavailable},
	{CUA_ESHUTTING_DOWN, cudaErrorDevicesUnavailable},
	{CUA_ECONTEXT_LOST, cudaErrorLaunchFailure},
	{CUA_EDEVICE_HUNG, cudaErrorLaunchFailure},
	{CUA_ESESSION_LOST, cudaErrorLaunchFailure},
	{CUA_EDEVICE, cudaErrorLaunchFailure},
};

static const struct {
	const char *driver_name;
	int cuda;
} device_faults[] = {
	{"CUDA_ERROR_ILLEGAL_ADDRESS", cudaErrorIllegalAddress},
	{"CUDA_ERROR_MISALIGNED_ADDRESS", cudaErrorMisalignedAddress},
	{"CUDA_ERROR_ILLEGAL_INSTRUCTION", cudaErrorIllegalInstruction},
	{"CUDA_ERROR_ASSERT", cudaErrorAssert},
	{"CUDA_ERROR_LAUNCH_TIMEOUT", cudaErrorLaunchTimeout},
	{"CUDA_ERROR_HARDWARE_STACK_ERROR", cudaErrorHardwareStackError},
	/* what the driver refused without a fault: not sticky */
	{"CUDA_ERROR_INVALID_VALUE", cudaErrorInvalidValue},
	{"CUDA_ERROR_OUT_OF_MEMORY", cudaErrorMemoryAllocation},
	{"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", cudaErrorLaunchOutOfResources},
	{"CUDA_ERROR_NOT_SUPPORTED", cudaErrorNotSupported},
	{"CUDA_ERROR_INVALID_HANDLE", cudaErrorInvalidResourceHandle},
};

/* CUASYNC_RUN_VERBOSE set and not "0". */
static bool
verbose(void)
{
	const char *v = getenv("CUASYNC_RUN_VERBOSE");
	return v && *v && strcmp(v, "0") != 0;
}

static int
from_status(int r, const char *msg)
{
	int e = cudaErrorUnknown;
	for (size_t i = 0; i < sizeof(status_map) / sizeof(status_map[0]); i++)
		if (status_map[i].cua == r)
			e = status_map[i].cuda;
	for (size_t i = 0; r == CUA_EDEVICE && msg && i < sizeof(device_faults) / sizeof(device_faults[0]); i++)
		if (strstr(msg, device_faults[i].driver_name))
			e = device_faults[i].cuda;
	if (e != cudaSuccess && verbose())
		fprintf(stderr, "cuasync-cudart: %s: %s\n", cua_strerror_name(r), msg && *msg ? msg : cua_strerror(r));
	return e;
}

/* A libcuasync call's status, recorded as the thread's error. */
static int
status(int r)
{
	return record(from_status(r, cua_last_error()));
}

int
crt_record(int e)
{
	return record(e);
}

int
crt_status(int r)
{
	return status(r);
}

int
crt_unsupported(const char *name, const char *why)
{
	static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	static struct crt_table told;
	bool first = true;
	pthread_mutex_lock(&mu);
	for (size_t i = 0; i < told.n && first; i++)
		first = strcmp(told.v[i], name) != 0;
	char *copy = first ? strdup(name) : NULL; /* names may be built by the caller */
	if (copy && table_add(&told, copy) != 0)
		free(copy);
	pthread_mutex_unlock(&mu);
	if (first)
		fprintf(stderr,
			"cuasync-cudart: %s is not supported through cuasyncd (%s): it returns cudaErrorNotSupported; "
			"run this program natively (without cuasync-run) for it (docs/DROPIN.md)\n",
			name, why);
	return record(cudaErrorNotSupported);
}

/* ---- the session ---- */
static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Every entry point's start: counts the call; 0 and *c, or the error to return (sticky, or no daemon). */
static int
enter(cua_client **c)
{
	atomic_fetch_add(&G.calls, 1);
	int s = atomic_load(&G.sticky);
	if (s != cudaSuccess)
		return record(s);
	pthread_mutex_lock(&G.mu);
	if (!G.connected) {
		G.connected = true;
		int r = cua_connect(NULL, &G.c);
		if (r == CUA_OK)
			r = cua_set_default_stream(G.c, CUA_STREAM_ORDERED);
		if (r != CUA_OK) {
			fprintf(stderr,
				"cuasync-cudart: cannot reach cuasyncd (%s: %s): set CUASYNC_URL to its socket\n",
				cua_strerror_name(r), *cua_last_error() ? cua_last_error() : cua_strerror(r));
			G.connect_status = cudaErrorNoDevice;
		}
	}
	*c = G.c;
	int e = G.connect_status;
	pthread_mutex_unlock(&G.mu);
	return e == cudaSuccess ? cudaSuccess : record(e);
}

int
crt_enter(cua_client **c)
{
	return enter(c);
}

/* A call that waits on the daemon, timed for the summary. */
#define TIMED(expr)                                                                                                    \
	({                                                                                                             \
		uint64_t t0_ = now_ns();                                                                               \
		int r_ = (expr);                                                                                       \
		atomic_fetch_add(&G.wait_ns, now_ns() - t0_);                                                          \
		r_;                                                                                                    \
	})

__attribute__((destructor)) static void
crt_fini(void)
{
	if (verbose())
		fprintf(stderr, "cuasync-run: %llu runtime calls, %llu bytes copied, %.3f s waiting on cuasyncd\n",
			(unsigned long long)atomic_load(&G.calls), (unsigned long long)atomic_load(&G.bytes),
			(double)atomic_load(&G.wait_ns) / 1e9);
	/* The session is left to the daemon, which frees it when the connection closes at exit: disconnecting here
	 * would wait for NNG threads while the process is being torn down. */
}

/* ---- streams ---- */
static struct CUstream_st *
stream_of(cudaStream_t s)
{
	if (s == NULL || s == cudaStreamLegacy || s == cudaStreamPerThread)
		return &G.deflt;
	return s;
}

/* Waits for the stream's pending host function, so what follows it runs after it, as in CUDA. */
static void
stream_join(struct CUstream_st *st)
{
	pthread_mutex_lock(&st->mu);
	if (st->helper_active) {
		pthread_join(st->helper, NULL);
		st->helper_active = false;
	}
	pthread_mutex_unlock(&st->mu);
}

static cua_stream
use_stream(cudaStream_t s)
{
	struct CUstream_st *st = stream_of(s);
	stream_join(st);
	return st->s;
}

struct CUstream_st *
crt_stream_of(cudaStream_t s)
{
	return stream_of(s);
}

cua_stream
crt_use_stream(cudaStream_t s)
{
	return use_stream(s);
}

/* ---- modules, functions, variables ---- */
static int
fatbin_load(cua_client *c, struct crt_fatbin *fb)
{
	if (!fb->loaded) {
		int r = TIMED(cua_module_load(c, G.device, fb->image, fb->len, &fb->mod));
		fb->load_status = r == CUA_OK ? cudaSuccess : from_status(r, cua_last_error());
		fb->loaded = r == CUA_OK;
	}
	return fb->loaded ? cudaSuccess : fb->load_status;
}

static struct crt_func *
func_find(const void *host)
{
	for (size_t i = 0; i < G.funcs.n; i++) {
		struct crt_func *f = G.funcs.v[i];
		if (f->host == host || (const void *)f == host)
			return f;
	}
	return NULL;
}

/* The kernel of a host stub, its module loaded and its parameter layout known; NULL and *e when not. */
static struct crt_func *
func_resolve(cua_client *c, const void *host, int *e)
{
	pthread_mutex_lock(&G.mu);
	struct crt_func *f = func_find(host);
	*e = f ? cudaSuccess : cudaErrorInvalidDeviceFunction;
	if (f && !f->resolved && (*e = fatbin_load(c, f->fb)) == cudaSuccess) {
		int r = cua_module_get_function(c, f->fb->mod, f->name, &f->f);
		if (r == CUA_OK)
			r = cua_function_get_params(c, f->f, &f->nparams, NULL, NULL);
		if (r == CUA_OK && f->nparams > MAX_PARAMS)
			r = CUA_ETOO_LARGE;
		uint32_t offsets[MAX_PARAMS];
		if (r == CUA_OK)
			r = cua_function_get_params(c, f->f, &f->nparams, offsets, f->sizes);
		*e = r == CUA_OK           ? cudaSuccess
		     : r == CUA_ENOT_FOUND ? cudaErrorInvalidDeviceFunction
					   : from_status(r, cua_last_error());
		f->resolved = r == CUA_OK;
	}
	pthread_mutex_unlock(&G.mu);
	return *e == cudaSuccess ? f : NULL;
}

struct crt_func *
crt_func_resolve(cua_client *c, const void *host, int *e)
{
	return func_resolve(c, host, e);
}

static struct crt_var *
var_resolve(cua_client *c, const void *host, int *e)
{
	pthread_mutex_lock(&G.mu);
	struct crt_var *v = NULL;
	for (size_t i = 0; i < G.vars.n && !v; i++)
		if (((struct crt_var *)G.vars.v[i])->host == host)
			v = G.vars.v[i];
	*e = v ? cudaSuccess : cudaErrorInvalidSymbol;
	if (v && !v->resolved && (*e = fatbin_load(c, v->fb)) == cudaSuccess) {
		size_t bytes = 0;
		int r = cua_module_get_global(c, v->fb->mod, v->name, &v->ptr, &bytes);
		*e = r == CUA_OK           ? cudaSuccess
		     : r == CUA_ENOT_FOUND ? cudaErrorInvalidSymbol
					   : from_status(r, cua_last_error());
		v->resolved = r == CUA_OK;
		if (v->resolved && bytes)
			v->size = bytes;
	}
	pthread_mutex_unlock(&G.mu);
	return *e == cudaSuccess ? v : NULL;
}

EXPORT void **
__cudaRegisterFatBinary(void *fatCubin)
{
	struct crt_fatbin *fb = calloc(1, sizeof(*fb));
	const struct {
		int magic, version;
		const unsigned char *data;
		void *filename_or_fatbins;
	} *w = fatCubin;
	if (!fb)
		return NULL;
	if (w && (unsigned)w->magic == FATBIN_WRAPPER_MAGIC && w->data) {
		uint32_t magic;
		uint16_t hs;
		uint64_t size;
		memcpy(&magic, w->data, 4);
		memcpy(&hs, w->data + 6, 2);
		memcpy(&size, w->data + 8, 8);
		if (magic == FATBIN_MAGIC) {
			fb->image = w->data;
			fb->len = (size_t)hs + (size_t)size;
		}
	}
	fb->load_status = fb->image ? cudaSuccess : cudaErrorInvalidKernelImage;
	pthread_mutex_lock(&G.mu);
	if (table_add(&G.fatbins, fb) != 0) {
		free(fb);
		fb = NULL;
	}
	pthread_mutex_unlock(&G.mu);
	return fb ? &fb->handle_slot : NULL;
}

EXPORT void
__cudaRegisterFatBinaryEnd(void **handle)
{
	(void)handle; /* modules load on first use: a program that never touches the GPU never talks to cuasyncd */
}

EXPORT void
__cudaUnregisterFatBinary(void **handle)
{
	(void)handle; /* at exit: the session's end unloads the modules */
}

EXPORT char
__cudaInitModule(void **handle)
{
	(void)handle;
	return 1;
}

EXPORT void
__cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName, int thread_limit,
		       uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
	(void)deviceFun, (void)thread_limit, (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
	struct crt_func *f = handle ? calloc(1, sizeof(*f)) : NULL;
	if (!f)
		return;
	f->host = hostFun;
	f->name = deviceName;
	f->fb = (struct crt_fatbin *)handle;
	pthread_mutex_lock(&G.mu);
	if (table_add(&G.funcs, f) != 0)
		free(f);
	pthread_mutex_unlock(&G.mu);
}

EXPORT void
__cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext, size_t size,
		  int constant, int global)
{
	(void)deviceAddress, (void)ext, (void)constant, (void)global;
	struct crt_var *v = handle ? calloc(1, sizeof(*v)) : NULL;
	if (!v)
		return;
	v->host = hostVar;
	v->name = deviceName;
	v->size = size;
	v->fb = (struct crt_fatbin *)handle;
	pthread_mutex_lock(&G.mu);
	if (table_add(&G.vars, v) != 0)
		free(v);
	pthread_mutex_unlock(&G.mu);
}

EXPORT void
__cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress, const char *deviceName, int ext,
			 size_t size, int constant, int global)
{
	(void)handle, (void)hostVarPtrAddress, (void)deviceAddress, (void)ext, (void)size, (void)constant, (void)global;
	(void)deviceName;
	crt_unsupported("__managed__ variables", "unified memory");
}

EXPORT unsigned
__cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream)
{
	if (config_depth == CONFIG_STACK)
		return 1;
	config_stack[config_depth++] = (struct crt_config){gridDim, blockDim, sharedMem, stream};
	return 0;
}

EXPORT cudaError_t
__cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
	if (config_depth == 0)
		return cudaErrorMissingConfiguration;
	struct crt_config *k = &config_stack[--config_depth];
	*gridDim = k->grid;
	*blockDim = k->block;
	*sharedMem = k->shmem;
	*(void **)stream = k->stream;
	return cudaSuccess;
}

/* ---- launches ---- */
const struct crt_capture_ops *_Atomic crt_capture_hooks;

/* The capture's hooks once a capture was ever begun, else NULL (the common case costs one load). */
static const struct crt_capture_ops *
hooks(void)
{
	return atomic_load(&crt_capture_hooks);
}

bool
crt_config_ok(dim3 g, dim3 b)
{
	uint64_t threads = (uint64_t)b.x * b.y * b.z;
	return g.x && g.y && g.z && threads && threads <= 1024 && b.z <= 64 && g.y <= 65535 && g.z <= 65535;
}

cua_launch *
crt_launch_new(cua_client *c, const struct crt_func *f, dim3 grid, dim3 block, size_t shmem, void **args, cua_stream s,
	       int *r)
{
	cua_launch *l = cua_launch_new(c, f->f);
	*r = l ? CUA_OK : CUA_ENOMEM;
	for (uint32_t i = 0; *r == CUA_OK && i < f->nparams; i++)
		*r = cua_launch_push_arg(l, args[i], f->sizes[i]);
	cua_launch_config cfg = {{grid.x, grid.y, grid.z}, {block.x, block.y, block.z}, (uint32_t)shmem};
	if (*r == CUA_OK)
		*r = cua_launch_set_config(l, cfg);
	if (*r == CUA_OK)
		*r = cua_launch_set_stream(l, s);
	if (*r != CUA_OK && l) {
		cua_launch_free(l);
		l = NULL;
	}
	return l;
}

EXPORT cudaError_t
cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!crt_config_ok(gridDim, blockDim))
		return record(cudaErrorInvalidConfiguration);
	struct crt_func *f = func_resolve(c, func, &e);
	if (!f)
		return record(e);
	const struct crt_capture_ops *h = hooks();
	if (h && (e = h->kernel(stream_of(stream), f, gridDim, blockDim, sharedMem, args)) != CRT_NOT_CAPTURED)
		return record(e);
	int r;
	cua_launch *l = crt_launch_new(c, f, gridDim, blockDim, sharedMem, args, use_stream(stream), &r);
	return status(l ? TIMED(cua_launch_submit(l, NULL)) : r);
}

/* cudaLaunchKernelExC's attributes: what each becomes on a libcuasync launch (NULL: refused, with its name). */
typedef int (*attr_apply_fn)(cua_client *c, cua_launch *l, const cudaLaunchAttributeValue *v);

static int
attr_cooperative(cua_client *c, cua_launch *l, const cudaLaunchAttributeValue *v)
{
	(void)c;
	return cua_launch_cooperative(l, v->cooperative != 0);
}

static int
attr_cluster(cua_client *c, cua_launch *l, const cudaLaunchAttributeValue *v)
{
	(void)c;
	return cua_launch_set_cluster_dims(l, v->clusterDim.x, v->clusterDim.y, v->clusterDim.z);
}

/* CUDA clamps a priority to the device's range, as it does a stream's. */
static int
attr_priority(cua_client *c, cua_launch *l, const cudaLaunchAttributeValue *v)
{
	cua_device_info di;
	int r = cua_device_get_info(c, G.device, &di);
	if (r != CUA_OK)
		return r;
	int p = v->priority;
	p = p > di.priority_least ? di.priority_least : p;
	p = p < di.priority_greatest ? di.priority_greatest : p;
	return cua_launch_set_priority(l, p);
}

static int
attr_pdl(cua_client *c, cua_launch *l, const cudaLaunchAttributeValue *v)
{
	(void)c;
	return v->programmaticStreamSerializationAllowed ? cua_launch_programmatic_dependent_launch(l) : CUA_OK;
}

static int
attr_ignore(cua_client *c, cua_launch *l, const cudaLaunchAttributeValue *v)
{
	(void)c, (void)l, (void)v;
	return CUA_OK;
}

static const struct {
	cudaLaunchAttributeID id;
	const char *name;
	attr_apply_fn apply;
} launch_attrs[] = {
	{cudaLaunchAttributeIgnore, "cudaLaunchAttributeIgnore", attr_ignore},
	{cudaLaunchAttributeAccessPolicyWindow, "cudaLaunchAttributeAccessPolicyWindow", NULL},
	{cudaLaunchAttributeCooperative, "cudaLaunchAttributeCooperative", attr_cooperative},
	{cudaLaunchAttributeSynchronizationPolicy, "cudaLaunchAttributeSynchronizationPolicy", NULL},
	{cudaLaunchAttributeClusterDimension, "cudaLaunchAttributeClusterDimension", attr_cluster},
	{cudaLaunchAttributeClusterSchedulingPolicyPreference, "cudaLaunchAttributeClusterSchedulingPolicyPreference",
	 NULL},
	{cudaLaunchAttributeProgrammaticStreamSerialization, "cudaLaunchAttributeProgrammaticStreamSerialization",
	 attr_pdl},
	{cudaLaunchAttributeProgrammaticEvent, "cudaLaunchAttributeProgrammaticEvent", NULL},
	{cudaLaunchAttributePriority, "cudaLaunchAttributePriority", attr_priority},
	{cudaLaunchAttributeMemSyncDomainMap, "cudaLaunchAttributeMemSyncDomainMap", NULL},
	{cudaLaunchAttributeMemSyncDomain, "cudaLaunchAttributeMemSyncDomain", NULL},
	{cudaLaunchAttributePreferredClusterDimension, "cudaLaunchAttributePreferredClusterDimension", NULL},
	{cudaLaunchAttributeLaunchCompletionEvent, "cudaLaunchAttributeLaunchCompletionEvent", NULL},
	{cudaLaunchAttributeDeviceUpdatableKernelNode, "cudaLaunchAttributeDeviceUpdatableKernelNode", NULL},
	{cudaLaunchAttributePreferredSharedMemoryCarveout, "cudaLaunchAttributePreferredSharedMemoryCarveout", NULL},
};

/* The row of attribute id; -1 when unknown. */
static int
launch_attr_row(cudaLaunchAttributeID id)
{
	for (size_t i = 0; i < sizeof(launch_attrs) / sizeof(launch_attrs[0]); i++)
		if (launch_attrs[i].id == id)
			return (int)i;
	return -1;
}

EXPORT cudaError_t
cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!config || (config->numAttrs && !config->attrs))
		return record(cudaErrorInvalidValue);
	bool plain = true; /* no attribute that changes the launch */
	for (unsigned i = 0; i < config->numAttrs; i++) {
		int row = launch_attr_row(config->attrs[i].id);
		if (row < 0 || !launch_attrs[row].apply) {
			char what[112];
			snprintf(what, sizeof(what), "cudaLaunchKernelExC(%s)",
				 row < 0 ? "an unknown launch attribute" : launch_attrs[row].name);
			return crt_unsupported(what, "cuasyncd launches with clusters, cooperative, priority and "
						     "programmatic stream serialization only");
		}
		plain = plain && launch_attrs[row].apply == attr_ignore;
	}
	if (!crt_config_ok(config->gridDim, config->blockDim))
		return record(cudaErrorInvalidConfiguration);
	struct crt_func *f = func_resolve(c, func, &e);
	if (!f)
		return record(e);
	struct CUstream_st *st = stream_of(config->stream);
	const struct crt_capture_ops *h = hooks();
	if (h && !plain && h->is_capturing(st))
		return crt_unsupported("cudaLaunchKernelExC(launch attributes in a stream capture)",
				       "graph kernel nodes carry no launch attributes through cuasyncd");
	if (h && (e = h->kernel(st, f, config->gridDim, config->blockDim, config->dynamicSmemBytes, args)) !=
			 CRT_NOT_CAPTURED)
		return record(e);
	int r;
	cua_launch *l = crt_launch_new(c, f, config->gridDim, config->blockDim, config->dynamicSmemBytes, args,
				       use_stream(config->stream), &r);
	for (unsigned i = 0; l && r == CUA_OK && i < config->numAttrs; i++)
		r = launch_attrs[launch_attr_row(config->attrs[i].id)].apply(c, l, &config->attrs[i].val);
	if (l && r != CUA_OK)
		cua_launch_free(l);
	return status(l && r == CUA_OK ? TIMED(cua_launch_submit(l, NULL)) : r);
}

EXPORT cudaError_t
cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
			    cudaStream_t stream)
{
	cudaLaunchAttribute attr = {.id = cudaLaunchAttributeCooperative, .val = {.cooperative = 1}};
	cudaLaunchConfig_t config = {gridDim, blockDim, sharedMem, stream, &attr, 1};
	return cudaLaunchKernelExC(&config, func, args);
}

EXPORT cudaError_t
__cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
	pthread_mutex_lock(&G.mu);
	struct crt_func *f = func_find(func);
	pthread_mutex_unlock(&G.mu);
	*kernel = (cudaKernel_t)f;
	return f ? cudaSuccess : record(cudaErrorInvalidDeviceFunction);
}

EXPORT cudaError_t
__cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, cudaStream_t stream)
{
	const struct crt_func *f = (const struct crt_func *)kernel;
	return cudaLaunchKernel(f ? f->host : NULL, gridDim, blockDim, args, sharedMem, stream);
}

EXPORT cudaError_t
cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	cua_client *c;
	int e = enter(&c);
	struct crt_func *f = e == cudaSuccess ? func_resolve(c, func, &e) : NULL;
	if (!f)
		return record(e);
	static const struct {
		cua_func_attribute a;
		size_t off;
		bool is_size;
	} rows[] = {
		{CUA_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, offsetof(struct cudaFuncAttributes, sharedSizeBytes), true},
		{CUA_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, offsetof(struct cudaFuncAttributes, constSizeBytes), true},
		{CUA_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, offsetof(struct cudaFuncAttributes, localSizeBytes), true},
		{CUA_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, offsetof(struct cudaFuncAttributes, maxThreadsPerBlock),
		 false},
		{CUA_FUNC_ATTRIBUTE_NUM_REGS, offsetof(struct cudaFuncAttributes, numRegs), false},
		{CUA_FUNC_ATTRIBUTE_PTX_VERSION, offsetof(struct cudaFuncAttributes, ptxVersion), false},
		{CUA_FUNC_ATTRIBUTE_BINARY_VERSION, offsetof(struct cudaFuncAttributes, binaryVersion), false},
		{CUA_FUNC_ATTRIBUTE_CACHE_MODE_CA, offsetof(struct cudaFuncAttributes, cacheModeCA), false},
		{CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
		 offsetof(struct cudaFuncAttributes, maxDynamicSharedSizeBytes), false},
		{CUA_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
		 offsetof(struct cudaFuncAttributes, preferredShmemCarveout), false},
	};
	memset(attr, 0, sizeof(*attr));
	int r = CUA_OK;
	for (size_t i = 0; r == CUA_OK && i < sizeof(rows) / sizeof(rows[0]); i++) {
		int v = 0;
		r = cua_func_get_attribute(c, f->f, rows[i].a, &v);
		size_t z = (size_t)v; /* the struct's fields by offset: memcpy, the rows' offsets being its own */
		if (rows[i].is_size)
			memcpy((char *)attr + rows[i].off, &z, sizeof(z));
		else
			memcpy((char *)attr + rows[i].off, &v, sizeof(v));
	}
	return status(r);
}

EXPORT cudaError_t
cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
	cua_client *c;
	int e = enter(&c);
	struct crt_func *f = e == cudaSuccess ? func_resolve(c, func, &e) : NULL;
	if (!f)
		return record(e);
	/* cudaFuncAttribute's values 8.. are CUfunction_attribute's */
	return status(cua_func_set_attribute(c, f->f, (cua_func_attribute)(attr + 8), value));
}

EXPORT cudaError_t
cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func, int blockSize,
						       size_t dynamicSMemSize, unsigned flags)
{
	(void)flags;
	cua_client *c;
	int e = enter(&c);
	struct crt_func *f = e == cudaSuccess ? func_resolve(c, func, &e) : NULL;
	if (!f)
		return record(e);
	if (blockSize <= 0)
		return record(cudaErrorInvalidValue);
	return status(cua_occupancy_max_active_blocks(c, f->f, (unsigned)blockSize, dynamicSMemSize, numBlocks));
}

EXPORT cudaError_t
cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize, size_t dynamicSMemSize)
{
	return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

/* ---- memory ---- */
static void
range_add(struct crt_table *t, const void *p, size_t len, bool shared)
{
	struct crt_range *r = malloc(sizeof(*r));
	if (!r)
		return; /* only cudaMemcpyDefault's guess loses it */
	*r = (struct crt_range){(uintptr_t)p, len, shared};
	pthread_mutex_lock(&G.mu);
	if (table_add(t, r) != 0)
		free(r);
	pthread_mutex_unlock(&G.mu);
}

/* Removes the range starting at p; returns whether there was one (and its shared flag). */
static bool
range_remove(struct crt_table *t, const void *p, bool *shared)
{
	bool found = false;
	pthread_mutex_lock(&G.mu);
	for (size_t i = 0; i < t->n && !found; i++) {
		struct crt_range *r = t->v[i];
		if (r->base == (uintptr_t)p) {
			found = true;
			*shared = r->shared;
			free(r);
			t->v[i] = t->v[--t->n];
		}
	}
	pthread_mutex_unlock(&G.mu);
	return found;
}

static bool
is_device(uintptr_t p)
{
	bool in = false;
	pthread_mutex_lock(&G.mu);
	for (size_t i = 0; i < G.dev_ranges.n && !in; i++) {
		struct crt_range *r = G.dev_ranges.v[i];
		in = p >= r->base && p - r->base < r->len;
	}
	for (size_t i = 0; i < G.vars.n && !in; i++) {
		struct crt_var *v = G.vars.v[i];
		in = v->resolved && p >= v->ptr && p - v->ptr < v->size;
	}
	pthread_mutex_unlock(&G.mu);
	return in;
}

/* [p, +n) lies inside one cudaMallocHost block shared with the daemon's worker (cua_host_alloc). */
static bool
is_shared_host(const void *p, size_t n)
{
	bool in = false;
	uintptr_t a = (uintptr_t)p;
	pthread_mutex_lock(&G.mu);
	for (size_t i = 0; i < G.host_ranges.n && !in; i++) {
		struct crt_range *r = G.host_ranges.v[i];
		in = r->shared && a >= r->base && a - r->base <= r->len && n <= r->len - (a - r->base);
	}
	pthread_mutex_unlock(&G.mu);
	return in;
}

EXPORT cudaError_t
cudaMalloc(void **devPtr, size_t size)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!devPtr)
		return record(cudaErrorInvalidValue);
	cua_deviceptr p = 0;
	int r = size ? TIMED(cua_mem_alloc(c, G.device, size, &p)) : CUA_OK;
	*devPtr = (void *)(uintptr_t)p;
	if (r == CUA_OK && p)
		range_add(&G.dev_ranges, *devPtr, size, false);
	return r == CUA_EQUOTA || r == CUA_ENOMEM ? record(cudaErrorMemoryAllocation) : status(r);
}

EXPORT cudaError_t
cudaFree(void *devPtr)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess || !devPtr)
		return e; /* cudaFree(0): the classic way to create the context */
	bool shared;
	if (!range_remove(&G.dev_ranges, devPtr, &shared))
		return record(cudaErrorInvalidValue);
	/* CUDA's cudaFree waits for the device first */
	int r = TIMED(cua_synchronize(c));
	int r2 = TIMED(cua_mem_free(c, (uintptr_t)devPtr));
	return status(r != CUA_OK ? r : r2);
}

EXPORT cudaError_t
cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	cua_device_info di;
	cua_daemon_status *ds = malloc(sizeof(*ds));
	int r = ds ? cua_device_get_info(c, G.device, &di) : CUA_ENOMEM;
	if (r == CUA_OK)
		r = cua_status(c, ds);
	if (r == CUA_OK) {
		uint64_t used = (uint32_t)G.device < ds->ndevices ? ds->devices[G.device].alloc_bytes : 0;
		*total = di.total_mem;
		*free_bytes = used < di.total_mem ? di.total_mem - used : 0;
	}
	free(ds);
	return status(r);
}

EXPORT cudaError_t
cudaMallocHost(void **ptr, size_t size)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!ptr)
		return record(cudaErrorInvalidValue);
	/* shared with the GPU worker where the daemon allows it (ipc://); else ordinary memory, copied through the
	 * socket */
	bool shared = cua_host_alloc(c, G.device, size ? size : 1, ptr) == CUA_OK;
	if (!shared && posix_memalign(ptr, 4096, size ? size : 1) != 0)
		return record(cudaErrorMemoryAllocation);
	range_add(&G.host_ranges, *ptr, size, shared);
	return cudaSuccess;
}

EXPORT cudaError_t
cudaHostAlloc(void **pHost, size_t size, unsigned flags)
{
	if (flags & cudaHostAllocMapped)
		return crt_unsupported("cudaHostAlloc(cudaHostAllocMapped)",
				       "zero-copy host memory mapped into kernels");
	return cudaMallocHost(pHost, size);
}

EXPORT cudaError_t
cudaFreeHost(void *ptr)
{
	cua_client *c;
	int e = enter(&c);
	bool shared;
	if (e != cudaSuccess || !ptr)
		return e;
	if (!range_remove(&G.host_ranges, ptr, &shared))
		return record(cudaErrorInvalidValue);
	if (!shared) {
		free(ptr);
		return cudaSuccess;
	}
	return status(TIMED(cua_host_free(c, ptr)));
}

/* cudaHostRegister: the memory stays the program's ordinary memory, which the library copies through the normal
 * path like any other host memory (what registering buys on a GPU, pinned DMA, is the daemon's business). What
 * needs the range mapped into the device (a device pointer for it) is refused. */
struct crt_registered {
	uintptr_t base;
	size_t len;
	unsigned flags;
};

/* The registered range holding p (any byte of it), or the index past the end. Caller holds G.mu. */
static size_t
registered_find(uintptr_t p, size_t len)
{
	size_t i = 0;
	for (; i < G.registered.n; i++) {
		const struct crt_registered *r = G.registered.v[i];
		if (p < r->base + r->len && r->base < p + (len ? len : 1))
			break;
	}
	return i;
}

EXPORT cudaError_t
cudaHostRegister(void *ptr, size_t size, unsigned flags)
{
	static const struct {
		unsigned flag;
		const char *what;
	} refused[] = {
		{cudaHostRegisterMapped, "cudaHostRegister(cudaHostRegisterMapped)"},
		{cudaHostRegisterIoMemory, "cudaHostRegister(cudaHostRegisterIoMemory)"},
		{cudaHostRegisterReadOnly, "cudaHostRegister(cudaHostRegisterReadOnly)"},
	};
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!ptr || !size ||
	    (flags & ~(unsigned)(cudaHostRegisterPortable | cudaHostRegisterMapped | cudaHostRegisterIoMemory |
				 cudaHostRegisterReadOnly)))
		return record(cudaErrorInvalidValue);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (flags & refused[i].flag)
			return crt_unsupported(refused[i].what, "host memory mapped into the device's address space");
	struct crt_registered *r = malloc(sizeof(*r));
	if (!r)
		return record(cudaErrorMemoryAllocation);
	*r = (struct crt_registered){(uintptr_t)ptr, size, flags};
	pthread_mutex_lock(&G.mu);
	e = registered_find(r->base, size) < G.registered.n ? cudaErrorHostMemoryAlreadyRegistered
	    : table_add(&G.registered, r) != 0              ? cudaErrorMemoryAllocation
							    : cudaSuccess;
	pthread_mutex_unlock(&G.mu);
	if (e != cudaSuccess)
		free(r);
	return record(e);
}

EXPORT cudaError_t
cudaHostUnregister(void *ptr)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	struct crt_registered *r = NULL;
	pthread_mutex_lock(&G.mu);
	size_t i = registered_find((uintptr_t)ptr, 1);
	if (i < G.registered.n && ((struct crt_registered *)G.registered.v[i])->base == (uintptr_t)ptr) {
		r = G.registered.v[i];
		G.registered.v[i] = G.registered.v[--G.registered.n];
	}
	pthread_mutex_unlock(&G.mu);
	free(r);
	return r ? cudaSuccess : record(cudaErrorHostMemoryNotRegistered);
}

EXPORT cudaError_t
cudaHostGetFlags(unsigned *pFlags, void *pHost)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pFlags)
		return record(cudaErrorInvalidValue);
	bool found = false;
	pthread_mutex_lock(&G.mu);
	size_t i = registered_find((uintptr_t)pHost, 1);
	if (i < G.registered.n) {
		found = true;
		*pFlags = ((struct crt_registered *)G.registered.v[i])->flags;
	}
	for (size_t k = 0; k < G.host_ranges.n && !found; k++) {
		const struct crt_range *h = G.host_ranges.v[k];
		found = (uintptr_t)pHost >= h->base && (uintptr_t)pHost - h->base < (h->len ? h->len : 1);
		if (found)
			*pFlags = cudaHostAllocDefault; /* cudaHostAllocMapped is refused, so never mapped */
	}
	pthread_mutex_unlock(&G.mu);
	return found ? cudaSuccess : record(cudaErrorInvalidValue);
}

/* Submits batch b, built up to status r (a failed build is freed unsent), and waits for it unless async. */
static int
submit(cua_batch *b, int r, bool async)
{
	cua_future *f = NULL;
	if (r != CUA_OK) {
		cua_batch_free(b);
		return r;
	}
	r = TIMED(cua_batch_submit(b, async ? NULL : &f));
	if (f) {
		r = TIMED(cua_future_wait(f, -1));
		cua_future_free(f);
	}
	return r;
}

/* A copy of kind on stream s: synchronous unless async. Asynchronous copies between the device and page-locked
 * memory (cudaMallocHost's, shared with the daemon's worker) run in stream order without their bytes in a
 * message (libcuasync's host-buffer batch items), as CUDA's do; an asynchronous copy into pageable memory waits,
 * as CUDA's does (the data must be there when the stream is synchronized). */
static int
copy(cua_client *c, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s, bool async)
{
	kind = crt_copy_kind(dst, src, kind);
	if (n == 0)
		return cudaSuccess;
	const struct crt_capture_ops *h = hooks();
	int e;
	if (h && (e = h->copy(stream_of(s), dst, src, n, kind)) != CRT_NOT_CAPTURED)
		return record(e);
	cua_stream st = use_stream(s);
	atomic_fetch_add(&G.bytes, n);
	if (kind == cudaMemcpyHostToHost) {
		int r = async ? CUA_OK : TIMED(cua_stream_synchronize(c, st));
		memmove(dst, src, n);
		return status(r);
	}
	if (kind == cudaMemcpyHostToDevice && !async)
		return status(TIMED(cua_memcpy_htod_on(c, (uintptr_t)dst, src, n, st)));
	int ndev = 0; /* libcuasync names a host buffer in a copy only where the daemon shows one device */
	bool dtoh_async = kind == cudaMemcpyDeviceToHost && async && is_shared_host(dst, n) &&
			  cua_device_count(c, &ndev) == CUA_OK && ndev == 1;
	if (kind == cudaMemcpyDeviceToHost && !dtoh_async)
		return status(TIMED(cua_memcpy_dtoh_on(c, dst, (uintptr_t)src, n, st)));
	if (kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice && !dtoh_async)
		return record(cudaErrorInvalidMemcpyDirection);
	cua_batch *b = cua_batch_new(c);
	int r = b ? CUA_OK : CUA_ENOMEM;
	if (r == CUA_OK && dtoh_async)
		r = cua_batch_add_memcpy_dtoh(b, dst, (uintptr_t)src, n, st);
	else if (r == CUA_OK)
		r = kind == cudaMemcpyHostToDevice
			    ? cua_batch_add_memcpy_htod(b, (uintptr_t)dst, src, n, st)
			    : cua_batch_add_memcpy_dtod(b, (uintptr_t)dst, (uintptr_t)src, n, st);
	return status(submit(b, r, async));
}

enum cudaMemcpyKind
crt_copy_kind(void *dst, const void *src, enum cudaMemcpyKind kind)
{
	if (kind != cudaMemcpyDefault)
		return kind;
	bool dd = is_device((uintptr_t)dst), sd = is_device((uintptr_t)src);
	return dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
		  : (sd ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}

int
crt_copy(cua_client *c, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s, bool async)
{
	return copy(c, dst, src, n, kind, s, async);
}

EXPORT cudaError_t
cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	cua_client *c;
	int e = enter(&c);
	return e != cudaSuccess ? e : copy(c, dst, src, count, kind, NULL, false);
}

EXPORT cudaError_t
cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
	cua_client *c;
	int e = enter(&c);
	return e != cudaSuccess ? e : copy(c, dst, src, count, kind, stream, true);
}

static int
set(void *p, int value, size_t count, cudaStream_t s, bool async)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess || count == 0)
		return e;
	const struct crt_capture_ops *h = hooks();
	if (h && (e = h->memset(stream_of(s), p, value, count)) != CRT_NOT_CAPTURED)
		return record(e);
	cua_stream st = use_stream(s);
	cua_batch *b = cua_batch_new(c);
	int r = b ? cua_batch_add_memset(b, (uintptr_t)p, (uint8_t)value, 1, count, st) : CUA_ENOMEM;
	return status(submit(b, r, async));
}

EXPORT cudaError_t
cudaMemset(void *devPtr, int value, size_t count)
{
	return set(devPtr, value, count, NULL, false);
}

EXPORT cudaError_t
cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	return set(devPtr, value, count, stream, true);
}

static int
symbol_copy(const void *symbol, void *host, size_t count, size_t offset, enum cudaMemcpyKind kind, cudaStream_t s,
	    bool async, bool to)
{
	cua_client *c;
	int e = enter(&c);
	struct crt_var *v = e == cudaSuccess ? var_resolve(c, symbol, &e) : NULL;
	if (!v)
		return record(e);
	if (offset > v->size || count > v->size - offset)
		return record(cudaErrorInvalidValue);
	void *dev = (void *)(uintptr_t)(v->ptr + offset);
	if (kind != cudaMemcpyDefault && kind != cudaMemcpyDeviceToDevice &&
	    kind != (to ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost))
		return record(cudaErrorInvalidMemcpyDirection);
	if (kind == cudaMemcpyDefault)
		kind = is_device((uintptr_t)host) ? cudaMemcpyDeviceToDevice
		       : to                       ? cudaMemcpyHostToDevice
						  : cudaMemcpyDeviceToHost;
	return to ? copy(c, dev, host, count, kind, s, async) : copy(c, host, dev, count, kind, s, async);
}

EXPORT cudaError_t
cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind)
{
	return symbol_copy(symbol, (void *)src, count, offset, kind, NULL, false, true);
}

EXPORT cudaError_t
cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind)
{
	return symbol_copy(symbol, dst, count, offset, kind, NULL, false, false);
}

EXPORT cudaError_t
cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind,
			cudaStream_t stream)
{
	return symbol_copy(symbol, (void *)src, count, offset, kind, stream, true, true);
}

EXPORT cudaError_t
cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind,
			  cudaStream_t stream)
{
	return symbol_copy(symbol, dst, count, offset, kind, stream, true, false);
}

EXPORT cudaError_t
cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
	cua_client *c;
	int e = enter(&c);
	struct crt_var *v = e == cudaSuccess ? var_resolve(c, symbol, &e) : NULL;
	if (v)
		*devPtr = (void *)(uintptr_t)v->ptr;
	return v ? cudaSuccess : record(e);
}

EXPORT cudaError_t
cudaGetSymbolSize(size_t *size, const void *symbol)
{
	cua_client *c;
	int e = enter(&c);
	struct crt_var *v = e == cudaSuccess ? var_resolve(c, symbol, &e) : NULL;
	if (v)
		*size = v->size;
	return v ? cudaSuccess : record(e);
}

/* ---- streams ---- */
EXPORT cudaError_t
cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned flags, int priority)
{
	(void)flags; /* cudaStreamNonBlocking: every stream of cuasyncd is independent of the default one */
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	struct CUstream_st *st = calloc(1, sizeof(*st));
	if (!st)
		return record(cudaErrorMemoryAllocation);
	pthread_mutex_init(&st->mu, NULL);
	int r = TIMED(cua_stream_create(c, G.device, priority, &st->s));
	if (r != CUA_OK) {
		pthread_mutex_destroy(&st->mu);
		free(st);
		return status(r);
	}
	*pStream = st;
	return cudaSuccess;
}

EXPORT cudaError_t
cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned flags)
{
	return cudaStreamCreateWithPriority(pStream, flags, 0);
}

EXPORT cudaError_t
cudaStreamCreate(cudaStream_t *pStream)
{
	return cudaStreamCreateWithPriority(pStream, 0, 0);
}

EXPORT cudaError_t
cudaStreamDestroy(cudaStream_t stream)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (stream_of(stream) == &G.deflt)
		return record(cudaErrorInvalidResourceHandle);
	const struct crt_capture_ops *h = hooks();
	if (h && (e = h->stream_use(stream)) != CRT_NOT_CAPTURED)
		return record(e);
	stream_join(stream);
	int r = TIMED(cua_stream_destroy(c, stream->s));
	pthread_mutex_destroy(&stream->mu);
	free(stream);
	return status(r);
}

EXPORT cudaError_t
cudaStreamSynchronize(cudaStream_t stream)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	const struct crt_capture_ops *h = hooks();
	if (h && (e = h->stream_use(stream_of(stream))) != CRT_NOT_CAPTURED)
		return record(e);
	return status(TIMED(cua_stream_synchronize(c, use_stream(stream))));
}

EXPORT cudaError_t
cudaStreamQuery(cudaStream_t stream)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	const struct crt_capture_ops *h = hooks();
	if (h && (e = h->stream_use(stream_of(stream))) != CRT_NOT_CAPTURED)
		return record(e);
	/* "has the stream reached this point?": an event recorded at its end */
	cua_event ev;
	int ready = 0;
	int r = cua_event_create_on(c, G.device, CUA_EVENT_DISABLE_TIMING, &ev);
	if (r != CUA_OK)
		return status(r);
	r = cua_event_record(c, ev, use_stream(stream));
	if (r == CUA_OK)
		r = TIMED(cua_event_query(c, ev, &ready));
	(void)cua_event_destroy(c, ev);
	return r != CUA_OK ? status(r) : ready ? cudaSuccess : cudaErrorNotReady;
}

EXPORT cudaError_t
cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags)
{
	(void)flags;
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!event)
		return record(cudaErrorInvalidResourceHandle);
	const struct crt_capture_ops *h = hooks();
	if (h && (e = h->stream_wait(stream_of(stream), event)) != CRT_NOT_CAPTURED)
		return record(e);
	return status(cua_stream_wait_event(c, use_stream(stream), event->e));
}

EXPORT cudaError_t
cudaStreamGetPriority(cudaStream_t stream, int *priority)
{
	(void)stream;
	*priority = 0;
	return cudaSuccess;
}

EXPORT cudaError_t
cudaStreamGetFlags(cudaStream_t stream, unsigned *flags)
{
	*flags = stream_of(stream) == &G.deflt ? cudaStreamDefault : cudaStreamNonBlocking;
	return cudaSuccess;
}

EXPORT cudaError_t
cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
	cua_client *c;
	int e = enter(&c);
	cua_device_info di;
	int r = e == cudaSuccess ? cua_device_get_info(c, G.device, &di) : CUA_OK;
	if (e != cudaSuccess)
		return e;
	if (r == CUA_OK) {
		if (leastPriority)
			*leastPriority = di.priority_least;
		if (greatestPriority)
			*greatestPriority = di.priority_greatest;
	}
	return status(r);
}

/* A host function: a helper thread waits until the stream reaches it, then runs it; the stream's next use waits
 * for the helper, so work after it starts after it, as in CUDA. */
struct crt_hostfn {
	cua_client *c;
	cua_stream s;
	void (*fn)(void *);
	void (*cb)(cudaStream_t, cudaError_t, void *);
	cudaStream_t stream;
	void *arg;
};

static void *
hostfn_run(void *p)
{
	struct crt_hostfn *h = p;
	int r = TIMED(cua_stream_synchronize(h->c, h->s));
	if (h->fn)
		h->fn(h->arg);
	else
		h->cb(h->stream, from_status(r, cua_last_error()), h->arg);
	free(h);
	return NULL;
}

static int
host_func(cudaStream_t stream, void (*fn)(void *), void (*cb)(cudaStream_t, cudaError_t, void *), void *arg)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	struct CUstream_st *st = stream_of(stream);
	const struct crt_capture_ops *hk = hooks();
	if (hk && (e = hk->host(st, fn, arg)) != CRT_NOT_CAPTURED)
		return record(e);
	stream_join(st);
	struct crt_hostfn *h = malloc(sizeof(*h));
	if (!h)
		return record(cudaErrorMemoryAllocation);
	*h = (struct crt_hostfn){c, st->s, fn, cb, stream, arg};
	pthread_mutex_lock(&st->mu);
	int r = pthread_create(&st->helper, NULL, hostfn_run, h);
	st->helper_active = r == 0;
	pthread_mutex_unlock(&st->mu);
	if (r != 0) {
		free(h);
		return record(cudaErrorMemoryAllocation);
	}
	return cudaSuccess;
}

int
crt_host_func(cudaStream_t s, cudaHostFn_t fn, void *arg)
{
	return host_func(s, fn, NULL, arg);
}

EXPORT cudaError_t
cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
	return fn ? host_func(stream, fn, NULL, userData) : record(cudaErrorInvalidValue);
}

EXPORT cudaError_t
cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void *userData, unsigned flags)
{
	if (!callback || flags != 0)
		return record(cudaErrorInvalidValue);
	return host_func(stream, NULL, callback, userData);
}

/* ---- events ---- */
EXPORT cudaError_t
cudaEventCreateWithFlags(cudaEvent_t *event, unsigned flags)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming))
		return flags & cudaEventInterprocess
			       ? crt_unsupported("cudaEventCreateWithFlags(cudaEventInterprocess)", "IPC handles")
			       : record(cudaErrorInvalidValue);
	struct CUevent_st *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return record(cudaErrorMemoryAllocation);
	int r = TIMED(cua_event_create_on(c, G.device, flags & cudaEventDisableTiming ? CUA_EVENT_DISABLE_TIMING : 0,
					  &ev->e));
	if (r != CUA_OK) {
		free(ev);
		return status(r);
	}
	*event = ev;
	return cudaSuccess;
}

EXPORT cudaError_t
cudaEventCreate(cudaEvent_t *event)
{
	return cudaEventCreateWithFlags(event, 0);
}

EXPORT cudaError_t
cudaEventDestroy(cudaEvent_t event)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!event)
		return record(cudaErrorInvalidResourceHandle);
	const struct crt_capture_ops *h = hooks();
	if (h)
		h->event_forget(event);
	int r = cua_event_destroy(c, event->e);
	free(event);
	return status(r);
}

EXPORT cudaError_t
cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!event)
		return record(cudaErrorInvalidResourceHandle);
	const struct crt_capture_ops *h = hooks();
	if (h && (e = h->event_record(stream_of(stream), event)) != CRT_NOT_CAPTURED)
		return record(e);
	if (h)
		h->event_forget(event); /* recorded outside a capture: a later wait waits on this record */
	return status(TIMED(cua_event_record(c, event->e, use_stream(stream))));
}

EXPORT cudaError_t
cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned flags)
{
	if (flags)
		return crt_unsupported("cudaEventRecordWithFlags(cudaEventRecordExternal)", "graph capture");
	return cudaEventRecord(event, stream);
}

EXPORT cudaError_t
cudaEventSynchronize(cudaEvent_t event)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	return event ? status(TIMED(cua_event_synchronize(c, event->e))) : record(cudaErrorInvalidResourceHandle);
}

EXPORT cudaError_t
cudaEventQuery(cudaEvent_t event)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!event)
		return record(cudaErrorInvalidResourceHandle);
	int ready = 0;
	int r = TIMED(cua_event_query(c, event->e, &ready));
	/* cudaErrorNotReady is a state, not an error: CUDA does not record it as the last error */
	return r != CUA_OK ? status(r) : ready ? cudaSuccess : cudaErrorNotReady;
}

EXPORT cudaError_t
cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!start || !end || !ms)
		return record(!ms ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
	int r = TIMED(cua_event_elapsed_ms(c, start->e, end->e, ms));
	/* CUDA: not reached yet is cudaErrorNotReady; never recorded or without timing, an invalid handle */
	return r == CUA_EBUSY           ? cudaErrorNotReady
	       : r == CUA_EBAD_ARGUMENT ? record(cudaErrorInvalidResourceHandle)
					: status(r);
}

/* ---- device ---- */
EXPORT cudaError_t
cudaDeviceSynchronize(void)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	stream_join(&G.deflt);
	return status(TIMED(cua_synchronize(c)));
}

EXPORT cudaError_t
cudaDeviceReset(void)
{
	/* the session keeps its objects; what CUDA's reset is used for at the end of samples is a synchronize */
	return cudaDeviceSynchronize();
}

EXPORT cudaError_t
cudaGetDeviceCount(int *count)
{
	cua_client *c;
	int e = enter(&c);
	if (e == cudaErrorNoDevice) {
		*count = 0;
		return e;
	}
	return e != cudaSuccess ? e : status(cua_device_count(c, count));
}

EXPORT cudaError_t
cudaSetDevice(int device)
{
	cua_client *c;
	int n = 0;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	int r = cua_device_count(c, &n);
	if (r != CUA_OK)
		return status(r);
	if (device < 0 || device >= n)
		return record(cudaErrorInvalidDevice);
	if (device != 0)
		/* the default stream and events are the session's on device 0 (CUA_STREAM_ORDERED) */
		return crt_unsupported("cudaSetDevice(device > 0)", "one device per process through cuasyncd");
	G.device = device;
	return cudaSuccess;
}

EXPORT cudaError_t
cudaGetDevice(int *device)
{
	*device = G.device;
	return cudaSuccess;
}

EXPORT cudaError_t
cudaSetDeviceFlags(unsigned flags)
{
	(void)flags; /* scheduling hints: the daemon schedules */
	return cudaSuccess;
}

EXPORT cudaError_t
cudaInitDevice(int device, unsigned deviceFlags, unsigned flags)
{
	(void)deviceFlags, (void)flags;
	return cudaSetDevice(device);
}

static int
device_props(int device, struct cudaDeviceProp *p)
{
	cua_client *c;
	int e = enter(&c);
	if (e != cudaSuccess)
		return e;
	cua_device_info di;
	int r = cua_device_get_info(c, device, &di);
	if (r != CUA_OK)
		return r == CUA_EBAD_ARGUMENT || r == CUA_ENOT_FOUND ? record(cudaErrorInvalidDevice) : status(r);
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%.255s", di.name); /* CUDA's name is 256 bytes */
	p->totalGlobalMem = di.total_mem;
	p->major = di.sm_major;
	p->minor = di.sm_minor;
	p->multiProcessorCount = di.multiprocessors;
	p->sharedMemPerBlock = 48 << 10;
	p->sharedMemPerBlockOptin = di.max_shared_optin;
	p->sharedMemPerMultiprocessor = di.max_shared_optin + 1024;
	p->regsPerBlock = p->regsPerMultiprocessor = 65536;
	p->warpSize = 32;
	p->memPitch = SIZE_MAX / 2;
	p->maxThreadsPerBlock = 1024;
	p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
	p->maxThreadsDim[2] = 64;
	p->maxGridSize[0] = 0x7fffffff;
	p->maxGridSize[1] = p->maxGridSize[2] = 65535;
	p->maxThreadsPerMultiProcessor = 2048;
	p->maxBlocksPerMultiProcessor = 32;
	p->totalConstMem = 64 << 10;
	p->textureAlignment = 512;
	p->texturePitchAlignment = 32;
	p->asyncEngineCount = 2;
	p->concurrentKernels = 1;
	p->l2CacheSize = 0;
	p->cooperativeLaunch = di.cooperative_launch;
	p->clusterLaunch = di.cluster_launch;
	p->unifiedAddressing = 1;
	p->computePreemptionSupported = 1;
	p->streamPrioritiesSupported = di.priority_least != di.priority_greatest;
	p->globalL1CacheSupported = p->localL1CacheSupported = 1;
	p->canMapHostMemory = 0; /* zero-copy is refused */
	/* then what the GPU's driver answered on the daemon's host (a daemon older than this library reports
	 * none: the architectural values above stay) */
	static const struct {
		enum cudaDeviceAttr attr;
		size_t off;
		bool size_t_field;
	} attr_rows[] = {
#define PROP_INT(a, f) {a, offsetof(struct cudaDeviceProp, f), false}
#define PROP_SIZE(a, f)                                                                                                \
	{                                                                                                              \
		a, offsetof(struct cudaDeviceProp, f), true                                                            \
	}
		PROP_SIZE(cudaDevAttrMaxSharedMemoryPerBlock, sharedMemPerBlock),
		PROP_INT(cudaDevAttrMaxRegistersPerBlock, regsPerBlock),
		PROP_INT(cudaDevAttrWarpSize, warpSize),
		PROP_SIZE(cudaDevAttrMaxPitch, memPitch),
		PROP_INT(cudaDevAttrMaxThreadsPerBlock, maxThreadsPerBlock),
		PROP_INT(cudaDevAttrMaxBlockDimX, maxThreadsDim[0]),
		PROP_INT(cudaDevAttrMaxBlockDimY, maxThreadsDim[1]),
		PROP_INT(cudaDevAttrMaxBlockDimZ, maxThreadsDim[2]),
		PROP_INT(cudaDevAttrMaxGridDimX, maxGridSize[0]),
		PROP_INT(cudaDevAttrMaxGridDimY, maxGridSize[1]),
		PROP_INT(cudaDevAttrMaxGridDimZ, maxGridSize[2]),
		PROP_SIZE(cudaDevAttrTotalConstantMemory, totalConstMem),
		PROP_SIZE(cudaDevAttrTextureAlignment, textureAlignment),
		PROP_SIZE(cudaDevAttrTexturePitchAlignment, texturePitchAlignment),
		PROP_INT(cudaDevAttrIntegrated, integrated),
		PROP_INT(cudaDevAttrConcurrentKernels, concurrentKernels),
		PROP_INT(cudaDevAttrEccEnabled, ECCEnabled),
		PROP_INT(cudaDevAttrPciBusId, pciBusID),
		PROP_INT(cudaDevAttrPciDeviceId, pciDeviceID),
		PROP_INT(cudaDevAttrPciDomainId, pciDomainID),
		PROP_INT(cudaDevAttrAsyncEngineCount, asyncEngineCount),
		PROP_INT(cudaDevAttrGlobalMemoryBusWidth, memoryBusWidth),
		PROP_INT(cudaDevAttrL2CacheSize, l2CacheSize),
		PROP_INT(cudaDevAttrMaxPersistingL2CacheSize, persistingL2CacheMaxSize),
		PROP_INT(cudaDevAttrMaxThreadsPerMultiProcessor, maxThreadsPerMultiProcessor),
		PROP_INT(cudaDevAttrGlobalL1CacheSupported, globalL1CacheSupported),
		PROP_INT(cudaDevAttrLocalL1CacheSupported, localL1CacheSupported),
		PROP_SIZE(cudaDevAttrMaxSharedMemoryPerMultiprocessor, sharedMemPerMultiprocessor),
		PROP_INT(cudaDevAttrMaxRegistersPerMultiprocessor, regsPerMultiprocessor),
		PROP_INT(cudaDevAttrIsMultiGpuBoard, isMultiGpuBoard),
		PROP_INT(cudaDevAttrMultiGpuBoardGroupID, multiGpuBoardGroupID),
		PROP_INT(cudaDevAttrHostNativeAtomicSupported, hostNativeAtomicSupported),
		PROP_INT(cudaDevAttrComputePreemptionSupported, computePreemptionSupported),
		PROP_SIZE(cudaDevAttrMaxSharedMemoryPerBlockOptin, sharedMemPerBlockOptin),
		PROP_INT(cudaDevAttrMaxBlocksPerMultiprocessor, maxBlocksPerMultiProcessor),
		PROP_INT(cudaDevAttrMaxAccessPolicyWindowSize, accessPolicyMaxWindowSize),
		PROP_SIZE(cudaDevAttrReservedSharedMemoryPerBlock, reservedSharedMemPerBlock),
		PROP_INT(cudaDevAttrSparseCudaArraySupported, sparseCudaArraySupported),
		PROP_INT(cudaDevAttrDeferredMappingCudaArraySupported, deferredMappingCudaArraySupported),
		PROP_INT(cudaDevAttrNumaConfig, deviceNumaConfig),
		PROP_INT(cudaDevAttrNumaId, deviceNumaId),
		PROP_INT(cudaDevAttrHostNumaId, hostNumaId),
#undef PROP_INT
#undef PROP_SIZE
	};
	for (size_t i = 0; i < sizeof(attr_rows) / sizeof(attr_rows[0]); i++) {
		int v;
		if (dropin_device_attribute(c, device, (int)attr_rows[i].attr, &v) != 0)
			continue;
		if (attr_rows[i].size_t_field)
			memcpy((char *)p + attr_rows[i].off, &(size_t){(size_t)(unsigned)v}, sizeof(size_t));
		else
			memcpy((char *)p + attr_rows[i].off, &v, sizeof(int));
	}
	return cudaSuccess;
}

EXPORT cudaError_t
cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	return prop ? device_props(device, prop) : record(cudaErrorInvalidValue);
}

EXPORT cudaError_t
cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	struct cudaDeviceProp p;
	int e = device_props(device, &p);
	if (e != cudaSuccess)
		return e;
	if (value == NULL)
		return record(cudaErrorInvalidValue);
	cua_client *c;
	if ((e = enter(&c)) != cudaSuccess)
		return e;
	/* what the GPU's driver answered on the daemon's host, less what the drop-in does not offer */
	if (dropin_device_attribute(c, device, (int)attr, value) == 0)
		return cudaSuccess;
	static const struct {
		enum cudaDeviceAttr attr;
		size_t off;
	} rows[] = {
		{cudaDevAttrMaxThreadsPerBlock, offsetof(struct cudaDeviceProp, maxThreadsPerBlock)},
		{cudaDevAttrMaxBlockDimX, offsetof(struct cudaDeviceProp, maxThreadsDim[0])},
		{cudaDevAttrMaxBlockDimY, offsetof(struct cudaDeviceProp, maxThreadsDim[1])},
		{cudaDevAttrMaxBlockDimZ, offsetof(struct cudaDeviceProp, maxThreadsDim[2])},
		{cudaDevAttrMaxGridDimX, offsetof(struct cudaDeviceProp, maxGridSize[0])},
		{cudaDevAttrMaxGridDimY, offsetof(struct cudaDeviceProp, maxGridSize[1])},
		{cudaDevAttrMaxGridDimZ, offsetof(struct cudaDeviceProp, maxGridSize[2])},
		{cudaDevAttrWarpSize, offsetof(struct cudaDeviceProp, warpSize)},
		{cudaDevAttrMultiProcessorCount, offsetof(struct cudaDeviceProp, multiProcessorCount)},
		{cudaDevAttrComputeCapabilityMajor, offsetof(struct cudaDeviceProp, major)},
		{cudaDevAttrComputeCapabilityMinor, offsetof(struct cudaDeviceProp, minor)},
		{cudaDevAttrMaxRegistersPerBlock, offsetof(struct cudaDeviceProp, regsPerBlock)},
		{cudaDevAttrMaxThreadsPerMultiProcessor, offsetof(struct cudaDeviceProp, maxThreadsPerMultiProcessor)},
		{cudaDevAttrConcurrentKernels, offsetof(struct cudaDeviceProp, concurrentKernels)},
		{cudaDevAttrAsyncEngineCount, offsetof(struct cudaDeviceProp, asyncEngineCount)},
		{cudaDevAttrUnifiedAddressing, offsetof(struct cudaDeviceProp, unifiedAddressing)},
		{cudaDevAttrCooperativeLaunch, offsetof(struct cudaDeviceProp, cooperativeLaunch)},
		{cudaDevAttrClusterLaunch, offsetof(struct cudaDeviceProp, clusterLaunch)},
		{cudaDevAttrStreamPrioritiesSupported, offsetof(struct cudaDeviceProp, streamPrioritiesSupported)},
		{cudaDevAttrCanMapHostMemory, offsetof(struct cudaDeviceProp, canMapHostMemory)},
		{cudaDevAttrMaxBlocksPerMultiprocessor, offsetof(struct cudaDeviceProp, maxBlocksPerMultiProcessor)},
		{cudaDevAttrL2CacheSize, offsetof(struct cudaDeviceProp, l2CacheSize)},
	};
	static const struct {
		enum cudaDeviceAttr attr;
		size_t off;
	} size_rows[] = {
		{cudaDevAttrMaxSharedMemoryPerBlock, offsetof(struct cudaDeviceProp, sharedMemPerBlock)},
		{cudaDevAttrMaxSharedMemoryPerBlockOptin, offsetof(struct cudaDeviceProp, sharedMemPerBlockOptin)},
		{cudaDevAttrMaxSharedMemoryPerMultiprocessor,
		 offsetof(struct cudaDeviceProp, sharedMemPerMultiprocessor)},
		{cudaDevAttrTotalConstantMemory, offsetof(struct cudaDeviceProp, totalConstMem)},
	};
	/* A daemon older than this library reports no attributes: the answers from the properties above, and
	 * these. A client of cuasyncd shares the device with every other one, which is what
	 * cudaComputeModeDefault says; the daemon serves discrete GPUs. Without the daemon's clock rates (CUDA 13
	 * dropped them from cudaDeviceProp), cudaErrorInvalidValue, which programs (the cuda-samples'
	 * helper_cuda.h) treat as "not reported". */
	static const struct {
		enum cudaDeviceAttr attr;
		int value;
	} fixed_rows[] = {
		{cudaDevAttrComputeMode, cudaComputeModeDefault},
		{cudaDevAttrIntegrated, 0},
	};
	for (size_t i = 0; i < sizeof(fixed_rows) / sizeof(fixed_rows[0]); i++)
		if (fixed_rows[i].attr == attr) {
			*value = fixed_rows[i].value;
			return cudaSuccess;
		}
	if (attr == cudaDevAttrClockRate || attr == cudaDevAttrMemoryClockRate)
		return record(cudaErrorInvalidValue);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		if (rows[i].attr == attr) {
			memcpy(value, (const char *)&p + rows[i].off, sizeof(int));
			return cudaSuccess;
		}
	for (size_t i = 0; i < sizeof(size_rows) / sizeof(size_rows[0]); i++)
		if (size_rows[i].attr == attr) {
			size_t z;
			memcpy(&z, (const char *)&p + size_rows[i].off, sizeof(z));
			*value = (int)z;
			return cudaSuccess;
		}
	char what[80];
	snprintf(what, sizeof(what), "cudaDeviceGetAttribute(attribute %d)", (int)attr);
	return crt_unsupported(what, "cuasyncd does not report it"); /* told once per attribute number */
}

/* ---- the profiler ---- */
/* Profiling goes with the process that owns the context, the daemon's worker: a client's cudaProfilerStart/Stop
 * mark nothing, and succeed as CUDA's do when no profiler is attached (the cuda-samples call them). */
EXPORT cudaError_t
cudaProfilerStart(void)
{
	return cudaSuccess;
}

EXPORT cudaError_t
cudaProfilerStop(void)
{
	return cudaSuccess;
}

/* ---- errors and versions ---- */
EXPORT cudaError_t
cudaGetLastError(void)
{
	int e = last_error;
	last_error = cudaSuccess;
	int s = atomic_load(&G.sticky);
	return s != cudaSuccess ? s : e;
}

EXPORT cudaError_t
cudaPeekAtLastError(void)
{
	int s = atomic_load(&G.sticky);
	return s != cudaSuccess ? s : last_error;
}

EXPORT const char *
cudaGetErrorName(cudaError_t error)
{
	const struct crt_error_row *r = error_row(error);
	return r ? r->name : "unrecognized error code";
}

EXPORT const char *
cudaGetErrorString(cudaError_t error)
{
	const struct crt_error_row *r = error_row(error);
	return r ? r->string : "unrecognized error code";
}

EXPORT cudaError_t
cudaRuntimeGetVersion(int *runtimeVersion)
{
	if (!runtimeVersion)
		return record(cudaErrorInvalidValue);
	*runtimeVersion = CUDART_VERSION;
	return cudaSuccess;
}

EXPORT cudaError_t
cudaDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return record(cudaErrorInvalidValue);
	/* the daemon's driver is at least the runtime it was built for */
	*driverVersion = CUDART_VERSION;
	return cudaSuccess;
}

EXPORT struct cudaChannelFormatDesc
cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
	/* a plain value (no device work); returning a struct, it cannot be one of unsupported.c's stubs */
	return (struct cudaChannelFormatDesc){x, y, z, w, f};
}

/* ---- the per-thread default stream's names (nvcc --default-stream per-thread): the same session stream ---- */
#define PTSZ(name, real) extern __typeof__(real) name __attribute__((alias(#real), visibility("default")));
PTSZ(cudaLaunchKernel_ptsz, cudaLaunchKernel)
PTSZ(cudaLaunchKernelExC_ptsz, cudaLaunchKernelExC)
PTSZ(cudaLaunchCooperativeKernel_ptsz, cudaLaunchCooperativeKernel)
PTSZ(__cudaLaunchKernel_ptsz, __cudaLaunchKernel)
PTSZ(cudaMemcpy_ptds, cudaMemcpy)
PTSZ(cudaMemcpyAsync_ptsz, cudaMemcpyAsync)
PTSZ(cudaMemset_ptds, cudaMemset)
PTSZ(cudaMemsetAsync_ptsz, cudaMemsetAsync)
PTSZ(cudaMemcpyToSymbol_ptds, cudaMemcpyToSymbol)
PTSZ(cudaMemcpyFromSymbol_ptds, cudaMemcpyFromSymbol)
PTSZ(cudaMemcpyToSymbolAsync_ptsz, cudaMemcpyToSymbolAsync)
PTSZ(cudaMemcpyFromSymbolAsync_ptsz, cudaMemcpyFromSymbolAsync)
PTSZ(cudaStreamSynchronize_ptsz, cudaStreamSynchronize)
PTSZ(cudaStreamQuery_ptsz, cudaStreamQuery)
PTSZ(cudaStreamWaitEvent_ptsz, cudaStreamWaitEvent)
PTSZ(cudaStreamGetPriority_ptsz, cudaStreamGetPriority)
PTSZ(cudaStreamGetFlags_ptsz, cudaStreamGetFlags)
PTSZ(cudaEventRecord_ptsz, cudaEventRecord)
PTSZ(cudaEventRecordWithFlags_ptsz, cudaEventRecordWithFlags)
PTSZ(cudaLaunchHostFunc_ptsz, cudaLaunchHostFunc)
PTSZ(cudaStreamAddCallback_ptsz, cudaStreamAddCallback)
