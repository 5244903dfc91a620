/*
 * flight.c — the send queue. Submitted launches wait in the client's queue while CUAC_MAX_INFLIGHT_BATCHES
 * BATCH messages are in flight and are then coalesced, up to CUA_MAX_BATCH per message; explicit batches go
 * out at once (after the launches queued before them: on one stream, submission order is run order). A flight
 * is one BATCH message on the wire: its reply fills in the items' futures (future.c), and a failed
 * fire-and-forget item becomes the client's deferred error (reported by cua_synchronize). The waits that must
 * move the queue live here too: for the queue to be sent (cuac_wait_sent), for nothing to be in flight
 * (cuac_wait_idle), and for a future (cua_future_wait).
 */
#include "config.h"

#include "cua_clock.h"
#include "cuac_error.h"
#include "cuac_flight.h"
#include "cuac_transport.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One BATCH message in flight. */
struct flight {
	cua_client *c;
	struct cuac_pendq items; /* owned, in message order */
	size_t n;
};

static void
flight_free(struct flight *fl)
{
	cuac_pendq_free(&fl->items);
	free(fl);
}

void
cuac_defer_locked(cua_client *c, int status, const char *msg, size_t len)
{
	if (status == CUA_OK || c->deferred_status != CUA_OK)
		return;
	c->deferred_status = status;
	snprintf(c->deferred_msg, sizeof(c->deferred_msg), "%.*s", (int)len, msg);
}

/* Fails every item of a flight that could not be sent or answered. Caller holds c->lock. */
static void
flight_fail(cua_client *c, struct flight *fl, int status, const char *msg)
{
	struct cuac_pending *p;
	TAILQ_FOREACH(p, &fl->items, link)
	{
		if (p->fut)
			cuac_future_item_done(p->fut, p->fut_idx, status, msg, strlen(msg));
		else
			cuac_defer_locked(c, status, msg, strlen(msg));
	}
}

/* Hands out the per-item results of an answered flight (as many as items). Caller holds c->lock. */
static void
flight_results(cua_client *c, struct flight *fl, const struct cua_rep_batch *rb)
{
	struct cuac_pending *p;
	size_t i = 0;
	TAILQ_FOREACH(p, &fl->items, link)
	{
		const cua_item_result *res = &rb->results[i++];
		if (p->fut == NULL) {
			cuac_defer_locked(c, (int)res->status, res->message.ptr, res->message.len);
			continue;
		}
		if (res->status == CUA_OK && p->item.kind == CUA_OP_MEMCPY_DTOH) {
			void *dst = p->fut->dtoh_dst[p->fut_idx];
			if (res->data.len == p->fut->dtoh_len[p->fut_idx] && dst)
				memcpy(dst, res->data.ptr, res->data.len);
		}
		cuac_future_item_done(p->fut, p->fut_idx, (int)res->status, res->message.ptr, res->message.len);
	}
}

/* cuac_done_fn of a flight, on an NNG thread: records the results, lets the queue move on, frees fl. */
static void
flight_done(void *arg, int status, const char *why, const cua_wire_reply *rep)
{
	struct flight *fl = arg;
	cua_client *c = fl->c;

	pthread_mutex_lock(&c->lock);
	if (status != 0) {
		flight_fail(c, fl, status, why);
	} else if (rep->status != CUA_OK) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%.*s", (int)rep->message.len, (const char *)rep->message.ptr);
		flight_fail(c, fl, (int)rep->status, msg);
	} else if (rep->body.batch.nresults != fl->n) {
		flight_fail(c, fl, CUA_EPROTOCOL, "batch reply has the wrong number of results");
	} else {
		flight_results(c, fl, &rep->body.batch);
	}
	c->inflight--;
	cuac_flush_locked(c);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	flight_free(fl);
}

/* The BATCH request for fl's items: *items and *args are allocated here (free both after encoding; the
 * request points into them, into the launches' arenas and into the callers' HTOD bytes). 0 or CUA_ENOMEM. */
static int
batch_request(const struct flight *fl, struct cua_req_batch *b, cua_batch_item **items, cua_wire_arg **args)
{
	const struct cuac_pending *p;
	bool no_wait = true;
	size_t nargs = 0, i = 0, a = 0;

	TAILQ_FOREACH(p, &fl->items, link)
	{
		no_wait &= p->fut == NULL;
		if (p->launch)
			nargs += p->launch->nargs;
	}
	*items = calloc(fl->n, sizeof(**items));
	*args = calloc(nargs ? nargs : 1, sizeof(**args));
	if (*items == NULL || *args == NULL)
		return CUA_ENOMEM;
	TAILQ_FOREACH(p, &fl->items, link)
	{
		cua_batch_item *bi = &(*items)[i++];
		*bi = p->item;
		if (p->item.kind == CUA_OP_MEMCPY_HTOD && p->launch == NULL)
			bi->u.htod.data.ptr = p->htod_src;
		if (p->launch == NULL)
			continue;
		bi->u.launch.args = &(*args)[a];
		cuac_launch_args(p->launch, &(*args)[a]);
		a += p->launch->nargs;
	}
	*b = (struct cua_req_batch){no_wait ? CUA_FLAG_NO_WAIT : 0, *items, (uint32_t)fl->n};
	return 0;
}

void
cuac_send_flight_locked(cua_client *c, struct cuac_pendq *items, size_t n)
{
	struct flight *fl = calloc(1, sizeof(*fl));
	cua_batch_item *bi = NULL;
	cua_wire_arg *args = NULL;
	struct cua_req_batch b;

	if (fl == NULL) {
		struct flight tmp = {.c = c, .n = n};
		TAILQ_INIT(&tmp.items);
		TAILQ_CONCAT(&tmp.items, items, link);
		flight_fail(c, &tmp, CUA_ENOMEM, "out of memory");
		cuac_pendq_free(&tmp.items);
		return;
	}
	fl->c = c;
	fl->n = n;
	TAILQ_INIT(&fl->items);
	TAILQ_CONCAT(&fl->items, items, link);
	int r = batch_request(fl, &b, &bi, &args);
	if (r == 0)
		r = cuac_send_async(c, CUA_OP_BATCH, &b, flight_done, fl);
	if (r != 0) {
		flight_fail(c, fl, r == CUA_ESESSION_LOST ? r : CUA_ENOMEM,
			    r == CUA_ESESSION_LOST ? CUAC_SESSION_LOST_WHY : "cannot build the batch message");
		flight_free(fl);
	} else {
		c->inflight++; /* fl is flight_done's now; it cannot run before the caller drops c->lock */
	}
	free(bi);
	free(args);
}

/* The bytes p adds to a message, near enough: its arguments or copy data and a little framing. */
static size_t
pending_bytes(const struct cuac_pending *p)
{
	size_t b = 64;
	if (p->launch != NULL)
		for (size_t i = 0; i < p->launch->nargs; i++)
			b += p->launch->sizes[i] + 4;
	else if (p->item.kind == CUA_OP_MEMCPY_HTOD)
		b += p->item.u.htod.data.len;
	return b;
}

/* Sends queued launches, up to CUA_MAX_BATCH and CUAC_FLIGHT_BYTES per message, while fewer than cap messages
 * are in flight. */
static void
flush_upto(cua_client *c, unsigned cap)
{
	while (!TAILQ_EMPTY(&c->queue) && c->inflight < cap) {
		struct cuac_pendq items = TAILQ_HEAD_INITIALIZER(items);
		struct cuac_pending *p;
		size_t n = 0, bytes = 0;
		while (n < CUA_MAX_BATCH && (p = TAILQ_FIRST(&c->queue)) != NULL) {
			size_t pb = pending_bytes(p);
			if (n > 0 && bytes + pb > CUAC_FLIGHT_BYTES)
				break;
			TAILQ_REMOVE(&c->queue, p, link);
			TAILQ_INSERT_TAIL(&items, p, link);
			bytes += pb;
			n++;
		}
		cuac_send_flight_locked(c, &items, n);
	}
}

void
cuac_flush_locked(cua_client *c)
{
	flush_upto(c, CUAC_MAX_INFLIGHT_BATCHES);
}

void
cuac_flush_now_locked(cua_client *c)
{
	flush_upto(c, CUAC_MAX_INFLIGHT_URGENT);
}

void
cuac_enqueue(cua_client *c, struct cuac_pending *p)
{
	pthread_mutex_lock(&c->lock);
	TAILQ_INSERT_TAIL(&c->queue, p, link);
	cuac_flush_locked(c);
	pthread_mutex_unlock(&c->lock);
}

void
cuac_wait_sent(cua_client *c)
{
	pthread_mutex_lock(&c->lock);
	cuac_flush_now_locked(c);
	while (!TAILQ_EMPTY(&c->queue)) {
		pthread_cond_wait(&c->cond, &c->lock);
		cuac_flush_now_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
}

int
cuac_wait_idle(cua_client *c, bool take, char *msg, size_t len)
{
	pthread_mutex_lock(&c->lock);
	cuac_flush_now_locked(c);
	while (!TAILQ_EMPTY(&c->queue) || c->inflight > 0) {
		pthread_cond_wait(&c->cond, &c->lock);
		cuac_flush_now_locked(c);
	}
	int st = c->deferred_status;
	if (take) {
		snprintf(msg, len, "%s", c->deferred_msg);
		c->deferred_status = CUA_OK;
	}
	pthread_mutex_unlock(&c->lock);
	return st;
}

int
cua_future_wait(cua_future *f, int timeout_ms)
{
	cua_client *c = f->c;
	struct timespec dl = cua_deadline_ts(timeout_ms < 0 ? 0 : (uint64_t)timeout_ms); /* c->cond: monotonic */
	int st;

	pthread_mutex_lock(&c->lock);
	while (!f->done) {
		/* launches still queued in the client must go out for this one to complete: now, not when a reply
		 * (perhaps of a long kernel on another stream) frees the coalescing window */
		cuac_flush_now_locked(c);
		int rc = timeout_ms < 0 ? pthread_cond_wait(&c->cond, &c->lock)
					: pthread_cond_timedwait(&c->cond, &c->lock, &dl);
		if (rc == ETIMEDOUT && !f->done) {
			pthread_mutex_unlock(&c->lock);
			return cuac_fail(CUA_ETIMEOUT, "the work did not complete within %d ms", timeout_ms);
		}
	}
	st = f->status;
	pthread_mutex_unlock(&c->lock);
	if (st != CUA_OK)
		cuac_fail(st, "%s", f->error ? f->error : "");
	return st;
}
