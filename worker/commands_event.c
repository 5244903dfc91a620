/*
 * commands_event.c — the worker's event commands (rows in commands.c): create, destroy, record, a stream's wait,
 * synchronize, elapsed time and query. The core keeps, per event, the stream of its last record (struct
 * wk_event), because two things must follow that record's issue, which a submit thread may not have done yet:
 * another record or a stream's wait issued by another thread (wk_after_owner waits for the owner), and the
 * synchronize's watch (handed to the same owner, after the record in its FIFO).
 *
 * RECORD, STREAM_WAIT_EVENT and SYNC are "held" stream commands (core.h): no stream notice; RECORD and WAIT
 * complete when issued, SYNC when the backend's event_notify calls back.
 */
#include "config.h"

#include "core.h"

#include <stdlib.h>
#include <string.h>

/* The core's record of event id when it is live, else NULL. Main thread. */
static struct wk_event *
event_at(struct wk *w, uint64_t id)
{
	return cua_idmap_find(&w->events, id);
}

static int
no_event(uint64_t id, cua_err *e)
{
	return cua_err_set(e, CUA_ENOT_FOUND, "no event %llu", (unsigned long long)id);
}

/* Notes id live in the core's table. 0 or CUA_ENOMEM. */
static int
event_add(struct wk *w, uint64_t id)
{
	struct wk_event *ev = event_at(w, id);
	if (ev != NULL) {
		*ev = (struct wk_event){0};
		return 0;
	}
	ev = calloc(1, sizeof(*ev));
	if (ev == NULL || cua_idmap_set(&w->events, id, ev) != 0) {
		free(ev);
		return CUA_ENOMEM;
	}
	return 0;
}

void
wk_events_fini(struct wk *w)
{
	wk_idmap_fini_each(&w->events, wk_free_obj, NULL);
}

int
wk_c_event_create(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	const struct wrec_event_create *c = (const struct wrec_event_create *)h;
	if (w->be->event_create == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "the %s backend has no events", w->be->name);
	if (c->flags & ~CUA_EVENT_FLAGS_ALL)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "event flags 0x%x", c->flags);
	uint64_t id = 0;
	int r = w->be->event_create(w, c->flags, &id, e);
	if (r != 0)
		return r;
	if (event_add(w, id) != 0) {
		cua_err ignored;
		w->be->event_destroy(w, id, &ignored);
		return cua_err_set(e, CUA_ENOMEM, "worker out of memory for an event");
	}
	x->value = id;
	return 0;
}

/* Runs after every submit thread issued what it had (WK_BARRIER_ALL): no record or wait of it is unissued. */
int
wk_c_event_destroy(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	uint64_t id = ((const struct wrec_event *)h)->event;
	struct wk_event *ev = event_at(w, id);
	if (ev == NULL)
		return no_event(id, e);
	free(cua_idmap_remove(&w->events, id));
	return w->be->event_destroy(w, id, e);
}

int
wk_c_event_elapsed(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	const struct wrec_event_elapsed *c = (const struct wrec_event_elapsed *)h;
	if (event_at(w, c->start) == NULL)
		return no_event(c->start, e);
	if (event_at(w, c->end) == NULL)
		return no_event(c->end, e);
	float ms = 0;
	int r = w->be->event_elapsed(w, c->start, c->end, &ms, e);
	uint32_t bits;
	memcpy(&bits, &ms, sizeof(bits));
	x->value = bits;
	return r;
}

int
wk_c_event_query(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	uint64_t id = ((const struct wrec_event *)h)->event;
	if (event_at(w, id) == NULL)
		return no_event(id, e);
	int ready = 0;
	int r = w->be->event_query(w, id, &ready, e);
	x->value = ready ? 1 : 0;
	return r;
}

/* The event of a RECORD or WAIT, its stream in op->sid; NULL (the reason in e) unless both exist. */
static struct wk_event *
event_stream(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	const struct wrec_event_stream *c = (const struct wrec_event_stream *)h;
	struct wk_event *ev = event_at(w, c->event);
	if (!wk_stream_live(w, c->stream)) {
		cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", c->stream);
		return NULL;
	}
	if (ev == NULL)
		no_event(c->event, e);
	op->sid = c->stream;
	return ev;
}

/* A record issued by another thread than the previous one must come after it (the last record wins). */
int
wk_p_event_record(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	struct wk_event *ev = event_stream(w, h, op, e);
	if (ev == NULL)
		return e->code;
	if (ev->recorded)
		wk_after_owner(w, ev->sid, op->sid);
	ev->recorded = 1;
	ev->sid = op->sid;
	return 0;
}

/* Held: ends its hold when issued. */
int
wk_i_event_record(struct wk *w, const struct wk_op *op, cua_err *e)
{
	const struct wrec_event_stream *c = (const struct wrec_event_stream *)op->c;
	int r = w->be->event_record(w, op->sid, c->event, e);
	if (r != 0)
		wk_report(w, op->tag, (uint32_t)r, e->detail);
	wk_hold_done(w, op->tag);
	return 0;
}

/* The wait must see the event's last record issued. A never-recorded event makes the wait a no-op (CUDA). */
int
wk_p_stream_wait_event(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	struct wk_event *ev = event_stream(w, h, op, e);
	if (ev == NULL)
		return e->code;
	if (ev->recorded)
		wk_after_owner(w, ev->sid, op->sid);
	return 0;
}

int
wk_i_stream_wait_event(struct wk *w, const struct wk_op *op, cua_err *e)
{
	const struct wrec_event_stream *c = (const struct wrec_event_stream *)op->c;
	int r = w->be->stream_wait_event(w, op->sid, c->event, e);
	if (r != 0)
		wk_report(w, op->tag, (uint32_t)r, e->detail);
	wk_hold_done(w, op->tag);
	return 0;
}

/* Handed to the owner of the stream of the event's last record, after that record in its FIFO. When that
 * stream is gone (destroyed after the record, which its destruction drained) any live stream will do. */
int
wk_p_event_sync(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	uint64_t id = ((const struct wrec_event *)h)->event;
	struct wk_event *ev = event_at(w, id);
	if (ev == NULL)
		return no_event(id, e);
	op->sid = ev->recorded && wk_stream_live(w, ev->sid) ? ev->sid : 0;
	return 0;
}

/* Held: the backend ends the hold when the record is reached. */
int
wk_i_event_sync(struct wk *w, const struct wk_op *op, cua_err *e)
{
	(void)e;
	w->be->event_notify(w, ((const struct wrec_event *)op->c)->event, op->tag, wk_hold_done);
	return 0;
}
