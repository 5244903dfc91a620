/*
 * rt.h — libcuasync-cudart's runtime core (cudart.c) as graph.c sees it. Not a public header.
 *
 * Layering: graph.c (graphs and stream capture) sits on cudart.c: it calls the core's helpers below, and the
 * core reaches capture only through crt_capture_hooks, which graph.c installs on the first
 * cudaStreamBeginCapture. The core never calls graph.c by name.
 */
#ifndef CUASYNC_RT_H
#define CUASYNC_RT_H

#include "crt.h"
#include "cuasync.h"

#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRT_MAX_PARAMS 256u

/* A kernel the program registered: its host stub, and once resolved its function and parameter sizes. */
struct crt_func {
	const void *host; /* the host stub's address: the program's handle for the kernel */
	const char *name;
	struct crt_fatbin *fb;
	cua_function f;
	bool resolved;
	uint32_t nparams;
	uint32_t sizes[CRT_MAX_PARAMS];
};

struct crt_capture; /* graph.c's */

struct CUstream_st {
	cua_stream s;
	pthread_mutex_t mu; /* guards the host-function helper */
	pthread_t helper;   /* the thread running a cudaLaunchHostFunc; joined before the stream's next use */
	bool helper_active;
	struct crt_capture *cap; /* the capture the stream takes part in, NULL when none (graph.c's, under its lock) */
};

struct CUevent_st {
	cua_event e;
};

/* ---- what the core offers graph.c ---- */
/* Every entry point's start: 0 and *c, or the error to return (already recorded). */
int crt_enter(cua_client **c);
/* Records e as the calling thread's last error (sticky when a device fault); returns e. */
int crt_record(int e);
/* A libcuasync status as CUDA's error, recorded. */
int crt_status(int r);
/* The kernel of a host stub (or of a cudaKernel_t), its module loaded; NULL and *e when not. */
struct crt_func *crt_func_resolve(cua_client *c, const void *host, int *e);
/* The stream behind a cudaStream_t (the default streams are the session's ordered stream). */
struct CUstream_st *crt_stream_of(cudaStream_t s);
/* The stream's libcuasync handle, after its pending host function ran. */
cua_stream crt_use_stream(cudaStream_t s);
/* cudaMemcpyDefault resolved by where dst and src lie (the others unchanged). */
enum cudaMemcpyKind crt_copy_kind(void *dst, const void *src, enum cudaMemcpyKind kind);
/* A copy on stream s, as cudaMemcpy (async false: returns once done) or cudaMemcpyAsync does it (device-to-host
 * always waits). Returns the recorded error. */
int crt_copy(cua_client *c, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s, bool async);
/* fn(arg) once stream s reaches this point, as cudaLaunchHostFunc. Returns the recorded error. */
int crt_host_func(cudaStream_t s, cudaHostFn_t fn, void *arg);
/* A launch of f built from CUDA's arguments (args[i] points at parameter i), its stream set to s; NULL and *r
 * (a libcuasync status) when it could not be built. */
cua_launch *crt_launch_new(cua_client *c, const struct crt_func *f, dim3 grid, dim3 block, size_t shmem, void **args,
			   cua_stream s, int *r);
/* A grid and block CUDA would launch. */
bool crt_config_ok(dim3 grid, dim3 block);

/* ---- capture: where the core sends work for a capturing stream ----
 * Each hook answers CRT_NOT_CAPTURED when the stream takes no part in a capture (the core then does the work
 * itself), else the CUDA error of recording the work as a graph node (cudaSuccess when recorded). The core
 * calls them after its own argument checks; NULL until the program first begins a capture. */
#define CRT_NOT_CAPTURED (-1)
struct crt_capture_ops {
	int (*kernel)(struct CUstream_st *st, const struct crt_func *f, dim3 grid, dim3 block, size_t shmem,
		      void **args);
	int (*copy)(struct CUstream_st *st, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind);
	int (*memset)(struct CUstream_st *st, void *dst, int value, size_t n);
	/* fn NULL: a cudaStreamAddCallback, which CUDA refuses in a capture */
	int (*host)(struct CUstream_st *st, cudaHostFn_t fn, void *arg);
	int (*event_record)(struct CUstream_st *st, struct CUevent_st *ev);
	/* also when st is not capturing but ev was recorded in a capture: st joins it (a fork) */
	int (*stream_wait)(struct CUstream_st *st, struct CUevent_st *ev);
	/* the event is recorded outside a capture, or destroyed: it forgets its captured position */
	void (*event_forget)(struct CUevent_st *ev);
	/* synchronize, query or destroy of a capturing stream: refused, and the capture invalidated */
	int (*stream_use)(struct CUstream_st *st);
	bool (*is_capturing)(struct CUstream_st *st);
};
extern const struct crt_capture_ops *_Atomic crt_capture_hooks;

#endif
