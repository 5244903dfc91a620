/*
 * native.c — the native columns of cuasync-bench --compare (native.h): kernels launched straight through the
 * CUDA driver API, loaded at run time like the worker does (worker/backend_cuda.c).
 */
#include "config.h"

#include "native.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA_H

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>

#define NATIVE_CUDA_VERSION 12000

/* Every driver entry point used: one row each. */
/* clang-format off */
#define NATIVE_FNS(X)                                                                                        \
	X(cuInit) X(cuDeviceGet) X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent)           \
	X(cuModuleLoadData) X(cuModuleGetFunction) X(cuMemAlloc) X(cuMemsetD32) X(cuStreamCreate)           \
	X(cuStreamSynchronize) X(cuLaunchKernel) X(cuGetErrorName)                                          \
	X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch)       \
	X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuMemHostAlloc) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)  \
	X(cuMemFreeHost)
/* clang-format on */

static struct {
#define NATIVE_FN_FIELD(name) __typeof__(name) *name;
	NATIVE_FNS(NATIVE_FN_FIELD)
#undef NATIVE_FN_FIELD
} drv;

/* One tenant's launch state: a context current where it launches, its stream, the kernel and its arguments. */
struct native_tenant {
	CUcontext ctx;
	CUstream stream;
	CUfunction fn;
	const struct bench_kernel *k;
	int64_t cycles;
	float a;
	CUdeviceptr x, y;
	uint64_t n;
	void *params[4];
	void *big;      /* the large-argument row's 32000 bytes (params[1]) */
	int has_params; /* empty_kernel takes none */
};

static const char *
errname(CUresult r)
{
	const char *s = NULL;
	if (drv.cuGetErrorName == NULL || drv.cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL)
		return "CUDA error";
	return s;
}

#define CK(call)                                                                                                       \
	do {                                                                                                           \
		CUresult cr_ = (call);                                                                                 \
		if (cr_ != CUDA_SUCCESS) {                                                                             \
			snprintf(err, len, "%s: %s", #call, errname(cr_));                                             \
			return -1;                                                                                     \
		}                                                                                                      \
	} while (0)

/* Loads libcuda.so.1, resolves every entry point and calls cuInit (once per process). 0, or -1 with err. */
static int
native_load(char *err, size_t len)
{
	static int loaded;
	if (loaded)
		return 0;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		snprintf(err, len, "no NVIDIA driver: cannot load libcuda.so.1 (%s)", dlerror());
		return -1;
	}
	__typeof__(cuGetProcAddress) *gpa = (__typeof__(cuGetProcAddress) *)dlsym(h, "cuGetProcAddress_v2");
	if (gpa == NULL) {
		snprintf(err, len, "NVIDIA driver too old: no cuGetProcAddress_v2");
		return -1;
	}
	CUdriverProcAddressQueryResult q;
#define NATIVE_FN_LOAD(name)                                                                                           \
	if (gpa(#name, (void **)&drv.name, NATIVE_CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q) != CUDA_SUCCESS ||    \
	    drv.name == NULL) {                                                                                        \
		snprintf(err, len, "NVIDIA driver too old: no %s", #name);                                             \
		return -1;                                                                                             \
	}
	NATIVE_FNS(NATIVE_FN_LOAD)
#undef NATIVE_FN_LOAD
	CK(drv.cuInit(0));
	loaded = 1;
	return 0;
}

/* Reads the whole file at path into a malloc'ed, NUL-terminated buffer. NULL with err (naming the option that
 * gives the file) on failure. */
static void *
read_file(const char *path, const char *option, char *err, size_t len)
{
	FILE *f = path != NULL ? fopen(path, "rb") : NULL;
	char *buf = NULL;
	long size = -1;
	if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)size + 1)) != NULL && fread(buf, 1, (size_t)size, f) == (size_t)size)
		buf[size] = '\0';
	else {
		snprintf(err, len, "cannot read the module %s (give the fatbin with %s)", path ? path : "(none)",
			 option);
		free(buf);
		buf = NULL;
	}
	if (f != NULL)
		fclose(f);
	return buf;
}

/* Makes device 0's primary context current on the calling thread and creates t's stream. 0, or -1 with err. */
static int
context_open(struct native_tenant *t, char *err, size_t len)
{
	if (native_load(err, len) != 0)
		return -1;
	CUdevice dev;
	CK(drv.cuDeviceGet(&dev, 0));
	CK(drv.cuDevicePrimaryCtxRetain(&t->ctx, dev));
	CK(drv.cuCtxSetCurrent(t->ctx));
	CK(drv.cuStreamCreate(&t->stream, CU_STREAM_NON_BLOCKING));
	return 0;
}

/* Sets t up on device 0's primary context, current on the calling thread afterwards, with job->kernel from
 * module (job->module, or job->feature_module for the large-argument row). 0, or -1 with err. */
static int
tenant_open_from(const struct bench_job *job, const char *module, const char *option, struct native_tenant *t,
		 char *err, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->k = job->kernel;
	if (context_open(t, err, len) != 0)
		return -1;
	void *image = read_file(module, option, err, len);
	if (image == NULL)
		return -1;
	CUmodule m;
	CUresult cr = drv.cuModuleLoadData(&m, image);
	free(image);
	CK(cr);
	CK(drv.cuModuleGetFunction(&t->fn, m, t->k->fn));
	t->cycles = t->k->cycles;
	t->params[0] = &t->cycles;
	t->has_params = strcmp(t->k->fn, "empty_kernel") != 0;
	if (t->k->n > 0) {
		t->n = t->k->n;
		t->a = 2.0f;
		CK(drv.cuMemAlloc(&t->x, t->n * sizeof(float)));
		CK(drv.cuMemAlloc(&t->y, t->n * sizeof(float)));
		CK(drv.cuMemsetD32(t->x, 0, t->n));
		CK(drv.cuMemsetD32(t->y, 0, t->n));
		t->params[0] = &t->a;
		t->params[1] = &t->x;
		t->params[2] = &t->y;
		t->params[3] = &t->n;
	}
	return 0;
}

static int
tenant_open(const struct bench_job *job, struct native_tenant *t, char *err, size_t len)
{
	return tenant_open_from(job, job->module, "--module", t, err, len);
}

/* n launches back to back on t's stream, then cuStreamSynchronize (what waiting for every future is). */
static int
tenant_launches(struct native_tenant *t, int n, char *err, size_t len)
{
	CK(drv.cuCtxSetCurrent(t->ctx));
	void **params = t->has_params ? t->params : NULL;
	for (int i = 0; i < n; i++)
		CK(drv.cuLaunchKernel(t->fn, t->k->grid, 1, 1, t->k->block, 1, 1, 0, t->stream, params, NULL));
	CK(drv.cuStreamSynchronize(t->stream));
	return 0;
}

void
native_probe_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	struct native_tenant t;
	char name[200];
	(void)k;
	(void)g;
	if (tenant_open(arg, &t, out->msg, sizeof(out->msg)) != 0)
		return;
	CUdevice dev;
	if (drv.cuDeviceGet(&dev, 0) != CUDA_SUCCESS || drv.cuDeviceGetName(name, sizeof(name), dev) != CUDA_SUCCESS)
		snprintf(name, sizeof(name), "(unnamed device)");
	snprintf(out->msg, sizeof(out->msg), "%s", name);
	out->ok = 1;
}

void
native_process_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	struct native_tenant t;
	(void)k;
	if (tenant_open(job, &t, out->msg, sizeof(out->msg)) != 0 ||
	    tenant_launches(&t, bench_warmup(job->launches), out->msg, sizeof(out->msg)) != 0 || tenant_ready(g) != 0)
		return;
	out->t0 = bench_now();
	if (tenant_launches(&t, job->launches, out->msg, sizeof(out->msg)) != 0)
		return;
	out->t1 = bench_now();
	out->launches = job->launches;
	out->ok = 1;
}

/* One thread of native_threads_tenant. */
struct native_thread {
	pthread_t tid;
	struct native_tenant t;
	pthread_barrier_t *bar; /* twice: all warmed up, then go */
	int launches, rc;
	double t0, t1;
	char err[200];
};

static void *
thread_main(void *p)
{
	struct native_thread *th = p;
	th->rc = tenant_launches(&th->t, bench_warmup(th->launches), th->err, sizeof(th->err));
	pthread_barrier_wait(th->bar);
	pthread_barrier_wait(th->bar);
	th->t0 = bench_now();
	if (th->rc == 0)
		th->rc = tenant_launches(&th->t, th->launches, th->err, sizeof(th->err));
	th->t1 = bench_now();
	return NULL;
}

/* Opens the P tenants (one context: the primary one) and starts their threads. Returns how many started. */
static int
threads_start(const struct bench_job *job, struct native_thread *th, pthread_barrier_t *bar, struct tenant_result *out)
{
	for (int i = 0; i < job->threads; i++) {
		th[i].bar = bar;
		th[i].launches = job->launches;
		if (tenant_open(job, &th[i].t, out->msg, sizeof(out->msg)) != 0 ||
		    pthread_create(&th[i].tid, NULL, thread_main, &th[i]) != 0)
			return i;
	}
	return job->threads;
}

void
native_threads_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	struct native_thread *th = calloc((size_t)job->threads, sizeof(*th));
	pthread_barrier_t bar;
	(void)k;
	if (th == NULL || pthread_barrier_init(&bar, NULL, (unsigned)job->threads + 1) != 0) {
		snprintf(out->msg, sizeof(out->msg), "out of memory");
		free(th);
		return;
	}
	int started = threads_start(job, th, &bar, out);
	if (started < job->threads) {
		/* Threads already started wait at the barrier forever: the process exits without them. */
		free(th);
		return;
	}
	pthread_barrier_wait(&bar);
	int ready = tenant_ready(g);
	pthread_barrier_wait(&bar);
	out->ok = ready == 0;
	for (int i = 0; i < job->threads; i++) {
		pthread_join(th[i].tid, NULL);
		if (th[i].rc != 0 && out->ok) {
			snprintf(out->msg, sizeof(out->msg), "%s", th[i].err);
			out->ok = 0;
		}
		out->t0 = i == 0 || th[i].t0 < out->t0 ? th[i].t0 : out->t0;
		out->t1 = th[i].t1 > out->t1 ? th[i].t1 : out->t1;
	}
	out->launches = (double)job->threads * job->launches;
	pthread_barrier_destroy(&bar);
	free(th);
}

void
native_latency_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	enum { REPS = 2000 };
	static double v[REPS];
	struct native_tenant t;
	(void)k;
	if (tenant_open(arg, &t, out->msg, sizeof(out->msg)) != 0 ||
	    tenant_launches(&t, 100, out->msg, sizeof(out->msg)) != 0 || tenant_ready(g) != 0)
		return;
	for (int i = 0; i < REPS; i++) {
		double t0 = bench_now();
		if (tenant_launches(&t, 1, out->msg, sizeof(out->msg)) != 0)
			return;
		v[i] = bench_now() - t0;
	}
	bench_percentiles(v, REPS, out);
}

/* A graph of job->graph_nodes launches of the kernel, captured on t's stream and instantiated. 0, or -1 with err. */
static int
graph_make(struct native_tenant *t, int nodes, CUgraphExec *exec, char *err, size_t len)
{
	CUgraph g;
	void **params = t->has_params ? t->params : NULL;
	CK(drv.cuCtxSetCurrent(t->ctx));
	CK(drv.cuStreamBeginCapture(t->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	for (int i = 0; i < nodes; i++)
		CK(drv.cuLaunchKernel(t->fn, t->k->grid, 1, 1, t->k->block, 1, 1, 0, t->stream, params, NULL));
	CK(drv.cuStreamEndCapture(t->stream, &g));
	CK(drv.cuGraphInstantiateWithFlags(exec, g, 0));
	CK(drv.cuGraphDestroy(g));
	return 0;
}

/* n launches of the graph back to back, then cuStreamSynchronize. */
static int
graph_launches(struct native_tenant *t, CUgraphExec exec, int n, char *err, size_t len)
{
	for (int i = 0; i < n; i++)
		CK(drv.cuGraphLaunch(exec, t->stream));
	CK(drv.cuStreamSynchronize(t->stream));
	return 0;
}

void
native_graph_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	struct native_tenant t;
	CUgraphExec exec;
	int rounds = job->launches / job->graph_nodes;
	(void)k;
	if (tenant_open(job, &t, out->msg, sizeof(out->msg)) != 0 ||
	    graph_make(&t, job->graph_nodes, &exec, out->msg, sizeof(out->msg)) != 0 ||
	    graph_launches(&t, exec, bench_warmup(rounds), out->msg, sizeof(out->msg)) != 0 || tenant_ready(g) != 0)
		return;
	out->t0 = bench_now();
	if (graph_launches(&t, exec, rounds, out->msg, sizeof(out->msg)) != 0)
		return;
	out->t1 = bench_now();
	out->launches = (double)rounds * job->graph_nodes;
	out->ok = 1;
	drv.cuGraphExecDestroy(exec);
}

/* One copy of job->copy_bytes between the pinned buffer h and d, in job's direction, on t's stream, then
 * cuStreamSynchronize (what cuasyncd's batch item + cua_stream_synchronize does). */
static int
copy_once(const struct bench_job *job, struct native_tenant *t, CUdeviceptr d, void *h, char *err, size_t len)
{
	if (job->copy_dtoh)
		CK(drv.cuMemcpyDtoHAsync(h, d, job->copy_bytes, t->stream));
	else
		CK(drv.cuMemcpyHtoDAsync(d, h, job->copy_bytes, t->stream));
	CK(drv.cuStreamSynchronize(t->stream));
	return 0;
}

/* Allocates the pinned host buffer and the device buffer, warms up. 0, or -1 with err. */
static int
copy_open(const struct bench_job *job, struct native_tenant *t, CUdeviceptr *d, void **h, char *err, size_t len)
{
	memset(t, 0, sizeof(*t));
	if (context_open(t, err, len) != 0)
		return -1;
	CK(drv.cuMemHostAlloc(h, job->copy_bytes, 0));
	memset(*h, 0x5a, job->copy_bytes); /* the pages exist before the timing, as cuasyncd's buffer's do */
	CK(drv.cuMemAlloc(d, job->copy_bytes));
	for (int i = 0; i < BENCH_COPY_WARMUP; i++)
		if (copy_once(job, t, *d, *h, err, len) != 0)
			return -1;
	return 0;
}

void
native_copy_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	struct native_tenant t;
	CUdeviceptr d;
	void *h = NULL;
	(void)k;
	if (copy_open(job, &t, &d, &h, out->msg, sizeof(out->msg)) != 0 || tenant_ready(g) != 0)
		return;
	out->t0 = bench_now();
	for (int i = 0; i < BENCH_COPY_REPS; i++)
		if (copy_once(job, &t, d, h, out->msg, sizeof(out->msg)) != 0)
			return;
	out->t1 = bench_now();
	out->launches = (double)job->copy_bytes * BENCH_COPY_REPS; /* so that gang_run's rate is bytes/s */
	out->ok = 1;
	drv.cuMemFreeHost(h);
}

/* big_param_copy from job->feature_module, its output buffer and the 32000 bytes as its arguments. */
static int
big_open(const struct bench_job *job, struct native_tenant *t, char *err, size_t len)
{
	if (tenant_open_from(job, job->feature_module, "--feature-module", t, err, len) != 0)
		return -1;
	CK(drv.cuMemAlloc(&t->x, BENCH_BIG_PARAM_BYTES));
	t->big = malloc(BENCH_BIG_PARAM_BYTES);
	if (t->big == NULL) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	memset(t->big, 0xa5, BENCH_BIG_PARAM_BYTES);
	t->params[0] = &t->x;
	t->params[1] = t->big; /* kernelParams points at each argument's bytes: here the whole struct */
	t->has_params = 1;
	return 0;
}

void
native_big_param_tenant(void *arg, int k, struct tenant_gate *g, struct tenant_result *out)
{
	const struct bench_job *job = arg;
	static double v[BENCH_LAT_REPS];
	struct native_tenant t;
	(void)k;
	if (big_open(job, &t, out->msg, sizeof(out->msg)) != 0 ||
	    tenant_launches(&t, 100, out->msg, sizeof(out->msg)) != 0 || tenant_ready(g) != 0)
		return;
	out->t0 = bench_now();
	if (tenant_launches(&t, BENCH_BIG_PIPELINED, out->msg, sizeof(out->msg)) != 0)
		return;
	out->t1 = bench_now();
	out->launches = BENCH_BIG_PIPELINED;
	for (int i = 0; i < BENCH_LAT_REPS; i++) {
		double t0 = bench_now();
		if (tenant_launches(&t, 1, out->msg, sizeof(out->msg)) != 0)
			return;
		v[i] = bench_now() - t0;
	}
	bench_percentiles(v, BENCH_LAT_REPS, out);
	free(t.big);
}

#else /* !HAVE_CUDA_H: the native columns are unavailable */

static void
unavailable(void *job, int k, struct tenant_gate *g, struct tenant_result *out)
{
	(void)job;
	(void)k;
	(void)g;
	snprintf(out->msg, sizeof(out->msg), "cuasync-bench was built without cuda.h (configure --with-cuda)");
}

void
native_probe_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out)
{
	unavailable(job, k, g, out);
}

void
native_threads_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out)
{
	unavailable(job, k, g, out);
}

void
native_process_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out)
{
	unavailable(job, k, g, out);
}

void
native_latency_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out)
{
	unavailable(job, k, g, out);
}

void
native_graph_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out)
{
	unavailable(job, k, g, out);
}

void
native_copy_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out)
{
	unavailable(job, k, g, out);
}

void
native_big_param_tenant(void *job, int k, struct tenant_gate *g, struct tenant_result *out)
{
	unavailable(job, k, g, out);
}

#endif
