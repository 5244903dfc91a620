/*
 * test_core_session.c — unit tests of the daemon's core (libcuadcore): sessions, HELLO and decoding; streams, handles
 * and the quotas on the objects a session holds. The stub edge, the session states and the table-driven request case
 * are in core_fixture.h.
 */
#include "config.h"

#include "core_fixture.h"

static void
setup_stream_quota(struct env *e)
{
	setup_std(e);
	e->fe.cfg.session_streams = 2; /* st0 and st1 */
}

static void
setup_module_quota(struct env *e)
{
	setup_std(e);
	e->fe.cfg.session_modules = 2;
}

static void
setup_module_bytes_quota(struct env *e)
{
	setup_std(e);
	e->fe.cfg.session_module_bytes = 16;
	e->s->module_bytes = 8;
}

static void
setup_host_quota(struct env *e)
{
	setup_std(e);
	e->fe.cfg.session_host_bytes = 1u << 20;
}

static void
setup_handle_quota(struct env *e)
{
	setup_std(e);
	e->fe.cfg.session_handles = e->s->nhandles; /* 6 */
}

/* The connection left (the edge said so): its late messages find no session. */
static void
setup_gone(struct env *e)
{
	setup_hello(e);
	request_pipe_removed(&e->fe, PIPE);
}

BODY(b_hello_v1, b->hello = (struct cua_req_hello){1, 1, {"t", 1}, 42})

BODY(b_hello_v2, b->hello = (struct cua_req_hello){2, 3, {"t", 1}, 42})

BODY(b_mload16, b->module_load = (struct cua_req_module_load){0, CUA_IMAGE_EMU, {bytes16, 16}})

BODY(b_hreg2m, b->host_register = (struct cua_req_host_register){0, 3, 2u << 20})

BODY(b_screate0, b->stream_create = (struct cua_req_stream_create){0, -9, 0})

BODY(b_stream0, b->stream.stream = 0)

BODY(b_stream_st0, b->stream.stream = e->st0)

BODY(b_stream_stale, b->stream.stream = e->st_stale)

static void
chk_hello_said(struct env *e)
{
	ck_assert(e->s->hello);
	ck_assert_uint_eq(replies[0].value, e->s->id);
}

static void
chk_no_hello(struct env *e)
{
	ck_assert(!e->s->hello);
}

/* A stale stream is forgotten when destroyed: its slot is free. */
static void
chk_stale_stream_freed(struct env *e)
{
	ck_assert_ptr_null(do_handle_slot(e->s, e->st_stale, CUA_HK_STREAM));
}

static void
chk_tomb(struct env *e)
{
	ck_assert_ptr_null(do_session_by_pipe(&e->fe, PIPE));
}

/* ------------------------------------------------------------------ the cases */

static const struct ccase cases[] = {
	/* sessions, HELLO, decoding */
	{"ping before HELLO", setup_pipe, CUA_OP_PING, 0, b_ping1, .status = CUA_OK, .outcome = ANSWERED},
	{"HELLO", setup_pipe, CUA_OP_HELLO, 0, b_hello_v1, .status = CUA_OK, .outcome = ANSWERED,
	 .check = chk_hello_said},
	{"NO_SESSION before HELLO", setup_pipe, CUA_OP_MEM_ALLOC, 0, b_alloc, .status = CUA_ENO_SESSION,
	 .msg = "send HELLO first", .outcome = ANSWERED, .check = chk_no_queue},
	{"a message before the edge saw the pipe makes the session", NULL, CUA_OP_MEM_ALLOC, 0, b_alloc,
	 .status = CUA_ENO_SESSION, .msg = "send HELLO first", .outcome = ANSWERED},
	{"HELLO version mismatch", setup_pipe, CUA_OP_HELLO, 0, b_hello_v2, .status = CUA_EVERSION,
	 .msg = "client speaks versions 2..3, this daemon 1..1", .outcome = ANSWERED, .check = chk_no_hello},
	{"unknown op", setup_hello, 0, 0, NULL, RAW("\x94\x01\x63\x00\x90"), .status = CUA_EUNKNOWN_OP,
	 .msg = "unknown op 99", .outcome = ANSWERED},
	{"undecodable bytes", setup_hello, 0, 0, NULL, RAW("\xc1"), .status = CUA_EPROTOCOL, .msg = "",
	 .outcome = ANSWERED},
	{"a truncated message", setup_hello, 0, 0, NULL, RAW("\x94\x01\x02"), .status = CUA_EPROTOCOL, .msg = "",
	 .outcome = ANSWERED},
	{"a body of the wrong shape", setup_hello, 0, 0, NULL, RAW("\x94\x01\x07\x00\x91\x00"), .status = CUA_EPROTOCOL,
	 .msg = "", .outcome = ANSWERED},
	{"after the connection left", setup_gone, CUA_OP_PING, 0, b_ping1, .status = CUA_ECLOSED,
	 .msg = "the connection is closing", .outcome = ANSWERED, .check = chk_tomb},

	/* streams and handles */
	{"stream create queues", setup_std, CUA_OP_STREAM_CREATE, 0, b_screate0, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 1},
	{"stream create: stream quota", setup_stream_quota, CUA_OP_STREAM_CREATE, 0, b_screate0, .status = CUA_EQUOTA,
	 .msg = "1 more would take the session to 3 streams (pool streams included), past its quota of 2 (2 held, 0 "
		"reserved by its requests not yet completed); destroy some, or raise it with --session-streams",
	 .outcome = ANSWERED},
	{"module load: module quota", setup_module_quota, CUA_OP_MODULE_LOAD, 0, b_mload16, .status = CUA_EQUOTA,
	 .msg = "1 more would take the session to 3 modules, past its quota of 2 (2 held, 0 reserved by its requests "
		"not "
		"yet completed); unload some, or raise it with --session-modules",
	 .outcome = ANSWERED},
	{"module load: module bytes", setup_module_bytes_quota, CUA_OP_MODULE_LOAD, 0, b_mload16, .status = CUA_EQUOTA,
	 .msg = "(8 held, 0 reserved by its requests not yet completed); unload some, or raise it with "
		"--session-module-bytes",
	 .outcome = ANSWERED},
	{"host register: host bytes", setup_host_quota, CUA_OP_HOST_REGISTER, 0, b_hreg2m, .status = CUA_EQUOTA,
	 .msg = "2097152 more would take the session to 2097152 bytes of registered host memory, past its quota of "
		"1048576 (0 held, 0 reserved by its requests not yet completed); unregister some, or raise it with "
		"--session-host-bytes",
	 .outcome = ANSWERED},
	{"stream create: handle quota", setup_handle_quota, CUA_OP_STREAM_CREATE, 0, b_screate0, .status = CUA_EQUOTA,
	 .msg = "1 more would take the session to 7 handles, past its quota of 6 (6 held, 0 reserved by its requests "
		"not "
		"yet completed); release some, or raise it with --session-handles",
	 .outcome = ANSWERED},
	{"STREAM_SYNC on stream 0", setup_std, CUA_OP_STREAM_SYNC, 0, b_stream0, .status = CUA_EBAD_ARGUMENT,
	 .msg = "stream 0 is the daemon's pool; use SYNCHRONIZE", .outcome = ANSWERED},
	{"STREAM_SYNC queues", setup_std, CUA_OP_STREAM_SYNC, 0, b_stream_st0, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 1},
	{"STREAM_DESTROY queues as a barrier", setup_std, CUA_OP_STREAM_DESTROY, 0, b_stream_st0, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1, .check = chk_barrier},
	{"STREAM_DESTROY of a stale stream forgets it", setup_restarted, CUA_OP_STREAM_DESTROY, 0, b_stream_stale,
	 .status = CUA_ECONTEXT_LOST, .msg = "stream handle", .outcome = ANSWERED, .check = chk_stale_stream_freed},
	{"SYNCHRONIZE queues as a barrier with nothing to run", setup_std, CUA_OP_SYNCHRONIZE, 0, NULL,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 0, .check = chk_barrier},
};

#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

/* A worker's restart marks stale only what the sessions it serves hold: a session in session isolation keeps its
 * objects when the shared worker of the device restarts, a shared session keeps its objects when a session's own
 * worker restarts, and a retired worker (its session gone) marks nobody's — each of those has objects of the
 * same generation number in another worker. */
START_TEST(restart_marks_only_the_sessions_the_worker_serves)
{
	struct env *e = &E;
	env_init(e);
	struct session *shared = do_session_new(&e->fe, PIPE), *own = do_session_new(&e->fe, PIPE_OTHER);
	ck_assert_ptr_nonnull(shared);
	ck_assert_ptr_nonnull(own);
	struct device w = e->fe.devs[0], retired = e->fe.devs[0]; /* a session's own worker, a retired one */
	w.owner = own;
	retired.owner = NULL;
	own->isolation = ISO_SESSION;
	own->worker[0] = &w;
	add_alloc(shared, 0, 1, ADDR_A, ALLOC_LEN);
	add_alloc(own, 0, 1, ADDR_X, ALLOC_LEN);
	do_sessions_mark_stale(&e->fe, &retired, 1);
	ck_assert_msg(!shared->allocs[0].stale && !own->allocs[0].stale, "a retired worker's restart marked a session");
	do_sessions_mark_stale(&e->fe, &e->fe.devs[0], 1);
	ck_assert_msg(shared->allocs[0].stale, "the shared worker's restart left its session's memory usable");
	ck_assert_msg(!own->allocs[0].stale, "the shared worker's restart marked a session-isolated session");
	do_sessions_mark_stale(&e->fe, &w, 1);
	ck_assert_msg(own->allocs[0].stale, "a session's own worker's restart left its memory usable");
	own->worker[0] = NULL;
	env_fini(e);
}
END_TEST

static Suite *
session_suite(void)
{
	TCase *tc;
	Suite *s = core_cases_suite("core-session", cases, NCASES, &tc);
	tcase_add_test(tc, restart_marks_only_the_sessions_the_worker_serves);
	return s;
}

int
main(void)
{
	return core_run(session_suite());
}
