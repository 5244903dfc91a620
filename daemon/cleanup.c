/*
 * cleanup.c — planning the release of what a closing session still holds on a device (see cleanup.h).
 */
#include "config.h"

#include "cleanup.h"
#include "cua_log.h"
#include "devlink.h"
#include "streampool.h"

static void
cleanup_cmd(struct request *r, uint32_t op, uint64_t id)
{
	struct wrec_release rec = {{op, 0}, id};
	if (plan_cmd(r, &rec, sizeof(rec), NULL, 0) < 0)
		log_error("out of memory: session %llu leaks a device object", (unsigned long long)r->s->id);
}

/* Plans the release of everything r's session still holds on r's device, in the passes of the handle kinds'
 * rows (session.h: graphs first, as they use the rest; streams, its pool streams with them, as they drain; then
 * modules — their functions go with them —, host buffers and events), then memory. Planned when the cleanup is
 * dispatched, not when the session closed: it runs after all of the session's work in flight (it is a
 * barrier), so whatever a completed MEM_FREE, MODULE_UNLOAD, … released has left the tables by then and is
 * not released twice, while objects whose releasing request never ran (dropped at close) are included. */
void
do_cleanup_plan(struct fe *fe, struct request *r)
{
	struct session *s = r->s;
	struct device *d = &fe->devs[r->dev];
	r->dep_gen = d->gen;
	for (unsigned pass = 0; pass < HK_RELEASE_PASSES; pass++) {
		if (pass == 1)
			do_spool_cleanup(fe, r, d);
		for (uint32_t i = 0; i < s->nslots; i++) {
			const struct hslot *h = &s->slots[i];
			const struct hkind_entry *k = hkind(h->kind);
			if (k == NULL || k->release_wrec == WR_NONE || k->release_pass != pass || h->dev != r->dev ||
			    h->stale || h->gen != d->gen)
				continue;
			cleanup_cmd(r, k->release_wrec, h->wid);
		}
	}
	for (uint32_t i = 0; i < s->nallocs; i++) {
		const struct alloc_rec *a = &s->allocs[i];
		if (a->dev == r->dev && !a->stale && a->gen == d->gen)
			cleanup_cmd(r, WR_MEM_FREE, a->addr);
	}
	r->planned = true;
}
