/*
 * emu_event.c — events of the emulated device. A record is a job on its stream that marks the event reached
 * (with the monotonic time, for elapsed times) when it runs, i.e. after everything queued before it there. A
 * stream's wait is a job too: when a pool thread finds it first on its stream and the record it waits for has
 * not run, the stream is parked on the event (no thread blocks) and put back on the ready list by that record.
 * A synchronize is a watcher on the event, called back by the record. Records are numbered per event; a wait or
 * a watcher waits for the last record issued before it (CUDA's semantics: a later record does not move it).
 *
 * Locks: the table of ids under E->lock; every event's state under the pool's qlock. An event lives while its
 * id or a queued job or watcher refers to it (destroying an event with work in flight is legal, as in CUDA).
 */
#include "config.h"

#include "cua_log.h"
#include "emu_impl.h"

#include <stdlib.h>
#include <time.h>

struct emu_watcher {
	TAILQ_ENTRY(emu_watcher) link;
	uint64_t target; /* the record it waits for */
	struct wk_tag tag;
	wk_done_fn done;
};
TAILQ_HEAD(emu_watchers, emu_watcher);

struct emu_event {
	unsigned refs; /* its id's, and one per queued record or wait job and per watcher */
	bool timing;
	uint64_t records; /* issued */
	uint64_t reached; /* the last record that ran */
	uint64_t t_ns;    /* when it ran (CLOCK_MONOTONIC) */
	struct emu_streams parked;
	struct emu_watchers watchers;
};

/* The jobs events queue (run, fini, blocks: struct emu_job_ops), below; on the copy engines, which never wait
 * behind kernels, as a GPU's host interface handles records and waits without its SMs. */
static void record_run(struct emu *E, struct emu_job *j);
static void wait_run(struct emu *E, struct emu_job *j);
static bool wait_blocks(struct emu_stream *s, const struct emu_job *j);
static void event_job_fini(struct emu *E, struct emu_job *j);
static const struct emu_job_ops record_ops = {EMU_ENGINE_COPY, record_run, event_job_fini, NULL},
				wait_ops = {EMU_ENGINE_COPY, wait_run, event_job_fini, wait_blocks};

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Drops a reference. Caller holds qlock. */
static void
event_put_locked(struct emu_event *ev)
{
	if (--ev->refs == 0)
		free(ev);
}

/* The event of id, or NULL. Any thread (takes E->lock). */
static struct emu_event *
event_get(struct emu *E, uint64_t id)
{
	pthread_mutex_lock(&E->lock);
	struct emu_event *ev = cua_idmap_find(&E->events, id);
	pthread_mutex_unlock(&E->lock);
	return ev;
}

static int
no_event(uint64_t id, cua_err *e)
{
	return cua_err_set(e, CUA_ENOT_FOUND, "emulated device: no event %llu", (unsigned long long)id);
}

int
emu_event_create(struct wk *w, uint32_t flags, uint64_t *id, cua_err *e)
{
	struct emu *E = w->be_state;
	struct emu_event *ev = calloc(1, sizeof(*ev));
	if (ev == NULL)
		return cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory");
	ev->refs = 1;
	ev->timing = !(flags & CUA_EVENT_DISABLE_TIMING);
	TAILQ_INIT(&ev->parked);
	TAILQ_INIT(&ev->watchers);
	pthread_mutex_lock(&E->lock);
	int r = cua_idmap_alloc(&E->events, id, ev); /* transferred */
	pthread_mutex_unlock(&E->lock);
	if (r != 0) {
		free(ev);
		return cua_err_set(e, r,
				   r == CUA_EQUOTA ? "emulated device: too many events"
						   : "emulated device: out of host memory");
	}
	return 0;
}

int
emu_event_destroy(struct wk *w, uint64_t id, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	struct emu_event *ev = cua_idmap_remove(&E->events, id);
	pthread_mutex_unlock(&E->lock);
	if (ev == NULL)
		return no_event(id, e);
	pthread_mutex_lock(&E->pool.qlock);
	event_put_locked(ev); /* queued records, waits and watchers keep it until they are done */
	pthread_mutex_unlock(&E->pool.qlock);
	return 0;
}

int
emu_event_record(struct wk *w, uint32_t sid, uint64_t id, cua_err *e)
{
	struct emu *E = w->be_state;
	struct emu_event *ev = event_get(E, id);
	if (ev == NULL)
		return no_event(id, e);
	struct emu_job *j = emu_job_new(&record_ops, (struct wk_tag){0}, e);
	if (j == NULL)
		return e->code;
	pthread_mutex_lock(&E->pool.qlock);
	ev->refs++;
	j->u.event.ev = ev;
	j->u.event.n = ++ev->records;
	pthread_mutex_unlock(&E->pool.qlock);
	int r = emu_enqueue(E, sid, j, e); /* drops the job's reference when it fails */
	if (r != 0) {
		pthread_mutex_lock(&E->pool.qlock);
		ev->records--; /* the core issues one event's records one after another */
		pthread_mutex_unlock(&E->pool.qlock);
	}
	return r;
}

/* Nothing to queue when the last record issued has run (or there was none: CUDA's wait completes at once). */
int
emu_stream_wait_event(struct wk *w, uint32_t sid, uint64_t id, cua_err *e)
{
	struct emu *E = w->be_state;
	struct emu_event *ev = event_get(E, id);
	if (ev == NULL)
		return no_event(id, e);
	struct emu_job *j = emu_job_new(&wait_ops, (struct wk_tag){0}, e);
	if (j == NULL)
		return e->code;
	pthread_mutex_lock(&E->pool.qlock);
	bool reached = ev->reached >= ev->records;
	if (!reached) {
		ev->refs++;
		j->u.event.ev = ev;
		j->u.event.n = ev->records;
	}
	pthread_mutex_unlock(&E->pool.qlock);
	if (reached) {
		free(j);
		return 0;
	}
	return emu_enqueue(E, sid, j, e);
}

void
emu_event_notify(struct wk *w, uint64_t id, struct wk_tag tag, wk_done_fn done)
{
	struct emu *E = w->be_state;
	struct emu_pool *P = &E->pool;
	struct emu_event *ev = event_get(E, id);
	struct emu_watcher *k = malloc(sizeof(*k));
	pthread_mutex_lock(&P->qlock);
	if (ev != NULL && ev->reached < ev->records) {
		if (k != NULL) {
			*k = (struct emu_watcher){.target = ev->records, .tag = tag, .done = done};
			TAILQ_INSERT_TAIL(&ev->watchers, k, link); /* transferred */
			ev->refs++;
			pthread_mutex_unlock(&P->qlock);
			return;
		}
		log_warn("emulated device: no memory to watch event %llu; waiting for it", (unsigned long long)id);
		uint64_t target = ev->records;
		P->drainers++;
		while (ev->reached < target)
			pthread_cond_wait(&P->idle, &P->qlock);
		P->drainers--;
	}
	pthread_mutex_unlock(&P->qlock);
	free(k);
	done(w, tag);
}

int
emu_event_elapsed(struct wk *w, uint64_t start, uint64_t end, float *ms, cua_err *e)
{
	struct emu *E = w->be_state;
	struct emu_event *a = event_get(E, start), *b = event_get(E, end);
	int r = 0;
	if (a == NULL || b == NULL)
		return no_event(a == NULL ? start : end, e);
	pthread_mutex_lock(&E->pool.qlock);
	if (!a->timing || !b->timing)
		r = cua_err_set(e, CUA_EBAD_ARGUMENT, "CUDA_ERROR_INVALID_HANDLE: an event created without timing");
	else if (a->records == 0 || b->records == 0)
		r = cua_err_set(e, CUA_EBAD_ARGUMENT, "CUDA_ERROR_INVALID_HANDLE: an event never recorded");
	else if (a->reached < a->records || b->reached < b->records)
		r = cua_err_set(e, CUA_EBUSY, "CUDA_ERROR_NOT_READY: an event's last record has not been reached");
	else
		*ms = (float)((double)((int64_t)(b->t_ns - a->t_ns)) / 1e6);
	pthread_mutex_unlock(&E->pool.qlock);
	return r;
}

int
emu_event_query(struct wk *w, uint64_t id, int *ready, cua_err *e)
{
	struct emu *E = w->be_state;
	struct emu_event *ev = event_get(E, id);
	if (ev == NULL)
		return no_event(id, e);
	pthread_mutex_lock(&E->pool.qlock);
	*ready = ev->reached >= ev->records;
	pthread_mutex_unlock(&E->pool.qlock);
	return 0;
}

/* A wait job's blocks: whether the record it waits for was not reached yet; if so parks s on the event. Caller
 * holds qlock. */
static bool
wait_blocks(struct emu_stream *s, const struct emu_job *j)
{
	if (j->u.event.ev->reached >= j->u.event.n)
		return false;
	TAILQ_INSERT_TAIL(&j->u.event.ev->parked, s, park_link);
	s->parked = true;
	return true;
}

/* A record job's run: the event is reached up to its number; the parked streams and watchers it satisfies go. */
static void
record_run(struct emu *E, struct emu_job *j)
{
	struct emu_event *ev = j->u.event.ev;
	struct emu_watchers fire = TAILQ_HEAD_INITIALIZER(fire);
	struct emu_stream *s, *sn;
	struct emu_watcher *k, *kn;
	pthread_mutex_lock(&E->pool.qlock);
	if (j->u.event.n > ev->reached) {
		ev->reached = j->u.event.n;
		ev->t_ns = now_ns();
	}
	for (s = TAILQ_FIRST(&ev->parked); s != NULL; s = sn) {
		sn = TAILQ_NEXT(s, park_link);
		const struct emu_job *head = TAILQ_FIRST(&s->jobs);
		if (head->u.event.n > ev->reached)
			continue;
		TAILQ_REMOVE(&ev->parked, s, park_link);
		s->parked = false;
		emu_stream_ready_locked(E, s);
	}
	for (k = TAILQ_FIRST(&ev->watchers); k != NULL; k = kn) {
		kn = TAILQ_NEXT(k, link);
		if (k->target > ev->reached)
			continue;
		TAILQ_REMOVE(&ev->watchers, k, link);
		TAILQ_INSERT_TAIL(&fire, k, link);
		ev->refs--; /* never the last: the record job holds one */
	}
	pthread_mutex_unlock(&E->pool.qlock);
	while ((k = TAILQ_FIRST(&fire)) != NULL) {
		TAILQ_REMOVE(&fire, k, link);
		k->done(E->w, k->tag);
		free(k);
	}
}

/* A wait job's run: nothing, it ran because the record it waited for was reached. */
static void
wait_run(struct emu *E, struct emu_job *j)
{
	(void)E;
	(void)j;
}

/* A record or wait job's fini: drops its reference. */
static void
event_job_fini(struct emu *E, struct emu_job *j)
{
	if (j->u.event.ev == NULL)
		return;
	pthread_mutex_lock(&E->pool.qlock);
	event_put_locked(j->u.event.ev);
	pthread_mutex_unlock(&E->pool.qlock);
}

/* After every stream drained: only the ids' references are left. */
void
emu_events_fini(struct emu *E)
{
	wk_idmap_fini_each(&E->events, wk_free_obj, NULL);
}
