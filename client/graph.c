/*
 * graph.c — CUDA graphs: a graph is a batch you instantiate. cua_graph_begin gives a cua_batch whose items
 * (launches, memsets, device-to-device copies, added with the cua_batch_add_* calls) become the graph's nodes,
 * in order; cua_graph_instantiate sends them as one GRAPH_CREATE; cua_graph_launch runs the whole graph with
 * one small GRAPH_LAUNCH message, its future completing when the graph has (flight.c's futures).
 */
#include "config.h"

#include "cuac_error.h"
#include "cuac_flight.h"
#include "cuac_transport.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cua_batch *
cua_graph_begin(cua_client *c)
{
	cua_batch *b = cua_batch_new(c);
	if (b != NULL)
		b->graph = true;
	return b;
}

/* The GRAPH_CREATE request for b's items: *items and *args are allocated here (free both after sending). Every
 * node's stream is 0: the graph's launch names the stream. 0 or CUA_ENOMEM. */
static int
create_request(const cua_batch *b, struct cua_req_graph_create *q, cua_batch_item **items, cua_wire_arg **args)
{
	const struct cuac_pending *p;
	size_t nargs = 0, i = 0, a = 0;
	TAILQ_FOREACH(p, &b->items, link)
	if (p->launch)
		nargs += p->launch->nargs;
	*items = calloc(b->n ? b->n : 1, sizeof(**items));
	*args = calloc(nargs ? nargs : 1, sizeof(**args));
	if (*items == NULL || *args == NULL)
		return CUA_ENOMEM;
	TAILQ_FOREACH(p, &b->items, link)
	{
		cua_batch_item *bi = &(*items)[i++];
		*bi = p->item;
		switch (bi->kind) {
		case CUA_OP_LAUNCH:
			bi->u.launch.stream = 0;
			bi->u.launch.args = &(*args)[a];
			cuac_launch_args(p->launch, &(*args)[a]);
			a += p->launch->nargs;
			break;
		case CUA_OP_MEMSET: bi->u.memset.stream = 0; break;
		case CUA_OP_MEMCPY_DTOD: bi->u.dtod.stream = 0; break;
		case CUA_OP_MEMCPY_HTOD: bi->u.htod.data.ptr = p->htod_src; break; /* the daemon refuses host copies */
		default: break;
		}
	}
	*q = (struct cua_req_graph_create){0, *items, (uint32_t)b->n};
	return 0;
}

int
cua_graph_instantiate(cua_batch *b, cua_graph *out)
{
	cua_batch_item *items = NULL;
	cua_wire_arg *args = NULL;
	struct cua_req_graph_create q;
	struct cuac_reply rep;
	int r;

	memset(&rep, 0, sizeof(rep));
	if (out)
		out->id = 0;
	if (b == NULL || out == NULL)
		return cuac_fail(CUA_EBAD_ARGUMENT, "no graph builder or no place for the graph");
	if (b->n == 0) {
		r = cuac_fail(CUA_EBAD_ARGUMENT, "a graph needs at least one node");
		goto out;
	}
	if (create_request(b, &q, &items, &args) != 0) {
		r = cuac_fail(CUA_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = cuac_rpc(b->c, CUA_OP_GRAPH_CREATE, &q, true, &rep)) == 0)
		out->id = rep.w.body.graph_create.graph;
	cuac_reply_done(&rep);
out:
	free(items);
	free(args);
	cua_batch_free(b);
	return r;
}

/* One GRAPH_LAUNCH in flight. */
struct graph_launch {
	cua_client *c;
	cua_future *fut; /* NULL: fire-and-forget */
};

/* The end of one GRAPH_LAUNCH exchange (an NNG thread, no lock held): its future, or the client's deferred
 * error when it had none. */
static void
launch_done(void *arg, int status, const char *why, const cua_wire_reply *rep)
{
	struct graph_launch *p = arg;
	cua_client *c = p->c;
	char msg[512] = "";
	if (status == 0 && rep->status != CUA_OK) {
		status = (int)rep->status;
		snprintf(msg, sizeof(msg), "%.*s", (int)rep->message.len, (const char *)rep->message.ptr);
	} else if (status != 0) {
		snprintf(msg, sizeof(msg), "%s", why ? why : cua_strerror(status));
	}
	pthread_mutex_lock(&c->lock);
	if (p->fut != NULL) {
		cuac_future_item_done(p->fut, 0, status, msg, strlen(msg));
	} else {
		cuac_defer_locked(c, status, msg, strlen(msg));
	}
	c->inflight--;
	cuac_flush_locked(c);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	free(p);
}

int
cua_graph_launch(cua_client *c, cua_graph g, cua_stream s, cua_future **out)
{
	struct graph_launch *p = calloc(1, sizeof(*p));
	int r;
	if (out)
		*out = NULL;
	if (p == NULL)
		return cuac_fail(CUA_ENOMEM, "out of memory");
	p->c = c;
	if (out && (p->fut = cuac_future_new(c, 1)) == NULL) {
		free(p);
		return cuac_fail(CUA_ENOMEM, "out of memory");
	}
	cua_future *fut = p->fut; /* p is launch_done's once sent */
	struct cua_req_graph_launch q = {g.id, cuac_stream(c, s), out ? 0 : CUA_FLAG_NO_WAIT};
	cuac_wait_sent(c); /* launches submitted before it go out first: on one stream they run first */
	pthread_mutex_lock(&c->lock);
	/* in flight like a batch, and bounded like them: the daemon answers QUOTA past --session-pending */
	while (c->inflight >= CUAC_MAX_INFLIGHT_BATCHES)
		pthread_cond_wait(&c->cond, &c->lock);
	r = cuac_send_async(c, CUA_OP_GRAPH_LAUNCH, &q, launch_done, p);
	if (r == 0)
		c->inflight++; /* counted like a batch: cua_synchronize waits for its reply */
	else if (fut != NULL)
		cuac_future_item_done(fut, 0, r, "not sent", 8); /* done: freed below */
	pthread_mutex_unlock(&c->lock);
	if (r != 0) {
		cua_future_free(fut);
		free(p);
		return cuac_fail(r, "%s",
				 r == CUA_ESESSION_LOST ? CUAC_SESSION_LOST_WHY : "cannot send the graph launch");
	}
	if (out)
		*out = fut;
	return 0;
}

int
cua_graph_set_kernel_args(cua_client *c, cua_graph g, uint32_t node, cua_launch *l)
{
	cua_wire_arg *args = NULL;
	int r;
	if (l == NULL)
		return cuac_fail(CUA_EBAD_ARGUMENT, "no launch");
	if (l->error) {
		r = l->error;
		goto out;
	}
	if ((args = calloc(l->nargs ? l->nargs : 1, sizeof(*args))) == NULL) {
		r = cuac_fail(CUA_ENOMEM, "out of memory");
		goto out;
	}
	cuac_launch_args(l, args);
	struct cua_req_graph_set_args q = {g.id, node, args, (uint32_t)l->nargs};
	r = cuac_call(c, CUA_OP_GRAPH_SET_ARGS, &q);
out:
	free(args);
	cua_launch_free(l);
	return r;
}

int
cua_graph_destroy(cua_client *c, cua_graph g)
{
	struct cua_req_graph_destroy q = {g.id};
	return cuac_call(c, CUA_OP_GRAPH_DESTROY, &q);
}
