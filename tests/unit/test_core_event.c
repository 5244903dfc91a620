/*
 * test_core_event.c — unit tests of the daemon's core (libcuadcore): events. The stub edge, the session states and the
 * table-driven request case are in core_fixture.h.
 */
#include "config.h"

#include "core_fixture.h"

/* setup_std, and events on device 0: one never recorded, one recorded, one recorded without timing, one of a
 * lost generation (device 0 restarted afterwards: the others are of generation 2). */
static void
setup_events(struct env *e)
{
	setup_restarted(e);
	struct session *s = e->s;
	e->ev_stale = add_event(s, 1, 40, EVF_TIMING | EVF_RECORDED);
	e->ev_new = add_event(s, 2, 41, EVF_TIMING);
	e->ev_rec = add_event(s, 2, 42, EVF_TIMING | EVF_RECORDED);
	e->ev_nt = add_event(s, 2, 43, EVF_RECORDED);
}

static void
setup_event_quota(struct env *e)
{
	setup_events(e);
	e->fe.cfg.session_events = 4;
}

static void
chk_event_recorded(struct env *e)
{
	ck_assert(do_handle_slot(e->s, e->ev_new, CUA_HK_EVENT)->evflags & EVF_RECORDED);
}

static void
chk_not_barrier(struct env *e)
{
	ck_assert(!TAILQ_LAST(&e->s->queue, request_queue)->barrier);
}

static void
chk_stale_event_freed(struct env *e)
{
	ck_assert_ptr_null(do_handle_slot(e->s, e->ev_stale, CUA_HK_EVENT));
}

BODY(b_ecreate, b->event_create = (struct cua_req_event_create){0, 0})

BODY(b_ecreate_dev5, b->event_create = (struct cua_req_event_create){5, 0})

BODY(b_erecord_pool, b->event_stream = (struct cua_req_event_stream){e->ev_new, 0})

BODY(b_erecord_st0, b->event_stream = (struct cua_req_event_stream){e->ev_new, e->st0})

BODY(b_erecord_ordered, b->event_stream = (struct cua_req_event_stream){e->ev_new, CUA_STREAM_ORDERED_ID})

BODY(b_erecord_st1, b->event_stream = (struct cua_req_event_stream){e->ev_new, e->st1})

BODY(b_erecord_kind, b->event_stream = (struct cua_req_event_stream){e->st0, e->st0})

BODY(b_ewait_new, b->event_stream = (struct cua_req_event_stream){e->ev_new, e->st0})

BODY(b_ewait_rec, b->event_stream = (struct cua_req_event_stream){e->ev_rec, e->st0})

BODY(b_ewait_stale_stream, b->event_stream = (struct cua_req_event_stream){e->ev_rec, e->st_stale})

BODY(b_event_new, b->event.event = e->ev_new)

BODY(b_event_rec, b->event.event = e->ev_rec)

BODY(b_event_stale, b->event.event = e->ev_stale)

BODY(b_elapsed_ok, b->event_elapsed = (struct cua_req_event_elapsed){e->ev_rec, e->ev_rec})

BODY(b_elapsed_nt, b->event_elapsed = (struct cua_req_event_elapsed){e->ev_rec, e->ev_nt})

BODY(b_elapsed_new, b->event_elapsed = (struct cua_req_event_elapsed){e->ev_new, e->ev_rec})

/* ------------------------------------------------------------------ the cases */

static const struct ccase cases[] = {
	/* events (issue 13) */
	{"EVENT_CREATE queues", setup_events, CUA_OP_EVENT_CREATE, 0, b_ecreate, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 1},
	{"EVENT_CREATE: event quota", setup_event_quota, CUA_OP_EVENT_CREATE, 0, b_ecreate, .status = CUA_EQUOTA,
	 .msg = "1 more would take the session to 5 events, past its quota of 4 (4 held, 0 reserved by its requests "
		"not "
		"yet completed); destroy some, or raise it with --session-events",
	 .outcome = ANSWERED},
	{"EVENT_CREATE on a device that does not exist", setup_events, CUA_OP_EVENT_CREATE, 0, b_ecreate_dev5,
	 .status = CUA_EBAD_ARGUMENT, .msg = "device 5 does not exist", .outcome = ANSWERED},
	{"EVENT_RECORD on the pool", setup_events, CUA_OP_EVENT_RECORD, 0, b_erecord_pool, .status = CUA_EBAD_ARGUMENT,
	 .msg = "stream 0 is the session's pool", .outcome = ANSWERED},
	{"EVENT_RECORD on a stream queues and marks it recorded", setup_events, CUA_OP_EVENT_RECORD, 0, b_erecord_st0,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1, .check = chk_event_recorded},
	{"EVENT_RECORD on the ordered stream queues", setup_events, CUA_OP_EVENT_RECORD, 0, b_erecord_ordered,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"EVENT_RECORD on a stream of another device", setup_events, CUA_OP_EVENT_RECORD, 0, b_erecord_st1,
	 .status = CUA_EBAD_ARGUMENT, .msg = "stream is on device 1, the work on device 0", .outcome = ANSWERED},
	{"EVENT_RECORD: a stream handle as the event", setup_events, CUA_OP_EVENT_RECORD, 0, b_erecord_kind,
	 .status = CUA_ENOT_FOUND, .msg = "event handle", .outcome = ANSWERED},
	{"STREAM_WAIT_EVENT of an event never recorded runs nothing", setup_events, CUA_OP_STREAM_WAIT_EVENT, 0,
	 b_ewait_new, .status = CUA_OK, .outcome = ANSWERED},
	{"STREAM_WAIT_EVENT queues", setup_events, CUA_OP_STREAM_WAIT_EVENT, 0, b_ewait_rec, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1, .check = chk_not_barrier},
	{"STREAM_WAIT_EVENT on a stream of a lost context", setup_events, CUA_OP_STREAM_WAIT_EVENT, 0,
	 b_ewait_stale_stream, .status = CUA_ECONTEXT_LOST, .msg = "stream handle", .outcome = ANSWERED},
	{"EVENT_SYNC of an event never recorded is answered at once", setup_events, CUA_OP_EVENT_SYNC, 0, b_event_new,
	 .status = CUA_OK, .outcome = ANSWERED},
	{"EVENT_SYNC queues", setup_events, CUA_OP_EVENT_SYNC, 0, b_event_rec, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 1},
	{"EVENT_SYNC of a lost context", setup_events, CUA_OP_EVENT_SYNC, 0, b_event_stale, .status = CUA_ECONTEXT_LOST,
	 .msg = "event handle", .outcome = ANSWERED},
	{"EVENT_QUERY of an event never recorded is answered at once", setup_events, CUA_OP_EVENT_QUERY, 0, b_event_new,
	 .status = CUA_OK, .outcome = ANSWERED},
	{"EVENT_QUERY queues", setup_events, CUA_OP_EVENT_QUERY, 0, b_event_rec, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 1},
	{"EVENT_ELAPSED queues", setup_events, CUA_OP_EVENT_ELAPSED, 0, b_elapsed_ok, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1},
	{"EVENT_ELAPSED without timing", setup_events, CUA_OP_EVENT_ELAPSED, 0, b_elapsed_nt,
	 .status = CUA_EBAD_ARGUMENT, .msg = "the end event was created with timing disabled", .outcome = ANSWERED},
	{"EVENT_ELAPSED of an event never recorded", setup_events, CUA_OP_EVENT_ELAPSED, 0, b_elapsed_new,
	 .status = CUA_EBAD_ARGUMENT, .msg = "the start event was never recorded", .outcome = ANSWERED},
	{"EVENT_DESTROY queues, not a barrier", setup_events, CUA_OP_EVENT_DESTROY, 0, b_event_rec, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1, .check = chk_not_barrier},
	{"EVENT_DESTROY of a lost context forgets it", setup_events, CUA_OP_EVENT_DESTROY, 0, b_event_stale,
	 .status = CUA_ECONTEXT_LOST, .msg = "event handle", .outcome = ANSWERED, .check = chk_stale_event_freed},
};

#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

int
main(void)
{
	return core_run(core_cases_suite("core-event", cases, NCASES, NULL));
}
