/*
 * cuda_reactor.c — the CUDA backend's completion reactor: the core asks for one notice per stream a request used
 * (cu_notify); each is an event recorded on that stream (a marker), which the reactor thread polls (spinning
 * briefly, then sleeping in short steps) and calls back when it has fired. No host callbacks on the hot path (they
 * cost ~8 µs more per completion). A sticky error (illegal address, launch failure, …) is reported with the
 * requests that had work in flight, and the worker exits: the context is unusable and only a new process gets a
 * working one. Below backend_cuda.c and backend_cuda_graph.c, above backend_cuda_event.c (cuda_impl.h, "Layers").
 */
#include "config.h"

#include "cua_clock.h"
#include "cua_log.h"
#include "cuda_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

/* How long the reactor polls its pending markers without progress before it sleeps between passes: an empty
 * kernel completes ~5 µs after its launch, and a sync client waits for each (BENCHMARKS.md, "hops"). */
#define REACTOR_SPIN_NS 50000u

/* A marker with its event, from the free list or new; NULL without memory or event. Any thread. */
static struct marker *
marker_get(struct cu *C)
{
	pthread_mutex_lock(&C->lock);
	struct marker *m = TAILQ_FIRST(&C->free_markers);
	if (m)
		TAILQ_REMOVE(&C->free_markers, m, link);
	pthread_mutex_unlock(&C->lock);
	if (m)
		return m;
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return NULL;
	CUresult r = drv.cuEventCreate(&m->ev, CU_EVENT_DISABLE_TIMING);
	if (r != CUDA_SUCCESS) {
		log_warn("cuEventCreate: %s", errname(r));
		free(m);
		return NULL;
	}
	return m;
}

_Noreturn void
cu_fatal(struct cu *C, CUresult r, const struct wk_tag *tag, const struct markers *held)
{
	char d[512];
	snprintf(d, sizeof(d),
		 "%s: %s (the GPU does not say which kernel in flight faulted; this request had work on the device)",
		 errname(r), errstr(r));
	pthread_mutex_lock(&C->lock); /* kept: the host's fatal_many exits */
	size_t n = 0, cap = 1;
	struct marker *m;
	if (held)
		TAILQ_FOREACH(m, held, link)
	cap++;
	TAILQ_FOREACH(m, &C->pending, link)
	cap++;
	struct wk_tag *tags = calloc(cap, sizeof(*tags));
	if (tags == NULL) { /* no memory to name them all: the one at hand (the rest get CONTEXT_LOST) */
		m = held && !TAILQ_EMPTY(held) ? TAILQ_FIRST(held) : TAILQ_FIRST(&C->pending);
		if (tag == NULL && m != NULL)
			tag = &m->tag;
		wk_host_fatal_many(C->host, C->w, tag, tag ? 1 : 0, d);
	}
	if (tag)
		tags[n++] = *tag;
	if (held)
		TAILQ_FOREACH(m, held, link)
	tags[n++] = m->tag;
	TAILQ_FOREACH(m, &C->pending, link)
	tags[n++] = m->tag;
	wk_host_fatal_many(C->host, C->w, tags, n, d);
}

/* Queries every marker of work once: the finished ones move to done; a fault ends the worker. */
static void
reactor_pass(struct cu *C, struct markers *work, struct markers *done)
{
	struct marker *m, *next;
	for (m = TAILQ_FIRST(work); m; m = next) {
		next = TAILQ_NEXT(m, link);
		CUresult r = drv.cuEventQuery(m->ev);
		if (r == CUDA_ERROR_NOT_READY)
			continue;
		TAILQ_REMOVE(work, m, link);
		if (r == CUDA_SUCCESS) {
			TAILQ_INSERT_TAIL(done, m, link);
			continue;
		}
		struct marker *k;
		TAILQ_FOREACH(k, done, link) /* those finished before the fault */
		k->done(C->w, k->tag);
		TAILQ_INSERT_HEAD(work, m, link); /* m and the ones still running */
		cu_fatal(C, r, NULL, work);
	}
}

/* The reactor thread: polls pending markers (spinning briefly, then sleeping in short steps) and calls their
 * notices back. */
static void *
reactor_main(void *arg)
{
	struct cu *C = arg;
	pthread_setname_np(pthread_self(), "cuaw-reactor");
	drv.cuCtxSetCurrent(C->ctx);
	/* its short sleeps last what they ask: the default slack (50 µs) made a 20 µs step ~70 µs */
	prctl(PR_SET_TIMERSLACK, 2000UL);
	int idle = 0;
	uint64_t idle_since = 0; /* CLOCK_MONOTONIC ns of the first pass without progress */
	pthread_mutex_lock(&C->lock);
	for (;;) {
		while (TAILQ_EMPTY(&C->pending) && !C->stop) {
			idle = 0;
			idle_since = 0;
			pthread_cond_wait(&C->cond, &C->lock);
		}
		if (TAILQ_EMPTY(&C->pending) && C->stop)
			break;
		struct markers work, done;
		TAILQ_INIT(&work);
		TAILQ_INIT(&done);
		TAILQ_CONCAT(&work, &C->pending, link);
		pthread_mutex_unlock(&C->lock);
		reactor_pass(C, &work, &done);
		struct marker *m;
		TAILQ_FOREACH(m, &done, link)
		m->done(C->w, m->tag);
		int progressed = !TAILQ_EMPTY(&done);
		cu_user_markers_release(C, &done); /* watches of clients' events: not reused */
		pthread_mutex_lock(&C->lock);
		TAILQ_CONCAT(&C->free_markers, &done, link);
		/* put back what is still running, ahead of newer markers */
		TAILQ_CONCAT(&work, &C->pending, link);
		TAILQ_CONCAT(&C->pending, &work, link);
		if (!TAILQ_EMPTY(&C->pending) && !progressed) {
			/* nothing finished this pass: spin up to REACTOR_SPIN_NS, then sleep in short steps */
			uint64_t now = cua_now_ns();
			if (idle_since == 0)
				idle_since = now;
			if (now - idle_since >= REACTOR_SPIN_NS) {
				idle++;
				pthread_mutex_unlock(&C->lock);
				struct timespec ts = {0, idle > 4096 ? 200000L : 20000L};
				nanosleep(&ts, NULL);
				pthread_mutex_lock(&C->lock);
			}
		} else {
			idle = 0;
			idle_since = 0;
		}
	}
	pthread_mutex_unlock(&C->lock);
	return NULL;
}

int
issued(struct cu *C, CUresult r, struct wk_tag tag, cua_err *e)
{
	if (r == CUDA_SUCCESS)
		return 0;
	if (is_sticky(r))
		cu_fatal(C, r, &tag, NULL);
	int bad = r == CUDA_ERROR_INVALID_VALUE || r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ||
		  r == CUDA_ERROR_INVALID_CLUSTER_SIZE || r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
	int status = r == CUDA_ERROR_OUT_OF_MEMORY ? CUA_ENOMEM : bad ? CUA_EBAD_ARGUMENT : CUA_EDEVICE;
	return cua_err_set(e, status, "%s: %s", errname(r), errstr(r));
}

/* An event recorded after what is queued on the stream, for the reactor to watch; when that cannot be done,
 * waits for the stream here. */
void
cu_notify(struct wk *w, uint32_t sid, struct wk_tag tag, wk_done_fn done)
{
	struct cu *C = w->be_state;
	CUstream s = cu_stream_of(C, sid);
	if (s == NULL) { /* destroyed: the core took its notice before, nothing is queued on it */
		done(w, tag);
		return;
	}
	struct marker *m = marker_get(C);
	CUresult r = m ? drv.cuEventRecord(m->ev, s) : CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS) {
		m->tag = tag;
		m->done = done;
		pthread_mutex_lock(&C->lock);
		TAILQ_INSERT_TAIL(&C->pending, m, link); /* transferred */
		pthread_cond_signal(&C->cond);
		pthread_mutex_unlock(&C->lock);
		return;
	}
	if (is_sticky(r))
		cu_fatal(C, r, &tag, NULL);
	if (m) {
		pthread_mutex_lock(&C->lock);
		TAILQ_INSERT_HEAD(&C->free_markers, m, link);
		pthread_mutex_unlock(&C->lock);
	}
	/* cannot watch this stream: wait for it here instead */
	r = drv.cuStreamSynchronize(s);
	if (is_sticky(r))
		cu_fatal(C, r, &tag, NULL);
	done(w, tag);
}

int
cu_reactor_start(struct cu *C)
{
	return pthread_create(&C->reactor, NULL, reactor_main, C);
}

void
cu_reactor_stop(struct cu *C)
{
	pthread_mutex_lock(&C->lock);
	C->stop = 1;
	pthread_cond_signal(&C->cond);
	pthread_mutex_unlock(&C->lock);
	pthread_join(C->reactor, NULL);
}
