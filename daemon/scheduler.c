/*
 * scheduler.c — sequence order, fairness and the dispatcher thread (see scheduler.h).
 */
#include "config.h"

#include "cua_log.h"
#include "scheduler.h"
#include "tenant.h"

#include <time.h>

static const struct sched_ops *sched_ops;

static bool pass(struct fe *fe, bool *full) CUA_REQUIRES(cuad_fe_lock);

void
do_sched_wake(struct fe *fe)
{
	if (fe->wake_deferred) {
		fe->wake_owed = true;
		return;
	}
	pthread_cond_signal(&fe->cond);
}

void
do_sched_defer_begin(struct fe *fe)
{
	fe->wake_deferred = true;
	fe->wake_owed = false;
}

void
do_sched_defer_end(struct fe *fe)
{
	fe->wake_deferred = false;
	if (!fe->wake_owed)
		return;
	fe->wake_owed = false;
	struct session *s = TAILQ_FIRST(&fe->ready);
	/* only beside a running dispatcher (core unit tests receive without one: their requests stay queued) */
	if (sched_ops != NULL && fe->dispatcher_started && !atomic_load(&fe->stopping) && !fe->dispatching &&
	    fe->pending_closes == 0 && TAILQ_EMPTY(&fe->gaps) && s != NULL && TAILQ_NEXT(s, ready_link) == NULL) {
		bool full = false;
		pass(fe, &full);
		if (!full && TAILQ_EMPTY(&fe->ready))
			return; /* all dispatched or answered: nothing for the dispatcher */
	}
	pthread_cond_signal(&fe->cond);
}

static void
ready_add(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock)
{
	if (s->in_ready)
		return;
	s->in_ready = true;
	TAILQ_INSERT_TAIL(&fe->ready, s, ready_link);
}

static void
ready_remove(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock)
{
	if (!s->in_ready)
		return;
	TAILQ_REMOVE(&fe->ready, s, ready_link);
	s->in_ready = false;
}

void
do_sched_enqueue(struct fe *fe, struct request *r)
{
	struct session *s = r->s;
	TAILQ_INSERT_TAIL(&s->queue, r, qlink);
	s->queued++;
	ready_add(fe, s);
	do_sched_wake(fe);
}

void
do_sched_take_queued(struct session *s, struct request_queue *out)
{
	struct request *r, *next;
	TAILQ_INIT(out);
	for (r = TAILQ_FIRST(&s->queue); r != NULL; r = next) {
		next = TAILQ_NEXT(r, qlink);
		if (r->kind == REQ_CLEANUP)
			continue;
		TAILQ_REMOVE(&s->queue, r, qlink);
		s->queued--;
		TAILQ_INSERT_TAIL(out, r, qlink);
	}
}

static void
gap_remove(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock)
{
	if (!s->in_gaps)
		return;
	TAILQ_REMOVE(&fe->gaps, s, gap_link);
	s->in_gaps = false;
}

void
do_sched_park(struct fe *fe, struct session *s, struct request *r)
{
	struct request *p;
	if (!s->in_gaps) { /* a new gap: its deadline counts from now, and the dispatcher must know of it */
		s->in_gaps = true;
		s->gap_since = cua_now_ms();
		TAILQ_INSERT_TAIL(&fe->gaps, s, gap_link);
		do_sched_wake(fe);
	}
	TAILQ_FOREACH_REVERSE(p, &s->parked, request_queue, qlink)
	if (p->seq < r->seq)
		break;
	if (p == NULL)
		TAILQ_INSERT_HEAD(&s->parked, r, qlink);
	else
		TAILQ_INSERT_AFTER(&s->parked, p, r, qlink);
	s->nparked++;
}

struct request *
do_sched_unpark(struct fe *fe, struct session *s)
{
	struct request *r = TAILQ_FIRST(&s->parked);
	if (r == NULL || r->seq != s->next_seq)
		return NULL;
	TAILQ_REMOVE(&s->parked, r, qlink);
	s->nparked--;
	if (s->nparked == 0)
		gap_remove(fe, s);
	else
		s->gap_since = cua_now_ms(); /* progress: what still waits, waits for another number */
	return r;
}

void
do_sched_take_parked(struct fe *fe, struct session *s, struct request_queue *out)
{
	TAILQ_INIT(out);
	TAILQ_CONCAT(out, &s->parked, qlink);
	s->nparked = 0;
	gap_remove(fe, s);
}

void
do_sched_session_release(struct fe *fe, struct session *s)
{
	if (!s->closing || s->in_flight > 0 || !TAILQ_EMPTY(&s->queue) || s->cleanup_pending > 0 || fe->tearing_down)
		return;
	if (fe->dispatching) { /* the dispatcher still holds a pointer to s: free it after its pass */
		if (!s->zombie) {
			s->zombie = true;
			TAILQ_INSERT_TAIL(&fe->zombies, s, zombie_link);
		}
		return;
	}
	ready_remove(fe, s);
	gap_remove(fe, s);
	if (sched_ops != NULL && sched_ops->session_gone != NULL)
		sched_ops->session_gone(fe, s);
	do_session_free(fe, s);
}

/* Tries to move the head request of s along. Returns true on progress; *full when a device had no room. */
static bool
dispatch_one(struct fe *fe, struct session *s, bool *full) CUA_REQUIRES(cuad_fe_lock)
{
	struct request *r = TAILQ_FIRST(&s->queue);
	if (r->barrier && s->in_flight > 0)
		return false;
	/* Fairness: a session keeps at most session_window requests in the workers; the rest wait here, so a
	 * flooding client cannot fill a worker's queue ahead of everyone else. */
	if (s->in_flight >= fe->cfg.session_window && r->kind != REQ_CLEANUP)
		return false;
	/* Backpressure: a connection that does not take its replies gets no more work run for it until it does
	 * (request_reply_sent wakes us), so the replies queued for it stay below --session-reply-bytes plus what
	 * its session_window requests in the workers produce. */
	if (s->reply_bytes >= fe->cfg.session_reply_bytes && r->kind != REQ_CLEANUP)
		return false;
	TAILQ_REMOVE(&s->queue, r, qlink);
	s->queued--;
	do_log_ctx(s, r->id);
	enum sched_verdict v = sched_ops->dispatch(fe, r);
	cua_log_ctx_clear();
	switch (v) {
	case SCHED_SENT:
	case SCHED_ANSWERED: return true;
	case SCHED_FULL: *full = true; break;
	case SCHED_WAIT: break;
	}
	TAILQ_INSERT_HEAD(&s->queue, r, qlink);
	s->queued++;
	return false;
}

static void
close_sessions(struct fe *fe) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s, *next;
	fe->pending_closes = 0;
	for (s = TAILQ_FIRST(&fe->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, link); /* s may be freed by closing it */
		if (s->pipe_gone && !s->closing)
			sched_ops->close_session(fe, s);
	}
}

/* One request per ready session, round-robin. Sessions that finish closing during the pass are freed after
 * it (do_sched_session_release). */
static bool
pass(struct fe *fe, bool *full) CUA_REQUIRES(cuad_fe_lock)
{
	bool progress = false;
	struct session *s, *next;
	fe->dispatching = true;
	tenant_pass_begin(fe);
	for (s = TAILQ_FIRST(&fe->ready); s != NULL; s = next) {
		next = TAILQ_NEXT(s, ready_link);
		if (!tenant_may_dispatch(fe, s)) /* its tenant is ahead of its share: the others' turn */
			continue;
		if (!TAILQ_EMPTY(&s->queue))
			progress |= dispatch_one(fe, s, full);
		if (TAILQ_EMPTY(&s->queue))
			ready_remove(fe, s);
	}
	fe->dispatching = false;
	/* the next pass starts with the next session */
	if ((s = TAILQ_FIRST(&fe->ready)) != NULL && TAILQ_NEXT(s, ready_link) != NULL) {
		TAILQ_REMOVE(&fe->ready, s, ready_link);
		TAILQ_INSERT_TAIL(&fe->ready, s, ready_link);
	}
	while ((s = TAILQ_FIRST(&fe->zombies)) != NULL) {
		TAILQ_REMOVE(&fe->zombies, s, zombie_link);
		s->zombie = false;
		do_sched_session_release(fe, s);
	}
	return progress;
}

/* Waits on fe->cond for at most us microseconds. */
static void
wait_us(struct fe *fe, uint64_t us) CUA_REQUIRES(cuad_fe_lock)
{
	struct timespec ts = cua_deadline_ts_us(us); /* fe->cond: monotonic (core.c) */
	fe_cond_wait(fe, &fe->cond, &ts);
}

/* Sequence gaps past --seq-gap-timeout are handed to sched_ops->gap_expired. Returns the milliseconds until
 * the next gap expires, or UINT64_MAX when none waits. No thread per session: the dispatcher sleeps at most
 * until the earliest deadline. */
static uint64_t
expire_gaps(struct fe *fe) CUA_REQUIRES(cuad_fe_lock)
{
	uint64_t now = cua_now_ms(), next = UINT64_MAX;
	struct session *s, *n;
	for (s = TAILQ_FIRST(&fe->gaps); s != NULL; s = n) {
		n = TAILQ_NEXT(s, gap_link);
		uint64_t due = s->gap_since + fe->cfg.seq_gap_timeout_ms;
		if (due <= now)
			sched_ops->gap_expired(fe, s); /* takes s off the list */
		else if (due - now < next)
			next = due - now;
	}
	return next;
}

static void *
dispatcher_main(void *arg)
{
	struct fe *fe = arg;
	pthread_setname_np(pthread_self(), "cuad-dispatch");
	fe_lock(fe);
	while (!atomic_load(&fe->stopping)) {
		bool full = false;
		if (fe->pending_closes > 0)
			close_sessions(fe);
		uint64_t gap_ms = TAILQ_EMPTY(&fe->gaps) ? UINT64_MAX : expire_gaps(fe);
		if (pass(fe, &full))
			continue;
		if (full)
			wait_us(fe, 200); /* a device's ring or staging is full: completions make room */
		else if (gap_ms != UINT64_MAX)
			wait_us(fe, gap_ms * 1000u + 1000u);
		else
			fe_cond_wait(fe, &fe->cond, NULL);
	}
	fe_unlock(fe);
	return NULL;
}

int
sched_start(struct fe *fe, const struct sched_ops *ops)
{
	sched_ops = ops;
	if (pthread_create(&fe->dispatcher, NULL, dispatcher_main, fe) != 0)
		return -1;
	fe->dispatcher_started = true;
	return 0;
}

void
sched_stop(struct fe *fe)
{
	atomic_store(&fe->stopping, 1);
	if (!fe->dispatcher_started)
		return;
	fe_lock(fe);
	pthread_cond_broadcast(&fe->cond);
	fe_unlock(fe);
	pthread_join(fe->dispatcher, NULL);
	fe->dispatcher_started = false;
}
