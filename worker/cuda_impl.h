/*
 * cuda_impl.h — the CUDA backend's state and driver table, shared by its files. Backends' internals: nothing else
 * includes this.
 *
 * Layers (calls go down only; core.h draws the worker's whole picture):
 *   backend_cuda.c                       device, modules, functions, memory, streams, stream work; the table
 *   backend_cuda_graph.c                 graphs
 *   cuda_reactor.c  backend_cuda_func.c  completion notices, sticky-fault exits | globals, attributes, occupancy
 *   backend_cuda_event.c                 clients' events (the reactor releases their watches)
 *   cuda_drv.c                           the driver's entry points, loaded at run time, and error helpers
 */
#ifndef CUAW_CUDA_IMPL_H
#define CUAW_CUDA_IMPL_H

#include "backend.h"
#include "idtab.h"

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/queue.h>

#define CUDA_API_VERSION 12040 /* cuFuncGetParamInfo appeared in 12.4 */
/* Functions live in chunks that never move, so submit threads read them while function_get adds more. */
#define FN_CHUNK 1024u
#define FN_CHUNKS 1024u

/* Every driver entry point used: one row each. */
/* clang-format off */
#define CUDA_FNS(X)                                                                                          \
	X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)               \
	X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent)            \
	X(cuCtxGetStreamPriorityRange) X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction)        \
	X(cuFuncGetParamInfo) X(cuMemAlloc) X(cuMemFree) X(cuMemHostRegister) X(cuMemHostUnregister)        \
	X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async)                   \
	X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuStreamCreateWithPriority) X(cuStreamDestroy)            \
	X(cuStreamSynchronize) X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuEventCreate) X(cuEventRecord)       \
	X(cuEventQuery) X(cuEventDestroy) X(cuGetErrorName) X(cuGetErrorString) X(cuMemGetAddressRange)       \
	X(cuModuleGetGlobal) X(cuFuncGetAttribute) X(cuFuncSetAttribute)                                   \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                     \
	X(cuEventElapsedTime) X(cuStreamWaitEvent) X(cuEventSynchronize) X(cuDeviceGetUuid)
/* Graphs (backend_cuda_graph.c); the _v2 entry points where cuda.h maps the names to them (cuGetProcAddress
 * resolves the name for CUDA_API_VERSION). */
#define CUDA_GRAPH_FNS(X)                                                                                    \
	X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphAddKernelNode) X(cuGraphAddMemsetNode)                   \
	X(cuGraphAddMemcpyNode) X(cuGraphInstantiateWithFlags) X(cuGraphExecDestroy) X(cuGraphLaunch)        \
	X(cuGraphExecKernelNodeSetParams)
/* clang-format on */

#define drv cuw_drv /* one object of the worker library; a short name in the backend's files */
extern struct cuda_drv {
#define CUDA_FN_FIELD(name) __typeof__(name) *name;
	CUDA_FNS(CUDA_FN_FIELD)
	CUDA_GRAPH_FNS(CUDA_FN_FIELD)
#undef CUDA_FN_FIELD
} drv;

/* A completion notice: an event recorded on a stream, watched by the reactor. */
struct marker {
	TAILQ_ENTRY(marker) link;
	CUevent ev;
	struct wk_tag tag; /* whose notice; blamed if the stream faulted */
	wk_done_fn done;
	struct cu_event *user; /* an EVENT_SYNC's watch of a client's event (ev is its; not reused): or NULL */
};
TAILQ_HEAD(markers, marker);

/* A module global a client looked up (cu_module_get_global): cleared before its module unloads (--scrub on). */
struct cu_global {
	uint64_t module;
	CUdeviceptr p;
	size_t bytes;
};

struct cu {
	struct wk *w;
	const struct wk_host *host; /* what failures and sticky faults are reported through */
	CUdevice dev;
	CUcontext ctx;
	int sm;
	/* stream id -> CUstream: changed by the main thread (create, destroy), read by each stream's owner while the
	 * stream exists (backend.h), all under slock (the map may move as it grows) */
	pthread_rwlock_t slock;
	cua_idmap streams;
	cua_idmap modules;         /* module id -> CUmodule; main thread */
	struct cu_global *globals; /* main thread */
	size_t nglobals, globals_cap;
	CUfunction *fn_chunks[FN_CHUNKS]; /* function id f is fn_chunks[(f-1) / FN_CHUNK][(f-1) % FN_CHUNK] */
	_Atomic size_t nfunctions;        /* stored (release) after the function is in its slot */
	int staging_registered;
	/* --scrub on: freed memory is cleared on this stream (non-blocking, highest priority) before cuMemFree */
	CUstream scrub;
	uint64_t leaked_bytes;  /* allocations kept because their clear failed (never handed out again) */
	struct wk_idtab graphs; /* graph id -> struct cu_graph * (backend_cuda_graph.c) */
	/* reactor */
	pthread_t reactor;
	pthread_mutex_t lock;
	pthread_cond_t cond;         /* markers pending, or stop */
	struct markers pending;      /* under lock: recorded and not yet seen complete */
	struct markers free_markers; /* under lock: their events are reused */
	int stop;
	/* clients' events (backend_cuda_event.c): id -> struct cu_event *; the table and the events' references under
	 * evlock */
	pthread_mutex_t evlock;
	cua_idmap events;
};

/* cuda_drv.c. Prefixed as the worker library's symbols; short names in the backend's files. */
#define errname cuw_errname
#define errstr cuw_errstr
#define cerr cuw_cerr
#define is_sticky cuw_is_sticky
/* CUDA error name and text of r (never NULL). Any thread. */
const char *errname(CUresult r);
const char *errstr(CUresult r);
/* Sets e to NO_MEMORY (out of memory) or DEVICE with "NAME: what: text". Returns the status. */
int cerr(cua_err *e, CUresult r, const char *what);
/* Whether r leaves the context unusable (the worker must exit). */
int is_sticky(CUresult r);
/* Loads the driver and resolves every entry point (once; later calls return 0). 0, or an error with the reason in
 * e. */
int cu_load_driver(cua_err *e);

/* sid's stream, or NULL. Any thread (takes slock to read). */
static inline CUstream
cu_stream_of(struct cu *C, uint32_t sid)
{
	pthread_rwlock_rdlock(&C->slock);
	CUstream s = cua_idmap_find(&C->streams, sid);
	pthread_rwlock_unlock(&C->slock);
	return s;
}

/* Function fn, or NULL. Any thread. */
static inline CUfunction
function_of(struct cu *C, uint64_t fn)
{
	if (fn == 0 || fn > atomic_load_explicit(&C->nfunctions, memory_order_acquire))
		return NULL;
	return C->fn_chunks[(fn - 1) / FN_CHUNK][(fn - 1) % FN_CHUNK];
}

/* cuda_reactor.c: the completion reactor. start: 0 or an errno (pthread_create); stop: after the markers pending
 * were called back, joins it. notify: backend.h. */
int cu_reactor_start(struct cu *C);
void cu_reactor_stop(struct cu *C);
void cu_notify(struct wk *w, uint32_t sid, struct wk_tag tag, wk_done_fn done);
/* A sticky error surfaced (in a marker query or a call): blame every request with work in flight, since the
 * device does not say whose kernel faulted, then exit. tag is the work that saw it, if any; `held` markers
 * (taken off the pending list by the caller) are blamed too. Any thread; never returns. */
_Noreturn void cu_fatal(struct cu *C, CUresult r, const struct wk_tag *tag, const struct markers *held);
/* The outcome of issuing stream work: 0; a sticky error ends the worker (blaming tag and the work in flight);
 * others fail the command with e. On the stream's owner. */
#define issued cuw_issued
int issued(struct cu *C, CUresult r, struct wk_tag tag, cua_err *e);

/* backend_cuda_graph.c: graphs (backend.h). cu_graphs_fini destroys those left (the worker is finishing). */
int cu_graph_create(struct wk *w, const struct wk_gnode *nodes, uint32_t n, uint64_t *id, cua_err *e);
int cu_graph_set_args(struct wk *w, uint64_t id, uint32_t node, const struct wk_launch *l, cua_err *e);
int cu_graph_destroy(struct wk *w, uint64_t id, cua_err *e);
int cu_graph_launch(struct wk *w, uint32_t sid, uint64_t id, struct wk_tag tag, cua_err *e);
void cu_graphs_fini(struct cu *C);

/* backend_cuda_func.c: module globals, function attributes and occupancy (backend.h). Main thread. */
int cu_module_get_global(struct wk *w, uint64_t mod, const char *name, uint64_t *addr, uint64_t *bytes, cua_err *e);
int cu_func_get_attr(struct wk *w, uint64_t fn, uint32_t attr, int32_t *value, cua_err *e);
int cu_func_set_attr(struct wk *w, uint64_t fn, uint32_t attr, int32_t value, cua_err *e);
/* Before module mod unloads: with --scrub on, clears the globals of it that clients looked up (the emulated device
 * clears every global), so that the memory is not handed to anyone uncleared, and forgets them. 0, or -1 when a
 * clear failed (logged): the caller then keeps the module loaded rather than free its memory uncleared. */
int cu_globals_release(struct cu *C, uint64_t mod);
int cu_occupancy(struct wk *w, uint64_t fn, uint32_t block_size, uint32_t shared_mem, uint32_t *blocks, cua_err *e);

/* backend_cuda_event.c: clients' events (backend.h), and the reactor's side: after calling back the markers of
 * done, frees those that watched a client's event (dropping its reference) and leaves the others (reactor
 * thread); every event destroyed at the end (cu_fini, after the reactor stopped). */
int cu_event_create(struct wk *w, uint32_t flags, uint64_t *id, cua_err *e);
int cu_event_destroy(struct wk *w, uint64_t id, cua_err *e);
int cu_event_record(struct wk *w, uint32_t sid, uint64_t id, cua_err *e);
int cu_stream_wait_event(struct wk *w, uint32_t sid, uint64_t id, cua_err *e);
void cu_event_notify(struct wk *w, uint64_t id, struct wk_tag tag, wk_done_fn done);
int cu_event_elapsed(struct wk *w, uint64_t start, uint64_t end, float *ms, cua_err *e);
int cu_event_query(struct wk *w, uint64_t id, int *ready, cua_err *e);
void cu_user_markers_release(struct cu *C, struct markers *done);
void cu_events_fini(struct cu *C);

#endif
