/*
 * drv.h — private to libcuasync-cuda, the CUDA driver API (libcuda.so.1) over libcuasync.
 *
 * One process holds one cuasyncd session (cua_connect at the first cuInit, URL from $CUASYNC_URL or the
 * default); every CUDA context of the process maps onto it. Handles given to the program (CUcontext, CUmodule,
 * CUfunction, CUstream, CUevent) are ids of one handle map, never pointers the library dereferences, so a stale or
 * made-up handle answers CUDA_ERROR_INVALID_HANDLE (INVALID_CONTEXT for a context) instead of crashing.
 *
 * Symbol names: cuda.h #defines the current names onto versioned ones (cuMemAlloc → cuMemAlloc_v2); the files
 * define the versioned names, and export an unversioned name only where its ABI is the same (drv_stubs.c refuses
 * the others: their pre-3.2 ABI took 32-bit device pointers).
 */
#ifndef CUA_DRV_H
#define CUA_DRV_H

#include "cuasync.h"

#define CUDA_ENABLE_DEPRECATED 1 /* cuDeviceComputeCapability is exported too */
#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

/* Unversioned names whose ABI equals the versioned one: defined as aliases, so their macros must go. */
#undef cuCtxCreate
#undef cuCtxDestroy
#undef cuCtxPopCurrent
#undef cuCtxPushCurrent
#undef cuStreamDestroy
#undef cuEventDestroy
#undef cuEventElapsedTime
#undef cuDevicePrimaryCtxRelease
#undef cuDeviceGetUuid
#undef cuGetProcAddress

/* The names cuda.h declares only under __CUDA_API_VERSION_INTERNAL, or under the macros undone above. */
CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams, unsigned int flags,
				CUdevice dev);
CUresult CUDAAPI cuCtxDestroy(CUcontext ctx);
CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx);
CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx);
CUresult CUDAAPI cuStreamDestroy(CUstream hStream);
CUresult CUDAAPI cuEventDestroy(CUevent hEvent);
CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

/* Exports name as another name of target (defined above it in the same file). */
#define DRV_ALIAS(target, name) extern __typeof__(target) name __attribute__((alias(#target)))

enum drv_kind { DRV_CTX = 1, DRV_MODULE, DRV_FUNCTION, DRV_STREAM, DRV_EVENT };

struct drv_obj {
	enum drv_kind kind;
	union {
		struct {
			int dev;
			bool primary;
		} ctx;
		struct {
			cua_module m;
			uint64_t *funcs; /* handles of the functions got from it: released with it */
			size_t nfuncs;
		} mod;
		struct {
			cua_function f;
			uint32_t n;                /* parameters */
			uint32_t *offsets, *sizes; /* the daemon's layout of them (cua_function_get_params) */
		} fn;
		struct {
			cua_stream s;    /* CUA_STREAM_ORDERED for a blocking stream */
			bool own;        /* s was created for it (a non-blocking stream) */
			cua_event probe; /* {0} until cuStreamQuery needs one */
			int priority;
		} st;
		struct {
			cua_event e;
		} ev;
	} u;
};

/* ---- drv_state.c ---- */
/* The session: CUDA_ERROR_NOT_INITIALIZED before a successful cuInit. */
CUresult drv_client(cua_client **c);
/* Connects once per process (cuInit); the error of the last attempt otherwise. */
CUresult drv_init(void);
/* The device of the calling thread's current context: CUDA_ERROR_INVALID_CONTEXT when none. Needs cuInit. */
CUresult drv_current(cua_client **c, int *dev);
/* The preamble of a call on a stream: drv_current (dev may be NULL), then drv_stream(hs, s) — the context's error
 * first, as CUDA checks it first. */
CUresult drv_enter(cua_client **c, int *dev, CUstream hs, cua_stream *s);
/* Device count and the cached info of device dev (INVALID_DEVICE when out of range). */
int drv_device_count(void);
CUresult drv_device_info(int dev, const cua_device_info **out);

/* Handle map. new: a handle for o (now owned by the map), 0 when out of memory (o is then the caller's).
 * get: the object of handle h when it is live and of kind k, else NULL. take: the same, removed (the caller frees
 * it). Any thread; the object stays valid until taken (destroying it while another thread uses it is the
 * program's bug, as in CUDA). */
uint64_t drv_handle_new(struct drv_obj *o);
struct drv_obj *drv_handle_get(uint64_t h, enum drv_kind k);
struct drv_obj *drv_handle_take(uint64_t h, enum drv_kind k);
/* The preamble of a call on one object: the session (NOT_INITIALIZED before cuInit), then the object of handle h
 * and kind k — taken from the map when take (the caller frees it), else left there — or INVALID_HANDLE. */
CUresult drv_object(uint64_t h, enum drv_kind k, bool take, cua_client **c, struct drv_obj **o);
/* CUstream → cua_stream: NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are the session's ordered stream. */
CUresult drv_stream(CUstream hs, cua_stream *out);

/* Context stack of the calling thread (drv_device.c uses it). */
uint64_t drv_ctx_top(void);
void drv_ctx_set_top(uint64_t h);
CUresult drv_ctx_push(uint64_t h);
uint64_t drv_ctx_pop(void);

/* ---- drv_errors.c ---- */
/* The CUresult for a libcuasync status (one table); the daemon's message is read for the CUDA error it names. */
CUresult drv_result(int status);

/* Work submitted without waiting (launches, async memsets and device copies, event records and waits) bumps
 * drv_submit; a cua_synchronize that succeeded covers everything submitted before it began (drv_sync_done).
 * cuStreamQuery answers from that when nothing was submitted since: its own probe (an event record, then a
 * query) races with the worker and can say NOT_READY on an idle stream (drv_stream.c). */
void drv_submitted(void);
/* cua_synchronize(c) as cuCtxSynchronize and cuStreamSynchronize use it, noting what it covered. */
CUresult drv_synchronize(cua_client *c);
/* Whether every submission so far is covered by a successful synchronize. */
bool drv_all_synced(void);
/* CUDA_ERROR_NOT_SUPPORTED; the first time for call, one line on stderr naming it and fix. Any thread. */
CUresult drv_refuse(const char *call, const char *fix);
/* The CUresult whose name is name ("CUDA_ERROR_..."), or -1. */
int drv_result_by_name(const char *name, size_t len);

#endif
