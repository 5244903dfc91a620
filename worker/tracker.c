/*
 * tracker.c — requests' outcomes and completion records: a request's tracker (core.h), each command's outcome,
 * the completion record written when the last hold on the tracker is dropped, and the exits on a sticky device
 * fault. The lowest layer of the worker core: it calls nothing else of worker/ (core.h, "Layers").
 */
#include "config.h"

#include "core.h"

#include "cua_clock.h"
#include "cua_log.h"
#include "ring.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exit status of a worker that stopped on a sticky fault (the front-end restarts it). */
#define WORKER_EXIT_FAULT 3

/* ------------------------------------------------------------------ outcomes */

void
wk_item_set(struct wk *w, struct tracker *t, uint32_t idx, uint32_t status, uint64_t value, const char *detail)
{
	struct titem *it = &t->items[idx];
	char *d = detail && *detail ? strdup(detail) : NULL, *old;
	pthread_mutex_lock(&w->cpl_lock);
	it->status = status;
	it->value = value;
	old = it->detail;
	it->detail = d;
	pthread_mutex_unlock(&w->cpl_lock);
	free(old);
}

void
wk_item_result(struct wk *w, struct tracker *t, uint32_t idx, uint64_t value, void *data, uint32_t data_len)
{
	struct titem *it = &t->items[idx];
	pthread_mutex_lock(&w->cpl_lock);
	it->value = value;
	void *old = it->data;
	it->data = data;
	it->data_len = data ? data_len : 0;
	pthread_mutex_unlock(&w->cpl_lock);
	free(old);
}

void
wk_report(struct wk *w, struct wk_tag tag, uint32_t status, const char *detail)
{
	wk_item_set(w, tag.t, tag.idx, status, 0, detail);
}

static const char *
item_detail(const struct titem *it)
{
	return it->detail ? it->detail : it->status ? cua_strerror((int)it->status) : NULL;
}

/* The length of an item's detail in its completion: at most cap bytes. */
static uint32_t
detail_len(const struct titem *it, size_t cap)
{
	const char *d = item_detail(it);
	size_t n = d ? strlen(d) : 0;
	return (uint32_t)(n < cap ? n : cap);
}

static size_t
cpl_size(const struct tracker *t, size_t cap)
{
	size_t n = sizeof(struct wcpl_req);
	for (uint32_t i = 0; i < t->ncmds; i++)
		n += sizeof(struct wcpl) + wrec_align8(detail_len(&t->items[i], cap) + t->items[i].data_len);
	return n;
}

/*
 * The longest detail each item's completion may carry so that t's record fits the ring: all of them when they
 * fit (always, but for a batch of thousands of failures with long messages), else cut to an equal share. A
 * worker that could not write a completion would have to end, taking every session's context with it.
 */
static size_t
detail_cap(const struct wk *w, const struct tracker *t)
{
	size_t max = ring_max_record(w->cpl), cap = CUA_ERR_DETAIL_MAX;
	while (cap > 0 && cpl_size(t, cap) > max)
		cap /= 2;
	return cap;
}

/* Room for len bytes in the completion ring; waits for the front-end to read. Caller holds cpl_lock. */
static unsigned char *
cpl_reserve(struct wk *w, size_t len)
{
	unsigned char *p;
	while ((p = ring_reserve(w->cpl, len)) == NULL) {
		if (len > ring_max_record(w->cpl)) {
			log_error("completion of %zu bytes exceeds the ring", len);
			_exit(1);
		}
		ring_wait_space(w->cpl, len, 100);
	}
	return p;
}

/* Writes t's completion record. Caller holds cpl_lock. */
static void
emit(struct wk *w, struct tracker *t, uint32_t fatal)
{
	size_t cap = detail_cap(w, t), len = cpl_size(t, cap);
	unsigned char *p = cpl_reserve(w, len);
	struct wcpl_req h = {t->req,      t->ncmds,
			     fatal,       atomic_load(&t->busy_ns),
			     t->t_read,   atomic_load(&t->t_issued),
			     cua_now_ns()};
	memcpy(p, &h, sizeof(h));
	size_t off = sizeof(h);
	for (uint32_t i = 0; i < t->ncmds; i++) {
		const struct titem *it = &t->items[i];
		const char *d = item_detail(it);
		struct wcpl c = {it->status, detail_len(it, cap), it->data_len, 0, it->value};
		memcpy(p + off, &c, sizeof(c));
		off += sizeof(c);
		if (c.detail_len)
			memcpy(p + off, d, c.detail_len);
		if (c.data_len)
			memcpy(p + off + c.detail_len, it->data, c.data_len);
		off += wrec_align8(c.detail_len + c.data_len);
	}
	t->emitted = true;
	ring_commit(w->cpl, len);
}

void
wk_emit_uniform(struct wk *w, uint64_t req, uint32_t ncmds, uint32_t status, const char *detail, const void *data,
		uint32_t data_len)
{
	uint32_t dlen = detail ? (uint32_t)strlen(detail) : 0;
	size_t one = sizeof(struct wcpl) + wrec_align8(dlen + data_len);
	size_t room = (ring_max_record(w->cpl) - sizeof(struct wcpl_req)) / one;
	if (ncmds > room)
		ncmds = (uint32_t)room;
	size_t len = sizeof(struct wcpl_req) + ncmds * one;
	pthread_mutex_lock(&w->cpl_lock);
	unsigned char *p = cpl_reserve(w, len);
	struct wcpl_req h = {req, ncmds, 0, 0};
	memcpy(p, &h, sizeof(h));
	for (uint32_t i = 0; i < ncmds; i++) {
		unsigned char *q = p + sizeof(h) + i * one;
		struct wcpl c = {status, dlen, data_len, 0, 0};
		memcpy(q, &c, sizeof(c));
		if (dlen)
			memcpy(q + sizeof(c), detail, dlen);
		if (data_len)
			memcpy(q + sizeof(c) + dlen, data, data_len);
	}
	ring_commit(w->cpl, len);
	pthread_mutex_unlock(&w->cpl_lock);
}

/* ------------------------------------------------------------------ trackers */

struct tracker *
wk_tracker_new(uint64_t req, uint32_t ncmds)
{
	struct tracker *t = calloc(1, sizeof(*t) + (size_t)ncmds * sizeof(struct titem));
	if (t == NULL)
		return NULL;
	t->req = req;
	t->ncmds = ncmds;
	t->t_read = cua_now_ns();
	atomic_init(&t->pending, 1);
	return t;
}

static void
tracker_free(struct tracker *t)
{
	for (uint32_t i = 0; i < t->ncmds; i++) {
		free(t->items[i].detail);
		free(t->items[i].data);
	}
	free(t);
}

void
wk_tracker_put(struct wk *w, struct tracker *t)
{
	if (atomic_fetch_sub(&t->pending, 1) != 1)
		return;
	pthread_mutex_lock(&w->cpl_lock);
	emit(w, t, 0);
	pthread_mutex_unlock(&w->cpl_lock);
	tracker_free(t);
}

void
wk_hold_done(struct wk *w, struct wk_tag tag)
{
	wk_tracker_put(w, tag.t);
}

/* ------------------------------------------------------------------ sticky faults */

/* Marks the unfinished commands of t after idx lost, and idx faulted. Caller holds cpl_lock. */
static void
blame(struct tracker *t, uint32_t idx, const char *detail)
{
	for (uint32_t i = idx + 1; i < t->ncmds; i++)
		if (t->items[i].status == CUA_OK)
			t->items[i].status = CUA_ECONTEXT_LOST;
	t->items[idx].status = CUA_EDEVICE;
	free(t->items[idx].detail);
	t->items[idx].detail = strdup(detail);
}

_Noreturn void
wk_fatal(struct wk *w, struct wk_tag tag, const char *detail)
{
	wk_fatal_many(w, &tag, 1, detail);
}

_Noreturn void
wk_fatal_many(struct wk *w, const struct wk_tag *tags, size_t n, const char *detail)
{
	log_error("sticky device fault: %s; %zu request(s) had work in flight; exiting so the front-end starts a "
		  "fresh worker",
		  detail, n);
	pthread_mutex_lock(&w->cpl_lock); /* held until exit: nothing else may complete after a fault */
	for (size_t i = 0; i < n; i++) {  /* every blamed command first: a request may be named more than once */
		struct titem *it = &tags[i].t->items[tags[i].idx];
		it->status = CUA_EDEVICE;
		free(it->detail);
		it->detail = strdup(detail);
	}
	size_t last = n;
	for (size_t i = 0; i < n; i++)
		if (!tags[i].t->emitted) {
			tags[i].t->emitted = true; /* first mention: its blamed command decides what is lost */
			last = i;
		}
	for (size_t i = 0; i < n; i++)
		tags[i].t->emitted = false;
	for (size_t i = 0; i < n; i++) {
		if (tags[i].t->emitted)
			continue;
		blame(tags[i].t, tags[i].idx, detail);
		emit(w, tags[i].t, i == last); /* the last record says fatal: the worker exits after it */
	}
	_exit(WORKER_EXIT_FAULT);
}
