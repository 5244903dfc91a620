/*
 * streampool.c — a session's own pool streams (see streampool.h).
 */
#include "config.h"

#include "cua_log.h"
#include "devlink.h"
#include "streampool.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(offsetof(struct wrec_copy, stream) == 8 && offsetof(struct wrec_dtod, stream) == 8 &&
		       offsetof(struct wrec_memset, stream) == 8 && offsetof(struct wrec_launch, stream) == 8 &&
		       offsetof(struct wrec_stream, stream) == 8,
	       "stream work keeps its stream right after the header");

static uint32_t
pool_size(const struct fe *fe, int dev)
{
	uint32_t n = fe->devs[dev].info.pool_streams ? fe->devs[dev].info.pool_streams : fe->cfg.pool_streams;
	return n < 1 ? 1 : n;
}

uint32_t
do_spool_ordered(struct fe *fe, struct request *r, int dev)
{
	(void)dev;
	if (r->s->isolation == ISO_SESSION) /* the worker's own pool stream 0 */
		return 0;
	r->uses_pool = true;
	return SPOOL_STREAM | 0;
}

uint32_t
do_spool_slot(struct fe *fe, struct request *r, int dev)
{
	uint32_t k = r->s->next_pool++ % pool_size(fe, dev);
	if (r->s->isolation == ISO_SESSION) /* the worker's own pool is the session's */
		return k;
	r->uses_pool = true;
	return SPOOL_STREAM | k;
}

/* Replaces every pool slot in r's stream work by the pool's stream id. */
static void
patch(struct request *r, const struct spool *p)
{
	size_t off = 0;
	for (uint32_t i = 0; i < r->ncmds; i++) {
		struct wrec_hdr h;
		uint32_t sid;
		memcpy(&h, r->cmds + off, sizeof(h));
		if (wrec_flags(h.op) & WRF_STREAM) {
			memcpy(&sid, r->cmds + off + 8, sizeof(sid));
			if (sid & SPOOL_STREAM) {
				sid = p->wid[(sid & ~SPOOL_STREAM) % p->n];
				memcpy(r->cmds + off + 8, &sid, sizeof(sid));
			}
		}
		off += h.size;
	}
	r->uses_pool = false;
}

enum spool_verdict
do_spool_prepare(struct fe *fe, struct request *r, struct device *d)
{
	struct session *s = r->s;
	struct spool *p = &s->spool[r->dev];
	uint32_t n = pool_size(fe, r->dev);
	if (!r->uses_pool)
		return SPOOL_READY;
	if (p->n > 0 && p->gen == d->gen) {
		patch(r, p);
		return SPOOL_READY;
	}
	if (p->creating)
		return SPOOL_WAIT;
	if (p->failed != CUA_OK) { /* the last attempt failed: this request says so, the next one tries again */
		request_fail(r, (int)p->failed, "the session's pool streams on device %d could not be created (%s)",
			     r->dev, cua_strerror_name((int)p->failed));
		p->failed = CUA_OK;
		return SPOOL_FAILED;
	}
	/* streams that admitted STREAM_CREATEs reserved count too (reserve.h) */
	uint64_t used = s->counts.streams + do_spool_live(fe, s) + s->resv[RES_STREAMS];
	if (used + n > fe->cfg.session_streams) {
		request_fail(r, CUA_EQUOTA,
			     "the session's %u pool streams on device %d would pass its stream limit (%llu of %u in "
			     "use); "
			     "destroy streams, or raise it with --session-streams",
			     n, r->dev, (unsigned long long)used, fe->cfg.session_streams);
		return SPOOL_FAILED;
	}
	return SPOOL_CREATE;
}

int
do_spool_plan(struct fe *fe, struct request *pr)
{
	uint32_t n = pool_size(fe, pr->dev);
	if (items_init(pr, n) != 0)
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		struct wrec_stream_create c = {{WR_STREAM_CREATE, 0}, fe->devs[pr->dev].info.prio_least, 0};
		if ((pr->items[i].cmd = plan_cmd(pr, &c, sizeof(c), NULL, 0)) < 0)
			return -1;
	}
	return 0;
}

void
do_spool_creating(struct session *s, int dev)
{
	s->spool[dev].creating = true;
	s->spool[dev].n = 0;
}

void
do_spool_created(struct fe *fe, struct request *pr)
{
	struct session *s = pr->s;
	struct spool *p = &s->spool[pr->dev];
	uint32_t st = request_status(pr);
	p->creating = false;
	if (st != CUA_OK) {
		p->failed = st;
		log_warn("session %llu: its pool streams on device %d: %s", (unsigned long long)s->id, pr->dev,
			 cua_strerror_name((int)st));
		return;
	}
	uint32_t *wid = realloc(p->wid, (pr->nitems ? pr->nitems : 1) * sizeof(*wid));
	if (wid == NULL) { /* the streams stay the worker's until the session's cleanup; the next request retries */
		p->failed = CUA_ENOMEM;
		log_error("session %llu: out of memory for its pool streams on device %d", (unsigned long long)s->id,
			  pr->dev);
		return;
	}
	for (uint32_t i = 0; i < pr->nitems; i++)
		wid[i] = (uint32_t)pr->items[i].value;
	p->wid = wid;
	p->n = pr->nitems;
	p->gen = pr->wdev->gen;
	(void)fe;
}

uint32_t
do_spool_live(struct fe *fe, const struct session *s)
{
	uint32_t n = 0;
	for (int i = 0; i < fe->ndevs; i++)
		if (s->spool[i].n > 0 && s->spool[i].gen == do_session_gen(fe, s, i))
			n += s->spool[i].n;
	return n;
}

void
do_spool_cleanup(struct fe *fe, struct request *r, const struct device *d)
{
	const struct spool *p = &r->s->spool[r->dev];
	(void)fe;
	if (p->n == 0 || p->gen != d->gen)
		return;
	for (uint32_t i = 0; i < p->n; i++) {
		struct wrec_stream st = {{WR_STREAM_DESTROY, 0}, p->wid[i], 0};
		if (plan_cmd(r, &st, sizeof(st), NULL, 0) < 0)
			log_error("out of memory: session %llu leaks a pool stream", (unsigned long long)r->s->id);
	}
}
