/*
 * test_core_sched.c — unit tests of the daemon's core (libcuadcore): sequence order: the quotas on requests in flight
 * and unanswered, parked requests, the sequence numbers of refused requests. The stub edge, the session states and the
 * table-driven request case are in core_fixture.h.
 */
#include "config.h"

#include "core_fixture.h"

#include <string.h>

/* One request queued (an allocation), with room for just that one. */
static void
setup_inflight_quota(struct env *e)
{
	setup_std(e);
	e->fe.cfg.session_inflight = 1;
	send_req(e, PIPE, CUA_OP_MEM_ALLOC, 0, &(struct cua_req_mem_alloc){0, 64});
	ck_assert_uint_eq(e->s->queued, 1);
}

/* One request unanswered (queued), and one receive context allowed per connection. */
static void
setup_pending_quota(struct env *e)
{
	setup_std(e);
	e->fe.cfg.session_pending = 1;
	send_req(e, PIPE, CUA_OP_MEM_ALLOC, 0, &(struct cua_req_mem_alloc){0, 64});
	ck_assert_uint_eq(e->s->held, 1);
}

static void
setup_seq5(struct env *e)
{
	setup_hello(e);
	e->s->next_seq = 5;
}

/* Request 2 (a PING, nonce 2) came first and waits for 1. */
static void
setup_parked2(struct env *e)
{
	setup_hello(e);
	send_req(e, PIPE, CUA_OP_PING, 2, &(struct cua_req_ping){2});
	ck_assert_uint_eq(e->s->nparked, 1);
	ck_assert_uint_eq(nreplies, 0);
}

/* Request 1 answered, then request 2 that waited for it, in that order; nothing parked any more. */
static void
chk_unparked(struct env *e)
{
	ck_assert_uint_eq(nreplies, 2);
	ck_assert_uint_eq(replies[0].value, 1);
	ck_assert_uint_eq(replies[1].op, CUA_OP_PING);
	ck_assert_uint_eq(replies[1].status, CUA_OK);
	ck_assert_uint_eq(replies[1].value, 2);
	ck_assert_uint_eq(e->s->nparked, 0);
	ck_assert_uint_eq(e->s->next_seq, 3);
	ck_assert_uint_eq(e->s->held, 0);
}

static void
chk_still_one_queued(struct env *e)
{
	ck_assert_uint_eq(e->s->queued, 1);
}

/* ------------------------------------------------------------------ the cases */

static const struct ccase cases[] = {
	/* quotas and order */
	{"session_inflight quota", setup_inflight_quota, CUA_OP_MEM_ALLOC, 0, b_alloc, .status = CUA_EQUOTA,
	 .msg = "1 requests of this session are queued or running, its limit; wait for some to complete, or raise it "
		"with --session-inflight",
	 .outcome = ANSWERED, .check = chk_still_one_queued},
	{"STATUS passes the session_inflight quota", setup_inflight_quota, CUA_OP_STATUS, 0, NULL, .status = CUA_OK,
	 .outcome = ANSWERED},
	{"session_pending quota", setup_pending_quota, CUA_OP_MEM_ALLOC, 0, b_alloc, .status = CUA_EQUOTA,
	 .msg = "too many unanswered requests on this connection", .outcome = ANSWERED, .check = chk_still_one_queued},
	{"a sequence number already used", setup_seq5, CUA_OP_PING, 3, b_ping1, .status = CUA_EPROTOCOL,
	 .msg = "request sequence number already used", .outcome = ANSWERED},
	{"a request ahead of its turn is parked", setup_hello, CUA_OP_PING, 2, b_ping1, .status = CUA_OK,
	 .outcome = PARKED},
	{"the parked request runs once its predecessor arrives", setup_parked2, CUA_OP_PING, 1, b_ping1,
	 .status = CUA_OK, .outcome = ANSWERED, .check = chk_unparked},
};

#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

/* ------------------------------------------------------------------ sequence numbers of refused requests */

/* Ordered requests (seq 1) that fail to decode after their header was read. */
struct seq_bad {
	const char *name;
	const char *raw; /* NULL: a FUNCTION_GET with a kernel name of CUA_MAX_NAME + 1 bytes */
	size_t rawlen;
	uint32_t status, op;
	bool before_seq; /* PROTOCOL.md §5 checks it before seq (structure, types, version, op): with a used seq it
			  * keeps its status; a body against its schema gets the used seq's PROTOCOL */
};

static const struct seq_bad seq_bads[] = {
	{"wrong field count", RAW("\x94\x01\x07\x01\x91\x00"), CUA_EPROTOCOL, CUA_OP_MEM_ALLOC, false},
	{"unknown op 99", RAW("\x94\x01\x63\x01\x90"), CUA_EUNKNOWN_OP, 99, true},
	{"wrong version", RAW("\x94\x07\x02\x01\x91\x01"), CUA_EVERSION, CUA_OP_PING, true},
	{"a float in the body", RAW("\x94\x01\x02\x01\x91\xca\x3f\x80\x00\x00"), CUA_EPROTOCOL, CUA_OP_PING, true},
	{"an ext in the body", RAW("\x94\x01\x02\x01\x91\xd4\x01\x00"), CUA_EPROTOCOL, CUA_OP_PING, true},
	{"a kernel name over the limit", NULL, 0, CUA_ETOO_LARGE, CUA_OP_FUNCTION_GET, false},
};

#define NSEQ_BAD (int)(sizeof(seq_bads) / sizeof(seq_bads[0]))

static void
send_seq_bad(struct env *e, const struct seq_bad *b)
{
	static char name[CUA_MAX_NAME + 1];
	if (b->raw != NULL) {
		send_bytes(e, PIPE, b->raw, b->rawlen);
		return;
	}
	memset(name, 'k', sizeof(name));
	send_req(e, PIPE, CUA_OP_FUNCTION_GET, 1, &(struct cua_req_function_get){1, {name, sizeof(name)}});
}

/* Request 1 does not decode, request 2 is a PING: 1 gets its decode error (its op echoed), then 2 is
 * served, whichever arrived first (_i odd: 2 first). Sending 1 again is a sequence number already used, unless
 * it fails a check §5 makes before seq's: then that answer, and still nothing used up. */
START_TEST(undecodable_request_uses_its_seq)
{
	const struct seq_bad *b = &seq_bads[_i / 2];
	struct env *e = &E;
	env_init(e);
	setup_hello(e);
	if (_i % 2 == 1) {
		send_req(e, PIPE, CUA_OP_PING, 2, &(struct cua_req_ping){2});
		ck_assert_uint_eq(nreplies, 0);
		send_seq_bad(e, b);
	} else {
		send_seq_bad(e, b);
		ck_assert_uint_eq(nreplies, 1);
		send_req(e, PIPE, CUA_OP_PING, 2, &(struct cua_req_ping){2});
	}
	ck_assert_uint_eq(nreplies, 2);
	ck_assert_msg(replies[0].status == b->status, "%s: %s (%s)", b->name, cua_strerror_name((int)replies[0].status),
		      replies[0].message);
	ck_assert_uint_eq(replies[0].op, b->op);
	ck_assert_uint_eq(replies[1].op, CUA_OP_PING);
	ck_assert_uint_eq(replies[1].status, CUA_OK);
	ck_assert_uint_eq(replies[1].value, 2);
	ck_assert_uint_eq(e->s->next_seq, 3);
	ck_assert_uint_eq(e->s->held, 0);
	ck_assert_uint_eq(e->s->nparked, 0);
	send_seq_bad(e, b);
	ck_assert_uint_eq(nreplies, 3);
	ck_assert_uint_eq(replies[2].status, b->before_seq ? b->status : CUA_EPROTOCOL);
	if (!b->before_seq)
		check_msg(b->name, replies[2].message, "request sequence number already used");
	ck_assert_uint_eq(e->s->next_seq, 3);
	env_fini(e);
}
END_TEST

/* --session-pending 2 binds ordered requests too: with 2 and 3 waiting for 1, request 1 is refused QUOTA
 * at once, uses up its number, and 2 and 3 run. */
START_TEST(pending_limit_refuses_the_next_in_turn)
{
	struct env *e = &E;
	env_init(e);
	setup_hello(e);
	e->fe.cfg.session_pending = 2;
	send_req(e, PIPE, CUA_OP_PING, 2, &(struct cua_req_ping){2});
	send_req(e, PIPE, CUA_OP_PING, 3, &(struct cua_req_ping){3});
	ck_assert_uint_eq(nreplies, 0);
	send_req(e, PIPE, CUA_OP_PING, 1, &(struct cua_req_ping){1});
	ck_assert_uint_eq(nreplies, 3);
	ck_assert_uint_eq(replies[0].status, CUA_EQUOTA);
	check_exact("in turn", replies[0].message,
		    "too many unanswered requests on this connection: 2, the limit set by --session-pending is 2; "
		    "wait for some replies");
	ck_assert_uint_eq(replies[1].value, 2);
	ck_assert_uint_eq(replies[2].value, 3);
	ck_assert_uint_eq(e->s->next_seq, 4);
	ck_assert_uint_eq(e->s->held, 0);
	env_fini(e);
}
END_TEST

/* --session-pending 1: request 3 arrives early over the limit (answered QUOTA, waits for its turn); request 1
 * arrives over the limit too (QUOTA, in turn); 2 runs, 3's number passes, and 4 is served. */
START_TEST(pending_limit_refuses_early_requests_in_order)
{
	struct env *e = &E;
	env_init(e);
	setup_hello(e);
	e->fe.cfg.session_pending = 1;
	send_req(e, PIPE, CUA_OP_PING, 2, &(struct cua_req_ping){2});
	send_req(e, PIPE, CUA_OP_PING, 3, &(struct cua_req_ping){3});
	ck_assert_uint_eq(nreplies, 1);
	ck_assert_uint_eq(replies[0].status, CUA_EQUOTA);
	send_req(e, PIPE, CUA_OP_PING, 1, &(struct cua_req_ping){1});
	ck_assert_uint_eq(nreplies, 3);
	ck_assert_uint_eq(replies[1].status, CUA_EQUOTA);
	ck_assert_uint_eq(replies[2].status, CUA_OK);
	ck_assert_uint_eq(replies[2].value, 2);
	ck_assert_uint_eq(e->s->next_seq, 4);
	send_req(e, PIPE, CUA_OP_PING, 4, &(struct cua_req_ping){4});
	ck_assert_uint_eq(nreplies, 4);
	ck_assert_uint_eq(replies[3].status, CUA_OK);
	ck_assert_uint_eq(replies[3].value, 4);
	ck_assert_uint_eq(e->s->nparked, 0);
	ck_assert_uint_eq(e->s->held, 0);
	env_fini(e);
}
END_TEST

static Suite *
sched_suite(void)
{
	Suite *s = core_cases_suite("core-sched", cases, NCASES, NULL);
	TCase *tc = tcase_create("sequence");
	tcase_add_loop_test(tc, undecodable_request_uses_its_seq, 0, 2 * NSEQ_BAD);
	tcase_add_test(tc, pending_limit_refuses_the_next_in_turn);
	tcase_add_test(tc, pending_limit_refuses_early_requests_in_order);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return core_run(sched_suite());
}
