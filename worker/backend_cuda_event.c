/*
 * backend_cuda_event.c — clients' events on the GPU: cuEventCreate/Record/Destroy/Query/ElapsedTime and
 * cuStreamWaitEvent. A synchronize is a marker of the completion reactor (cuda_reactor.c) that watches the
 * client's event itself instead of one recorded by the backend: the same polling as every completion, no thread
 * and no host callback per event. An event lives while its id or a watch refers to it; cuEventDestroy of an
 * event whose records or waits are still queued is legal (CUDA releases it when they are done).
 */
#include "config.h"

#include "cua_log.h"
#include "cuda_impl.h"

#include <stdbool.h>
#include <stdlib.h>

struct cu_event {
	CUevent ev;
	unsigned refs; /* under evlock: its id's and one per watch */
	bool recorded; /* under evlock: a record was issued */
};

/* Drops a reference; the last destroys the event. Caller holds evlock. */
static void
event_put_locked(struct cu_event *x)
{
	if (--x->refs > 0)
		return;
	drv.cuEventDestroy(x->ev);
	free(x);
}

/* The event of id with a reference taken (event_put it), or NULL. Any thread. */
static struct cu_event *
event_ref(struct cu *C, uint64_t id)
{
	pthread_mutex_lock(&C->evlock);
	struct cu_event *x = cua_idmap_find(&C->events, id);
	if (x != NULL)
		x->refs++;
	pthread_mutex_unlock(&C->evlock);
	return x;
}

/* event_put_locked as a callback of wk_idmap_fini_each (ud unused; the table is going, no other thread left). */
static void
event_drop(void *ud, void *x)
{
	(void)ud;
	event_put_locked(x);
}

static void
event_put(struct cu *C, struct cu_event *x)
{
	pthread_mutex_lock(&C->evlock);
	event_put_locked(x);
	pthread_mutex_unlock(&C->evlock);
}

static int
no_event(uint64_t id, cua_err *e)
{
	return cua_err_set(e, CUA_ENOT_FOUND, "no event %llu", (unsigned long long)id);
}

int
cu_event_create(struct wk *w, uint32_t flags, uint64_t *id, cua_err *e)
{
	struct cu *C = w->be_state;
	struct cu_event *x = calloc(1, sizeof(*x));
	if (x == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	CUresult r = drv.cuEventCreate(&x->ev,
				       (flags & CUA_EVENT_DISABLE_TIMING) ? CU_EVENT_DISABLE_TIMING : CU_EVENT_DEFAULT);
	if (r != CUDA_SUCCESS) {
		free(x);
		return cerr(e, r, "cuEventCreate");
	}
	x->refs = 1;
	pthread_mutex_lock(&C->evlock);
	int rc = cua_idmap_alloc(&C->events, id, x);
	pthread_mutex_unlock(&C->evlock);
	if (rc != 0) {
		drv.cuEventDestroy(x->ev);
		free(x);
		return cua_err_set(e, rc, rc == CUA_EQUOTA ? "too many events" : "out of host memory");
	}
	return 0;
}

int
cu_event_destroy(struct wk *w, uint64_t id, cua_err *e)
{
	struct cu *C = w->be_state;
	pthread_mutex_lock(&C->evlock);
	struct cu_event *x = cua_idmap_remove(&C->events, id);
	if (x != NULL)
		event_put_locked(x); /* a watch still pending keeps it */
	pthread_mutex_unlock(&C->evlock);
	return x != NULL ? 0 : no_event(id, e);
}

/* The stream's owner thread. */
int
cu_event_record(struct wk *w, uint32_t sid, uint64_t id, cua_err *e)
{
	struct cu *C = w->be_state;
	CUstream s = cu_stream_of(C, sid);
	struct cu_event *x = event_ref(C, id);
	if (x == NULL)
		return no_event(id, e);
	CUresult r = s ? drv.cuEventRecord(x->ev, s) : CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&C->evlock);
	if (r == CUDA_SUCCESS)
		x->recorded = true;
	event_put_locked(x);
	pthread_mutex_unlock(&C->evlock);
	return r == CUDA_SUCCESS ? 0 : cerr(e, r, "cuEventRecord");
}

/* The stream's owner thread. A never-recorded event: the wait completes at once (CUDA). */
int
cu_stream_wait_event(struct wk *w, uint32_t sid, uint64_t id, cua_err *e)
{
	struct cu *C = w->be_state;
	CUstream s = cu_stream_of(C, sid);
	struct cu_event *x = event_ref(C, id);
	if (x == NULL)
		return no_event(id, e);
	CUresult r = s ? drv.cuStreamWaitEvent(s, x->ev, CU_EVENT_WAIT_DEFAULT) : CUDA_ERROR_INVALID_HANDLE;
	event_put(C, x);
	return r == CUDA_SUCCESS ? 0 : cerr(e, r, "cuStreamWaitEvent");
}

/* A marker on the reactor's list that polls the client's event; without memory, waits for the event here. */
void
cu_event_notify(struct wk *w, uint64_t id, struct wk_tag tag, wk_done_fn done)
{
	struct cu *C = w->be_state;
	struct cu_event *x = event_ref(C, id);
	bool recorded = false;
	if (x != NULL) {
		pthread_mutex_lock(&C->evlock);
		recorded = x->recorded; /* set by the recording stream's thread */
		pthread_mutex_unlock(&C->evlock);
	}
	if (x == NULL || !recorded) { /* never recorded: nothing to wait for (CUDA) */
		if (x != NULL)
			event_put(C, x);
		done(w, tag);
		return;
	}
	struct marker *m = calloc(1, sizeof(*m));
	if (m == NULL) {
		log_warn("no memory to watch an event; waiting for it");
		CUresult r = drv.cuEventSynchronize(x->ev);
		if (r != CUDA_SUCCESS)
			log_warn("cuEventSynchronize: %s", errname(r)); /* a sticky error surfaces in the next notice */
		event_put(C, x);
		done(w, tag);
		return;
	}
	*m = (struct marker){.ev = x->ev, .tag = tag, .done = done, .user = x}; /* the reference goes with it */
	pthread_mutex_lock(&C->lock);
	TAILQ_INSERT_TAIL(&C->pending, m, link);
	pthread_cond_signal(&C->cond);
	pthread_mutex_unlock(&C->lock);
}

void
cu_user_markers_release(struct cu *C, struct markers *done)
{
	struct marker *m, *next;
	for (m = TAILQ_FIRST(done); m != NULL; m = next) {
		next = TAILQ_NEXT(m, link);
		if (m->user == NULL)
			continue;
		TAILQ_REMOVE(done, m, link);
		event_put(C, m->user);
		free(m);
	}
}

int
cu_event_elapsed(struct wk *w, uint64_t start, uint64_t end, float *ms, cua_err *e)
{
	struct cu *C = w->be_state;
	struct cu_event *a = event_ref(C, start), *b = event_ref(C, end);
	int rc = 0;
	if (a == NULL || b == NULL) {
		rc = no_event(a == NULL ? start : end, e);
		goto out;
	}
	CUresult r = drv.cuEventElapsedTime(ms, a->ev, b->ev);
	if (r == CUDA_ERROR_NOT_READY)
		rc = cua_err_set(e, CUA_EBUSY, "CUDA_ERROR_NOT_READY: an event's last record has not been reached");
	else if (r == CUDA_ERROR_INVALID_HANDLE)
		rc = cua_err_set(e, CUA_EBAD_ARGUMENT,
				 "CUDA_ERROR_INVALID_HANDLE: an event created without timing, or never recorded");
	else if (r != CUDA_SUCCESS)
		rc = cerr(e, r, "cuEventElapsedTime");
out:
	if (a != NULL)
		event_put(C, a);
	if (b != NULL)
		event_put(C, b);
	return rc;
}

int
cu_event_query(struct wk *w, uint64_t id, int *ready, cua_err *e)
{
	struct cu *C = w->be_state;
	struct cu_event *x = event_ref(C, id);
	if (x == NULL)
		return no_event(id, e);
	CUresult r = drv.cuEventQuery(x->ev);
	event_put(C, x);
	*ready = r == CUDA_SUCCESS;
	return r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY ? 0 : cerr(e, r, "cuEventQuery");
}

void
cu_events_fini(struct cu *C)
{
	wk_idmap_fini_each(&C->events, event_drop, NULL);
}
