/*
 * emu_stream.c — the emulated device's streams: a FIFO of jobs per stream, served by a bounded pool of threads
 * (--emu-threads), each stream by at most one thread at a time so its order holds, the streams that have work
 * taking turns, one job each, so up to the pool's size of streams run at once whatever their number. A job
 * carries what to run (struct emu_job_ops): the FIFO calls it and never a feature file by name, so the stream work
 * (emu_work.c), events (emu_event.c) and graphs (emu_graph.c) sit above it (core.h, "Layers").
 */
#include "config.h"

#include "cua_log.h"
#include "emu_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EMU_THREADS_MIN 8u /* the derived pool size: twice the cores, within these bounds */
#define EMU_THREADS_MAX 32u

void
emu_job_free(struct emu *E, struct emu_job *j)
{
	if (j->ops->fini)
		j->ops->fini(E, j);
	free(j);
}

/* A pool thread: serves ready streams, one job per turn, until stopped with nothing ready. */
static void *
pool_main(void *arg)
{
	struct emu *E = arg;
	struct emu_pool *P = &E->pool;
	pthread_setname_np(pthread_self(), "cuaw-emu");
	pthread_mutex_lock(&P->qlock);
	for (;;) {
		struct emu_stream *s;
		while ((s = TAILQ_FIRST(&P->ready)) == NULL && !P->stop)
			pthread_cond_wait(&P->work, &P->qlock);
		if (s == NULL) /* stop requested and nothing ready */
			break;
		TAILQ_REMOVE(&P->ready, s, ready_link);
		P->nready--;
		s->on_ready = false;
		struct emu_job *j = TAILQ_FIRST(&s->jobs);
		if (j->ops->blocks && j->ops->blocks(s, j)) /* parked (on an event) until unblocked: no thread waits */
			continue;
		s->running = true;
		P->busy++;
		TAILQ_REMOVE(&s->jobs, j, link);
		pthread_mutex_unlock(&P->qlock);
		j->ops->run(E, j);
		emu_job_free(E, j);
		pthread_mutex_lock(&P->qlock);
		P->busy--;
		s->done++;
		s->running = false;
		if (!TAILQ_EMPTY(&s->jobs)) {
			TAILQ_INSERT_TAIL(&P->ready, s, ready_link);
			s->on_ready = true;
			if (++P->nready > 1) /* this thread takes one; a waiting one may take the other */
				pthread_cond_signal(&P->work);
		}
		if (P->drainers)
			pthread_cond_broadcast(&P->idle);
	}
	pthread_mutex_unlock(&P->qlock);
	return NULL;
}

/* Starts one more pool thread. 0 or an errno. Caller holds qlock (or is init). */
static int
pool_grow(struct emu *E)
{
	struct emu_pool *P = &E->pool;
	if (P->nthreads == P->max)
		return EAGAIN;
	int rc = pthread_create(&P->threads[P->nthreads], NULL, pool_main, E);
	if (rc == 0)
		P->nthreads++;
	return rc;
}

/* The pool of at most opts.emu_threads threads (0: twice the cores, EMU_THREADS_MIN..MAX), one started. */
int
emu_pool_init(struct emu *E, cua_err *e)
{
	struct emu_pool *P = &E->pool;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned max = E->w->opts.emu_threads;
	if (max == 0) {
		max = cores > 0 ? 2 * (unsigned)cores : EMU_THREADS_MIN;
		max = max < EMU_THREADS_MIN ? EMU_THREADS_MIN : max > EMU_THREADS_MAX ? EMU_THREADS_MAX : max;
	}
	pthread_mutex_init(&P->qlock, NULL);
	pthread_cond_init(&P->work, NULL);
	pthread_cond_init(&P->idle, NULL);
	TAILQ_INIT(&P->ready);
	P->threads = calloc(max, sizeof(*P->threads));
	if (P->threads == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	P->max = max;
	if (pool_grow(E) != 0)
		return cua_err_set(e, CUA_ENOMEM, "emulated device: cannot start a stream thread");
	return 0;
}

/* Stops the pool's threads once nothing is ready (callers drain the streams first). */
void
emu_pool_fini(struct emu *E)
{
	struct emu_pool *P = &E->pool;
	pthread_mutex_lock(&P->qlock);
	P->stop = true;
	pthread_cond_broadcast(&P->work);
	pthread_mutex_unlock(&P->qlock);
	for (unsigned i = 0; i < P->nthreads; i++)
		pthread_join(P->threads[i], NULL);
	free(P->threads);
	pthread_mutex_destroy(&P->qlock);
	pthread_cond_destroy(&P->work);
	pthread_cond_destroy(&P->idle);
}

/* Waits until everything queued on s so far has run. Main thread; allocates nothing. */
static void
stream_drain(struct emu *E, struct emu_stream *s)
{
	struct emu_pool *P = &E->pool;
	pthread_mutex_lock(&P->qlock);
	uint64_t target = s->queued;
	P->drainers++;
	while (s->done < target)
		pthread_cond_wait(&P->idle, &P->qlock);
	P->drainers--;
	pthread_mutex_unlock(&P->qlock);
}

/* Runs what is queued on stream s, then frees it; s is no longer in the table (or the table is going), so nothing
 * more is queued on it. ud: the device (struct emu *), as a callback of wk_idmap_fini_each. */
static void
stream_stop(void *ud, void *s)
{
	stream_drain(ud, s);
	free(s);
}

int
emu_stream_new(struct emu *E, int priority, bool pool, uint32_t *sid, cua_err *e)
{
	struct emu_stream *s = calloc(1, sizeof(*s));
	uint64_t id = *sid;
	if (s == NULL)
		return cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory");
	TAILQ_INIT(&s->jobs);
	s->priority = priority;
	int r = pool ? cua_idmap_set(&E->streams, id, s) : cua_idmap_alloc(&E->streams, &id, s);
	if (r != 0) {
		free(s);
		return r == CUA_EQUOTA
			       ? cua_err_set(e, r, "emulated device: more than %u streams", WK_STREAM_ID_MAX + 1)
			       : cua_err_set(e, r, "emulated device: out of host memory");
	}
	*sid = (uint32_t)id; /* transferred */
	return 0;
}

int
emu_stream_create(struct wk *w, int priority, uint32_t *sid, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	int r = emu_stream_new(E, priority, false, sid, e);
	pthread_mutex_unlock(&E->lock);
	return r;
}

int
emu_stream_destroy(struct wk *w, uint32_t sid, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	struct emu_stream *s = sid < w->info.pool_streams ? NULL : cua_idmap_remove(&E->streams, sid);
	pthread_mutex_unlock(&E->lock);
	if (s == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	stream_stop(E, s); /* runs what is queued first */
	return 0;
}

struct emu_job *
emu_job_new(const struct emu_job_ops *ops, struct wk_tag tag, cua_err *e)
{
	struct emu_job *j = calloc(1, sizeof(*j));
	if (j == NULL) {
		cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory");
		return NULL;
	}
	j->ops = ops;
	j->tag = tag;
	return j;
}

static struct emu_stream *
stream_get(struct emu *E, uint32_t sid)
{
	pthread_mutex_lock(&E->lock);
	struct emu_stream *s = cua_idmap_find(&E->streams, sid);
	pthread_mutex_unlock(&E->lock);
	return s;
}

void
emu_stream_ready_locked(struct emu *E, struct emu_stream *s)
{
	struct emu_pool *P = &E->pool;
	if (!s->running && !s->on_ready && !s->parked) {
		TAILQ_INSERT_TAIL(&P->ready, s, ready_link);
		s->on_ready = true;
		P->nready++;
		/* more streams to run than threads that could take them: one more thread, up to the bound */
		if (P->busy + P->nready > P->nthreads && P->nthreads < P->max) {
			int rc = pool_grow(E);
			if (rc != 0)
				log_warn("emulated device: cannot start stream thread %u: %s", P->nthreads + 1,
					 strerror(rc));
		}
		pthread_cond_signal(&P->work);
	}
}

/* Queues j on stream sid; takes j in every case. */
int
emu_enqueue(struct emu *E, uint32_t sid, struct emu_job *j, cua_err *e)
{
	struct emu_stream *s = stream_get(E, sid);
	if (s == NULL) {
		emu_job_free(E, j);
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	}
	struct emu_pool *P = &E->pool;
	pthread_mutex_lock(&P->qlock);
	TAILQ_INSERT_TAIL(&s->jobs, j, link); /* transferred */
	s->queued++;
	emu_stream_ready_locked(E, s);
	pthread_mutex_unlock(&P->qlock);
	return 0;
}

static void
run_notice(struct emu *E, struct emu_job *j)
{
	j->u.done(E->w, j->tag);
}

static const struct emu_job_ops notice_ops = {run_notice, NULL, NULL};

/* A marker job after what is queued; without memory for one, waits for the stream here. */
void
emu_notify(struct wk *w, uint32_t sid, struct wk_tag tag, wk_done_fn done)
{
	struct emu *E = w->be_state;
	cua_err e;
	struct emu_job *j = emu_job_new(&notice_ops, tag, &e);
	if (j != NULL) {
		j->u.done = done;
		if (emu_enqueue(E, sid, j, &e) == 0)
			return;
	} else {
		struct emu_stream *s = stream_get(E, sid);
		log_warn("emulated device: no memory for a completion marker on stream %u; waiting for it", sid);
		if (s != NULL)
			stream_drain(E, s);
	}
	done(w, tag); /* an unknown stream has nothing queued */
}

void
emu_streams_fini(struct emu *E)
{
	wk_idmap_fini_each(&E->streams, stream_stop, E);
}
