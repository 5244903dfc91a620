/*
 * session.c — sessions (one per client connection), their handle tables and allocation tables.
 * All functions expect fe->lock held.
 */
#include "config.h"

#include "cua_log.h"
#include "daemon.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOT_MAX 0xffffffu

struct session *
do_session_new(struct fe *fe, uint32_t pipe)
{
	struct session *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	s->id = ++fe->next_session;
	s->pipe = pipe;
	s->next_seq = 1;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->tag_salt = (uint16_t)((uint64_t)ts.tv_nsec * 2654435761u ^ s->id * 40503u);
	s->next = fe->sessions;
	fe->sessions = s;
	fe->nsessions++;
	return s;
}

struct session *
do_session_by_pipe(struct fe *fe, uint32_t pipe)
{
	for (struct session *s = fe->sessions; s; s = s->next)
		if (s->pipe == pipe && !s->closing && !s->pipe_gone)
			return s;
	return NULL;
}

void
do_ready_remove(struct fe *fe, struct session *s)
{
	if (!s->in_ready)
		return;
	if (s->rnext == s) {
		fe->ready = NULL;
	} else {
		s->rprev->rnext = s->rnext;
		s->rnext->rprev = s->rprev;
		if (fe->ready == s)
			fe->ready = s->rnext;
	}
	s->in_ready = false;
}

void
do_session_maybe_free(struct fe *fe, struct session *s)
{
	if (!s->closing || s->in_flight > 0 || s->qhead != NULL || s->cleanup_pending > 0)
		return;
	if (fe->dispatching) { /* the dispatcher still holds a pointer to s: free it after its pass */
		if (!s->zombie) {
			s->zombie = true;
			s->znext = fe->zombies;
			fe->zombies = s;
		}
		return;
	}
	do_ready_remove(fe, s);
	for (struct session **pp = &fe->sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	fe->nsessions--;
	for (uint32_t i = 0; i < s->nslots; i++)
		free(s->slots[i].params);
	free(s->slots);
	free(s->allocs);
	log_debug("session %llu freed", (unsigned long long)s->id);
	free(s);
}

void
do_session_close(struct fe *fe, struct session *s)
{
	if (s->closing)
		return;
	/* requests waiting for a predecessor that will never come: answer them so their contexts recycle
	 * (before closing is set, so that answering them cannot free the session under us) */
	while (s->parked) {
		struct request *r = s->parked;
		s->parked = r->qnext;
		s->nparked--;
		r->qnext = NULL;
		if (r->refused) { /* already answered */
			request_free(r);
			continue;
		}
		r->status = CUA_ECLOSED;
		r->status_msg = strdup("the connection closed before this request's turn");
		do_finish(fe, r);
	}
	/* queued work nobody will collect: answer it now (the replies go nowhere; the contexts recycle) */
	struct request **pp = &s->qhead, *last = NULL;
	while (*pp) {
		struct request *r = *pp;
		if (r->internal) {
			last = r;
			pp = &r->qnext;
			continue;
		}
		*pp = r->qnext;
		s->queued--;
		r->qnext = NULL;
		r->status = CUA_ECLOSED;
		r->status_msg = strdup("the connection closed before this request ran");
		do_finish(fe, r);
	}
	s->qtail = last;
	s->closing = true;
	log_debug("session %llu closing: %u in flight, %u queued", (unsigned long long)s->id, s->in_flight, s->queued);
	/* Release its device objects through the workers, after its queued work. */
	for (int d = 0; d < fe->ndevs; d++) {
		struct request *r = do_cleanup_request(fe, s, d);
		if (r == NULL)
			continue;
		s->cleanup_pending++;
		if (s->qtail)
			s->qtail->qnext = r;
		else
			s->qhead = r;
		s->qtail = r;
		s->queued++;
	}
	/* Host-side bookkeeping does not wait: quotas and status see the session gone at once. */
	for (uint32_t i = 0; i < s->nallocs; i++)
		if (!s->allocs[i].stale) {
			struct device *dv = &fe->devs[s->allocs[i].dev];
			dv->allocations--;
			dv->alloc_bytes -= s->allocs[i].len;
		}
	memset(&s->counts, 0, sizeof(s->counts));
	do_wake_dispatcher(fe);
	do_session_maybe_free(fe, s);
}

int
do_handle_new(struct session *s, unsigned kind, int dev, uint32_t gen, uint64_t wid, uint64_t *h)
{
	uint32_t slot = s->nslots;
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->slots[i].kind == 0) {
			slot = i;
			break;
		}
	if (slot == s->nslots) {
		if (s->nslots == SLOT_MAX)
			return CUA_EQUOTA;
		if (s->nslots == s->slots_cap) {
			uint32_t cap = s->slots_cap ? 2 * s->slots_cap : 16;
			struct hslot *n = realloc(s->slots, cap * sizeof(*n));
			if (n == NULL)
				return CUA_ENOMEM;
			s->slots = n;
			s->slots_cap = cap;
		}
		memset(&s->slots[slot], 0, sizeof(s->slots[slot]));
		s->slots[slot].tag = (uint16_t)(s->tag_salt + slot * 7919u);
		s->nslots++;
	}
	struct hslot *hs = &s->slots[slot];
	uint16_t tag = (uint16_t)(hs->tag + 1);
	memset(hs, 0, sizeof(*hs));
	hs->kind = (uint8_t)kind;
	hs->dev = (uint8_t)dev;
	hs->tag = tag;
	hs->gen = gen;
	hs->wid = wid;
	s->nhandles++;
	*h = cua_handle_make(kind, (unsigned)dev, gen, tag, slot);
	return 0;
}

static const char *
kind_name(unsigned kind)
{
	return kind == CUA_HK_MODULE ? "module" : kind == CUA_HK_FUNCTION ? "function" : kind == CUA_HK_STREAM ? "stream" : "host buffer";
}

int
do_handle_get(struct fe *fe, struct session *s, uint64_t h, unsigned kind, struct hslot **out, cua_err *e)
{
	uint32_t slot = cua_handle_slot(h);
	if (cua_handle_kind(h) != kind || slot >= s->nslots || s->slots[slot].kind != kind ||
	    s->slots[slot].tag != cua_handle_tag(h) || s->slots[slot].dev != cua_handle_dev(h) ||
	    (s->slots[slot].gen & CUA_HANDLE_GEN_MASK) != cua_handle_gen(h))
		return cua_err_set(e, CUA_ENOT_FOUND, "%s handle 0x%llx is not an object of this session", kind_name(kind),
				   (unsigned long long)h);
	struct hslot *hs = &s->slots[slot];
	if (hs->stale || hs->gen != fe->devs[hs->dev].gen)
		return cua_err_set(e, CUA_ECONTEXT_LOST,
				   "%s handle 0x%llx belongs to a GPU context that was lost (device %u restarted); recreate it",
				   kind_name(kind), (unsigned long long)h, hs->dev);
	*out = hs;
	return 0;
}

void
do_handle_free(struct session *s, struct hslot *hs)
{
	free(hs->params);
	uint16_t tag = hs->tag;
	memset(hs, 0, sizeof(*hs));
	hs->tag = tag; /* kept so the next use of the slot gets a new tag */
	s->nhandles--;
}

/* Index of the last allocation with addr <= p, or -1. */
static int64_t
alloc_floor(const struct session *s, uint64_t p)
{
	int64_t lo = 0, hi = (int64_t)s->nallocs - 1, best = -1;
	while (lo <= hi) {
		int64_t mid = (lo + hi) / 2;
		if (s->allocs[mid].addr <= p) {
			best = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return best;
}

int
do_alloc_find(struct fe *fe, struct session *s, uint64_t p, uint64_t len, int *dev, struct alloc_rec **rec,
	      cua_err *e)
{
	int64_t i = alloc_floor(s, p);
	/* Among overlapping records (a stale one and a live one reusing its addresses) prefer the live one. */
	for (int64_t k = i; k >= 0 && k > i - 4; k--) {
		struct alloc_rec *a = &s->allocs[k];
		if (p - a->addr < a->len && len <= a->len - (p - a->addr) && !a->stale &&
		    a->gen == fe->devs[a->dev].gen) {
			*dev = a->dev;
			if (rec)
				*rec = a;
			return 0;
		}
	}
	for (int64_t k = i; k >= 0 && k > i - 4; k--) {
		struct alloc_rec *a = &s->allocs[k];
		if (p - a->addr < a->len && (a->stale || a->gen != fe->devs[a->dev].gen))
			return cua_err_set(e, CUA_ECONTEXT_LOST,
					   "device pointer 0x%llx is in memory of a GPU context that was lost; allocate again",
					   (unsigned long long)p);
	}
	return cua_err_set(e, CUA_EBAD_ARGUMENT,
			   "device pointer 0x%llx (%llu bytes) is not inside an allocation of this session",
			   (unsigned long long)p, (unsigned long long)len);
}

int
do_alloc_add(struct session *s, int dev, uint32_t gen, uint64_t addr, uint64_t len)
{
	if (s->nallocs == s->allocs_cap) {
		uint32_t cap = s->allocs_cap ? 2 * s->allocs_cap : 16;
		struct alloc_rec *n = realloc(s->allocs, cap * sizeof(*n));
		if (n == NULL)
			return CUA_ENOMEM;
		s->allocs = n;
		s->allocs_cap = cap;
	}
	int64_t i = alloc_floor(s, addr) + 1;
	memmove(&s->allocs[i + 1], &s->allocs[i], (s->nallocs - (uint32_t)i) * sizeof(*s->allocs));
	s->allocs[i] = (struct alloc_rec){addr, len, gen, (uint8_t)dev, false};
	s->nallocs++;
	return 0;
}

void
do_alloc_remove(struct session *s, struct alloc_rec *rec)
{
	size_t i = (size_t)(rec - s->allocs);
	memmove(&s->allocs[i], &s->allocs[i + 1], (s->nallocs - i - 1) * sizeof(*s->allocs));
	s->nallocs--;
}

void
do_sessions_mark_stale(struct fe *fe, struct device *d, uint32_t old_gen)
{
	for (struct session *s = fe->sessions; s; s = s->next) {
		for (uint32_t i = 0; i < s->nallocs; i++) {
			struct alloc_rec *a = &s->allocs[i];
			if (a->dev == d->index && a->gen == old_gen && !a->stale) {
				a->stale = true;
				if (!s->closing) {
					s->counts.allocations--;
					s->counts.alloc_bytes -= a->len;
				}
			}
		}
		for (uint32_t i = 0; i < s->nslots; i++) {
			struct hslot *h = &s->slots[i];
			if (h->kind && h->dev == d->index && h->gen == old_gen && !h->stale) {
				h->stale = true;
				if (!s->closing) {
					if (h->kind == CUA_HK_MODULE)
						s->counts.modules--;
					else if (h->kind == CUA_HK_FUNCTION)
						s->counts.functions--;
					else if (h->kind == CUA_HK_STREAM)
						s->counts.streams--;
				}
			}
		}
	}
	d->allocations = 0;
	d->alloc_bytes = 0;
}
