/*
 * cmd-stream.c — STREAM_CREATE, STREAM_DESTROY, STREAM_SYNC (a session's own ordered streams) and
 * SYNCHRONIZE (everything of the session so far, and the first error of its fire-and-forget work).
 */
#include "config.h"

#include "cmd.h"
#include "streampool.h"

static int
v_stream_create(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_stream_create *q = &r->w.body.stream_create;
	int rc;
	if ((rc = plan_need_device(fe, q->device, e)) != 0 || (rc = plan_bind_device(fe, r, (int)q->device, 0, e)) != 0)
		return rc; /* the limits: .reserve */
	const struct wdev_info *in = &fe->devs[q->device].info;
	int prio = q->priority;
	if (prio > in->prio_least)
		prio = in->prio_least;
	if (prio < in->prio_greatest)
		prio = in->prio_greatest;
	struct wrec_stream_create c = {{WR_STREAM_CREATE, 0}, prio, 0};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* A stream and its handle (--session-streams, --session-handles, the tenant's `streams`). */
static void
rs_stream_create(const struct fe *fe, const struct request *r, struct resv *want)
{
	(void)fe, (void)r;
	want->n[RES_STREAMS] = 1;
	want->n[RES_HANDLES] = 1;
}

static void
c_stream_create(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct ritem *it = &r->items[0];
	uint64_t h;
	if (it->status != CUA_OK)
		return;
	int rc = do_handle_new(r->s, CUA_HK_STREAM, r->dev, r->wdev->gen, it->value, &h);
	if (rc != 0) {
		item_fail(it, rc, "cannot record the stream");
		return;
	}
	it->value = h;
	r->s->counts.streams++;
}

/* STREAM_SYNC of the ordered stream (on device 0, the only one a stream field without a handle can name). */
static int
sync_ordered(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	int rc;
	uint32_t sid;
	if ((rc = plan_need_device(fe, 0, e)) != 0 || (rc = plan_bind_device(fe, r, 0, 0, e)) != 0 ||
	    (rc = plan_stream(fe, r, CUA_STREAM_ORDERED_ID, 0, &sid, e)) != 0)
		return rc;
	struct wrec_stream c = {{WR_STREAM_SYNC, 0}, sid, 0};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* STREAM_DESTROY and STREAM_SYNC */
static int
v_stream(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	uint64_t h = r->w.body.stream.stream;
	struct hslot *hs;
	if (h == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "stream 0 is the daemon's pool; use SYNCHRONIZE");
	if (h == CUA_STREAM_ORDERED_ID && r->op == CUA_OP_STREAM_DESTROY)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "the session's ordered stream lives as long as the session");
	if (h == CUA_STREAM_ORDERED_ID)
		return sync_ordered(fe, r, e);
	int rc = do_handle_get(fe, r->s, h, CUA_HK_STREAM, &hs, e);
	if (rc == CUA_ECONTEXT_LOST && r->op == CUA_OP_STREAM_DESTROY) {
		do_handle_free(r->s, do_handle_slot(r->s, h, CUA_HK_STREAM));
		return rc;
	}
	if (rc != 0 || (rc = plan_bind_device(fe, r, hs->dev, hs->gen, e)) != 0)
		return rc;
	struct wrec_stream c = {{r->op == CUA_OP_STREAM_DESTROY ? WR_STREAM_DESTROY : WR_STREAM_SYNC, 0},
				(uint32_t)hs->wid,
				0};
	r->barrier = r->op == CUA_OP_STREAM_DESTROY;
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	if (r->items[0].cmd < 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	if (r->op == CUA_OP_STREAM_DESTROY)
		hs->release = (struct release){r->id, r->seq}; /* later requests no longer see it (session.h) */
	return 0;
}

static void
c_stream_destroy(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct hslot *hs = do_handle_slot(r->s, r->w.body.stream.stream, CUA_HK_STREAM);
	if (hs == NULL || hs->release.req != r->id)
		return;
	if (r->items[0].status == CUA_OK) {
		do_handle_free(r->s, hs);
		r->s->counts.streams--;
	} else { /* not destroyed: the session's again */
		hs->release = (struct release){0, 0};
	}
}

/* STREAM_DESTROY failed as a whole after validation: the stream is the session's again. */
static void
a_stream_destroy(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct hslot *hs = do_handle_slot(r->s, r->w.body.stream.stream, CUA_HK_STREAM);
	if (hs != NULL && hs->release.req == r->id)
		hs->release = (struct release){0, 0};
}

static int
v_synchronize(struct fe *fe, struct request *r, cua_err *e)
{
	(void)fe;
	(void)e;
	r->barrier = true;
	return 0;
}

static void
c_synchronize(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct session *s = r->s;
	if (s->deferred_status == CUA_OK)
		return;
	item_fail(&r->items[0], (int)s->deferred_status, "%s", s->deferred_msg);
	s->deferred_status = CUA_OK;
	s->deferred_msg[0] = '\0';
}

const struct cmd_entry cmd_stream_create_entry = {.op = CUA_OP_STREAM_CREATE,
						  .flags = CMD_HELLO,
						  .family = SF_STREAM,
						  .wrec = WR_STREAM_CREATE,
						  .validate = v_stream_create,
						  .reserve = rs_stream_create,
						  .complete = c_stream_create,
						  .reply = reply_value};
const struct cmd_entry cmd_stream_destroy_entry = {.op = CUA_OP_STREAM_DESTROY,
						   .flags = CMD_HELLO | CMD_RELEASES,
						   .family = SF_STREAM,
						   .wrec = WR_STREAM_DESTROY,
						   .validate = v_stream,
						   .complete = c_stream_destroy,
						   .abandon = a_stream_destroy};
const struct cmd_entry cmd_stream_sync_entry = {.op = CUA_OP_STREAM_SYNC,
						.flags = CMD_HELLO | CMD_STREAM,
						.family = SF_STREAM,
						.wrec = WR_STREAM_SYNC,
						.validate = v_stream};
const struct cmd_entry cmd_synchronize_entry = {.op = CUA_OP_SYNCHRONIZE,
						.flags = CMD_HELLO,
						.family = SF_STREAM,
						.wrec = WR_NONE,
						.validate = v_synchronize,
						.complete = c_synchronize};
