/*
 * request.c — the life of a request (see request.h): received, ordered, validated and planned, queued,
 * dispatched, completed, answered, freed. It is the only file that moves a request from one stage to the
 * next; the parts below it (scheduler.c, cmd-*.c, devlink.c) report back through the callbacks given here.
 */
#include "config.h"

#include "auth.h"
#include "cleanup.h"
#include "cmd.h"
#include "cua_log.h"
#include "graphtab.h"
#include "scheduler.h"
#include "streampool.h"
#include "tenant.h"
#include "workerpool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CUAD_MAX_PARKED 4096 /* out-of-order requests one session may have waiting */

/* The metrics family of op (SF_INFO for an unknown one: it is answered like the info requests). */
static enum stats_family
op_family(uint32_t op)
{
	const struct cmd_entry *row = cmd_find(op);
	return row != NULL ? row->family : SF_INFO;
}

/* Counts what r did (stats.h: launches, bytes copied), item by item through the rows of their kinds. */
static void
do_count_work(struct fe *fe, const struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cmd_entry *row = cmd_find(r->op);
	if (r->undecodable || r->status != CUA_OK || r->nitems == 0 || row == NULL)
		return;
	if (row->validate_items == NULL) {
		if (row->count != NULL && r->items[0].status == CUA_OK)
			row->count(&fe->stats, &r->w.body);
		return;
	}
	const struct cua_req_batch *b = &r->w.body.batch;
	for (uint32_t i = 0; i < b->nitems && i < r->nitems; i++) {
		const struct cmd_entry *irow = cmd_find(b->items[i].kind);
		if (r->items[i].status == CUA_OK && irow != NULL && irow->count != NULL)
			irow->count(&fe->stats, &b->items[i].u);
	}
}

/* ------------------------------------------------------------------ answering */

/* Builds r's answer: its status, or its body on success (the row's reply; what it allocates is in *scratch,
 * to be freed once the reply was encoded). */
static void
build_reply(struct fe *fe, struct request *r, struct reply *rep, cua_rep_body *body, void **scratch)
{
	const struct cmd_entry *row = cmd_find(r->op);
	*rep = (struct reply){r->op, CUA_OK, NULL, NULL, r->held};
	*scratch = NULL;
	if (r->status != CUA_OK) {
		rep->status = r->status;
		rep->message = r->status_msg;
	} else if (row != NULL && row->validate_items == NULL && r->nitems > 0 && r->items[0].status != CUA_OK) {
		rep->status = r->items[0].status;
		rep->message = r->items[0].msg;
	} else if (row != NULL && row->reply != NULL) {
		memset(body, 0, sizeof(*body));
		if (row->reply(fe, r, body, scratch) == 0) {
			rep->body = body;
		} else {
			rep->status = CUA_EINTERNAL;
			rep->message = "cannot encode the reply (daemon out of memory)";
		}
	}
}

/* r's reply of `bytes` was handed to the edge: a counted request stays counted in its session until the
 * connection took the reply (request_reply_sent). */
static void
do_replied(struct request *r, size_t bytes) CUA_REQUIRES(cuad_fe_lock)
{
	r->reply_ctx = NULL;
	if (r->held) {
		r->held = false;
		if (bytes > 0)
			r->s->reply_bytes += bytes;
		else
			r->s->held--;
	}
}

/* Sends r's answer now; its receive context comes back to the edge once the connection took the reply. */
static void
do_answer(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct reply rep;
	cua_rep_body body;
	void *scratch;
	build_reply(fe, r, &rep, &body, &scratch);
	size_t bytes = fe->edge->reply(r->reply_ctx, &rep);
	do_stats_hops(fe, r, cua_now_ns());
	free(scratch);
	do_replied(r, bytes);
}

/* Fire-and-forget work that failed: its first error waits for the session's next SYNCHRONIZE. */
static void
do_defer_error(struct request *r, uint32_t st) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s = r->s;
	const char *msg = r->status_msg;
	if (s->deferred_status != CUA_OK)
		return;
	for (uint32_t i = 0; msg == NULL && i < r->nitems; i++)
		if (r->items[i].status != CUA_OK)
			msg = r->items[i].msg;
	s->deferred_status = st;
	snprintf(s->deferred_msg, sizeof(s->deferred_msg), "%s (request %s)", msg ? msg : cua_strerror((int)st),
		 cua_op_name(r->op));
}

/* What finishing r does before its reply: the row completes it (or abandons what validation took), and it is
 * counted (errors, metrics). */
static void
do_settle(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s = r->s;
	do_log_ctx(s, r->id);
	if (r->kind == REQ_CLIENT && r->status == CUA_OK) {
		const struct cmd_entry *row = cmd_find(r->op);
		if (row != NULL && row->complete != NULL)
			row->complete(fe, r);
	} else if (r->kind == REQ_CLIENT && r->id != 0 && !r->undecodable) {
		const struct cmd_entry *row = cmd_find(r->op);
		if (row != NULL && row->abandon != NULL)
			row->abandon(fe, r);
	}
	uint32_t st = request_status(r);
	if (st != CUA_OK) {
		fe->errors++;
		s->errors++;
	}
	if (r->kind == REQ_CLIENT) {
		do_stats_request(fe, r->op, op_family(r->op), st, cua_now_ns() - r->recv_ns);
		do_stats_tenant(fe, s->tenant ? s->tenant->name : NULL, op_family(r->op), st);
		do_count_work(fe, r);
	}
	do_unreserve(fe, r); /* made and counted by complete, or never made: either way no longer reserved */
}

/* A request's very end, after its answer: its staging back, r freed, its session freed if that was the last thing
 * it waited for, the dispatcher woken. */
static void
do_request_end(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s = r->s;
	if (r->wdev != NULL)
		do_dev_release_staging(r->wdev, r);
	request_free(fe, r);
	do_sched_session_release(fe, s);
	do_sched_wake(fe);
	cua_log_ctx_clear();
}

void
do_request_finish(struct fe *fe, struct request *r)
{
	struct session *s = r->s;
	do_settle(fe, r);
	uint32_t st = request_status(r);
	if (r->kind == REQ_CLEANUP)
		s->cleanup_pending--;
	else if (r->kind == REQ_POOL)
		do_spool_created(fe, r);
	else if (r->reply_ctx != NULL)
		do_answer(fe, r);
	else if (st != CUA_OK)
		do_defer_error(r, st);
	do_request_end(fe, r);
}

/* After the worker: the request is no longer in its device, its session's counts say so. */
static void
do_left_device(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	if (r->kind == REQ_CLIENT)
		fe->client_in_flight--;
	if (r->kind != REQ_POOL)
		r->s->dev_in_flight[r->dev]--;
	tenant_account(fe, r->s, r->busy_ns);
}

void
do_request_done(struct fe *fe, struct request *r)
{
	do_left_device(fe, r);
	r->s->in_flight--;
	do_request_finish(fe, r);
}

/*
 * The completion thread's callback (dev_done_fn), without fe->lock. A reply that carries bulk bytes from the
 * staging area (a DTOH copy, a BATCH) is built and encoded — its bytes copied into the message — without the
 * lock: its row marks it CMD_REPLY_UNLOCKED, meaning its reply refers only to the request and its staging,
 * which are this thread's until the request is freed. Its session stays counted busy (in_flight) meanwhile,
 * so it cannot be freed under us. Every other request is finished under the lock as before.
 */
void
request_done(struct fe *fe, struct request *r)
{
	const struct cmd_entry *row = r->kind == REQ_CLIENT ? cmd_find(r->op) : NULL;
	struct reply rep;
	cua_rep_body body;
	void *scratch;
	size_t bytes = 0;
	fe_lock(fe);
	bool unlocked = row != NULL && (row->flags & CMD_REPLY_UNLOCKED) && row->complete == NULL &&
			r->reply_ctx != NULL && fe->edge->encode != NULL;
	if (!unlocked) {
		do_request_done(fe, r);
		fe_unlock(fe);
		return;
	}
	do_settle(fe, r);
	fe_unlock(fe);

	build_reply(fe, r, &rep, &body, &scratch);
	void *msg = fe->edge->encode(r->reply_ctx, &rep, &bytes);
	free(scratch);

	fe_lock(fe);
	struct session *s = r->s;
	do_log_ctx(s, r->id);
	/* left the device only now, with its reply handed to the edge: a drain that sees no client request in
	 * flight (request_in_flight) must find this reply among the edge's sends, or it stops the edge under it */
	do_left_device(fe, r);
	s->in_flight--;
	bytes = fe->edge->send(r->reply_ctx, msg, rep.counted);
	do_stats_hops(fe, r, cua_now_ns());
	do_replied(r, bytes);
	do_request_end(fe, r);
	fe_unlock(fe);
}

/* ------------------------------------------------------------------ validation */

/* Validates and plans r through its row. true: r is to be answered now (refused, or nothing to run). */
static bool
do_validate(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cmd_entry *row = cmd_find(r->op);
	struct session *s = r->s;
	cua_err e;
	cua_err_clear(&e);
	r->dev = -1;
	if (items_init(r, 1) != 0)
		return request_fail(r, CUA_ENOMEM, "daemon out of memory"), true;
	if (row == NULL)
		return request_fail(r, CUA_EUNKNOWN_OP, "unknown request kind %u", r->op), true;
	int rc = do_auth_gate(fe, s, (row->flags & CMD_AUTHENTICATES) != 0, &e);
	if (rc != 0)
		return request_fail(r, rc, "%s", e.detail), true;
	if ((row->flags & CMD_HELLO) && !s->hello)
		return request_fail(r, CUA_ENO_SESSION, "send HELLO first"), true;
	if ((row->flags & CMD_OPERATOR) && !s->operator)
		return request_fail(r, CUA_EPERMISSION_DENIED, "%s is the operator's: send it on the operator endpoint",
				    cua_op_name(r->op)),
		       true;
	bool exempt = (row->flags & CMD_QUOTA_EXEMPT) != 0;
	if (s->queued + s->in_flight >= fe->cfg.session_inflight && !exempt)
		return request_fail(r, CUA_EQUOTA,
				    "%u requests of this session are queued or running, its limit; wait for some to "
				    "complete, "
				    "or raise it with --session-inflight",
				    s->queued + s->in_flight),
		       true;
	if (!exempt && (rc = tenant_check_inflight(fe, s, &e)) != 0)
		return request_fail(r, rc, "%s", e.detail), true;
	if (s->reply_bytes >= fe->cfg.session_reply_bytes && !exempt)
		return request_fail(r, CUA_EQUOTA,
				    "%llu bytes of replies to this connection wait to be sent, its limit set by "
				    "--session-reply-bytes is %llu; read the replies",
				    (unsigned long long)s->reply_bytes,
				    (unsigned long long)fe->cfg.session_reply_bytes),
		       true;
	if (row->validate_items != NULL)
		rc = row->validate_items(fe, r, cmd_find, &e);
	else if (row->validate != NULL)
		rc = row->validate(fe, r, &e);
	else
		rc = row->item(fe, r, &r->w.body, &r->items[0], &e);
	if (rc == 0 && row->reserve != NULL) { /* admission reserves what it makes (reserve.h) */
		struct resv want = {{0}};
		row->reserve(fe, r, &want);
		rc = do_reserve(fe, r, &want, &e);
	}
	if (rc == 0)
		rc = do_reserve_worker(fe, r, &e);
	if (rc != 0) {
		request_fail(r, rc, "%s", e.detail[0] ? e.detail : cua_strerror(rc));
		r->cmds = NULL; /* the bytes stay in r->pool */
		r->cmds_len = r->cmds_cap = 0;
		r->ncmds = 0;
		return true;
	}
	if (r->ncmds == 0 && !r->barrier)
		return true; /* answered by the front-end alone (the row completes it in do_request_finish) */
	return false;
}

/* r's turn has come: validate it, then answer it or queue it. Its sequence number is used up whatever
 * comes of it. */
static void
do_process(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s = r->s;
	if (r->seq != 0)
		s->next_seq++;
	if (r->refused) { /* already answered QUOTA: only its turn was missing */
		request_free(fe, r);
		return;
	}
	r->id = ++fe->next_req;
	do_log_ctx(s, r->id);
	if (r->undecodable || do_validate(fe, r)) {
		do_request_finish(fe, r);
		return;
	}
	if (r->no_wait) /* accepted: answer now, errors surface at SYNCHRONIZE */
		do_answer(fe, r);
	do_sched_enqueue(fe, r);
}

/* r's turn has come: it is processed, then the parked requests that were waiting for it. */
static void
do_take_turn(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s = r->s;
	struct request *p;
	do_process(fe, r);
	while ((p = do_sched_unpark(fe, s)) != NULL)
		do_process(fe, p);
}

/* The connection is past one of its limits: r is answered QUOTA at once (with the message r was failed with,
 * unless it did not decode: §5 checks a message's decoding before the connection's limits). An ordered r still
 * uses up its sequence number in order: now when it is the next one (the requests parked behind it then run),
 * else when its turn comes (parked, answered). */
static void
do_refuse(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s = r->s;
	bool in_turn = r->seq != 0 && r->seq == s->next_seq;
	bool ahead = r->seq > s->next_seq && s->nparked < CUAD_MAX_PARKED;
	if (!in_turn && !ahead) {
		do_request_finish(fe, r);
		return;
	}
	fe->errors++;
	do_stats_request(fe, r->op, op_family(r->op), r->status, cua_now_ns() - r->recv_ns);
	do_stats_tenant(fe, r->s->tenant ? r->s->tenant->name : NULL, op_family(r->op), r->status);
	do_answer(fe, r);
	r->refused = true;
	if (ahead)
		do_sched_park(fe, s, r);
	else
		do_take_turn(fe, r);
}

/* r is dropped unanswered: its connection holds the hard limit of receive contexts (see do_admit). */
static void
do_drop(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s = r->s;
	fe->stats.dropped++;
	if (s->dropped++ % 1024 == 0)
		log_warn("session %llu: %u requests unanswered or replies unsent (the connection does not read its "
			 "replies?); dropping its requests (%llu so far) until it reads, or --send-timeout closes it",
			 (unsigned long long)s->id, s->held, (unsigned long long)s->dropped);
	fe->edge->drop(r->reply_ctx);
	r->reply_ctx = NULL;
	request_free(fe, r);
}

/*
 * Admission: the per-connection limits of unanswered requests, then sequence order.
 *
 * Every request holds one of the edge's receive contexts from its arrival until its reply was sent (taken by
 * the connection, request_reply_sent), so a connection that does not read holds them as long as its replies
 * wait. Two limits per session keep that its own problem:
 *   - past --session-pending (P) unanswered-or-unsent requests, a request is answered QUOTA at once (the
 *     refusal holds a context too, until it is sent);
 *   - at 2 P a request is dropped unanswered, holding nothing: a peer that does not read its replies gets
 *     none, and --send-timeout closes its connection.
 * So one connection holds at most 2 P contexts, and the edge grows the number of contexts on demand up to
 * --contexts-max (C): it takes C / 2P connections that all stop reading at once (128 with the defaults
 * P = 64, C = 8192) to exhaust receive capacity, and each of them is closed within --send-timeout; requests
 * parked behind a missing sequence number are answered within --seq-gap-timeout.
 */
static void
do_admit(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s = r->s;
	if (s->held >= 2 * fe->cfg.session_pending) {
		do_drop(fe, r);
		return;
	}
	bool over = s->held >= fe->cfg.session_pending;
	r->held = true;
	s->held++;
	/* PROTOCOL.md §5's order: the message, version and op (before_seq), then seq, then the body, then the
	 * connection's limits. A used seq, or one past the window, is answered at once and uses up nothing. */
	bool reused = r->seq != 0 && r->seq < s->next_seq;
	if (reused || (r->seq > s->next_seq && s->nparked >= CUAD_MAX_PARKED)) {
		if (!r->before_seq) /* replaces a body's decode error, which §5 checks after seq */
			request_fail(r, CUA_EPROTOCOL, "%s",
				     reused ? "request sequence number already used"
					    : "too many requests ahead of a missing sequence number");
		do_request_finish(fe, r);
		return;
	}
	if (over) {
		if (!r->undecodable)
			request_fail(r, CUA_EQUOTA,
				     "too many unanswered requests on this connection: %u, the limit set by "
				     "--session-pending is %u; wait for some replies",
				     s->held - 1, fe->cfg.session_pending);
		do_refuse(fe, r);
		return;
	}
	/* The bytes of its message stay in the daemon's memory until r is finished (its decoded fields point into
	 * them): weighed per session and in total. A session that holds none is always admitted one, whatever its
	 * size (up to --max-message). */
	bool mine = s->request_bytes > 0 && s->request_bytes + r->msg_len > fe->cfg.session_request_bytes;
	if (mine || (fe->request_bytes > 0 && fe->request_bytes + r->msg_len > fe->cfg.request_bytes)) {
		if (!r->undecodable)
			request_fail(r, CUA_EQUOTA,
				     mine ? "this session's requests not yet finished hold %llu bytes of the daemon's "
					    "memory; this one (%zu bytes) would pass --session-request-bytes (%llu): "
					    "wait for some of them to complete"
					  : "requests not yet finished hold %llu bytes of the daemon's memory; this "
					    "one (%zu bytes) would pass --request-bytes (%llu): try again later",
				     (unsigned long long)(mine ? s->request_bytes : fe->request_bytes), r->msg_len,
				     (unsigned long long)(mine ? fe->cfg.session_request_bytes
							       : fe->cfg.request_bytes));
		do_refuse(fe, r);
		return;
	}
	r->msg_counted = true;
	s->request_bytes += r->msg_len;
	fe->request_bytes += r->msg_len;
	if (r->seq != 0 && r->seq != s->next_seq) {
		do_sched_park(fe, s, r);
		return;
	}
	do_take_turn(fe, r);
}

static void
do_answer_early(struct fe *fe, void *ctx, uint32_t op, int status, const char *msg) CUA_REQUIRES(cuad_fe_lock)
{
	struct reply rep = {op, (uint32_t)status, msg, NULL, false};
	fe->errors++;
	do_stats_request(fe, op, op_family(op), (uint32_t)status, UINT64_MAX);
	fe->edge->reply(ctx, &rep);
}

void
request_receive(struct fe *fe, const struct incoming *in)
{
	struct request *r = request_new(fe);
	cua_err e;
	if (r == NULL) {
		fe_lock(fe);
		fe->requests++;
		fe->edge->msg_free(in->msg);
		do_answer_early(fe, in->reply_ctx, 0, CUA_ENOMEM, "daemon out of memory");
		fe_unlock(fe);
		return;
	}
	r->recv_ns = cua_now_ns();
	r->msg = in->msg; /* transferred */
	r->msg_len = in->len;
	r->reply_ctx = in->reply_ctx;
	r->pipe = in->pipe;
	cua_err_clear(&e);
	int rc = cua_wire_decode_request(in->body, in->len, &r->w, &e);
	r->decoded = true;
	fe_lock(fe);
	fe->requests++;
	if (fe->draining) { /* no new work: nothing of it ran */
		do_answer_early(fe, r->reply_ctx, r->w.op, CUA_ESHUTTING_DOWN,
				"cuasyncd is shutting down and takes no new requests");
		goto drop;
	}
	if (rc != 0) {
		log_debug("pipe %u: undecodable request (seq %s%llu): %s: %s", in->pipe,
			  r->w.has_header ? "" : "unread ", (unsigned long long)r->w.seq, cua_strerror_name(rc),
			  e.detail);
		if (!r->w.has_header || r->w.seq == 0) { /* no turn to wait for: answered now */
			do_answer_early(fe, r->reply_ctx, r->w.op, rc, e.detail); /* op is 0 when it was not read */
			goto drop;
		}
		request_fail(r, rc, "%s", e.detail); /* answered in its turn */
		r->undecodable = true;
		/* §5 checks the message's structure, version and op before seq: which of the decoder's failures was
		 * one of those (only failures get here, so the structural walk runs twice only for them) */
		cua_err_clear(&e);
		r->before_seq =
			rc == CUA_EVERSION || rc == CUA_EUNKNOWN_OP || cua_wire_check(in->body, in->len, &e) != 0;
	}
	r->op = r->w.op;
	r->seq = r->w.seq;
	r->s = do_session_by_pipe(fe, in->pipe);
	if (in->session != 0 && (r->s == NULL || r->s->id != in->session)) {
		/* a shared-memory record read as its session ended (DISCONNECT, the connection going): as on the closed
		 * connection, its reply goes nowhere; the channel closes and its client sees SESSION_LOST (a CLOSED
		 * reply through the ring would reach it first) */
		fe->edge->drop(r->reply_ctx);
		r->s = NULL;
		goto drop;
	}
	if (r->s == NULL && !do_pipe_gone(fe, in->pipe) && (r->s = do_session_new(fe, in->pipe)) != NULL)
		do_auth_session(fe, r->s, in->operator); /* the message beat the edge's pipe-added event */
	if (r->s == NULL) {
		do_answer_early(fe, r->reply_ctx, r->op, CUA_ECLOSED, "the connection is closing");
		goto drop;
	}
	r->s->requests++;
	do_log_ctx(r->s, r->id); /* the records of its validation name it (journald fields) */
	do_sched_defer_begin(fe);
	do_admit(fe, r); /* r and its session may be gone after the next line */
	do_sched_defer_end(fe);
	cua_log_ctx_clear();
	fe_unlock(fe);
	return;
drop:
	request_free(fe, r);
	fe_unlock(fe);
}

/* ------------------------------------------------------------------ dispatch (the scheduler's callback) */

/* r needs its session's pool streams on worker d, which are not there: a REQ_POOL request creates them (r waits
 * until it completed, SCHED_WAIT), or the worker's ring has no room for it now (SCHED_FULL), or r fails. */
static enum sched_verdict
do_pool_create(struct fe *fe, struct request *r, struct device *d) CUA_REQUIRES(cuad_fe_lock)
{
	struct request *pr = request_new(fe);
	if (pr != NULL) {
		pr->s = r->s;
		pr->kind = REQ_POOL;
		pr->dev = r->dev;
		pr->wdev = d;
		pr->id = ++fe->next_req;
	}
	if (pr == NULL || do_spool_plan(fe, pr) != 0) {
		if (pr != NULL)
			request_free(fe, pr);
		request_fail(r, CUA_ENOMEM, "daemon out of memory");
		do_request_finish(fe, r);
		return SCHED_ANSWERED;
	}
	if (do_dev_dispatch(fe, d, pr) != 0) {
		request_free(fe, pr);
		return SCHED_FULL;
	}
	r->s->in_flight++; /* not in dev_in_flight: STATUS counts the session's requests, and this is none of them */
	do_spool_creating(r->s, r->dev);
	return SCHED_WAIT;
}

enum sched_verdict
do_request_dispatch(struct fe *fe, struct request *r)
{
	if (r->kind == REQ_CLEANUP && !r->planned)
		do_cleanup_plan(fe, r);
	if (r->ncmds == 0) { /* a barrier with nothing to run (SYNCHRONIZE) */
		do_request_finish(fe, r);
		return SCHED_ANSWERED;
	}
	struct device *d = do_session_worker(fe, r->s, r->dev);
	if (d == NULL) { /* --isolation session: the session's first work on this device */
		if ((d = do_pool_take(fe, r->dev, r->s)) == NULL)
			return SCHED_WAIT; /* the pool thread wakes the dispatcher when one is ready */
		r->s->worker[r->dev] = d;
	}
	/* Refers to objects of a lost generation: answered at once, even while the next worker starts. */
	bool lost = r->dep_gen != 0 && r->dep_gen != d->gen;
	if (!lost && (d->state == DEV_STARTING || d->state == DEV_RESTARTING))
		return SCHED_WAIT;
	if (d->state == DEV_FAILED || lost) {
		if (r->kind == REQ_CLEANUP) /* nothing left to release on a lost context */
			;
		else if (d->state == DEV_FAILED)
			request_fail(r, CUA_ENO_DEVICE, "%s", d->why);
		else
			request_fail(r, CUA_ECONTEXT_LOST,
				     "the GPU context this request refers to was lost; recreate modules, memory and "
				     "streams");
		do_request_finish(fe, r);
		return SCHED_ANSWERED;
	}
	switch (do_spool_prepare(fe, r, d)) {
	case SPOOL_READY: break;
	case SPOOL_WAIT: return SCHED_WAIT;
	case SPOOL_CREATE: return do_pool_create(fe, r, d);
	case SPOOL_FAILED: do_request_finish(fe, r); return SCHED_ANSWERED;
	}
	r->wdev = d;
	int rc = do_dev_dispatch(fe, d, r);
	if (rc < 0) {
		r->wdev = NULL;
		return SCHED_FULL;
	}
	if (rc > 0) { /* refused for good */
		do_request_finish(fe, r);
		return SCHED_ANSWERED;
	}
	if (r->kind == REQ_CLIENT)
		fe->client_in_flight++;
	r->s->in_flight++;
	r->s->dev_in_flight[r->dev]++;
	return SCHED_SENT;
}
