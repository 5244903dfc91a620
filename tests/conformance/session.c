/*
 * session.c — conformance cases of versions, HELLO, and what a session sees and releases (PROTOCOL.md §2: [R:version],
 * [R:hello-version], [R:hello-first], [R:session-release], [R:status-private], [R:sessions-private], [R:disconnect],
 * [R:drain]), driven by raw messages like the rest of the suite, against the daemon of conf_dmn (emulated device).
 */
#include "config.h"

#include "rules.h"

#include <string.h>
#include <unistd.h>

#define D conf_dmn

/* ------------------------------------------------------------------ §2 versions and sessions */

START_TEST(r_version)
{
	struct conn c;
	sess(&c, &D);
	static const uint64_t vs[] = {0, 2, 1000};
	for (size_t k = 0; k < 3; k++) {
		struct reply r;
		conn_req(&c, vs[k], OP_PING, 0, &r, "[u]", U(1));
		ck_assert_msg(r.status == ST_VERSION, "version %llu: %s", (unsigned long long)vs[k], r.name);
		ck_assert_uint_eq(r.op, OP_PING);
		ck_assert_msg(strchr(r.msg, '1') != NULL, "the message gives the range spoken: %s", r.msg);
		reply_free(&r);
		conn_req(&c, vs[k], OP_MEM_ALLOC, 0, &r, "[uu]", U(0), U(64));
		ck_assert_uint_eq(r.status, ST_VERSION);
		ck_assert_uint_eq(r.op, OP_MEM_ALLOC);
		reply_free(&r);
	}
	ping_ok(&c, 2);
	conn_close(&c);
}
END_TEST

START_TEST(r_hello_version)
{
	static const struct {
		uint64_t lo, hi, st, got;
	} rows[] = {{1, 1, ST_OK, 1},      {1, 9, ST_OK, 1},      {0, 1, ST_OK, 1},
		    {0, 0, ST_VERSION, 0}, {2, 9, ST_VERSION, 0}, {2, 1, ST_VERSION, 0}};
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct conn c;
		struct reply r;
		conn_open(&c, D.url);
		conn_req(&c, PV, OP_HELLO, 0, &r, "[uusus]", rows[k].lo, rows[k].hi, "conf", U(getpid()), "");
		ck_assert_msg(r.status == rows[k].st, "[%llu, %llu]: %s", (unsigned long long)rows[k].lo,
			      (unsigned long long)rows[k].hi, r.name);
		ck_assert_uint_eq(r.op, OP_HELLO);
		if (r.status == ST_OK) {
			const struct mpv *b = r.body;
			ck_assert_uint_eq(b->len, 8);
			ck_assert_uint_eq(b->a[0].u, rows[k].got);
			ck_assert_uint_ne(b->a[1].u, 0);
			ck_assert_int_eq(b->a[2].t, MP_STR);
			ck_assert_uint_eq(b->a[3].u, 68157440); /* --max-message default */
			ck_assert_uint_ge(b->a[6].u, 1);
		}
		reply_free(&r);
		conn_close(&c);
	}
}
END_TEST

START_TEST(r_hello_first)
{
	struct conn c;
	conn_open(&c, D.url);
	ping_ok(&c, 5); /* PING needs no HELLO */
	static const uint64_t ops[] = {OP_DEVICES, OP_STATUS, OP_SYNCHRONIZE};
	for (size_t k = 0; k < 3; k++)
		expect(&c, ops[k], 0, ST_NO_SESSION, NULL, "[]");
	expect(&c, OP_MEM_ALLOC, 0, ST_NO_SESSION, NULL, "[uu]", U(0), U(64));
	expect(&c, OP_MEM_ALLOC, 1, ST_NO_SESSION, NULL, "[uu]", U(0), U(64));
	conn_hello(&c, NULL);
	expect(&c, OP_DEVICES, 0, ST_OK, NULL, "[]");
	conn_close(&c);
}
END_TEST

/* ------------------------------------------------------------------ §2 session release */

/* STATUS's `total` counts [allocations, alloc_bytes, modules, functions, streams, in_flight]. */
static uint64_t
total_count(struct conn *c, int k)
{
	struct reply r;
	expect(c, OP_STATUS, 0, ST_OK, &r, "[]");
	ck_assert_uint_eq(r.body->len, 8);
	ck_assert_uint_eq(r.body->a[6].len, 6);
	uint64_t v = r.body->a[6].a[k].u;
	reply_free(&r);
	return v;
}

/* STATUS field k of the reply (0 uptime, 1 sessions, 2 requests, 3 errors). */
static uint64_t
status_field(struct conn *c, int k)
{
	struct reply r;
	expect(c, OP_STATUS, 0, ST_OK, &r, "[]");
	uint64_t v = r.body->a[k].u;
	reply_free(&r);
	return v;
}

/* A client's STATUS shows its own session only; the operator endpoint's shows every session. */
START_TEST(r_status_private)
{
	struct conn a, b, op;
	sess(&a, &D);
	sess(&b, &D);
	sess_operator(&op, &D);
	alloc(&a, 1 << 20);
	ck_assert_uint_eq(total_count(&b, 0), 0); /* a's allocation is not b's business */
	ck_assert_uint_eq(status_field(&b, 1), 1);
	ck_assert_uint_eq(total_count(&a, 0), 1);
	ck_assert_uint_eq(total_count(&a, 1), 1 << 20);
	ck_assert_uint_ge(total_count(&op, 0), 1);
	ck_assert_uint_ge(status_field(&op, 1), 3);
	ck_assert_uint_ge(status_field(&op, 2), status_field(&a, 2) + status_field(&b, 2));
	conn_close(&a);
	conn_close(&b);
	conn_close(&op);
}
END_TEST

/* SESSIONS row i of the reply r (19 fields, PROTOCOL.md §4 session_info: this daemon sends the optional tail). */
static const struct mpv *
session_row(const struct reply *r, uint32_t i)
{
	ck_assert_uint_eq(r->body->len, 1);
	ck_assert_uint_gt(r->body->a[0].len, i);
	const struct mpv *row = &r->body->a[0].a[i];
	ck_assert_uint_eq(row->len, 19);
	return row;
}

/* SESSIONS: a client sees its own row only, the operator every session, oldest first. */
START_TEST(r_sessions_private)
{
	struct conn a, b, op;
	struct reply r;
	sess(&a, &D);
	sess(&b, &D);
	sess_operator(&op, &D);
	alloc(&a, 1 << 20);
	expect(&b, OP_SESSIONS, 0, ST_OK, &r, "[]");
	const struct mpv *row = session_row(&r, 0);
	ck_assert_uint_eq(r.body->a[0].len, 1); /* its own */
	ck_assert_uint_eq(row->a[1].len, strlen("conformance"));
	ck_assert(memcmp(row->a[1].p, "conformance", row->a[1].len) == 0);
	ck_assert_uint_eq(row->a[2].u, (uint64_t)getpid());
	ck_assert_uint_eq(row->a[3].u, (uint64_t)getpid()); /* ipc://: the kernel's word */
	ck_assert_uint_eq(row->a[8].u, 0);                  /* a's memory is not b's business */
	ck_assert_uint_eq(row->a[11].u, 0);
	ck_assert_uint_eq(row->a[12].len, strlen("default")); /* no configuration: every session is default's */
	ck_assert(memcmp(row->a[12].p, "default", row->a[12].len) == 0);
	ck_assert_uint_eq(row->a[14].len, strlen("ipc")); /* transport, and the kernel's uid and gid of the peer */
	ck_assert(memcmp(row->a[14].p, "ipc", row->a[14].len) == 0);
	ck_assert_uint_eq(row->a[15].u, (uint64_t)geteuid());
	ck_assert_uint_eq(row->a[16].u, (uint64_t)getegid());
	ck_assert_uint_eq(row->a[17].len, 0); /* no address for an ipc:// peer */
	ck_assert_uint_eq(row->a[18].len, 0); /* no token */
	uint64_t b_id = row->a[0].u;
	reply_free(&r);
	expect(&a, OP_SESSIONS, 0, ST_OK, &r, "[]");
	ck_assert_uint_eq(r.body->a[0].len, 1);
	ck_assert_uint_eq(session_row(&r, 0)->a[8].u, 1 << 20);
	uint64_t a_id = session_row(&r, 0)->a[0].u;
	reply_free(&r);
	expect(&op, OP_SESSIONS, 0, ST_OK, &r, "[]");
	uint32_t n = r.body->a[0].len, seen = 0;
	ck_assert_uint_ge(n, 3);
	for (uint32_t i = 0; i < n; i++) {
		row = session_row(&r, i);
		if (i > 0)
			ck_assert_uint_gt(row->a[0].u, session_row(&r, i - 1)->a[0].u); /* oldest first */
		seen |= (row->a[0].u == a_id && row->a[8].u == 1 << 20) ? 1u : 0u;
		seen |= row->a[0].u == b_id ? 2u : 0u;
		seen |= row->a[11].u == 1 ? 4u : 0u;
	}
	ck_assert_uint_eq(seen, 7);
	reply_free(&r);
	conn_close(&a);
	conn_close(&b);
	conn_close(&op);
}
END_TEST

/* Whether the operator's SESSIONS lists session id. */
static bool
session_listed(struct conn *op, uint64_t id)
{
	struct reply r;
	bool found = false;
	expect(op, OP_SESSIONS, 0, ST_OK, &r, "[]");
	for (uint32_t i = 0; i < r.body->a[0].len; i++)
		found |= session_row(&r, i)->a[0].u == id;
	reply_free(&r);
	return found;
}

/* DISCONNECT: the operator's alone; the named session's connection closes and what it held is released. */
START_TEST(r_disconnect)
{
	struct conn a, b, op;
	struct reply r;
	sess(&a, &D);
	sess(&b, &D);
	sess_operator(&op, &D);
	alloc(&a, 1 << 20);
	expect(&a, OP_SESSIONS, 0, ST_OK, &r, "[]");
	uint64_t a_id = session_row(&r, 0)->a[0].u;
	reply_free(&r);
	expect(&op, OP_SESSIONS, 0, ST_OK, &r, "[]");
	uint64_t op_id = session_row(&r, r.body->a[0].len - 1)->a[0].u; /* the newest */
	reply_free(&r);
	expect(&b, OP_DISCONNECT, 0, ST_PERMISSION_DENIED, NULL, "[u]", a_id); /* a client may not */
	expect(&op, OP_DISCONNECT, 0, ST_NOT_FOUND, NULL, "[u]", U(1) << 40);
	expect(&op, OP_DISCONNECT, 0, ST_BAD_ARGUMENT, NULL, "[u]", op_id);
	ck_assert(session_listed(&op, a_id));
	expect(&op, OP_DISCONNECT, 0, ST_OK, NULL, "[u]", a_id);
	int k = 0; /* closed within a second; released after (poll, bounded: 5 s) */
	for (; k < 500 && (session_listed(&op, a_id) || total_count(&op, 0) != 0); k++)
		usleep(10000);
	ck_assert_msg(k < 500, "session %llu still listed or its allocation held", (unsigned long long)a_id);
	expect(&b, OP_PING, 0, ST_OK, NULL, "[u]", U(5)); /* the others are served on */
	conn_close(&a);
	conn_close(&b);
	conn_close(&op);
}
END_TEST

/* DRAIN: the operator's alone; a drained device takes no new objects, what is held there works on. */
START_TEST(r_drain)
{
	struct conn a, op;
	struct reply r;
	sess(&a, &D);
	sess_operator(&op, &D);
	uint64_t p = alloc(&a, 4096), s = stream_new(&a);
	expect(&a, OP_DRAIN, 0, ST_PERMISSION_DENIED, NULL, "[uu]", U(0), U(1));
	expect(&op, OP_DRAIN, 0, ST_BAD_ARGUMENT, NULL, "[uu]", U(63), U(1)); /* the daemon serves one device */
	expect(&op, OP_DRAIN, 0, ST_OK, &r, "[uu]", U(0), U(1));
	ck_assert_uint_eq(r.body->len, 2);
	ck_assert_uint_ge(r.body->a[0].u, 1); /* a holds memory and a stream there */
	reply_free(&r);
	expect(&a, OP_MEM_ALLOC, 0, ST_NO_DEVICE, NULL, "[uu]", U(0), U(4096));
	expect(&a, OP_STREAM_CREATE, 0, ST_NO_DEVICE, NULL, "[uiu]", U(0), (int64_t)0, U(0));
	expect(&a, OP_MEMSET, 0, ST_OK, NULL, "[uuuuu]", p, U(0), U(4), U(16), s); /* what it holds works */
	expect(&a, OP_STREAM_DESTROY, 0, ST_OK, NULL, "[u]", s);
	expect(&a, OP_MEM_FREE, 0, ST_OK, NULL, "[u]", p);
	expect(&op, OP_DRAIN, 0, ST_OK, NULL, "[uu]", U(0), U(0)); /* undone */
	alloc(&a, 4096);
	conn_close(&a);
	conn_close(&op);
}
END_TEST

START_TEST(r_session_release)
{
	struct conn a, b;
	sess(&a, &D);
	sess_operator(&b, &D); /* the operator sees every session [R:status-private] */
	alloc(&a, 1 << 20);
	function_get(&a, module_load(&a), "axpy");
	stream_new(&a);
	ck_assert_uint_eq(total_count(&b, 0), 1);
	ck_assert_uint_eq(total_count(&b, 2), 1);
	ck_assert_uint_eq(total_count(&b, 4), 1);
	conn_close(&a);
	/* released after the connection closed: poll STATUS, bounded (5 s) */
	int k = 0;
	for (; k < 500 && (total_count(&b, 0) || total_count(&b, 2) || total_count(&b, 3) || total_count(&b, 4)); k++)
		usleep(10000);
	ck_assert_msg(k < 500, "the closed session's objects were not released");
	ck_assert_uint_eq(total_count(&b, 1), 0);
	conn_close(&b);
}
END_TEST

size_t
session_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"version", r_version},
		{"hello-version", r_hello_version},
		{"hello-first", r_hello_first},
		{"session-release", r_session_release},
		{"status-private", r_status_private},
		{"sessions-private", r_sessions_private},
		{"disconnect", r_disconnect},
		{"drain", r_drain},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
