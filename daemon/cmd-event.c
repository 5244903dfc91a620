/*
 * cmd-event.c — EVENT_CREATE, EVENT_DESTROY, EVENT_RECORD, STREAM_WAIT_EVENT, EVENT_SYNC, EVENT_ELAPSED and
 * EVENT_QUERY (PROTOCOL.md §3, [R:event-*]). An event is a handle of its session (CUA_HK_EVENT) on one device;
 * it is recorded on a stream of the session (its own or its ordered stream, never the unordered pool) and
 * waited for by a stream of the same session. What the front-end knows of it (timing, recorded) lives in its
 * handle slot, set when requests are validated, i.e. in the session's order.
 */
#include "config.h"

#include "cmd.h"

#include <string.h>

static int
v_event_create(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_event_create *q = &r->w.body.event_create;
	int rc;
	/* 1 passes the schema's u32<=2 but is no flag of EVENT_CREATE: unknown flag bits are PROTOCOL (§5) */
	if (q->flags & ~CUA_EVENT_FLAGS_ALL)
		return cua_err_set(e, CUA_EPROTOCOL, "EVENT_CREATE flags %u: the only flag is DISABLE_TIMING (2)",
				   q->flags);
	if ((rc = plan_need_device(fe, q->device, e)) != 0 || (rc = plan_bind_device(fe, r, (int)q->device, 0, e)) != 0)
		return rc; /* the limits: .reserve */
	struct wrec_event_create c = {{WR_EVENT_CREATE, 0}, q->flags, 0};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* An event and its handle (--session-events, --session-handles). */
static void
rs_event_create(const struct fe *fe, const struct request *r, struct resv *want)
{
	(void)fe, (void)r;
	want->n[RES_EVENTS] = 1;
	want->n[RES_HANDLES] = 1;
}

static void
c_event_create(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct ritem *it = &r->items[0];
	uint64_t h;
	if (it->status != CUA_OK)
		return;
	if (do_handle_new(r->s, CUA_HK_EVENT, r->dev, r->wdev->gen, it->value, &h) != 0) {
		item_fail(it, CUA_ENOMEM, "cannot record the event"); /* the worker's event stays until cleanup */
		return;
	}
	struct hslot *hs = do_handle_slot(r->s, h, CUA_HK_EVENT);
	hs->evflags = (r->w.body.event_create.flags & CUA_EVENT_DISABLE_TIMING) ? 0 : EVF_TIMING;
	it->value = h;
	r->s->events++;
}

/* The event of handle h, bound to r's device and generation. */
static int
event_get(struct fe *fe, struct request *r, uint64_t h, struct hslot **hs, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	int rc = do_handle_get(fe, r->s, h, CUA_HK_EVENT, hs, e);
	if (rc == 0)
		rc = plan_bind_device(fe, r, (*hs)->dev, (*hs)->gen, e);
	return rc;
}

/* Releases in sequence order, as STREAM_DESTROY does; not a barrier: the worker keeps the event itself alive
 * while records, waits and synchronizes queued before still use it (CUDA's cuEventDestroy semantics). */
static int
v_event_destroy(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	uint64_t h = r->w.body.event.event;
	struct hslot *hs;
	int rc = do_handle_get(fe, r->s, h, CUA_HK_EVENT, &hs, e);
	if (rc == CUA_ECONTEXT_LOST) { /* gone with its worker: forget it */
		do_handle_free(r->s, do_handle_slot(r->s, h, CUA_HK_EVENT));
		return rc;
	}
	if (rc != 0 || (rc = plan_bind_device(fe, r, hs->dev, hs->gen, e)) != 0)
		return rc;
	struct wrec_event c = {{WR_EVENT_DESTROY, 0}, hs->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	if (r->items[0].cmd < 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	hs->release = (struct release){r->id, r->seq}; /* later requests no longer see it (session.h) */
	return 0;
}

static void
c_event_destroy(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct hslot *hs = do_handle_slot(r->s, r->w.body.event.event, CUA_HK_EVENT);
	if (hs == NULL || hs->release.req != r->id)
		return;
	if (r->items[0].status == CUA_OK) {
		do_handle_free(r->s, hs);
		r->s->events--;
	} else { /* not destroyed: the session's again */
		hs->release = (struct release){0, 0};
	}
}

/* EVENT_DESTROY failed as a whole after validation: the event is the session's again. */
static void
a_event_destroy(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct hslot *hs = do_handle_slot(r->s, r->w.body.event.event, CUA_HK_EVENT);
	if (hs != NULL && hs->release.req == r->id)
		hs->release = (struct release){0, 0};
}

/* The stream of a RECORD or WAIT: one of the session's own or its ordered stream, on the event's device. */
static int
event_stream(struct fe *fe, struct request *r, uint64_t stream, const struct hslot *ev, uint32_t *sid, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock)
{
	if (stream == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "stream 0 is the session's pool, whose streams are not ordered with each other, so "
				   "an "
				   "event there would mark no point of its work; use a stream of the session "
				   "(STREAM_CREATE) or its ordered stream (1)");
	if (stream == CUA_STREAM_ORDERED_ID && ev->dev != 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "the ordered stream (1) is on device 0, the event on device %u; use a stream of "
				   "that "
				   "device",
				   ev->dev);
	return plan_stream(fe, r, stream, ev->dev, sid, e);
}

/* EVENT_RECORD and STREAM_WAIT_EVENT. A wait for an event never recorded completes at once (CUDA): nothing runs. */
static int
v_event_stream(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_event_stream *q = &r->w.body.event_stream;
	struct hslot *ev;
	uint32_t sid;
	int rc;
	if ((rc = event_get(fe, r, q->event, &ev, e)) != 0 || (rc = event_stream(fe, r, q->stream, ev, &sid, e)) != 0)
		return rc;
	bool record = r->op == CUA_OP_EVENT_RECORD;
	if (!record && !(ev->evflags & EVF_RECORDED))
		return 0;
	struct wrec_event_stream c = {{record ? WR_EVENT_RECORD : WR_STREAM_WAIT_EVENT, 0}, sid, 0, ev->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	if (r->items[0].cmd < 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	if (record)
		ev->evflags |= EVF_RECORDED;
	return 0;
}

/* EVENT_SYNC, EVENT_QUERY. An event never recorded has nothing to wait for: answered at once, ready. */
static int
v_event_one(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	struct hslot *ev;
	int rc = event_get(fe, r, r->w.body.event.event, &ev, e);
	if (rc != 0)
		return rc;
	r->items[0].value = 1; /* EVENT_QUERY of an event never recorded */
	if (!(ev->evflags & EVF_RECORDED))
		return 0;
	struct wrec_event c = {{r->op == CUA_OP_EVENT_SYNC ? WR_EVENT_SYNC : WR_EVENT_QUERY, 0}, ev->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
reply_query(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	(void)fe;
	(void)scratch;
	b->event_query.ready = r->items[0].value != 0;
	return 0;
}

/* Both events timed and recorded; whether their records were reached is the worker's to say (BUSY). */
static int
elapsed_check(const struct hslot *ev, const char *which, cua_err *e)
{
	if (!(ev->evflags & EVF_TIMING))
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "the %s event was created with timing disabled (CUA_EVENT_DISABLE_TIMING); create "
				   "it "
				   "without the flag to time with it",
				   which);
	if (!(ev->evflags & EVF_RECORDED))
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "the %s event was never recorded; record it first", which);
	return 0;
}

static int
v_event_elapsed(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_event_elapsed *q = &r->w.body.event_elapsed;
	struct hslot *a, *b;
	int rc;
	if ((rc = event_get(fe, r, q->start, &a, e)) != 0 || (rc = event_get(fe, r, q->end, &b, e)) != 0 ||
	    (rc = elapsed_check(a, "start", e)) != 0 || (rc = elapsed_check(b, "end", e)) != 0)
		return rc;
	struct wrec_event_elapsed c = {{WR_EVENT_ELAPSED, 0}, a->wid, b->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
reply_elapsed(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	(void)fe;
	(void)scratch;
	b->event_elapsed.ms_bits = (uint32_t)r->items[0].value;
	return 0;
}

const struct cmd_entry cmd_event_create_entry = {.op = CUA_OP_EVENT_CREATE,
						 .flags = CMD_HELLO,
						 .family = SF_EVENT,
						 .wrec = WR_EVENT_CREATE,
						 .validate = v_event_create,
						 .reserve = rs_event_create,
						 .complete = c_event_create,
						 .reply = reply_value};
const struct cmd_entry cmd_event_destroy_entry = {.op = CUA_OP_EVENT_DESTROY,
						  .flags = CMD_HELLO | CMD_RELEASES,
						  .family = SF_EVENT,
						  .wrec = WR_EVENT_DESTROY,
						  .validate = v_event_destroy,
						  .complete = c_event_destroy,
						  .abandon = a_event_destroy};
const struct cmd_entry cmd_event_record_entry = {.op = CUA_OP_EVENT_RECORD,
						 .flags = CMD_HELLO | CMD_STREAM,
						 .family = SF_EVENT,
						 .wrec = WR_EVENT_RECORD,
						 .validate = v_event_stream};
const struct cmd_entry cmd_stream_wait_event_entry = {.op = CUA_OP_STREAM_WAIT_EVENT,
						      .flags = CMD_HELLO | CMD_STREAM,
						      .family = SF_EVENT,
						      .wrec = WR_STREAM_WAIT_EVENT,
						      .validate = v_event_stream};
const struct cmd_entry cmd_event_sync_entry = {.op = CUA_OP_EVENT_SYNC,
					       .flags = CMD_HELLO,
					       .family = SF_EVENT,
					       .wrec = WR_EVENT_SYNC,
					       .validate = v_event_one};
const struct cmd_entry cmd_event_elapsed_entry = {.op = CUA_OP_EVENT_ELAPSED,
						  .flags = CMD_HELLO,
						  .family = SF_EVENT,
						  .wrec = WR_EVENT_ELAPSED,
						  .validate = v_event_elapsed,
						  .reply = reply_elapsed};
const struct cmd_entry cmd_event_query_entry = {.op = CUA_OP_EVENT_QUERY,
						.flags = CMD_HELLO,
						.family = SF_EVENT,
						.wrec = WR_EVENT_QUERY,
						.validate = v_event_one,
						.reply = reply_query};
