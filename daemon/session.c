/*
 * session.c — sessions and their tables (see session.h). All functions expect fe->lock held.
 */
#include "config.h"

#include "auth.h"
#include "cua_log.h"
#include "devlink.h"
#include "session.h"
#include "tenant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOT_MAX 0xffffffu
#define CUAD_TOMBS 4096u /* pipes remembered after they left */

struct pipe_tomb {
	uint32_t pipe;
	STAILQ_ENTRY(pipe_tomb) fifo;
	UT_hash_handle hh;
};

/* Frees s's per-device parts (any of them may be NULL). */
static void
session_dev_free(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock)
{
	for (int i = 0; s->spool != NULL && i < fe->ndevs; i++)
		free(s->spool[i].wid);
	free(s->dev_bytes);
	free(s->dev_resv);
	free(s->dev_in_flight);
	free(s->worker);
	free(s->spool);
}

struct session *
do_session_new(struct fe *fe, uint32_t pipe)
{
	struct session *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return NULL;
	size_t n = fe->ndevs > 0 ? (size_t)fe->ndevs : 1;
	s->dev_bytes = calloc(n, sizeof(*s->dev_bytes));
	s->dev_resv = calloc(n, sizeof(*s->dev_resv));
	s->dev_in_flight = calloc(n, sizeof(*s->dev_in_flight));
	s->worker = calloc(n, sizeof(*s->worker));
	s->spool = calloc(n, sizeof(*s->spool));
	if (s->dev_bytes == NULL || s->dev_resv == NULL || s->dev_in_flight == NULL || s->worker == NULL ||
	    s->spool == NULL) {
		session_dev_free(fe, s);
		free(s);
		return NULL;
	}
	s->id = ++fe->next_session;
	s->pipe = pipe;
	s->next_seq = 1;
	s->born_ms = cua_now_ms();
	s->isolation = fe->cfg.isolation;
	TAILQ_INIT(&s->queue);
	TAILQ_INIT(&s->parked);
	fdtab_init(&s->fds);
	s->tag_salt = (uint16_t)(cua_now_ns() % 1000000000u * 2654435761u ^ s->id * 40503u);
	TAILQ_INSERT_HEAD(&fe->sessions, s, link);
	HASH_ADD(hh, fe->by_pipe, pipe, sizeof(s->pipe), s);
	fe->nsessions++;
	return s;
}

void
do_log_ctx(const struct session *s, uint64_t req)
{
	cua_log_ctx_set(s ? s->id : 0, s && s->tenant ? s->tenant->name : NULL, req);
}

int
do_session_log_level(const struct session *s)
{
	return s->operator? CUA_LOG_DEBUG : CUA_LOG_INFO;
}

const char *
do_session_from(const struct session *s, char *buf, size_t len)
{
	buf[0] = '\0';
	if (s->ident.addr[0])
		snprintf(buf, len, " from %s", s->ident.addr);
	return buf;
}

void
do_session_log_end(const struct session *s, uint64_t now_ms)
{
	char who[256], from[CUA_MAX_PEER_ADDR + 8];
	if (!s->hello) { /* refused or silent: its HELLO's refusal was logged, if it sent one */
		log_debug("session %llu closing before a HELLO was accepted", (unsigned long long)s->id);
		return;
	}
	cua_log_(do_session_log_level(s),
		 "session %llu: ended (%s) after %.1f s: %llu requests, %llu errors; it was %s%s, tenant %s",
		 (unsigned long long)s->id, s->kicked ? "disconnected by an operator" : "its connection closed",
		 (double)(now_ms - s->born_ms) / 1000, (unsigned long long)s->requests, (unsigned long long)s->errors,
		 auth_describe(s, who, sizeof(who)), do_session_from(s, from, sizeof(from)),
		 s->tenant ? s->tenant->name : "- (operator)");
}

struct session *
do_session_by_pipe(struct fe *fe, uint32_t pipe)
{
	struct session *s;
	HASH_FIND(hh, fe->by_pipe, &pipe, sizeof(pipe), s);
	return s != NULL && !s->closing && !s->pipe_gone ? s : NULL;
}

struct session *
do_session_by_id(struct fe *fe, uint64_t id)
{
	struct session *s;
	TAILQ_FOREACH(s, &fe->sessions, link)
	if (s->id == id)
		return s->hello && !s->closing && !s->pipe_gone ? s : NULL;
	return NULL;
}

void
do_session_free(struct fe *fe, struct session *s)
{
	TAILQ_REMOVE(&fe->sessions, s, link);
	struct session *h;
	HASH_FIND(hh, fe->by_pipe, &s->pipe, sizeof(s->pipe), h);
	if (h == s)
		HASH_DEL(fe->by_pipe, s);
	fe->nsessions--;
	/* Its memory leaves the device's counts only now: a closing session's allocations stay counted until its
	 * work drained and its cleanup freed them (or its own worker went), which is when it is freed. */
	for (uint32_t i = 0; i < s->nallocs; i++)
		if (!s->allocs[i].stale && s->allocs[i].dev < fe->ndevs) {
			fe->devs[s->allocs[i].dev].allocations--;
			fe->devs[s->allocs[i].dev].alloc_bytes -= s->allocs[i].len;
		}
	for (uint32_t i = 0; i < s->nslots; i++)
		free(s->slots[i].params);
	free(s->slots);
	free(s->allocs);
	free(s->globals);
	fdtab_clear(&s->fds);
	session_dev_free(fe, s);
	log_debug("session %llu freed", (unsigned long long)s->id);
	free(s);
}

uint32_t
do_sessions_live(struct fe *fe)
{
	uint32_t live = 0;
	struct session *s;
	TAILQ_FOREACH(s, &fe->sessions, link)
	live += s->hello && !s->closing && !s->pipe_gone; /* connections that never said HELLO are no sessions */
	return live;
}

void
do_pipe_tomb_add(struct fe *fe, uint32_t pipe)
{
	if (do_pipe_gone(fe, pipe))
		return;
	struct pipe_tomb *t;
	if (fe->ntombs >= CUAD_TOMBS) { /* recycle the oldest */
		t = STAILQ_FIRST(&fe->tomb_fifo);
		STAILQ_REMOVE_HEAD(&fe->tomb_fifo, fifo);
		HASH_DEL(fe->tombs, t);
		fe->ntombs--;
	} else if ((t = malloc(sizeof(*t))) == NULL) {
		return; /* forgetting a pipe only risks a session for a late message, freed when its reply fails */
	}
	t->pipe = pipe;
	STAILQ_INSERT_TAIL(&fe->tomb_fifo, t, fifo);
	HASH_ADD(hh, fe->tombs, pipe, sizeof(t->pipe), t);
	fe->ntombs++;
}

bool
do_pipe_gone(struct fe *fe, uint32_t pipe)
{
	struct pipe_tomb *t;
	HASH_FIND(hh, fe->tombs, &pipe, sizeof(pipe), t);
	return t != NULL;
}

void
do_pipe_tombs_free(struct fe *fe)
{
	struct pipe_tomb *t, *tmp;
	HASH_ITER(hh, fe->tombs, t, tmp)
	{
		HASH_DEL(fe->tombs, t);
		free(t);
	}
	STAILQ_INIT(&fe->tomb_fifo);
	fe->ntombs = 0;
}

/* ------------------------------------------------------------------ handles */

static int
slot_grow(struct session *s, uint32_t *slot) CUA_REQUIRES(cuad_fe_lock)
{
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
	*slot = s->nslots++;
	memset(&s->slots[*slot], 0, sizeof(s->slots[*slot]));
	s->slots[*slot].tag = (uint16_t)(s->tag_salt + *slot * 7919u);
	return 0;
}

int
do_handle_new(struct session *s, unsigned kind, int dev, uint32_t gen, uint64_t wid, uint64_t *h)
{
	uint32_t slot;
	if (s->free_slot != 0) {
		slot = s->free_slot - 1;
		s->free_slot = s->slots[slot].next_free;
	} else {
		int rc = slot_grow(s, &slot);
		if (rc != 0)
			return rc;
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

static const struct hkind_entry hkinds[] = {
	[CUA_HK_MODULE] = {"module", WR_MODULE_UNLOAD, 2, offsetof(struct session, counts.modules),
			   offsetof(struct session, module_bytes)},
	[CUA_HK_FUNCTION] = {"function", WR_NONE, 0, offsetof(struct session, counts.functions), 0},
	[CUA_HK_STREAM] = {"stream", WR_STREAM_DESTROY, 1, offsetof(struct session, counts.streams), 0},
	[CUA_HK_HOSTBUF] = {"host buffer", WR_HOST_UNREGISTER, 2, offsetof(struct session, host_buffers),
			    offsetof(struct session, host_bytes)},
	[CUA_HK_EVENT] = {"event", WR_EVENT_DESTROY, 2, offsetof(struct session, events), 0},
	[CUA_HK_GRAPH] = {"graph", WR_GRAPH_DESTROY, 0, 0, 0}, /* counted with their nodes by graphtab.c */
};

const struct hkind_entry *
hkind(unsigned kind)
{
	return kind < sizeof(hkinds) / sizeof(hkinds[0]) && hkinds[kind].name != NULL ? &hkinds[kind] : NULL;
}

static const char *
kind_name(unsigned kind)
{
	const struct hkind_entry *k = hkind(kind);
	return k != NULL ? k->name : "handle";
}

/* The uint64_t field of s at off. */
static uint64_t *
field(struct session *s, size_t off)
{
	return (uint64_t *)(void *)((char *)s + off);
}

struct hslot *
do_handle_slot(struct session *s, uint64_t h, unsigned kind)
{
	uint32_t slot = cua_handle_slot(h);
	if (cua_handle_kind(h) != kind || slot >= s->nslots || s->slots[slot].kind != kind ||
	    s->slots[slot].tag != cua_handle_tag(h) || s->slots[slot].dev != cua_handle_dev(h) ||
	    (s->slots[slot].gen & CUA_HANDLE_GEN_MASK) != cua_handle_gen(h))
		return NULL;
	return &s->slots[slot];
}

const char *
release_name(const struct release *rel, char *buf, size_t len)
{
	if (rel->seq != 0)
		snprintf(buf, len, "request seq %llu", (unsigned long long)rel->seq);
	else
		snprintf(buf, len, "an earlier unordered request");
	return buf;
}

int
do_handle_get(struct fe *fe, struct session *s, uint64_t h, unsigned kind, struct hslot **out, cua_err *e)
{
	struct hslot *hs = do_handle_slot(s, h, kind);
	char by[48];
	if (hs == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "%s handle 0x%llx is not an object of this session",
				   kind_name(kind), (unsigned long long)h);
	if (hs->release.req != 0)
		return cua_err_set(e, CUA_ENOT_FOUND, "%s handle 0x%llx was released by %s of this session",
				   kind_name(kind), (unsigned long long)h, release_name(&hs->release, by, sizeof(by)));
	if (hs->stale || hs->gen != do_session_gen(fe, s, hs->dev))
		return cua_err_set(e, CUA_ECONTEXT_LOST,
				   "%s handle 0x%llx belongs to a GPU context that was lost (device %u restarted); "
				   "recreate it",
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
	hs->next_free = s->free_slot;
	s->free_slot = (uint32_t)(hs - s->slots) + 1;
	s->nhandles--;
}

/* ------------------------------------------------------------------ allocations */

/* Index of the last allocation with addr <= p, or -1. */
static int64_t
alloc_floor(const struct session *s, uint64_t p) CUA_REQUIRES(cuad_fe_lock)
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

static bool
alloc_live(struct fe *fe, const struct session *s, const struct alloc_rec *a) CUA_REQUIRES(cuad_fe_lock)
{
	return !a->stale && a->gen == do_session_gen(fe, s, a->dev);
}

/* do_alloc_find for the session's module globals: 0 (found, usable), -1 (no global holds p), or a status. A live
 * global wins over a stale or released one at the same address (a new context or module may reuse it). */
static int
global_find(struct fe *fe, struct session *s, uint64_t p, uint64_t len, int *dev, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct global_rec *stale = NULL, *released = NULL;
	char by[48];
	for (uint32_t i = 0; i < s->nglobals; i++) {
		const struct global_rec *g = &s->globals[i];
		const struct hslot *m = &s->slots[g->module_slot];
		if (p < g->addr || p - g->addr >= g->len)
			continue;
		if (m->stale || m->gen != do_session_gen(fe, s, m->dev)) {
			stale = g;
			continue;
		}
		if (m->release.req != 0) {
			released = g;
			continue;
		}
		if (len > g->len - (p - g->addr))
			return cua_err_set(e, CUA_EBAD_ARGUMENT,
					   "device pointer 0x%llx (%llu bytes) runs past the end of its %llu-byte "
					   "module global",
					   (unsigned long long)p, (unsigned long long)len, (unsigned long long)g->len);
		*dev = m->dev;
		return 0;
	}
	if (released != NULL)
		return cua_err_set(e, CUA_ENOT_FOUND,
				   "device pointer 0x%llx is in a global of a module unloaded by %s of this session",
				   (unsigned long long)p,
				   release_name(&s->slots[released->module_slot].release, by, sizeof(by)));
	if (stale != NULL)
		return cua_err_set(e, CUA_ECONTEXT_LOST,
				   "device pointer 0x%llx is in a module global of a lost GPU context; load it again",
				   (unsigned long long)p);
	return -1;
}

int
do_global_add(struct session *s, uint32_t module_slot, uint64_t addr, uint64_t len)
{
	for (uint32_t i = 0; i < s->nglobals; i++)
		if (s->globals[i].module_slot == module_slot && s->globals[i].addr == addr)
			return 0;
	if (s->nglobals == s->globals_cap) {
		uint32_t cap = s->globals_cap ? 2 * s->globals_cap : 8;
		struct global_rec *n = realloc(s->globals, cap * sizeof(*n));
		if (n == NULL)
			return CUA_ENOMEM;
		s->globals = n;
		s->globals_cap = cap;
	}
	s->globals[s->nglobals++] = (struct global_rec){addr, len, module_slot};
	return 0;
}

void
do_globals_forget(struct session *s, uint32_t module_slot)
{
	for (uint32_t i = 0; i < s->nglobals;)
		if (s->globals[i].module_slot == module_slot)
			s->globals[i] = s->globals[--s->nglobals];
		else
			i++;
}

int
do_alloc_find(struct fe *fe, struct session *s, uint64_t p, uint64_t len, int *dev, struct alloc_rec **rec, cua_err *e)
{
	struct alloc_rec *stale = NULL, *released = NULL;
	char by[48];
	/* Records that may hold p start at most alloc_max_len below it. Among overlapping records (a stale or
	 * released one and a live one reusing its addresses) the live one wins. */
	for (int64_t k = alloc_floor(s, p); k >= 0 && p - s->allocs[k].addr < s->alloc_max_len; k--) {
		struct alloc_rec *a = &s->allocs[k];
		if (p - a->addr >= a->len)
			continue;
		if (!alloc_live(fe, s, a)) {
			stale = a;
			continue;
		}
		if (a->release.req != 0) {
			released = a;
			continue;
		}
		if (len > a->len - (p - a->addr))
			break; /* live allocations never overlap: no other one holds p */
		*dev = a->dev;
		if (rec)
			*rec = a;
		return 0;
	}
	int grc = global_find(fe, s, p, len, dev, e);
	if (grc >= 0) {
		if (rec)
			*rec = NULL;
		return grc;
	}
	if (released != NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "device pointer 0x%llx is in memory freed by %s of this session",
				   (unsigned long long)p, release_name(&released->release, by, sizeof(by)));
	if (stale != NULL)
		return cua_err_set(e, CUA_ECONTEXT_LOST,
				   "device pointer 0x%llx is in memory of a GPU context that was lost; allocate again",
				   (unsigned long long)p);
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
	s->allocs[i] = (struct alloc_rec){addr, len, gen, (uint8_t)dev, false, {0, 0}};
	s->nallocs++;
	if (len > s->alloc_max_len)
		s->alloc_max_len = len;
	return 0;
}

void
do_alloc_remove(struct session *s, struct alloc_rec *rec)
{
	size_t i = (size_t)(rec - s->allocs);
	memmove(&s->allocs[i], &s->allocs[i + 1], (s->nallocs - i - 1) * sizeof(*s->allocs));
	s->nallocs--;
}

struct alloc_rec *
do_alloc_released(struct session *s, uint64_t addr, uint64_t req)
{
	for (int64_t k = alloc_floor(s, addr); k >= 0 && s->allocs[k].addr == addr; k--)
		if (s->allocs[k].release.req == req)
			return &s->allocs[k];
	return NULL;
}

static void
session_mark_stale(struct fe *fe, struct session *s, int dev, uint32_t old_gen) CUA_REQUIRES(cuad_fe_lock)
{
	for (uint32_t i = 0; i < s->nallocs; i++) {
		struct alloc_rec *a = &s->allocs[i];
		if (a->dev != dev || a->gen != old_gen || a->stale)
			continue;
		a->stale = true;
		s->counts.allocations--;
		s->counts.alloc_bytes -= a->len;
		s->dev_bytes[dev] -= a->len;
		fe->devs[dev].allocations--;
		fe->devs[dev].alloc_bytes -= a->len;
	}
	for (uint32_t i = 0; i < s->nslots; i++) {
		struct hslot *h = &s->slots[i];
		if (!h->kind || h->dev != dev || h->gen != old_gen || h->stale)
			continue;
		h->stale = true;
		const struct hkind_entry *k = hkind(h->kind);
		if (k != NULL && k->bytes_off != 0)
			*field(s, k->bytes_off) -= h->size;
		if (k != NULL && k->count_off != 0)
			*field(s, k->count_off) -= 1;
	}
}

void
do_sessions_mark_stale(struct fe *fe, const struct device *d, uint32_t old_gen)
{
	struct session *s;
	/* Only the sessions d serves: a shared worker's sessions in shared isolation, a session's own worker's
	 * owner. A session in the other mode has objects of the same generation number in another worker, and a
	 * retired worker (its owner gone) serves nobody: marking by generation alone let one session's fault in
	 * its own worker, after it disconnected, make every other session's objects CONTEXT_LOST. */
	TAILQ_FOREACH(s, &fe->sessions, link)
	{
		if (do_session_worker(fe, s, d->index) == d)
			session_mark_stale(fe, s, d->index, old_gen);
	}
}

struct device *
do_session_worker(struct fe *fe, const struct session *s, int dev)
{
	return s->isolation == ISO_SESSION ? s->worker[dev] : &fe->devs[dev];
}

uint32_t
do_session_gen(struct fe *fe, const struct session *s, int dev)
{
	const struct device *d = do_session_worker(fe, s, dev);
	return d != NULL ? d->gen : 0;
}
