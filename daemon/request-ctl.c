/*
 * request-ctl.c — the pipeline's control (see request.h): connections coming and going, a session closing (what
 * waits is answered, a cleanup request per device releases what it held), deadlines, draining, start and stop.
 * Above request.c, whose steps it uses; nothing below calls it except through the callbacks it hands the
 * scheduler (struct sched_ops).
 */
#include "config.h"

#include "auth.h"
#include "cmd.h"
#include "cua_log.h"
#include "graphtab.h"
#include "scheduler.h"
#include "tenant.h"
#include "workerpool.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ sessions coming and going */

void
request_pipe_added(struct fe *fe, uint32_t pipe, bool operator)
{
	fe_lock(fe);
	if (!do_pipe_gone(fe, pipe)) {
		struct session *s = do_session_by_pipe(fe, pipe);
		if (s == NULL && (s = do_session_new(fe, pipe)) != NULL)
			do_auth_session(fe, s, operator);
		if (s == NULL)
			log_error("out of memory for a session");
		else
			log_debug("pipe %u: session %llu", pipe, (unsigned long long)s->id);
	}
	fe_unlock(fe);
}

void
request_reply_sent(struct fe *fe, uint32_t pipe, size_t bytes)
{
	fe_lock(fe);
	struct session *s = do_session_by_pipe(fe, pipe); /* a closing session's counts no longer matter */
	if (s != NULL && s->held > 0) {
		bool stalled = s->reply_bytes >= fe->cfg.session_reply_bytes;
		s->held--;
		s->reply_bytes -= bytes < s->reply_bytes ? bytes : s->reply_bytes;
		if (stalled)
			do_sched_wake(fe); /* its queue may move again (scheduler.c's dispatch_one) */
	}
	fe_unlock(fe);
}

void
request_pipe_removed(struct fe *fe, uint32_t pipe)
{
	fe_lock(fe);
	struct session *s = do_session_by_pipe(fe, pipe);
	if (s != NULL && !s->pipe_gone) {
		s->pipe_gone = true;
		fe->pending_closes++;
		do_sched_wake(fe);
	}
	do_pipe_tomb_add(fe, pipe);
	fe_unlock(fe);
}

/* A cleanup request for session s on device dev (planned when dispatched), or NULL (out of memory). */
static struct request *
cleanup_request(struct fe *fe, struct session *s, int dev)
{
	struct request *r = request_new(fe);
	if (r == NULL) {
		log_error("out of memory: session %llu leaks its device objects", (unsigned long long)s->id);
		return NULL;
	}
	r->s = s;
	r->kind = REQ_CLEANUP;
	r->barrier = true;
	r->dev = dev;
	return r;
}

/* Answers every request of q with status (refused ones were answered already). */
static void
do_answer_all(struct fe *fe, struct request_queue *q, int status, const char *why) CUA_REQUIRES(cuad_fe_lock)
{
	struct request *r;
	while ((r = TAILQ_FIRST(q)) != NULL) {
		TAILQ_REMOVE(q, r, qlink);
		if (r->refused) {
			request_free(fe, r);
			continue;
		}
		request_fail(r, status, "%s", why);
		do_request_finish(fe, r);
	}
}

void
do_request_close_session(struct fe *fe, struct session *s)
{
	struct request_queue q;
	if (s->closing)
		return;
	/* Requests waiting for a predecessor that will never come, and queued work nobody will collect: answer
	 * them now so their receive contexts recycle (before closing is set, so that answering them cannot free
	 * the session under us). */
	do_sched_take_parked(fe, s, &q);
	do_answer_all(fe, &q, CUA_ECLOSED, "the connection closed before this request's turn");
	do_sched_take_queued(s, &q);
	do_answer_all(fe, &q, CUA_ECLOSED, "the connection closed before this request ran");
	s->closing = true;
	do_session_log_end(s, cua_now_ms());
	log_debug("session %llu closing: %u in flight, %u queued", (unsigned long long)s->id, s->in_flight, s->queued);
	/* Release its device objects through the shared workers, after its work in flight (a session's own
	 * workers are stopped when it is gone: request_session_gone). */
	for (int d = 0; d < fe->ndevs && s->isolation == ISO_SHARED; d++) {
		struct request *r = cleanup_request(fe, s, d);
		if (r == NULL)
			continue;
		s->cleanup_pending++;
		do_sched_enqueue(fe, r);
	}
	/* What it holds stays counted — its session's limits, its tenant's, the device's — until it is freed: its
	 * memory is still allocated while its work drains and its cleanup runs (reserve.h). */
	do_sched_session_release(fe, s);
}

/* ------------------------------------------------------------------ deadlines and shutdown */

unsigned
request_hello_overdue(struct fe *fe, uint32_t *pipes, unsigned max)
{
	unsigned n = 0;
	struct session *s;
	fe_lock(fe);
	uint64_t limit = (uint64_t)fe->cfg.hello_timeout * 1000u, now = cua_now_ms();
	TAILQ_FOREACH(s, &fe->sessions, link)
	{
		if (n == max)
			break;
		bool late = limit != 0 && !s->hello && now - s->born_ms >= limit;
		if (s->hello_overdue || s->pipe_gone || s->closing || !(late || s->kicked))
			continue;
		s->hello_overdue = true;
		pipes[n++] = s->pipe;
	}
	fe_unlock(fe);
	return n;
}

uint32_t
request_drain_begin(struct fe *fe)
{
	struct request_queue q;
	struct session *s, *next;
	fe_lock(fe);
	fe->draining = true;
	for (s = TAILQ_FIRST(&fe->sessions); s != NULL; s = next) {
		next = TAILQ_NEXT(s, link);
		if (s->closing)
			continue;
		do_sched_take_parked(fe, s, &q);
		do_answer_all(fe, &q, CUA_ESHUTTING_DOWN,
			      "cuasyncd is shutting down: this request was waiting for an earlier one and did not run");
		do_sched_take_queued(s, &q);
		do_answer_all(fe, &q, CUA_ESHUTTING_DOWN,
			      "cuasyncd is shutting down: this request was waiting for a worker and did not run");
	}
	uint32_t n = fe->client_in_flight;
	fe_unlock(fe);
	return n;
}

uint32_t
request_in_flight(struct fe *fe)
{
	fe_lock(fe);
	uint32_t n = fe->client_in_flight;
	fe_unlock(fe);
	return n;
}

/* ------------------------------------------------------------------ start / stop */

/* The scheduler's callback just before s is freed: its own workers (session isolation) are stopped. */
static void
do_request_session_gone(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock)
{
	do_graphs_free(s);
	for (int i = 0; i < fe->ndevs; i++)
		if (s->worker[i] != NULL) {
			do_pool_retire(fe, s->worker[i]);
			s->worker[i] = NULL;
		}
}

/* The scheduler's callback when s's parked requests waited --seq-gap-timeout for the missing s->next_seq: each
 * is answered PROTOCOL, and every number up to the last of them counts as used (a late arrival answers
 * "already used"). Running them would break the order the client asked for. */
static void
do_request_gap_expired(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock)
{
	struct request_queue q;
	struct request *r;
	uint64_t missing = s->next_seq;
	do_sched_take_parked(fe, s, &q);
	log_info("session %llu: sequence number %llu did not arrive within --seq-gap-timeout (%u ms)",
		 (unsigned long long)s->id, (unsigned long long)missing, fe->cfg.seq_gap_timeout_ms);
	while ((r = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, r, qlink);
		s->next_seq = r->seq + 1;
		if (r->refused) { /* answered QUOTA already */
			request_free(fe, r);
			continue;
		}
		request_fail(r, CUA_EPROTOCOL,
			     "sequence number %llu did not arrive within --seq-gap-timeout (%u ms): this request (seq "
			     "%llu), "
			     "which waited for it, was not run; every number up to %llu counts as used",
			     (unsigned long long)missing, fe->cfg.seq_gap_timeout_ms, (unsigned long long)r->seq,
			     (unsigned long long)r->seq);
		do_request_finish(fe, r);
	}
}

static const struct sched_ops request_sched_ops = {do_request_dispatch, do_request_close_session,
						   do_request_session_gone, do_request_gap_expired};

int
request_pool_ensure(struct fe *fe)
{
	return pool_running() ? 0 : pool_start(fe, request_done);
}

int
request_start(struct fe *fe)
{
	bool pool = fe->cfg.isolation == ISO_SESSION || tenant_table_wants_session(fe->cfg.tenants);
	if (pool && request_pool_ensure(fe) != 0)
		return -1;
	return sched_start(fe, &request_sched_ops);
}

/* r is freed at teardown unanswered: what its reply context holds goes too (edge_ops.forget). */
static void
do_forget_reply(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	if (r->reply_ctx != NULL && fe->edge->forget != NULL)
		fe->edge->forget(r->reply_ctx);
	r->reply_ctx = NULL;
}

/* Stops a worker (shutdown, without fe->lock) and frees what was still in flight on it. */
static void
stop_worker(struct fe *fe, struct device *d)
{
	struct request_queue q;
	struct request *r;
	dev_stop(d, &q);
	fe_lock(fe); /* the counts of their bytes (request_free) */
	while ((r = TAILQ_FIRST(&q)) != NULL) {
		TAILQ_REMOVE(&q, r, qlink);
		do_forget_reply(fe, r);
		request_free(fe, r);
	}
	fe_unlock(fe);
}

/* Takes every session's own workers (session isolation) out of their sessions, under fe->lock, into a malloc'd
 * array of *n: they are stopped without the lock, while their completion threads may still finish requests. */
static struct device **
take_session_workers(struct fe *fe, size_t *n) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s;
	struct device **w = NULL;
	size_t cap = 0;
	*n = 0;
	TAILQ_FOREACH(s, &fe->sessions, link)
	{
		for (int i = 0; i < fe->ndevs; i++) {
			if (s->worker[i] == NULL)
				continue;
			if (*n == cap) {
				struct device **g = realloc(w, (cap = cap ? 2 * cap : 16) * sizeof(*w));
				if (g == NULL)
					return w; /* the rest die with the daemon (PR_SET_PDEATHSIG) */
				w = g;
			}
			w[(*n)++] = s->worker[i];
			s->worker[i] = NULL;
		}
	}
	return w;
}

void
request_stop(struct fe *fe)
{
	struct session *s;
	struct request_queue q;
	struct request *r;
	size_t n;
	sched_stop(fe);
	/* From here completions (workers' threads still run) answer and free requests but never free a session:
	 * this thread walks the sessions and frees them last. */
	fe_lock(fe);
	fe->tearing_down = true;
	struct device **w = take_session_workers(fe, &n);
	fe_unlock(fe);
	/* sessions' workers before the pool: a worker dies with the thread that started it (PR_SET_PDEATHSIG), and
	 * the pool thread started them */
	for (size_t i = 0; i < n; i++) {
		stop_worker(fe, w[i]);
		free(w[i]);
	}
	free(w);
	pool_stop(fe);
	for (int i = 0; i < fe->ndevs; i++)
		stop_worker(fe, &fe->devs[i]);
	/* requests still queued or parked are freed with their sessions; every other thread has stopped, so fe->lock
	 * is taken only for the analysis's sake (no one waits for it) */
	TAILQ_INIT(&q);
	fe_lock(fe);
	while ((s = TAILQ_FIRST(&fe->sessions)) != NULL) {
		TAILQ_CONCAT(&q, &s->queue, qlink);
		TAILQ_CONCAT(&q, &s->parked, qlink);
		while ((r = TAILQ_FIRST(&q)) != NULL) {
			TAILQ_REMOVE(&q, r, qlink);
			do_forget_reply(fe, r);
			request_free(fe, r);
		}
		do_graphs_free(s);
		do_session_free(fe, s);
	}
	do_pipe_tombs_free(fe);
	fe_unlock(fe);
}
