/*
 * frontend.c — the NNG side of cuasyncd: one REP socket with many contexts (each with its own aio), sessions
 * bound to pipes, the dispatcher that feeds workers round-robin across sessions, and the reply path.
 */
#include "config.h"

#include "cua_log.h"
#include "cua_nngmsg.h"
#include "daemon.h"

#include <nng/protocol/reqrep0/rep.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void do_complete_request(struct fe *fe, struct request *r);

uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void
do_wake_dispatcher(struct fe *fe)
{
	pthread_cond_signal(&fe->cond);
}

static void
ctx_send(struct fectx *c, nng_msg *m)
{
	c->sending = 1;
	nng_aio_set_msg(c->aio, m);
	nng_ctx_send(c->ctx, c->aio);
}

/* Packs r's reply and sends it on ctx. Caller holds fe->lock (the packers read session state). */
static void
do_reply(struct fe *fe, struct request *r, struct fectx *c)
{
	nng_msg *m;
	if (nng_msg_alloc(&m, 0) != 0) {
		log_error("out of memory for a reply; the client will time out");
		c->sending = 1; /* restart receiving through the callback path */
		nng_ctx_recv(c->ctx, c->aio);
		c->sending = 0;
		return;
	}
	int rc = do_pack_reply(fe, r, cua_nngmsg_out(m));
	if (rc != 0) {
		nng_msg_clear(m);
		cua_wire_pack_reply(cua_nngmsg_out(m), r->op, CUA_EINTERNAL, "cannot encode the reply", NULL);
	}
	ctx_send(c, m);
}

static uint32_t
request_status(const struct request *r)
{
	if (r->status != CUA_OK)
		return r->status;
	for (uint32_t i = 0; i < r->nitems; i++)
		if (r->items[i].status != CUA_OK)
			return r->items[i].status;
	return CUA_OK;
}

void
do_finish(struct fe *fe, struct request *r)
{
	struct session *s = r->s;
	if (r->status == CUA_OK)
		do_complete_request(fe, r);
	uint32_t st = request_status(r);
	if (st != CUA_OK)
		fe->errors++;
	if (r->internal) {
		s->cleanup_pending--;
	} else if (r->ctx != NULL) {
		do_reply(fe, r, r->ctx);
		if (r->held)
			s->held--;
	} else if (st != CUA_OK && s->deferred_status == CUA_OK) {
		/* fire-and-forget: keep the first error for the next SYNCHRONIZE */
		const char *msg = r->status_msg;
		for (uint32_t i = 0; msg == NULL && i < r->nitems; i++)
			if (r->items[i].status != CUA_OK)
				msg = r->items[i].msg;
		s->deferred_status = st;
		snprintf(s->deferred_msg, sizeof(s->deferred_msg), "%s (request %s)", msg ? msg : cua_strerror((int)st),
			 cua_op_name(r->op));
	}
	if (r->dev >= 0 && r->dev < fe->ndevs) {
		struct device *d = &fe->devs[r->dev];
		for (uint32_t i = 0; i < r->nstages; i++)
			if (r->stages[i].placed)
				extent_put(&d->staging_alloc, r->stages[i].off, r->stages[i].len);
	}
	request_free(r);
	do_session_maybe_free(fe, s);
	do_wake_dispatcher(fe);
}

/* ------------------------------------------------------------------ dispatcher */

static void
ready_add(struct fe *fe, struct session *s)
{
	if (s->in_ready)
		return;
	s->in_ready = true;
	if (fe->ready == NULL) {
		s->rnext = s->rprev = s;
		fe->ready = s;
	} else {
		s->rnext = fe->ready;
		s->rprev = fe->ready->rprev;
		fe->ready->rprev->rnext = s;
		fe->ready->rprev = s;
	}
}

static void
do_enqueue(struct fe *fe, struct request *r)
{
	struct session *s = r->s;
	if (s->qtail)
		s->qtail->qnext = r;
	else
		s->qhead = r;
	s->qtail = r;
	s->queued++;
	ready_add(fe, s);
	do_wake_dispatcher(fe);
}

static struct request *
queue_pop(struct session *s)
{
	struct request *r = s->qhead;
	s->qhead = r->qnext;
	if (s->qhead == NULL)
		s->qtail = NULL;
	r->qnext = NULL;
	s->queued--;
	return r;
}

/* Tries to move the head request of s along. Returns 1 on progress. */
static int
do_dispatch_one(struct fe *fe, struct session *s, int *blocked_on_space)
{
	struct request *r = s->qhead;
	if (r->barrier && s->in_flight > 0)
		return 0;
	/* Fairness: a session keeps at most session_window requests in the workers; the rest wait here, so a
	 * flooding client cannot fill a worker's queue ahead of everyone else. */
	if (s->in_flight >= fe->cfg.session_window && !r->internal)
		return 0;
	if (r->ncmds == 0) { /* a barrier with nothing to run (SYNCHRONIZE) */
		queue_pop(s);
		do_finish(fe, r);
		return 1;
	}
	struct device *d = &fe->devs[r->dev];
	if (d->state == DEV_STARTING || d->state == DEV_RESTARTING)
		return 0;
	if (d->state == DEV_FAILED || (r->dep_gen != 0 && r->dep_gen != d->gen)) {
		queue_pop(s);
		if (r->internal) { /* nothing left to release on a lost context */
			do_finish(fe, r);
			return 1;
		}
		r->status = d->state == DEV_FAILED ? CUA_ENO_DEVICE : CUA_ECONTEXT_LOST;
		r->status_msg = strdup(d->state == DEV_FAILED ? d->why
				       : "the GPU context this request refers to was lost; recreate modules, memory and streams");
		do_finish(fe, r);
		return 1;
	}
	int rc = do_dev_dispatch(fe, d, r);
	if (rc < 0) {
		*blocked_on_space = 1;
		return 0;
	}
	queue_pop(s);
	if (rc > 0) /* refused for good */
		do_finish(fe, r);
	return 1;
}

static void *
dispatcher_main(void *arg)
{
	struct fe *fe = arg;
	pthread_mutex_lock(&fe->lock);
	while (!atomic_load(&fe->stopping)) {
		int progress = 0, blocked = 0;
		if (fe->pending_closes > 0) {
			fe->pending_closes = 0;
			for (struct session *s = fe->sessions, *next; s; s = next) {
				next = s->next; /* s may be freed by closing it */
				if (s->pipe_gone && !s->closing)
					do_session_close(fe, s);
			}
		}
		/* One request per session per round: a flooding client cannot starve the others. Sessions that
		 * finish closing during the pass are freed after it (see do_session_maybe_free). */
		fe->dispatching = true;
		struct session *start = fe->ready;
		if (start != NULL) {
			struct session *s = start;
			do {
				struct session *next = s->rnext;
				if (s->qhead != NULL)
					progress |= do_dispatch_one(fe, s, &blocked);
				if (s->qhead == NULL && s->in_ready) {
					int was_start = s == start;
					do_ready_remove(fe, s);
					if (was_start)
						start = fe->ready;
					if (fe->ready == NULL)
						break;
				}
				s = next;
			} while (s != start && fe->ready != NULL);
			if (fe->ready)
				fe->ready = fe->ready->rnext;
		}
		fe->dispatching = false;
		while (fe->zombies) {
			struct session *z = fe->zombies;
			fe->zombies = z->znext;
			z->zombie = false;
			do_session_maybe_free(fe, z);
		}
		if (progress)
			continue;
		if (blocked) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&fe->cond, &fe->lock, &ts);
		} else {
			pthread_cond_wait(&fe->cond, &fe->lock);
		}
	}
	pthread_mutex_unlock(&fe->lock);
	return NULL;
}

/* ------------------------------------------------------------------ receiving */

static void
reply_error(struct fectx *c, uint32_t op, int status, const char *msg)
{
	nng_msg *m;
	if (nng_msg_alloc(&m, 0) != 0) {
		nng_ctx_recv(c->ctx, c->aio);
		return;
	}
	cua_wire_pack_reply(cua_nngmsg_out(m), op, (uint32_t)status, msg, NULL);
	ctx_send(c, m);
}

/* Validates r and queues it (or answers it at once). Caller holds fe->lock. */
static void
do_process(struct fe *fe, struct request *r)
{
	struct session *s = r->s;
	if (r->seq != 0)
		s->next_seq++;
	if (r->refused) { /* already answered QUOTA: only its turn was missing */
		request_free(r);
		return;
	}
	r->id = ++fe->next_req;
	if (do_handle_request(fe, r) == H_REPLY) {
		do_finish(fe, r);
		return;
	}
	if (r->no_wait) { /* accepted: answer now, errors surface at SYNCHRONIZE */
		do_reply(fe, r, r->ctx);
		r->ctx = NULL;
		if (r->held)
			s->held--;
		r->held = false;
	}
	do_enqueue(fe, r);
}

static void
do_park(struct session *s, struct request *r)
{
	struct request **pp = &s->parked;
	while (*pp && (*pp)->seq < r->seq)
		pp = &(*pp)->qnext;
	r->qnext = *pp;
	*pp = r;
	s->nparked++;
}

static bool
do_pipe_gone(struct fe *fe, uint32_t pipe)
{
	for (unsigned i = 0; i < sizeof(fe->tombs) / sizeof(fe->tombs[0]); i++)
		if (fe->tombs[i] == pipe)
			return true;
	return false;
}

static void
handle_msg(struct fe *fe, struct fectx *c, nng_msg *msg)
{
	struct request *r = calloc(1, sizeof(*r));
	if (r == NULL) {
		nng_msg_free(msg);
		reply_error(c, 0, CUA_ENOMEM, "daemon out of memory");
		return;
	}
	r->fe = fe;
	r->msg = msg;
	r->ctx = c;
	r->dev = -1;
	r->host_fd = -1;
	r->pipe = nng_msg_get_pipe(msg);
	cua_err e;
	cua_err_clear(&e);
	int rc = cua_wire_decode_request(nng_msg_body(msg), nng_msg_len(msg), &r->w, &e);
	r->decoded = true;
	uint32_t pipe = nng_pipe_id(nng_msg_get_pipe(msg));
	pthread_mutex_lock(&fe->lock);
	fe->requests++;
	if (rc != 0) {
		fe->errors++;
		log_debug("pipe %u: undecodable request: %s: %s", pipe, cua_strerror_name(rc), e.detail);
		pthread_mutex_unlock(&fe->lock);
		reply_error(c, r->w.op, rc, e.detail); /* op is 0 when it could not be read */
		request_free(r);
		return;
	}
	r->op = r->w.op;
	r->s = do_session_by_pipe(fe, pipe);
	if (r->s == NULL && !do_pipe_gone(fe, pipe))
		r->s = do_session_new(fe, pipe); /* the message beat NNG_PIPE_EV_ADD_POST */
	if (r->s == NULL) {
		fe->errors++;
		pthread_mutex_unlock(&fe->lock);
		reply_error(c, r->op, CUA_ECLOSED, "the connection is closing");
		request_free(r);
		return;
	}
	r->seq = r->w.seq;
	struct session *s = r->s;
	/* Every unanswered request holds one of the daemon's NNG contexts: cap them per session so that one
	 * client cannot take all of them (and with them everyone else's ability to send). */
	if (s->held >= fe->cfg.session_pending && !(r->seq != 0 && r->seq == s->next_seq)) {
		r->status = CUA_EQUOTA;
		r->status_msg = strdup("too many unanswered requests on this connection; wait for some replies");
		if (r->seq > s->next_seq && s->nparked < CUAD_MAX_PARKED) {
			/* answered now, but its sequence number still has to pass in order */
			do_reply(fe, r, r->ctx);
			r->ctx = NULL;
			r->refused = true;
			do_park(s, r);
		} else {
			do_finish(fe, r);
		}
		pthread_mutex_unlock(&fe->lock);
		return;
	}
	r->held = true;
	s->held++;
	if (r->seq != 0 && r->seq != s->next_seq) {
		if (r->seq < s->next_seq || s->nparked >= CUAD_MAX_PARKED) {
			r->status = CUA_EPROTOCOL;
			r->status_msg = strdup(r->seq < s->next_seq ? "request sequence number already used"
								   : "too many requests ahead of a missing sequence number");
			do_finish(fe, r);
		} else {
			do_park(s, r);
		}
		pthread_mutex_unlock(&fe->lock);
		return;
	}
	do_process(fe, r);
	/* the requests that were waiting for this one */
	while (s->parked != NULL && s->parked->seq == s->next_seq) {
		struct request *p = s->parked;
		s->parked = p->qnext;
		p->qnext = NULL;
		s->nparked--;
		do_process(fe, p);
	}
	pthread_mutex_unlock(&fe->lock);
}

static void
ctx_cb(void *arg)
{
	struct fectx *c = arg;
	struct fe *fe = c->fe;
	int rv = nng_aio_result(c->aio);
	if (c->sending) {
		c->sending = 0;
		if (rv != 0) {
			nng_msg *m = nng_aio_get_msg(c->aio);
			if (m)
				nng_msg_free(m);
		}
		if (rv == NNG_ECLOSED)
			return;
		nng_ctx_recv(c->ctx, c->aio);
		return;
	}
	if (rv != 0) {
		if (rv == NNG_ECLOSED || atomic_load(&fe->stopping))
			return;
		nng_ctx_recv(c->ctx, c->aio);
		return;
	}
	handle_msg(fe, c, nng_aio_get_msg(c->aio));
}

static void
pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct fe *fe = arg;
	uint32_t id = nng_pipe_id(p);
	pthread_mutex_lock(&fe->lock);
	/* No NNG calls in here (it runs inside NNG's pipe handling): closing a session, which may answer
	 * requests, is left to the dispatcher thread. */
	if (ev == NNG_PIPE_EV_ADD_POST && listener_is_probe(fe, p)) {
		/* the listener watchdog's probe: not a client */
		atomic_fetch_add(&fe->probe_adds, 1);
	} else if (ev == NNG_PIPE_EV_ADD_POST && !do_pipe_gone(fe, id)) {
		struct session *s = do_session_by_pipe(fe, id);
		if (s == NULL)
			s = do_session_new(fe, id);
		if (s == NULL)
			log_error("out of memory for a session");
		else
			log_debug("pipe %u: session %llu", id, (unsigned long long)s->id);
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		struct session *s = do_session_by_pipe(fe, id);
		if (s && !s->pipe_gone) {
			s->pipe_gone = true;
			fe->pending_closes++;
			do_wake_dispatcher(fe);
		}
		fe->tombs[fe->ntombs++ % (sizeof(fe->tombs) / sizeof(fe->tombs[0]))] = id;
	}
	pthread_mutex_unlock(&fe->lock);
}

/* ------------------------------------------------------------------ start / stop */

int
fe_start(struct fe *fe)
{
	int rv;
	pthread_mutex_init(&fe->lock, NULL);
	pthread_cond_init(&fe->cond, NULL);
	fe->start_ms = now_ms();
	if ((rv = nng_rep0_open(&fe->sock)) != 0) {
		log_error("cannot open the REP socket: %s", nng_strerror(rv));
		return -1;
	}
	nng_socket_set_size(fe->sock, NNG_OPT_RECVMAXSZ, fe->cfg.max_message);
	nng_pipe_notify(fe->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, fe);
	nng_pipe_notify(fe->sock, NNG_PIPE_EV_REM_POST, pipe_cb, fe);
	if (pthread_create(&fe->dispatcher, NULL, dispatcher_main, fe) != 0)
		return -1;
	fe->ctxs = calloc(fe->cfg.contexts, sizeof(*fe->ctxs));
	if (fe->ctxs == NULL)
		return -1;
	for (unsigned i = 0; i < fe->cfg.contexts; i++) {
		struct fectx *c = &fe->ctxs[i];
		c->fe = fe;
		if ((rv = nng_aio_alloc(&c->aio, ctx_cb, c)) != 0 || (rv = nng_ctx_open(&c->ctx, fe->sock)) != 0) {
			log_error("cannot open context %u: %s", i, nng_strerror(rv));
			return -1;
		}
		fe->nctxs++;
	}
	for (int i = 0; i < fe->cfg.nlisten; i++) {
		fe->listeners[i].url = fe->cfg.listen[i];
		if (listener_open(fe, &fe->listeners[i]) != 0)
			return -1;
		fe->nlisteners++;
		log_info("listening on %s", fe->cfg.listen[i]);
	}
	if (listener_watchdog_start(fe) != 0)
		return -1;
	for (unsigned i = 0; i < fe->nctxs; i++)
		nng_ctx_recv(fe->ctxs[i].ctx, fe->ctxs[i].aio);
	return 0;
}

void
fe_stop(struct fe *fe)
{
	atomic_store(&fe->stopping, 1);
	listener_watchdog_stop(fe);
	nng_close(fe->sock);
	for (unsigned i = 0; i < fe->nctxs; i++)
		nng_aio_stop(fe->ctxs[i].aio);
	pthread_mutex_lock(&fe->lock);
	pthread_cond_broadcast(&fe->cond);
	pthread_mutex_unlock(&fe->lock);
	pthread_join(fe->dispatcher, NULL);
	for (int i = 0; i < fe->ndevs; i++) {
		struct device *d = &fe->devs[i];
		dev_stop(d);
		for (size_t b = 0; d->inflight && b < d->inflight_buckets; b++)
			while (d->inflight[b]) {
				struct request *r = d->inflight[b];
				d->inflight[b] = r->hnext;
				request_free(r);
			}
		free(d->inflight);
	}
	for (unsigned i = 0; i < fe->nctxs; i++)
		nng_aio_free(fe->ctxs[i].aio);
	free(fe->ctxs);
	/* requests still queued or in flight are freed with their sessions */
	while (fe->sessions) {
		struct session *s = fe->sessions;
		while (s->qhead)
			request_free(queue_pop(s));
		s->closing = true;
		s->in_flight = 0;
		s->cleanup_pending = 0;
		do_session_maybe_free(fe, s);
	}
	free(fe->devs);
	/* Reclaims what NNG still holds, e.g. a listener that the watchdog replaced (its accept loop is dead
	 * and its socket's close cannot reach it). */
	nng_fini();
}
