/*
 * drv_state.c — the process's session, its devices, the handle map and the threads' context stacks.
 */
#include "config.h"

#include "cua_idmap.h"
#include "drv.h"

#include "cua_tsa.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRV_MAX_DEVICES 64
#define DRV_CTX_DEPTH 32 /* contexts a thread may push */

static cua_mutex init_lock = PTHREAD_MUTEX_INITIALIZER;
static cua_client *client; /* guarded by init_lock until set, then read-only */
static int ndevices;       /* set with client */
static cua_device_info infos[DRV_MAX_DEVICES];

static cua_mutex map_lock = PTHREAD_MUTEX_INITIALIZER;
static cua_idmap handles CUA_GUARDED_BY(map_lock); /* ids of every kind, in [2^12, 2^40) */
static bool handles_ready CUA_GUARDED_BY(map_lock);

static _Thread_local uint64_t ctx_stack[DRV_CTX_DEPTH];
static _Thread_local int ctx_depth;

CUresult
drv_init(void)
{
	CUresult r;
	cua_mutex_lock(&init_lock);
	if (client != NULL) {
		r = CUDA_SUCCESS;
		goto out;
	}
	cua_client *c = NULL;
	int st = cua_connect(NULL, &c);
	if (st != CUA_OK) {
		fprintf(stderr,
			"libcuda (cuasyncd): cuInit: cannot connect to cuasyncd (%s: %s): start the daemon or set "
			"CUASYNC_URL to its socket\n",
			cua_strerror_name(st), cua_last_error());
		r = st == CUA_ETRANSPORT ? CUDA_ERROR_NO_DEVICE : drv_result(st);
		goto out;
	}
	/* CUDA's default stream orders the work of a one-thread program: the session's ordered stream. */
	int n = 0;
	st = cua_set_default_stream(c, CUA_STREAM_ORDERED);
	if (st == CUA_OK)
		st = cua_device_count(c, &n);
	if (n > DRV_MAX_DEVICES)
		n = DRV_MAX_DEVICES;
	for (int d = 0; st == CUA_OK && d < n; d++)
		st = cua_device_get_info(c, d, &infos[d]);
	if (st != CUA_OK) {
		r = drv_result(st);
		cua_disconnect(c);
		goto out;
	}
	ndevices = n;
	client = c;
	r = n > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
out:
	cua_mutex_unlock(&init_lock);
	return r;
}

CUresult
drv_client(cua_client **c)
{
	cua_mutex_lock(&init_lock);
	*c = client;
	cua_mutex_unlock(&init_lock);
	return *c != NULL ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

int
drv_device_count(void)
{
	cua_client *c;
	return drv_client(&c) == CUDA_SUCCESS ? ndevices : 0;
}

CUresult
drv_device_info(int dev, const cua_device_info **out)
{
	cua_client *c;
	CUresult r = drv_client(&c);
	if (r != CUDA_SUCCESS)
		return r;
	if (dev < 0 || dev >= ndevices)
		return CUDA_ERROR_INVALID_DEVICE;
	*out = &infos[dev];
	return CUDA_SUCCESS;
}

CUresult
drv_current(cua_client **c, int *dev)
{
	CUresult r = drv_client(c);
	if (r != CUDA_SUCCESS)
		return r;
	struct drv_obj *o = drv_handle_get(drv_ctx_top(), DRV_CTX);
	if (o == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	*dev = o->u.ctx.dev;
	return CUDA_SUCCESS;
}

CUresult
drv_enter(cua_client **c, int *dev, CUstream hs, cua_stream *s)
{
	int d;
	CUresult r = drv_current(c, dev != NULL ? dev : &d);
	return r != CUDA_SUCCESS ? r : drv_stream(hs, s);
}

uint64_t
drv_handle_new(struct drv_obj *o)
{
	uint64_t id = 0;
	cua_mutex_lock(&map_lock);
	if (!handles_ready) {
		cua_idmap_init(&handles, 1ull << 12, (1ull << 40) - 1);
		handles_ready = true;
	}
	if (cua_idmap_alloc(&handles, &id, o) != 0)
		id = 0;
	cua_mutex_unlock(&map_lock);
	return id;
}

struct drv_obj *
drv_handle_get(uint64_t h, enum drv_kind k)
{
	struct drv_obj *o = NULL;
	cua_mutex_lock(&map_lock);
	if (handles_ready)
		o = cua_idmap_find(&handles, h);
	cua_mutex_unlock(&map_lock);
	return o != NULL && o->kind == k ? o : NULL;
}

struct drv_obj *
drv_handle_take(uint64_t h, enum drv_kind k)
{
	struct drv_obj *o = NULL;
	cua_mutex_lock(&map_lock);
	if (handles_ready && (o = cua_idmap_find(&handles, h)) != NULL && o->kind == k)
		cua_idmap_remove(&handles, h);
	else
		o = NULL;
	cua_mutex_unlock(&map_lock);
	return o;
}

CUresult
drv_object(uint64_t h, enum drv_kind k, bool take, cua_client **c, struct drv_obj **o)
{
	CUresult r = drv_client(c);
	if (r == CUDA_SUCCESS && (*o = take ? drv_handle_take(h, k) : drv_handle_get(h, k)) == NULL)
		r = CUDA_ERROR_INVALID_HANDLE;
	return r;
}

CUresult
drv_stream(CUstream hs, cua_stream *out)
{
	uintptr_t h = (uintptr_t)hs;
	if (h == 0 || hs == CU_STREAM_LEGACY || hs == CU_STREAM_PER_THREAD) {
		*out = CUA_STREAM_ORDERED;
		return CUDA_SUCCESS;
	}
	struct drv_obj *o = drv_handle_get(h, DRV_STREAM);
	if (o == NULL)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = o->u.st.s;
	return CUDA_SUCCESS;
}

uint64_t
drv_ctx_top(void)
{
	return ctx_depth > 0 ? ctx_stack[ctx_depth - 1] : 0;
}

void
drv_ctx_set_top(uint64_t h)
{
	if (ctx_depth == 0)
		ctx_depth = 1;
	ctx_stack[ctx_depth - 1] = h;
}

CUresult
drv_ctx_push(uint64_t h)
{
	if (ctx_depth >= DRV_CTX_DEPTH)
		return CUDA_ERROR_OUT_OF_MEMORY;
	ctx_stack[ctx_depth++] = h;
	return CUDA_SUCCESS;
}

uint64_t
drv_ctx_pop(void)
{
	return ctx_depth > 0 ? ctx_stack[--ctx_depth] : 0;
}

/* ---- what a synchronize covered (drv.h) ---- */

static _Atomic uint64_t submit_count, synced_count;

void
drv_submitted(void)
{
	atomic_fetch_add(&submit_count, 1);
}

CUresult
drv_synchronize(cua_client *c)
{
	uint64_t at = atomic_load(&submit_count);
	int st = cua_synchronize(c);
	if (st == CUA_OK) {
		uint64_t seen = atomic_load(&synced_count);
		while (seen < at && !atomic_compare_exchange_weak(&synced_count, &seen, at))
			;
	}
	return drv_result(st);
}

bool
drv_all_synced(void)
{
	return atomic_load(&synced_count) == atomic_load(&submit_count);
}
