/*
 * streams.c — the core's streams: the table of live backend stream ids, the streams the request being issued
 * touched, their completion notices (asked of the backend directly, or handed to the submit threads' batches)
 * and the busy time they measure. Below the command handlers, above tracker.c and submit.c (core.h, "Layers").
 */
#include "config.h"

#include "core.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ notices and busy time */

static uint64_t
mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* sid's "last notice done" clock, or NULL when it has none (wk_stream_add makes them). Any thread. */
static _Atomic uint64_t *
done_at(struct wk *w, uint32_t sid)
{
	if (sid / WK_DONE_CHUNK >= WK_DONE_CHUNKS)
		return NULL;
	_Atomic uint64_t *c = atomic_load_explicit(&w->done_at[sid / WK_DONE_CHUNK], memory_order_acquire);
	return c ? &c[sid % WK_DONE_CHUNK] : NULL;
}

/*
 * Busy time, the measure tenants' weights are kept by (front-end: tenant.c). A request's work on a stream runs
 * between the later of two moments — its notice was asked for (the work had just been issued), or the
 * stream's previous notice was done (the work before it finished) — and its own notice being done: that span
 * is added to the request, for each stream it used. Notices of one stream are done in order, by one thread at
 * a time, so the stream's clock moves forward. What it measures is the stream's occupancy: time the work
 * waited on the device for other streams' work counts too. Backends' notice callbacks, any thread.
 */
void
wk_notice(struct wk *w, uint32_t sid, struct wk_tag tag, wk_done_fn done)
{
	tag.sid = sid;
	tag.t0 = mono_ns();
	uint64_t prev = atomic_load(&tag.t->t_issued);
	while (prev < tag.t0 && !atomic_compare_exchange_weak(&tag.t->t_issued, &prev, tag.t0))
		;
	w->be->notify(w, sid, tag, done);
}

void
wk_notice_done(struct wk *w, struct wk_tag tag)
{
	uint64_t now = mono_ns(), from = tag.t0;
	_Atomic uint64_t *last = done_at(w, tag.sid);
	if (last != NULL) {
		uint64_t prev = atomic_exchange(last, now);
		from = prev > from ? prev : from;
	}
	if (now > from)
		atomic_fetch_add(&tag.t->busy_ns, now - from);
	wk_tracker_put(w, tag.t);
}

/* ------------------------------------------------------------------ the stream table */

/* The core's record of live stream sid, or NULL. Main thread. */
static struct wk_stream *
stream_at(const struct wk *w, uint32_t sid)
{
	return cua_idmap_find(&w->streams, sid);
}

int
wk_stream_add(struct wk *w, uint32_t sid)
{
	struct wk_stream *s = stream_at(w, sid);
	if (s == NULL) {
		if ((s = calloc(1, sizeof(*s))) == NULL)
			return CUA_ENOMEM;
		if (cua_idmap_set(&w->streams, sid, s) != 0) {
			free(s);
			return CUA_ENOMEM;
		}
	}
	*s = (struct wk_stream){0};
	if (sid / WK_DONE_CHUNK < WK_DONE_CHUNKS && atomic_load(&w->done_at[sid / WK_DONE_CHUNK]) == NULL) {
		_Atomic uint64_t *c = calloc(WK_DONE_CHUNK, sizeof(*c));
		if (c != NULL) /* else its work is timed from its notices */
			atomic_store_explicit(&w->done_at[sid / WK_DONE_CHUNK], c, memory_order_release);
	}
	_Atomic uint64_t *last = done_at(w, sid);
	if (last != NULL)
		atomic_store(last, 0);
	return 0;
}

bool
wk_stream_live(const struct wk *w, uint32_t sid)
{
	return stream_at(w, sid) != NULL;
}

void
wk_streams_fini(struct wk *w)
{
	wk_idmap_fini_each(&w->streams, wk_free_obj, NULL);
	free(w->touched);
	w->touched = NULL;
	w->ntouched = w->touched_cap = 0;
	for (size_t i = 0; i < WK_DONE_CHUNKS; i++)
		free(atomic_exchange(&w->done_at[i], NULL));
}

/* ------------------------------------------------------------------ the streams a request touched */

bool
wk_stream_touched(const struct wk *w, uint32_t sid)
{
	const struct wk_stream *s = stream_at(w, sid);
	return s != NULL && s->mark == w->serial;
}

int
wk_touch(struct wk *w, uint32_t sid, uint32_t idx)
{
	struct wk_stream *s = stream_at(w, sid);
	if (s == NULL)
		return CUA_ENOT_FOUND; /* not live: nothing to note (its notice, asked at once, finds nothing queued) */
	if (s->mark == w->serial)
		return 0;
	if (w->ntouched == w->touched_cap) {
		size_t cap = w->touched_cap ? 2 * w->touched_cap : 16;
		struct wk_touch *n = realloc(w->touched, cap * sizeof(*n));
		if (n == NULL)
			return CUA_ENOMEM;
		w->touched = n;
		w->touched_cap = cap;
	}
	w->touched[w->ntouched++] = (struct wk_touch){sid, idx};
	s->mark = w->serial;
	return 0;
}

void
wk_notify(struct wk *w, struct tracker *t, uint32_t sid, uint32_t blame_idx)
{
	atomic_fetch_add(&t->pending, 1);
	wk_notice(w, sid, (struct wk_tag){t, blame_idx, 0, 0}, wk_notice_done);
}

void
wk_notify_touched(struct wk *w)
{
	for (size_t i = 0; i < w->ntouched; i++) {
		const struct wk_touch *k = &w->touched[i];
		if (wk_stream_touched(w, k->sid))
			wk_notify(w, w->issuing, k->sid, k->blame);
	}
	w->ntouched = 0;
}

void
wk_stream_retire(struct wk *w, uint32_t sid)
{
	if (wk_stream_touched(w, sid))
		for (size_t i = 0; i < w->ntouched; i++)
			if (w->touched[i].sid == sid) {
				wk_notify(w, w->issuing, sid, w->touched[i].blame);
				break;
			}
	free(cua_idmap_remove(&w->streams, sid));
}

void
wk_flush(struct wk *w)
{
	for (size_t i = 0; i < w->ntouched; i++) {
		const struct wk_touch *k = &w->touched[i];
		if (!wk_stream_touched(w, k->sid))
			continue;
		atomic_fetch_add(&w->issuing->pending, 1);
		wksub_notice(w->sub, k->sid, (struct wk_tag){w->issuing, k->blame});
	}
	w->ntouched = 0;
	w->serial++;
	wksub_push(w->sub, w->alone);
}

void
wk_after_owner(struct wk *w, uint32_t sid, uint32_t next)
{
	if (w->sub == NULL || wksub_owner(w->sub, sid) == wksub_owner(w->sub, next))
		return; /* one thread issues both, in order */
	wk_flush(w);
	wksub_drain(w->sub, (int)wksub_owner(w->sub, sid));
}
