/*
 * drv_stream.c — streams and events.
 *
 * The NULL stream (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) and every stream created without
 * CU_STREAM_NON_BLOCKING are the session's ordered stream: CUDA's legacy default stream orders those streams'
 * work with its own, and one ordered stream keeps every such ordering (it also orders blocking streams among
 * themselves, which costs their concurrency but never a result). A CU_STREAM_NON_BLOCKING stream is a stream of
 * its own in the daemon, with its priority.
 */
#include "config.h"

#include "drv.h"

#include "cua_tsa.h"
#include <stdlib.h>

static cua_mutex probe_lock = PTHREAD_MUTEX_INITIALIZER;
/* cuStreamQuery's marker on the ordered stream; probe_lock also guards the streams' u.st.probe */
static cua_event null_probe CUA_GUARDED_BY(probe_lock);

CUresult CUDAAPI
cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	cua_client *c;
	int dev;
	CUresult r = drv_current(&c, &dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (phStream == NULL || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	struct drv_obj *o = calloc(1, sizeof(*o));
	if (o == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	o->kind = DRV_STREAM;
	o->u.st.s = CUA_STREAM_ORDERED;
	o->u.st.priority = priority;
	int st = CUA_OK;
	if (flags & CU_STREAM_NON_BLOCKING) {
		st = cua_stream_create(c, dev, priority, &o->u.st.s);
		o->u.st.own = st == CUA_OK;
	}
	uint64_t h = st == CUA_OK ? drv_handle_new(o) : 0;
	if (h == 0) {
		if (o->u.st.own)
			(void)cua_stream_destroy(c, o->u.st.s);
		free(o);
		return st != CUA_OK ? drv_result(st) : CUDA_ERROR_OUT_OF_MEMORY;
	}
	*phStream = (CUstream)(uintptr_t)h;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	return cuStreamCreateWithPriority(phStream, Flags, 0);
}

CUresult CUDAAPI
cuStreamGetPriority(CUstream hStream, int *priority)
{
	struct drv_obj *o = drv_handle_get((uintptr_t)hStream, DRV_STREAM);
	if (priority == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*priority = o != NULL ? o->u.st.priority : 0;
	return o != NULL || hStream == NULL || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD
		       ? CUDA_SUCCESS
		       : CUDA_ERROR_INVALID_HANDLE;
}
DRV_ALIAS(cuStreamGetPriority, cuStreamGetPriority_ptsz);

CUresult CUDAAPI
cuStreamDestroy_v2(CUstream hStream)
{
	cua_client *c;
	struct drv_obj *o;
	CUresult r = drv_object((uintptr_t)hStream, DRV_STREAM, true, &c, &o);
	if (r != CUDA_SUCCESS)
		return r;
	int st = CUA_OK;
	if (o->u.st.own) {
		/* CUDA lets queued work finish after the destroy: wait for it here when the daemon would refuse. */
		if ((st = cua_stream_destroy(c, o->u.st.s)) == CUA_EBUSY &&
		    (st = cua_stream_synchronize(c, o->u.st.s)) == CUA_OK)
			st = cua_stream_destroy(c, o->u.st.s);
	}
	if (o->u.st.probe.id != 0)
		(void)cua_event_destroy(c, o->u.st.probe);
	free(o);
	return drv_result(st);
}
DRV_ALIAS(cuStreamDestroy_v2, cuStreamDestroy);

/* Waits for all of the process's work, not only the stream's: libcuasync reports the failures of queued work
 * only there, and CUDA reports a kernel's fault at the next synchronising call. Never a missed error, at the
 * cost of waiting for other streams too. */
CUresult CUDAAPI
cuStreamSynchronize(CUstream hStream)
{
	cua_client *c;
	cua_stream s;
	CUresult r = drv_enter(&c, NULL, hStream, &s);
	return r != CUDA_SUCCESS ? r : drv_synchronize(c);
}
DRV_ALIAS(cuStreamSynchronize, cuStreamSynchronize_ptsz);

/* Records a marker event (made at the first query) on the stream and asks whether it was reached. */
CUresult CUDAAPI
cuStreamQuery(CUstream hStream)
{
	cua_client *c;
	int dev;
	cua_stream s;
	CUresult r = drv_enter(&c, &dev, hStream, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (drv_all_synced())
		return CUDA_SUCCESS;
	struct drv_obj *o = drv_handle_get((uintptr_t)hStream, DRV_STREAM);
	int st = CUA_OK;
	cua_mutex_lock(&probe_lock);
	cua_event *probe = o != NULL ? &o->u.st.probe : &null_probe;
	if (probe->id == 0)
		st = cua_event_create_on(c, dev, CUA_EVENT_DISABLE_TIMING, probe);
	cua_event ev = *probe;
	cua_mutex_unlock(&probe_lock);
	int ready = 0;
	if (st == CUA_OK)
		st = cua_event_record(c, ev, s);
	if (st == CUA_OK)
		st = cua_event_query(c, ev, &ready);
	return st != CUA_OK ? drv_result(st) : ready ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
DRV_ALIAS(cuStreamQuery, cuStreamQuery_ptsz);

static CUresult
event(CUevent hEvent, cua_client **c, cua_event *out)
{
	struct drv_obj *o;
	CUresult r = drv_object((uintptr_t)hEvent, DRV_EVENT, false, c, &o);
	if (r == CUDA_SUCCESS)
		*out = o->u.ev.e;
	return r;
}

/* The preamble of an event's use on a stream: the event, then the stream. */
static CUresult
event_on(CUevent hEvent, CUstream hStream, cua_client **c, cua_event *e, cua_stream *s)
{
	CUresult r = event(hEvent, c, e);
	return r != CUDA_SUCCESS ? r : drv_stream(hStream, s);
}

CUresult CUDAAPI
cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	cua_client *c;
	cua_stream s;
	cua_event e;
	CUresult r = event_on(hEvent, hStream, &c, &e, &s);
	if (r == CUDA_SUCCESS && Flags != 0)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS)
		drv_submitted();
	return r != CUDA_SUCCESS ? r : drv_result(cua_stream_wait_event(c, s, e));
}
DRV_ALIAS(cuStreamWaitEvent, cuStreamWaitEvent_ptsz);

CUresult CUDAAPI
cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	cua_client *c;
	int dev;
	CUresult r = drv_current(&c, &dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (phEvent == NULL ||
	    (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)))
		return CUDA_ERROR_INVALID_VALUE;
	if (Flags & CU_EVENT_INTERPROCESS)
		return drv_refuse("cuEventCreate(CU_EVENT_INTERPROCESS)",
				  "IPC handles do not cross cuasyncd sessions: share work through one process");
	struct drv_obj *o = calloc(1, sizeof(*o));
	if (o == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	o->kind = DRV_EVENT;
	int st = cua_event_create_on(c, dev, Flags & CU_EVENT_DISABLE_TIMING, &o->u.ev.e);
	uint64_t h = st == CUA_OK ? drv_handle_new(o) : 0;
	if (h == 0) {
		if (st == CUA_OK)
			(void)cua_event_destroy(c, o->u.ev.e);
		free(o);
		return st != CUA_OK ? drv_result(st) : CUDA_ERROR_OUT_OF_MEMORY;
	}
	*phEvent = (CUevent)(uintptr_t)h;
	return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuEventRecord(CUevent hEvent, CUstream hStream)
{
	cua_client *c;
	cua_stream s;
	cua_event e;
	CUresult r = event_on(hEvent, hStream, &c, &e, &s);
	if (r == CUDA_SUCCESS)
		drv_submitted();
	return r != CUDA_SUCCESS ? r : drv_result(cua_event_record(c, e, s));
}
DRV_ALIAS(cuEventRecord, cuEventRecord_ptsz);

CUresult CUDAAPI
cuEventSynchronize(CUevent hEvent)
{
	cua_client *c;
	cua_event e;
	CUresult r = event(hEvent, &c, &e);
	return r != CUDA_SUCCESS ? r : drv_result(cua_event_synchronize(c, e));
}

CUresult CUDAAPI
cuEventQuery(CUevent hEvent)
{
	cua_client *c;
	cua_event e;
	int ready = 0;
	CUresult r = event(hEvent, &c, &e);
	if (r == CUDA_SUCCESS)
		r = drv_result(cua_event_query(c, e, &ready));
	return r != CUDA_SUCCESS ? r : ready ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

/* CUDA answers INVALID_HANDLE for an event without timing or never recorded, NOT_READY before it is reached. */
CUresult CUDAAPI
cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	cua_client *c;
	cua_event a, b;
	CUresult r = event(hStart, &c, &a);
	if (r == CUDA_SUCCESS)
		r = event(hEnd, &c, &b);
	if (r == CUDA_SUCCESS && pMilliseconds == NULL)
		r = CUDA_ERROR_INVALID_VALUE;
	if (r != CUDA_SUCCESS)
		return r;
	int st = cua_event_elapsed_ms(c, a, b, pMilliseconds);
	return st == CUA_EBAD_ARGUMENT ? CUDA_ERROR_INVALID_HANDLE : drv_result(st);
}
DRV_ALIAS(cuEventElapsedTime_v2, cuEventElapsedTime);

CUresult CUDAAPI
cuEventDestroy_v2(CUevent hEvent)
{
	cua_client *c;
	struct drv_obj *o;
	CUresult r = drv_object((uintptr_t)hEvent, DRV_EVENT, true, &c, &o);
	if (r != CUDA_SUCCESS)
		return r;
	int st = cua_event_destroy(c, o->u.ev.e);
	free(o);
	return drv_result(st);
}
DRV_ALIAS(cuEventDestroy_v2, cuEventDestroy);
