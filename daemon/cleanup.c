/*
 * cleanup.c — planning the release of what a closing session still holds on a device (see cleanup.h).
 */
#include "config.h"

#include "cleanup.h"
#include "cmd.h"
#include "cua_log.h"
#include "streampool.h"

static void
cleanup_cmd(struct request *r, void *rec, size_t len, uint32_t op)
{
	((struct wrec_hdr *)rec)->op = op;
	if (plan_cmd(r, rec, len, NULL, 0) < 0)
		log_error("out of memory: session %llu leaks a device object", (unsigned long long)r->s->id);
}

/* Plans the release of everything r's session still holds on r's device: graphs first (they use the rest),
 * streams (they drain), then modules (their functions go with them), host buffers and events, then memory.
 * Planned when the cleanup is
 * dispatched, not when the session closed: it runs after all of the session's work in flight (it is a
 * barrier), so whatever a completed MEM_FREE, MODULE_UNLOAD, … released has left the tables by then and is
 * not released twice, while objects whose releasing request never ran (dropped at close) are included. */
void
do_cleanup_plan(struct fe *fe, struct request *r)
{
	struct session *s = r->s;
	struct device *d = &fe->devs[r->dev];
	r->dep_gen = d->gen;
	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct hslot *h = &s->slots[i];
		struct wrec_graph_destroy gd = {{0, 0}, h->wid};
		if (h->kind == CUA_HK_GRAPH && h->dev == r->dev && !h->stale && h->gen == d->gen)
			cleanup_cmd(r, &gd, sizeof(gd), WR_GRAPH_DESTROY);
	}
	do_spool_cleanup(fe, r, d);
	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct hslot *h = &s->slots[i];
		struct wrec_stream st = {{0, 0}, (uint32_t)h->wid, 0};
		if (h->kind == CUA_HK_STREAM && h->dev == r->dev && !h->stale && h->gen == d->gen)
			cleanup_cmd(r, &st, sizeof(st), WR_STREAM_DESTROY);
	}
	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct hslot *h = &s->slots[i];
		struct wrec_module_unload mu = {{0, 0}, h->wid};
		struct wrec_host_unregister hu = {{0, 0}, h->wid};
		struct wrec_event ev = {{0, 0}, h->wid};
		if (h->dev != r->dev || h->stale || h->gen != d->gen)
			continue;
		if (h->kind == CUA_HK_MODULE)
			cleanup_cmd(r, &mu, sizeof(mu), WR_MODULE_UNLOAD);
		else if (h->kind == CUA_HK_HOSTBUF)
			cleanup_cmd(r, &hu, sizeof(hu), WR_HOST_UNREGISTER);
		else if (h->kind == CUA_HK_EVENT)
			cleanup_cmd(r, &ev, sizeof(ev), WR_EVENT_DESTROY);
	}
	for (uint32_t i = 0; i < s->nallocs; i++) {
		const struct alloc_rec *a = &s->allocs[i];
		struct wrec_mem_free mf = {{0, 0}, a->addr};
		if (a->dev == r->dev && !a->stale && a->gen == d->gen)
			cleanup_cmd(r, &mf, sizeof(mf), WR_MEM_FREE);
	}
	r->planned = true;
}
