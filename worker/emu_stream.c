/*
 * emu_stream.c — the emulated device's streams: a FIFO of jobs per stream, served by the device's engines
 * (enum emu_engine), each a bounded set of threads: the kernel threads (--emu-threads) and EMU_COPY_ENGINES copy
 * engines. A stream is served by at most one thread at a time so its order holds: it waits on the ready list of
 * its first job's engine, so a copy first on its stream runs on a copy engine even while every kernel thread runs
 * other streams' kernels (as on a GPU), and a copy behind a kernel on its stream runs once that kernel has. The
 * streams that have work take turns, one job each, so up to an engine's size of streams run on it at once
 * whatever their number. A job carries what to run (struct emu_job_ops): the FIFO calls it and never a feature
 * file by name, so the stream work (emu_work.c), events (emu_event.c) and graphs (emu_graph.c) sit above it
 * (core.h, "Layers").
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
#define EMU_COPY_ENGINES 2u /* like a GPU's host-to-device and device-to-host engines; either takes any copy */

void
emu_job_free(struct emu *E, struct emu_job *j)
{
	if (j->ops->fini)
		j->ops->fini(E, j);
	free(j);
}

static int pool_grow(struct emu *E, enum emu_engine k);

/* Puts s, which has jobs and no thread, on the ready list of its first job's engine and wakes a thread of it
 * (starting one more when more streams are ready or running there than it has threads, up to its bound), unless
 * the caller, a thread of that engine, is the one to take it (self: the caller's engine, or EMU_ENGINES). Caller
 * holds qlock. */
static void
ready_push_locked(struct emu *E, struct emu_stream *s, enum emu_engine self)
{
	enum emu_engine k = TAILQ_FIRST(&s->jobs)->ops->engine;
	struct emu_engine_threads *T = &E->pool.eng[k];
	TAILQ_INSERT_TAIL(&T->ready, s, ready_link);
	s->on_ready = true;
	T->nready++;
	if (k == self && T->nready == 1) /* the caller takes it next */
		return;
	if (T->busy + T->nready > T->nthreads && T->nthreads < T->max) {
		int rc = pool_grow(E, k);
		if (rc != 0)
			log_warn("emulated device: cannot start %s thread %u: %s",
				 k == EMU_ENGINE_COPY ? "copy engine" : "stream", T->nthreads + 1, strerror(rc));
	}
	pthread_cond_signal(&T->work);
}

/* What a thread of an engine runs: the device and which engine. */
struct engine_arg {
	struct emu *E;
	enum emu_engine engine;
};

/* A thread of engine A->engine: serves the streams ready for it, one job per turn, until stopped with nothing
 * ready for it. */
static void *
pool_main(void *arg)
{
	struct engine_arg *A = arg;
	struct emu *E = A->E;
	struct emu_pool *P = &E->pool;
	struct emu_engine_threads *T = &P->eng[A->engine];
	pthread_setname_np(pthread_self(), A->engine == EMU_ENGINE_COPY ? "cuaw-emu-copy" : "cuaw-emu");
	pthread_mutex_lock(&P->qlock);
	for (;;) {
		struct emu_stream *s;
		while ((s = TAILQ_FIRST(&T->ready)) == NULL && !P->stop)
			pthread_cond_wait(&T->work, &P->qlock);
		if (s == NULL) /* stop requested and nothing ready */
			break;
		TAILQ_REMOVE(&T->ready, s, ready_link);
		T->nready--;
		s->on_ready = false;
		struct emu_job *j = TAILQ_FIRST(&s->jobs);
		if (j->ops->blocks && j->ops->blocks(s, j)) /* parked (on an event) until unblocked: no thread waits */
			continue;
		s->running = true;
		T->busy++;
		TAILQ_REMOVE(&s->jobs, j, link);
		pthread_mutex_unlock(&P->qlock);
		j->ops->run(E, j);
		emu_job_free(E, j);
		pthread_mutex_lock(&P->qlock);
		T->busy--;
		s->done++;
		s->running = false;
		if (!TAILQ_EMPTY(&s->jobs)) /* at the tail of its next job's engine: the other streams' turn first */
			ready_push_locked(E, s, A->engine);
		if (P->drainers)
			pthread_cond_broadcast(&P->idle);
	}
	pthread_mutex_unlock(&P->qlock);
	free(A);
	return NULL;
}

/* Starts one more thread of engine k. 0 or an errno. Caller holds qlock (or is init). */
static int
pool_grow(struct emu *E, enum emu_engine k)
{
	struct emu_engine_threads *T = &E->pool.eng[k];
	if (T->nthreads == T->max)
		return EAGAIN;
	struct engine_arg *A = malloc(sizeof(*A));
	if (A == NULL)
		return ENOMEM;
	*A = (struct engine_arg){E, k};
	int rc = pthread_create(&T->threads[T->nthreads], NULL, pool_main, A); /* A transferred when 0 */
	if (rc == 0)
		T->nthreads++;
	else
		free(A);
	return rc;
}

/* The kernel threads, at most opts.emu_threads (0: twice the cores, EMU_THREADS_MIN..MAX), and EMU_COPY_ENGINES
 * copy engines; one thread of each started (so a ready stream always has one to take it), the rest on demand. */
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
	const unsigned maxes[EMU_ENGINES] = {[EMU_ENGINE_KERNEL] = max, [EMU_ENGINE_COPY] = EMU_COPY_ENGINES};
	pthread_mutex_init(&P->qlock, NULL);
	pthread_cond_init(&P->idle, NULL);
	for (int k = 0; k < EMU_ENGINES; k++) {
		struct emu_engine_threads *T = &P->eng[k];
		pthread_cond_init(&T->work, NULL);
		TAILQ_INIT(&T->ready);
		T->threads = calloc(maxes[k], sizeof(*T->threads));
		if (T->threads == NULL)
			return cua_err_set(e, CUA_ENOMEM, "out of host memory");
		T->max = maxes[k];
	}
	for (int k = 0; k < EMU_ENGINES; k++)
		if (pool_grow(E, (enum emu_engine)k) != 0)
			return cua_err_set(e, CUA_ENOMEM, "emulated device: cannot start a stream thread");
	return 0;
}

/* Stops every engine's threads once nothing is ready (callers drain the streams first). */
void
emu_pool_fini(struct emu *E)
{
	struct emu_pool *P = &E->pool;
	pthread_mutex_lock(&P->qlock);
	P->stop = true;
	for (int k = 0; k < EMU_ENGINES; k++)
		pthread_cond_broadcast(&P->eng[k].work);
	pthread_mutex_unlock(&P->qlock);
	for (int k = 0; k < EMU_ENGINES; k++) {
		struct emu_engine_threads *T = &P->eng[k];
		for (unsigned i = 0; i < T->nthreads; i++)
			pthread_join(T->threads[i], NULL);
		free(T->threads);
		pthread_cond_destroy(&T->work);
	}
	pthread_mutex_destroy(&P->qlock);
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
	if (!s->running && !s->on_ready && !s->parked)
		ready_push_locked(E, s, EMU_ENGINES);
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

/* on a copy engine: a completion notice never waits behind other streams' kernels */
static const struct emu_job_ops notice_ops = {EMU_ENGINE_COPY, run_notice, NULL, NULL};

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
