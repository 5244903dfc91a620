/*
 * contract.c — conformance cases where the daemon and PROTOCOL.md once disagreed (issue 22, points 8 and 9):
 * §5's order of checks against a used seq and against --session-pending ([R:status-order],
 * [R:pending-quota]), unknown flag bits ([R:event-create], [R:batch-items]), a graph's launches on two streams
 * ([R:graph-launch]), a partly set required cluster ([R:cluster]), the operator's STATUS while a closed session
 * drains ([R:status-private]) and the golden vectors as a client replays them ([R:vectors]). Raw messages against the daemon of conf_dmn (emulated device, sm_90) unless a case starts its own.
 */
#include "config.h"

#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D conf_dmn

/* ------------------------------------------------------------------ §5: the order of the checks */

/* A used seq is checked after the message, its version and its op: each of those failures is answered as it is,
 * and a body that fails its schema gets the seq's PROTOCOL; none of them uses anything up. */
START_TEST(r_used_seq_order)
{
	struct conn c;
	struct mpb m = {0}, body = {0};
	struct reply r;
	sess(&c, &D);
	expect(&c, OP_PING, 1, ST_OK, NULL, "[u]", U(1));
	msg_build(&m, PV, 99, 1, "[]"); /* an unknown op */
	raw_expect(&c, m.p, m.n, ST_UNKNOWN_OP, 99);
	msg_build(&m, 2, OP_PING, 1, "[u]", U(1)); /* a version the daemon does not speak */
	raw_expect(&c, m.p, m.n, ST_VERSION, OP_PING);
	mpb_arr(&body, 4097); /* more array elements than §6 allows: the message's structure */
	for (int k = 0; k < 4097; k++)
		mpb_uint(&body, 0);
	msg_build(&m, PV, OP_PING, 1, "r", body.p, body.n);
	raw_expect(&c, m.p, m.n, ST_TOO_LARGE, OP_PING);
	conn_req(&c, PV, OP_PING, 1, &r, "[]"); /* a body against its schema: after seq */
	ck_assert_str_eq(r.name, "PROTOCOL");
	ck_assert_msg(strstr(r.msg, "already used") != NULL, "%s", r.msg);
	reply_free(&r);
	expect(&c, OP_PING, 2, ST_OK, NULL, "[u]", U(2)); /* none of them used up seq 2 */
	mpb_free(&body);
	mpb_free(&m);
	conn_close(&c);
}
END_TEST

/* --session-pending's QUOTA comes after the message, seq and body checks (§5: "then the connection"); the
 * requests it refuses still pass their turn. A well-behaved connection beside it is served throughout. */
START_TEST(r_pending_after_seq)
{
	enum { P = 4 };
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--session-pending", "4", "--seq-gap-timeout", "60000", NULL});
	struct conn c, o;
	struct flight early[P], f;
	struct mpb m = {0};
	sess(&c, &d);
	sess(&o, &d);
	expect(&c, OP_PING, 1, ST_OK, NULL, "[u]", U(1));
	for (int k = 0; k < P; k++) /* seq 3..6 wait for seq 2: the connection's P unanswered requests */
		ping_flight(&c, &early[k], (uint64_t)k + 3);
	bool full = false; /* they arrived once a PING beside them is refused QUOTA (bounded) */
	for (int tries = 0; tries < 1000 && !full; tries++) {
		struct reply r;
		conn_req(&c, PV, OP_PING, 0, &r, "[u]", U(0));
		full = r.status == ST_QUOTA;
		reply_free(&r);
	}
	ck_assert_msg(full, "4 waiting requests never filled --session-pending 4");
	msg_build(&m, PV, OP_PING, 1, "[u]", U(1)); /* a used seq: PROTOCOL, not QUOTA */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, OP_PING);
	msg_build(&m, PV, 99, 7, "[]"); /* an unknown op, ahead: UNKNOWN_OP at once, not QUOTA */
	raw_expect(&c, m.p, m.n, ST_UNKNOWN_OP, 99);
	msg_build(&m, PV, OP_PING, 8, "[]"); /* a body against its schema: PROTOCOL at once, not QUOTA */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, OP_PING);
	ping_ok(&o, 5);         /* the other connection is served */
	ping_flight(&c, &f, 2); /* seq 2 (QUOTA in its turn, as the 4 still wait) lets 3..6 run; 7 and 8 pass */
	flight_wait(&f, 5000);
	struct reply r;
	flight_reply(&f, &r);
	ck_assert_msg(r.status == ST_QUOTA || r.status == ST_OK, "seq 2: %s (%s)", r.name, r.msg);
	reply_free(&r);
	for (int k = 0; k < P; k++)
		flight_expect(&early[k], ST_OK, OP_PING);
	expect(&c, OP_PING, 9, ST_OK, NULL, "[u]", U(9)); /* 7 and 8 used up their seq, 1 used nothing */
	mpb_free(&m);
	conn_close(&o);
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

/* ------------------------------------------------------------------ §5: unknown flag bits */

START_TEST(r_event_create_flags)
{
	struct conn c;
	sess(&c, &D);
	expect(&c, OP_EVENT_CREATE, 0, ST_PROTOCOL, NULL, "[uu]", U(0), U(1)); /* bit 0 is no flag */
	expect(&c, OP_EVENT_CREATE, 0, ST_OK, NULL, "[uu]", U(0), U(2));
	conn_close(&c);
}
END_TEST

START_TEST(r_batch_flags)
{
	struct conn c;
	sess(&c, &D);
	uint64_t p = alloc(&c, 64);
	uint32_t out[4];
	/* BATCH [1, [MEMSET p = 7]]: bit 0 is no flag of BATCH, so nothing runs */
	expect(&c, OP_BATCH, 0, ST_PROTOCOL, NULL, "[u[[u[uuuuu]]]]", U(1), U(OP_MEMSET), p, U(7), U(4), U(4), U(1));
	dtoh(&c, p, 1, out, sizeof(out));
	for (int k = 0; k < 4; k++)
		ck_assert_uint_eq(out[k], 0);
	expect(&c, OP_BATCH, 0, ST_OK, NULL, "[u[[u[uuuuu]]]]", U(0), U(OP_MEMSET), p, U(7), U(4), U(4), U(1));
	dtoh(&c, p, 1, out, sizeof(out));
	ck_assert_uint_eq(out[3], 7);
	conn_close(&c);
}
END_TEST

/* ------------------------------------------------------------------ §4: graphs and clusters */

/* A LAUNCH item (1 block of 1 thread, stream 0) of f with pre-encoded args (count of them). */
static void
launch_item(struct mpb *it, uint64_t f, const struct mpb *args, uint32_t count)
{
	struct mpb body = {0};
	launch_body(&body, f, 1, 1, 0, 0, args, count);
	mpb_arr(it, 2);
	mpb_uint(it, OP_LAUNCH);
	mpb_raw(it, body.p, body.n);
	mpb_free(&body);
}

/* Launches of one graph run one after the other whatever their streams: the graph reads A into B, spins, then
 * sets A to 1. Two NO_WAIT launches on two streams: run in turn, the second reads the 1 the first wrote; run at
 * once, both read 0. (The spin only makes an overlap likely; the assertion holds for any timing once they are
 * serialised.) */
START_TEST(r_graph_launch_serial)
{
	struct conn c;
	sess(&c, &D);
	static const char image[] = "cuasync-emu-module\ncopy_u32\nspin\nfill_u32\n";
	struct reply r;
	expect(&c, OP_MODULE_LOAD, 0, ST_OK, &r, "[uub]", U(0), U(4), image, sizeof(image) - 1);
	uint64_t m = r.body->a[0].u;
	reply_free(&r);
	uint64_t cp = function_get(&c, m, "copy_u32"), sp = function_get(&c, m, "spin");
	uint64_t fl = function_get(&c, m, "fill_u32"), a = alloc(&c, 256), b = a + 128, one = 1, ns = 300000000;
	uint64_t s1 = stream_new(&c), s2 = stream_new(&c);
	uint32_t v = 1, got;
	struct mpb args = {0}, items = {0}, msg = {0};
	mpb_fmt(&args, "uub", b, a, &one, sizeof(one)); /* copy_u32(B, A, 1) */
	launch_item(&items, cp, &args, 3);
	args.n = 0;
	mpb_fmt(&args, "b", &ns, sizeof(ns)); /* spin(300 ms) */
	launch_item(&items, sp, &args, 1);
	args.n = 0;
	mpb_fmt(&args, "ubb", a, &v, sizeof(v), &one, sizeof(one)); /* fill_u32(A, 1, 1) */
	launch_item(&items, fl, &args, 3);
	msg_build(&msg, PV, OP_GRAPH_CREATE, 0, ""); /* [flags 0, items] */
	mpb_arr(&msg, 2);
	mpb_uint(&msg, 0);
	mpb_arr(&msg, 3);
	mpb_raw(&msg, items.p, items.n);
	conn_raw(&c, msg.p, msg.n, &r);
	ck_assert_msg(r.status == ST_OK, "GRAPH_CREATE: %s (%s)", r.name, r.msg);
	uint64_t g = r.body->a[0].u;
	reply_free(&r);
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_OK, NULL, "[uuu]", g, s1, U(2));
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_OK, NULL, "[uuu]", g, s2, U(2));
	expect(&c, OP_SYNCHRONIZE, 0, ST_OK, NULL, "[]");
	dtoh(&c, b, 1, &got, sizeof(got));
	ck_assert_msg(got == 1, "the second launch read A = %u: the two launches of one graph ran at once", got);
	mpb_free(&args);
	mpb_free(&items);
	mpb_free(&msg);
	conn_close(&c);
}
END_TEST

/* REQUIRED_CLUSTER_WIDTH set alone (2x0x0): a launch without a cluster answers BAD_ARGUMENT, all three set runs. */
START_TEST(r_cluster_partly_required)
{
	struct conn c;
	struct reply r;
	sess(&c, &D);
	uint64_t f = function_get(&c, module_load(&c), "fill_u32"), p = alloc(&c, 256);
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_OK, NULL, "[uuu]", f, U(11), U(2));
	ck_assert_uint_eq(launch_fill(&c, 0, f, p, 1, 4, 0, 0, &r), ST_BAD_ARGUMENT);
	ck_assert_msg(strstr(r.msg, "set all three or none") != NULL, "%s", r.msg);
	reply_free(&r);
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_OK, NULL, "[uuu]", f, U(11), U(1));
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_OK, NULL, "[uuu]", f, U(12), U(1));
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_OK, NULL, "[uuu]", f, U(13), U(1));
	ck_assert_uint_eq(launch_fill(&c, 0, f, p, 1, 4, 0, 0, NULL), ST_OK);
	conn_close(&c);
}
END_TEST

/* ------------------------------------------------------------------ §4 STATUS: a closing session's drain */

/* The operator's STATUS: sessions, and total's alloc_bytes. */
static void
op_status(struct conn *op, uint64_t *sessions, uint64_t *bytes)
{
	struct reply r;
	expect(op, OP_STATUS, 0, ST_OK, &r, "[]");
	*sessions = r.body->a[1].u;
	*bytes = r.body->a[6].a[1].u; /* total = [allocations, alloc_bytes, …] */
	reply_free(&r);
}

/* A client closes its connection with a 10 s kernel in flight: it leaves `sessions` at once, but its memory
 * stays in `total` until its work drained and the memory was freed. */
START_TEST(r_status_closing_drain)
{
	struct conn c, op;
	uint64_t sessions = 0, bytes = 0;
	sess(&c, &D);
	sess_operator(&op, &D);
	uint64_t spin = function_get(&c, module_load(&c), "spin");
	alloc(&c, 1 << 20);
	ck_assert_uint_eq(launch_one(&c, spin, false, 10000000000ull, 1, 2, NULL), ST_OK); /* 10 s, NO_WAIT */
	/* NO_WAIT is answered when the launch is accepted; a close before it reached the worker would cancel it
	 * and leave nothing to drain: close only once the device has it in flight (dev_status[3]). */
	uint64_t dev_in_flight = 0;
	for (int k = 0; k < 2000 && dev_in_flight == 0; k++) { /* bounded */
		struct reply r;
		expect(&op, OP_STATUS, 0, ST_OK, &r, "[]");
		dev_in_flight = r.body->a[4].len > 0 ? r.body->a[4].a[0].a[3].u : 0;
		reply_free(&r);
	}
	ck_assert_msg(dev_in_flight >= 1, "the 10 s kernel never reached the worker");
	conn_close(&c);
	for (int k = 0; k < 2000; k++) { /* bounded: the close reaches the daemon */
		op_status(&op, &sessions, &bytes);
		if (sessions == 1) /* the operator's own */
			break;
	}
	ck_assert_uint_eq(sessions, 1);
	ck_assert_msg(bytes == 1 << 20, "total alloc_bytes %llu while the closed session drains, want 1 MiB",
		      (unsigned long long)bytes);
	for (int k = 0; k < 1500 && bytes != 0; k++) { /* then freed: polled, bounded (the kernel takes 10 s) */
		nng_msleep(20);
		op_status(&op, &sessions, &bytes);
	}
	ck_assert_uint_eq(bytes, 0);
	conn_close(&op);
}
END_TEST

/* ------------------------------------------------------------------ §8: the golden vectors */

/* The bytes of proto/vectors/NAME.hex (comment lines skipped); caller frees. */
static uint8_t *
vector(const char *name, size_t *n)
{
	char path[512], line[512];
	snprintf(path, sizeof(path), "%s/proto/vectors/%s.hex", CUA_SRCDIR, name);
	FILE *fp = fopen(path, "r");
	ck_assert_msg(fp != NULL, "cannot read %s", path);
	uint8_t *buf = malloc(1 << 16);
	ck_assert_ptr_nonnull(buf);
	*n = 0;
	while (fgets(line, sizeof(line), fp) != NULL) {
		if (line[0] == '#')
			continue;
		unsigned v;
		int used;
		for (const char *q = line; *n < (1 << 16) && sscanf(q, "%2x%n", &v, &used) == 1; q += used)
			buf[(*n)++] = (uint8_t)v;
	}
	fclose(fp);
	return buf;
}

/* The decoded reply of a reply vector; its str payloads point into the returned bytes (caller frees both). */
static uint8_t *
vector_reply(const char *name, struct mpv *out)
{
	size_t n;
	uint8_t *b = vector(name, &n);
	ck_assert_int_eq(mp_decode(b, n, out), 0);
	ck_assert_uint_eq(out->len, 6);
	return b;
}

/* The vectors form one session a client can replay: its HELLO, DEVICES and MODULE_LOAD (a well-formed format-4
 * image) are answered OK by the daemon; SESSIONS names the client the HELLO named; the MODULE error is the
 * daemon's own answer to a format-4 image without its header line. */
START_TEST(r_vectors)
{
	size_t n;
	struct mpv hello, sessions, merr;
	uint8_t *hb = vector("req_hello", &n);
	ck_assert_int_eq(mp_decode(hb, n, &hello), 0);
	uint8_t *sb = vector_reply("rep_sessions", &sessions);
	const struct mpv *row = &sessions.a[5].a[0].a[0], *hbody = &hello.a[3];
	ck_assert_msg(row->a[1].len == hbody->a[2].len && memcmp(row->a[1].p, hbody->a[2].p, row->a[1].len) == 0,
		      "rep_sessions names client '%.*s', req_hello '%.*s'", (int)row->a[1].len, row->a[1].p,
		      (int)hbody->a[2].len, hbody->a[2].p);
	ck_assert_uint_eq(row->a[2].u, hbody->a[3].u);

	struct conn c;
	struct reply r;
	conn_open(&c, D.url);
	raw_expect(&c, hb, n, ST_OK, OP_HELLO);
	uint8_t *b = vector("req_devices", &n); /* seq 1 */
	raw_expect(&c, b, n, ST_OK, OP_DEVICES);
	free(b);
	b = vector("req_module_load", &n); /* seq 2 */
	conn_raw(&c, b, n, &r);
	free(b);
	ck_assert_msg(r.status == ST_OK, "req_module_load.hex: %s (%s)", r.name, r.msg);
	uint64_t m = r.body->a[0].u;
	reply_free(&r);
	function_get(&c, m, "axpy");

	uint8_t *mb = vector_reply("rep_error_module", &merr);
	ck_assert_uint_eq(merr.a[2].u, ST_MODULE);
	static const char noheader[] = "axpy\n";
	expect(&c, OP_MODULE_LOAD, 0, ST_MODULE, &r, "[uub]", U(0), U(4), noheader, sizeof(noheader) - 1);
	ck_assert_msg(strlen(r.msg) == merr.a[4].len && memcmp(r.msg, merr.a[4].p, merr.a[4].len) == 0,
		      "the daemon says '%s', rep_error_module.hex '%.*s'", r.msg, (int)merr.a[4].len, merr.a[4].p);
	reply_free(&r);
	expect(&c, OP_MODULE_LOAD, 0, ST_BAD_ARGUMENT, NULL, "[uub]", U(0), U(4), "", (size_t)0); /* §4: empty */
	mpv_free(&hello);
	mpv_free(&sessions);
	mpv_free(&merr);
	free(hb);
	free(sb);
	free(mb);
	conn_close(&c);
}
END_TEST

size_t
contract_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"status-order", r_used_seq_order},
		{"pending-quota", r_pending_after_seq},
		{"event-create", r_event_create_flags},
		{"batch-items", r_batch_flags},
		{"graph-launch", r_graph_launch_serial},
		{"cluster", r_cluster_partly_required},
		{"vectors", r_vectors},
		{"status-private", r_status_closing_drain},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
