/*
 * test_conformance.c — the daemon against proto/PROTOCOL.md, one case per rule tag [R:...], driven only by
 * raw messages built from the spec's tables (tests/conformance/mp.c encodes them; no libcuasync, no common/).
 * The case "spec-coverage" parses PROTOCOL.md and fails listing every tag without a case and every case
 * whose tag left the spec. Each case runs against a fresh daemon (emulated device) on a private socket.
 */
#include "config.h"

#include "auth.h"
#include "rules.h"

#include <arpa/inet.h>
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

struct dmn conf_dmn; /* each case's daemon, default options */
#define D conf_dmn

static void
up(void)
{
	dmn_start(&D, NULL);
}

static void
down(void)
{
	dmn_stop(&D);
}

/* Sends a raw message and asserts status and echoed op. */
static void
raw_expect(struct conn *c, const void *msg, size_t n, uint64_t status, uint64_t op)
{
	struct reply r;
	conn_raw(c, msg, n, &r);
	ck_assert_msg(r.status == status, "got %s (%s), expected %s", r.name, r.msg, st_name(status));
	ck_assert_uint_eq(r.op, op);
	reply_free(&r);
}

/* A PING on seq 0 answers OK with its nonce: the session still works. */
static void
ping_ok(struct conn *c, uint64_t nonce)
{
	struct reply r;
	expect(c, OP_PING, 0, ST_OK, &r, "[u]", nonce);
	ck_assert_uint_eq(r.body->len, 1);
	ck_assert_uint_eq(r.body->a[0].u, nonce);
	reply_free(&r);
}

/* ------------------------------------------------------------------ §1 framing and types */

START_TEST(r_framing)
{
	struct conn c;
	sess(&c, &D);
	struct mpb m = {0};
	msg_build(&m, PV, OP_PING, 0, "[u]", U(7));
	raw_expect(&c, m.p, m.n, ST_OK, OP_PING);
	mpb_raw(&m, "\x01", 1); /* a second value after the request */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, OP_PING);
	m.n -= 3; /* the request cut short: not one value */
	struct reply r;
	conn_raw(&c, m.p, m.n, &r);
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	mpb_free(&m);
	ping_ok(&c, 8);
	conn_close(&c);
}
END_TEST

START_TEST(r_types)
{
	static const struct {
		const char *what;
		const char *bytes;
		size_t n;
	} bad[] = {
		{"map", "\x81\x01\x02", 3},
		{"empty map", "\x80", 1},
		{"nil", "\xc0", 1},
		{"false", "\xc2", 1},
		{"true", "\xc3", 1},
		{"float32", "\xca\x3f\x80\x00\x00", 5},
		{"float64", "\xcb\x3f\xf0\0\0\0\0\0\0", 9},
		{"fixext1", "\xd4\x01\x00", 3},
		{"ext8", "\xc7\x01\x05\x00", 4},
	};
	struct conn c;
	sess(&c, &D);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct reply r;
		/* as PING's nonce, and nested inside an array */
		conn_req(&c, PV, OP_PING, 0, &r, "[r]", bad[k].bytes, bad[k].n);
		ck_assert_msg(r.status == ST_PROTOCOL, "%s: %s", bad[k].what, r.name);
		reply_free(&r);
		conn_req(&c, PV, OP_MEM_ALLOC, 0, &r, "[u[r]]", U(0), bad[k].bytes, bad[k].n);
		ck_assert_msg(r.status == ST_PROTOCOL, "%s nested: %s", bad[k].what, r.name);
		reply_free(&r);
	}
	ping_ok(&c, 1);
	conn_close(&c);
}
END_TEST

/* Every uint width for uint fields (header and body), every int width for an i32 field. */
START_TEST(r_int_width)
{
	struct conn c;
	sess(&c, &D);
	static const int widths[] = {0, 1, 2, 4, 8};
	for (size_t k = 0; k < 5; k++) {
		struct mpb m = {0};
		struct reply r;
		int w = widths[k];
		mpb_arr(&m, 4);
		mpb_uint_w(&m, PV, w);
		mpb_uint_w(&m, OP_PING, w);
		mpb_uint_w(&m, 0, w);
		mpb_arr(&m, 1);
		mpb_uint_w(&m, 100 + k, w);
		conn_raw(&c, m.p, m.n, &r);
		ck_assert_msg(r.status == ST_OK, "width %d: %s %s", w, r.name, r.msg);
		ck_assert_uint_eq(r.body->a[0].u, 100 + k);
		reply_free(&r);
		mpb_free(&m);
	}
	static const int swidths[] = {-1, 1, 2, 4, 8};
	for (size_t k = 0; k < 5; k++) {
		struct mpb m = {0};
		msg_build(&m, PV, OP_STREAM_CREATE, 0, "");
		mpb_arr(&m, 3);
		mpb_uint(&m, 0);
		mpb_int_w(&m, -1, swidths[k]); /* priority: clamped to the device's range */
		mpb_uint(&m, 0);
		raw_expect(&c, m.p, m.n, ST_OK, OP_STREAM_CREATE);
		mpb_free(&m);
	}
	conn_close(&c);
}
END_TEST

START_TEST(r_field_count)
{
	struct conn c;
	sess(&c, &D);
	struct reply r;
	conn_req(&c, PV, OP_PING, 0, &r, "[]");
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	conn_req(&c, PV, OP_PING, 0, &r, "[uu]", U(1), U(2));
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	conn_req(&c, PV, OP_HELLO, 0, &r, "[uus]", U(1), U(1), "x");
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	conn_req(&c, PV, OP_MEM_ALLOC, 0, &r, "[uuu]", U(0), U(64), U(0));
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	struct mpb m = {0};
	mpb_fmt(&m, "[uuu[u]u]", U(PV), U(OP_PING), U(0), U(1), U(0)); /* a request of 5 */
	conn_raw(&c, m.p, m.n, &r);
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	mpb_free(&m);
	ping_ok(&c, 3);
	conn_close(&c);
}
END_TEST

/* ------------------------------------------------------------------ §1 replies */

START_TEST(r_reply_op)
{
	struct conn c;
	sess(&c, &D);
	struct mpb m = {0};
	msg_build(&m, PV, OP_PING, 0, "[r]", "\xcb\x3f\xf0\0\0\0\0\0\0", (size_t)9); /* a float in the body */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, OP_PING);
	msg_build(&m, PV, OP_MEM_ALLOC, 0, "[u]", U(0)); /* a wrong field count */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, OP_MEM_ALLOC);
	msg_build(&m, PV, 200, 0, "[]"); /* an unknown op */
	raw_expect(&c, m.p, m.n, ST_UNKNOWN_OP, 200);
	m.n = 0;
	mpb_fmt(&m, "[u]", U(5)); /* no second element */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, 0);
	m.n = 0;
	mpb_fmt(&m, "[usu[]]", U(PV), "x", U(0)); /* the op is not an unsigned integer */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, 0);
	m.n = 0;
	mpb_fmt(&m, "s", "hello"); /* not an array */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, 0);
	m.n = 0;
	mpb_fmt(&m, "[uu[]]", U(PV), U(OP_STATUS)); /* an array of 3: not a request, no op read */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, 0);
	mpb_free(&m);
	conn_close(&c);
}
END_TEST

START_TEST(r_reply_shape)
{
	/* conn.c asserts the shape on every reply of the suite; here one of each kind, and the limits */
	struct conn c;
	sess(&c, &D);
	struct reply r;
	conn_req(&c, PV, OP_STATUS, 0, &r, "[]");
	ck_assert_uint_eq(r.version, PV);
	ck_assert_uint_eq(r.status, ST_OK);
	ck_assert_str_eq(r.name, "OK");
	reply_free(&r);
	conn_req(&c, PV, OP_MEM_FREE, 0, &r, "[u]", U(12345));
	ck_assert_uint_eq(r.status, ST_NOT_FOUND);
	ck_assert_str_eq(r.name, "NOT_FOUND");
	ck_assert_msg(strlen(r.msg) > 0, "an error reply says what happened");
	reply_free(&r);
	conn_req(&c, PV, OP_PING, 0, &r, "[r]", "\xc0", (size_t)1);
	ck_assert_str_eq(r.name, "PROTOCOL");
	ck_assert_msg(strlen(r.msg) > 0, "an error reply says what happened");
	reply_free(&r);
	conn_close(&c);
}
END_TEST

START_TEST(r_reply_body)
{
	struct conn c;
	sess(&c, &D);
	struct reply r;
	conn_req(&c, PV, OP_PING, 0, &r, "[u]", U(0xfedcba9876543210ull));
	ck_assert_uint_eq(r.body->len, 1);
	ck_assert_uint_eq(r.body->a[0].u, 0xfedcba9876543210ull);
	reply_free(&r);
	conn_req(&c, PV, OP_SYNCHRONIZE, 0, &r, "[]");
	ck_assert_uint_eq(r.status, ST_OK);
	ck_assert_uint_eq(r.body->len, 0);
	reply_free(&r);
	static const uint64_t ops[] = {OP_MEM_ALLOC, OP_STREAM_SYNC, OP_FUNCTION_GET};
	for (size_t k = 0; k < 3; k++) { /* errors: the body is [] (asserted in conn.c) */
		conn_req(&c, PV, ops[k], 0, &r, "[uu]", U(99), U(0));
		ck_assert_uint_ne(r.status, ST_OK);
		ck_assert_uint_eq(r.body->len, 0);
		reply_free(&r);
	}
	conn_close(&c);
}
END_TEST

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
			ck_assert_uint_eq(b->len, 7);
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

/* ------------------------------------------------------------------ §1 sequence numbers */

/* Sends a PING [nonce] with seq on a flight of its own. */
static void
ping_flight(struct conn *c, struct flight *f, uint64_t seq)
{
	struct mpb m = {0};
	msg_build(&m, PV, OP_PING, seq, "[u]", seq);
	flight_send(c, f, m.p, m.n);
	mpb_free(&m);
}

static void
flight_expect(struct flight *f, uint64_t status, uint64_t op)
{
	struct reply r;
	flight_reply(f, &r);
	ck_assert_msg(r.status == status, "op %llu: %s (%s), expected %s", (unsigned long long)op, r.name, r.msg,
		      st_name(status));
	ck_assert_uint_eq(r.op, op);
	reply_free(&r);
}

START_TEST(r_seq_unordered)
{
	struct conn c;
	sess(&c, &D);
	struct flight early;
	ping_flight(&c, &early, 2); /* waits for seq 1 */
	ping_ok(&c, 9);             /* seq 0: handled on arrival, past the waiting one */
	expect(&c, OP_STATUS, 0, ST_OK, NULL, "[]");
	ck_assert_msg(!flight_wait(&early, 200), "seq 2 was handled before seq 1 arrived");
	struct flight first;
	ping_flight(&c, &first, 1);
	flight_expect(&first, ST_OK, OP_PING);
	flight_expect(&early, ST_OK, OP_PING);
	conn_close(&c);
}
END_TEST

START_TEST(r_seq_order)
{
	struct conn c;
	sess(&c, &D);
	uint64_t p = alloc(&c, 64);
	struct mpb m = {0};
	struct reply r;
	conn_req(&c, PV, OP_STREAM_CREATE, 1, &r, "[uiu]", U(0), (int64_t)0, U(0));
	ck_assert_uint_eq(r.status, ST_OK);
	uint64_t s = r.body->a[0].u;
	reply_free(&r);
	/* seq 3 reads what seq 2 writes: sent first, it must wait for seq 2 */
	struct flight rd, wr;
	msg_build(&m, PV, OP_MEMCPY_DTOH, 3, "[uuu]", p, U(4), s);
	flight_send(&c, &rd, m.p, m.n);
	ck_assert_msg(!flight_wait(&rd, 200), "seq 3 was handled before seq 2 arrived");
	static const uint8_t v[4] = {0xdd, 0xcc, 0xbb, 0xaa};
	msg_build(&m, PV, OP_MEMCPY_HTOD, 2, "[uub]", p, s, v, sizeof(v));
	flight_send(&c, &wr, m.p, m.n);
	flight_expect(&wr, ST_OK, OP_MEMCPY_HTOD);
	flight_reply(&rd, &r);
	ck_assert_msg(r.status == ST_OK, "%s %s", r.name, r.msg);
	ck_assert_uint_eq(r.body->a[0].len, 4);
	ck_assert_int_eq(memcmp(r.body->a[0].p, v, 4), 0);
	reply_free(&r);
	mpb_free(&m);
	conn_close(&c);
}
END_TEST

/* Requests that fail in each way the spec lists: [R:seq-consumed] sends each with seq k after k + 1. */
struct failing {
	const char *what;
	uint64_t version, op, status;
};

static const struct failing failing[] = {
	{"wrong field count", PV, OP_PING, ST_PROTOCOL},
	{"unknown format", PV, OP_MODULE_LOAD, ST_PROTOCOL},
	{"float in the body", PV, OP_PING, ST_PROTOCOL},
	{"unknown op", PV, 200, ST_UNKNOWN_OP},
	{"kernel name over 1024 bytes", PV, OP_FUNCTION_GET, ST_TOO_LARGE},
	{"version 2", 2, OP_PING, ST_VERSION},
	{"zero-byte alloc", PV, OP_MEM_ALLOC, ST_BAD_ARGUMENT},
	{"free of nothing", PV, OP_MEM_FREE, ST_NOT_FOUND},
	{"over --session-mem", PV, OP_MEM_ALLOC, ST_QUOTA},
};
#define NFAILING (sizeof(failing) / sizeof(failing[0]))

/* The bodies of failing[], in its order. */
static void
failing_bodies(struct mpb *b)
{
	static char longname[1025];
	memset(longname, 'k', sizeof(longname));
	mpb_fmt(&b[0], "[]");
	mpb_fmt(&b[1], "[uub]", U(0), U(99), "x", (size_t)1);
	mpb_fmt(&b[2], "[r]", "\xca\0\0\0\0", (size_t)5);
	mpb_fmt(&b[3], "[]");
	mpb_arr(&b[4], 2);
	mpb_uint(&b[4], 1);
	mpb_str(&b[4], longname, sizeof(longname));
	mpb_fmt(&b[5], "[u]", U(1));
	mpb_fmt(&b[6], "[uu]", U(0), U(0));
	mpb_fmt(&b[7], "[u]", U(4096));
	mpb_fmt(&b[8], "[uu]", U(0), U(2 << 20));
}

START_TEST(r_seq_consumed)
{
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--session-mem", "1M", NULL});
	struct conn c;
	sess(&c, &d);
	struct mpb body[NFAILING] = {{0}};
	failing_bodies(body);
	uint64_t seq = 1;
	for (size_t k = 0; k < NFAILING; k++, seq += 2) {
		struct mpb m = {0};
		struct flight bad, next;
		ping_flight(&c, &next, seq + 1); /* the later one first */
		msg_build(&m, failing[k].version, failing[k].op, seq, "r", body[k].p, body[k].n);
		flight_send(&c, &bad, m.p, m.n);
		mpb_free(&m);
		mpb_free(&body[k]);
		struct reply r;
		flight_reply(&bad, &r);
		ck_assert_msg(r.status == failing[k].status, "%s: %s (%s)", failing[k].what, r.name, r.msg);
		ck_assert_uint_eq(r.op, failing[k].op);
		reply_free(&r);
		ck_assert_msg(flight_wait(&next, 5000), "%s (seq %llu) did not use up its seq: seq %llu stalls",
			      failing[k].what, (unsigned long long)seq, (unsigned long long)seq + 1);
		flight_expect(&next, ST_OK, OP_PING);
	}
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

START_TEST(r_seq_reused)
{
	struct conn c;
	sess(&c, &D);
	struct reply r;
	conn_req(&c, PV, OP_PING, 1, &r, "[u]", U(1));
	ck_assert_uint_eq(r.status, ST_OK);
	reply_free(&r);
	conn_req(&c, PV, OP_PING, 1, &r, "[u]", U(1));
	ck_assert_str_eq(r.name, "PROTOCOL");
	ck_assert_uint_eq(r.op, OP_PING);
	reply_free(&r);
	conn_req(&c, PV, OP_PING, 2, &r, "[u]", U(2));
	ck_assert_uint_eq(r.status, ST_OK);
	reply_free(&r);
	conn_req(&c, PV, OP_MEM_ALLOC, 1, &r, "[uu]", U(0), U(64));
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	conn_close(&c);
}
END_TEST

START_TEST(r_seq_window)
{
	enum { WINDOW = 4096 };
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--contexts", "8192", "--session-pending", "8192", "--seq-gap-timeout",
					    "60000", NULL});
	struct conn c;
	sess(&c, &d);
	struct flight *f = calloc(WINDOW + 2, sizeof(*f));
	ck_assert_ptr_nonnull(f);
	/* seq 2 .. 4098 while seq 1 is missing: 4096 may wait, one (whichever arrives last) answers PROTOCOL */
	for (uint64_t k = 0; k <= WINDOW; k++)
		ping_flight(&c, &f[k], k + 2);
	int refused = -1;
	for (int round = 0; round < 200 && refused < 0; round++)
		for (int k = 0; k <= WINDOW && refused < 0; k++)
			if (flight_wait(&f[k], k == 0 ? 50 : 0))
				refused = k;
	ck_assert_msg(refused >= 0, "4097 early requests all wait");
	flight_expect(&f[refused], ST_PROTOCOL, OP_PING);
	ping_flight(&c, &f[WINDOW + 1], 1);
	flight_expect(&f[WINDOW + 1], ST_OK, OP_PING); /* seq 1 handled: the waiting ones go */
	/* the refused one did not use up its number: sent again (now that there is room), it is handled in its
	 * turn, and the ones after it, which waited for it, follow */
	ping_flight(&c, &f[refused], (uint64_t)refused + 2);
	for (int k = 0; k <= WINDOW; k++)
		flight_expect(&f[k], ST_OK, OP_PING);
	free(f);
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

/* Requests waiting for a missing seq are answered PROTOCOL after --seq-gap-timeout, naming it; every number up
 * to them counts as used. */
START_TEST(r_seq_gap)
{
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--seq-gap-timeout", "300", NULL});
	struct conn c;
	sess(&c, &d);
	struct flight f[2];
	struct reply r;
	ping_flight(&c, &f[0], 3); /* 1 and 2 never come */
	ping_flight(&c, &f[1], 4);
	for (int k = 0; k < 2; k++) {
		flight_reply(&f[k], &r);
		ck_assert_str_eq(r.name, "PROTOCOL");
		ck_assert_msg(strstr(r.msg, "sequence number 1 did not arrive within --seq-gap-timeout"), "%s", r.msg);
		reply_free(&r);
	}
	conn_req(&c, PV, OP_PING, 2, &r, "[u]", U(2));
	ck_assert_str_eq(r.name, "PROTOCOL");
	ck_assert_msg(strstr(r.msg, "already used"), "%s", r.msg);
	reply_free(&r);
	expect(&c, OP_PING, 5, ST_OK, NULL, "[u]", U(5));
	conn_close(&c);
	dmn_stop(&d);
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

/* SESSIONS row i of the reply r (14 fields, PROTOCOL.md §4 session_info). */
static const struct mpv *
session_row(const struct reply *r, uint32_t i)
{
	ck_assert_uint_eq(r->body->len, 1);
	ck_assert_uint_gt(r->body->a[0].len, i);
	const struct mpv *row = &r->body->a[0].a[i];
	ck_assert_uint_eq(row->len, 14);
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

/* ------------------------------------------------------------------ §3 handles and pointers */

START_TEST(r_handle_scope)
{
	struct conn a, b;
	sess(&a, &D);
	sess(&b, &D);
	uint64_t m = module_load(&a), f = function_get(&a, m, "axpy"), s = stream_new(&a);
	ck_assert_uint_ne(m, 0);
	ck_assert_uint_ne(f, 0);
	ck_assert_uint_ne(s, 0);
	expect(&b, OP_FUNCTION_GET, 0, ST_NOT_FOUND, NULL, "[us]", m, "axpy"); /* another session's */
	expect(&b, OP_STREAM_SYNC, 0, ST_NOT_FOUND, NULL, "[u]", s);
	expect(&b, OP_MODULE_UNLOAD, 0, ST_NOT_FOUND, NULL, "[u]", m);
	expect(&a, OP_FUNCTION_GET, 0, ST_NOT_FOUND, NULL, "[us]", s, "axpy"); /* another kind */
	expect(&a, OP_STREAM_SYNC, 0, ST_NOT_FOUND, NULL, "[u]", f);
	expect(&a, OP_STREAM_DESTROY, 0, ST_NOT_FOUND, NULL, "[u]", m);
	expect(&a, OP_MODULE_UNLOAD, 0, ST_OK, NULL, "[u]", m);
	expect(&a, OP_FUNCTION_GET, 0, ST_NOT_FOUND, NULL, "[us]", m, "axpy"); /* freed */
	expect(&a, OP_MODULE_UNLOAD, 0, ST_NOT_FOUND, NULL, "[u]", m);
	expect(&a, OP_STREAM_DESTROY, 0, ST_OK, NULL, "[u]", s);
	expect(&a, OP_STREAM_SYNC, 0, ST_NOT_FOUND, NULL, "[u]", s);
	conn_close(&a);
	conn_close(&b);
}
END_TEST

/* bad_write on a's pool stream: a sticky fault of device 0. Asserts DEVICE with the CUDA error name. */
static void
make_fault(struct conn *a)
{
	uint64_t bad = function_get(a, module_load(a), "bad_write"), p = alloc(a, 64);
	struct reply r;
	uint64_t st = launch_one(a, bad, true, p, 0, 0, &r);
	ck_assert_msg(st == ST_DEVICE, "bad_write: %s %s", r.name, r.msg);
	ck_assert_msg(strncmp(r.msg, "CUDA_ERROR_", 11) == 0, "the message starts with the CUDA error: %s", r.msg);
	reply_free(&r);
}

START_TEST(r_handle_stale)
{
	struct conn a, b;
	sess(&a, &D);
	sess(&b, &D);
	uint64_t m = module_load(&b), f = function_get(&b, m, "fill_u32"), s = stream_new(&b), p = alloc(&b, 64);
	make_fault(&a);
	expect(&b, OP_STREAM_SYNC, 0, ST_CONTEXT_LOST, NULL, "[u]", s);
	expect(&b, OP_FUNCTION_GET, 0, ST_CONTEXT_LOST, NULL, "[us]", m, "spin");
	ck_assert_uint_eq(launch_fill(&b, 0, f, p, 1, 1, 0, 0, NULL), ST_CONTEXT_LOST);
	expect(&b, OP_STREAM_DESTROY, 0, ST_CONTEXT_LOST, NULL, "[u]", s);
	expect(&b, OP_MODULE_UNLOAD, 0, ST_CONTEXT_LOST, NULL, "[u]", m);
	function_get(&b, module_load(&b), "spin"); /* recreated objects work */
	conn_close(&a);
	conn_close(&b);
}
END_TEST

START_TEST(r_pointer_stale)
{
	struct conn a, b;
	sess(&a, &D);
	sess(&b, &D);
	uint64_t p = alloc(&b, 64);
	make_fault(&a);
	expect(&b, OP_MEMCPY_DTOH, 0, ST_CONTEXT_LOST, NULL, "[uuu]", p, U(4), U(0));
	expect(&b, OP_MEMCPY_HTOD, 0, ST_CONTEXT_LOST, NULL, "[uub]", p + 8, U(0), "abcd", (size_t)4);
	expect(&b, OP_MEMSET, 0, ST_CONTEXT_LOST, NULL, "[uuuuu]", p, U(0), U(1), U(4), U(0));
	expect(&b, OP_MEM_FREE, 0, ST_CONTEXT_LOST, NULL, "[u]", p);
	conn_close(&a);
	conn_close(&b);
}
END_TEST

START_TEST(r_stream_zero)
{
	struct conn c;
	sess(&c, &D);
	expect(&c, OP_STREAM_SYNC, 0, ST_BAD_ARGUMENT, NULL, "[u]", U(0));
	expect(&c, OP_STREAM_DESTROY, 0, ST_BAD_ARGUMENT, NULL, "[u]", U(0));
	uint64_t p = alloc(&c, 16);
	uint8_t out[4];
	htod(&c, p, 0, "wxyz", 4); /* stream 0: a pool stream */
	expect(&c, OP_SYNCHRONIZE, 0, ST_OK, NULL, "[]");
	dtoh(&c, p, 0, out, 4);
	ck_assert_int_eq(memcmp(out, "wxyz", 4), 0);
	conn_close(&c);
}
END_TEST

START_TEST(r_pointer_check)
{
	struct conn a, b;
	sess(&a, &D);
	sess(&b, &D);
	uint64_t pa = alloc(&a, 64), pb = alloc(&b, 64), pc = alloc(&a, 64);
	uint64_t f = function_get(&a, module_load(&a), "fill_u32");
	expect(&a, OP_MEM_FREE, 0, ST_OK, NULL, "[u]", pc);
	expect(&a, OP_MEMCPY_HTOD, 0, ST_BAD_ARGUMENT, NULL, "[uub]", pb, U(0), "abcd", (size_t)4);
	expect(&a, OP_MEMCPY_HTOD, 0, ST_BAD_ARGUMENT, NULL, "[uub]", pa + 60, U(0), "abcdefgh", (size_t)8);
	expect(&a, OP_MEMCPY_HTOD, 0, ST_BAD_ARGUMENT, NULL, "[uub]", pc, U(0), "abcd", (size_t)4);
	expect(&a, OP_MEMCPY_HTOD, 0, ST_OK, NULL, "[uub]", pa + 56, U(0), "abcdefgh", (size_t)8);
	expect(&a, OP_MEMCPY_DTOH, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", pa, U(65), U(0));
	expect(&a, OP_MEMCPY_DTOH, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", pb, U(4), U(0));
	expect(&a, OP_MEMCPY_DTOD, 0, ST_BAD_ARGUMENT, NULL, "[uuuu]", pa, pb, U(4), U(0));
	expect(&a, OP_MEMCPY_DTOD, 0, ST_BAD_ARGUMENT, NULL, "[uuuu]", pb, pa, U(4), U(0));
	expect(&a, OP_MEMSET, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", pa, U(0), U(4), U(17), U(0));
	expect(&a, OP_MEMSET, 0, ST_OK, NULL, "[uuuuu]", pa, U(0), U(4), U(16), U(0));
	ck_assert_uint_eq(launch_fill(&a, 0, f, pb, 1, 1, 0, 0, NULL), ST_BAD_ARGUMENT);
	ck_assert_uint_eq(launch_fill(&a, 0, f, pc, 1, 1, 0, 0, NULL), ST_BAD_ARGUMENT);
	ck_assert_uint_eq(launch_fill(&a, 0, f, pa + 8, 1, 1, 0, 0, NULL), ST_OK);
	conn_close(&a);
	conn_close(&b);
}
END_TEST

START_TEST(r_free_check)
{
	struct conn a, b;
	sess(&a, &D);
	sess(&b, &D);
	uint64_t p = alloc(&a, 64), q = alloc(&b, 64);
	expect(&a, OP_MEM_FREE, 0, ST_NOT_FOUND, NULL, "[u]", q);
	expect(&a, OP_MEM_FREE, 0, ST_NOT_FOUND, NULL, "[u]", U(0x10));
	expect(&a, OP_MEM_FREE, 0, ST_BAD_ARGUMENT, NULL, "[u]", p + 16);
	expect(&a, OP_MEM_FREE, 0, ST_OK, NULL, "[u]", p);
	expect(&a, OP_MEM_FREE, 0, ST_NOT_FOUND, NULL, "[u]", p);
	conn_close(&a);
	conn_close(&b);
}
END_TEST

START_TEST(r_pointer_bytes)
{
	struct conn a, b;
	sess(&a, &D);
	sess(&b, &D);
	uint64_t pb = alloc(&b, 64);
	uint64_t f = function_get(&a, module_load(&a), "fill_u32");
	struct mpb args = {0}, body = {0}, m = {0};
	uint32_t v = 0x5eed;
	uint64_t n = 4;
	/* the pointer as 8 bytes: passed as it is, unchecked (the checks guard against mistakes only) */
	mpb_fmt(&args, "bbb", &pb, sizeof(pb), &v, sizeof(v), &n, sizeof(n));
	launch_body(&body, f, 1, 32, 0, 0, &args, 3);
	msg_build(&m, PV, OP_LAUNCH, 0, "r", body.p, body.n);
	raw_expect(&a, m.p, m.n, ST_OK, OP_LAUNCH);
	uint32_t out[4];
	dtoh(&b, pb, 0, out, sizeof(out));
	ck_assert_uint_eq(out[3], 0x5eed);
	mpb_free(&args);
	mpb_free(&body);
	mpb_free(&m);
	conn_close(&a);
	conn_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ §4 requests */

START_TEST(r_module_reject)
{
	static const struct {
		const char *what;
		uint64_t format;
		const char *img;
		size_t n;
	} bad[] = {
		{"fatbin magic and noise", 0, "\x50\xed\x55\xba\x01\x00\x10\x00\x13\x37\xca\xfe\x99\x88\x77\x66", 16},
		{"fatbin magic and noise as fatbin", 2, "\x50\xed\x55\xba\x01\x00\x10\x00\x13\x37\xca\xfe", 12},
		{"a fake cubin", 1,
		 "\x7f"
		 "ELF\x02\x01\x01\x00garbage-garbage-garbage",
		 31},
		{"garbage as PTX", 3, "this is not PTX at all", 22},
		{"garbage, detected", 0, "lorem ipsum dolor sit amet", 26},
		{"garbage as an emulated-device image", 4, "not an image\n", 13},
	};
	struct conn c;
	sess(&c, &D);
	expect(&c, OP_MODULE_LOAD, 0, ST_BAD_ARGUMENT, NULL, "[uub]", U(0), U(0), "", (size_t)0);
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct reply r;
		conn_req(&c, PV, OP_MODULE_LOAD, 0, &r, "[uub]", U(0), bad[k].format, bad[k].img, bad[k].n);
		ck_assert_msg(r.status == ST_MODULE, "%s: %s (%s)", bad[k].what, r.name, r.msg);
		ck_assert_msg(strlen(r.msg) > 0, "%s: MODULE carries the loader log", bad[k].what);
		reply_free(&r);
	}
	conn_close(&c);
}
END_TEST

/* FUNCTION_GET's params of name must be the layout of tests/kernels/test_kernels.cu (pairs, n of them). */
static void
params_are(struct conn *c, uint64_t m, const char *name, const uint32_t *want, uint32_t n)
{
	struct reply r;
	expect(c, OP_FUNCTION_GET, 0, ST_OK, &r, "[us]", m, name);
	ck_assert_uint_eq(r.body->len, 2);
	ck_assert_uint_ne(r.body->a[0].u, 0);
	const struct mpv *p = &r.body->a[1];
	ck_assert_uint_eq(p->len, n);
	for (uint32_t k = 0; k < n; k++) {
		ck_assert_uint_eq(p->a[k].len, 2);
		ck_assert_uint_eq(p->a[k].a[0].u, want[2 * k]);
		ck_assert_uint_eq(p->a[k].a[1].u, want[2 * k + 1]);
	}
	reply_free(&r);
}

START_TEST(r_function_get)
{
	struct conn c;
	sess(&c, &D);
	uint64_t m = module_load(&c);
	params_are(&c, m, "axpy", (const uint32_t[]){0, 4, 8, 8, 16, 8, 24, 8}, 4);
	params_are(&c, m, "fill_u32", (const uint32_t[]){0, 8, 8, 4, 16, 8}, 3);
	params_are(&c, m, "empty_kernel", NULL, 0);
	expect(&c, OP_FUNCTION_GET, 0, ST_NOT_FOUND, NULL, "[us]", m, "no_such_kernel");
	expect(&c, OP_FUNCTION_GET, 0, ST_BAD_ARGUMENT, NULL, "[us]", m, "");
	struct mpb b = {0};
	msg_build(&b, PV, OP_FUNCTION_GET, 0, "");
	mpb_arr(&b, 2);
	mpb_uint(&b, m);
	mpb_str(&b, "ax\0py", 5);
	raw_expect(&c, b.p, b.n, ST_BAD_ARGUMENT, OP_FUNCTION_GET);
	mpb_free(&b);
	conn_close(&c);
}
END_TEST

START_TEST(r_alloc)
{
	struct conn c;
	sess(&c, &D);
	expect(&c, OP_MEM_ALLOC, 0, ST_BAD_ARGUMENT, NULL, "[uu]", U(0), U(0));
	/* by default a session may hold a quarter of a device's memory (--emu-mem 256M here) */
	expect(&c, OP_MEM_ALLOC, 0, ST_QUOTA, NULL, "[uu]", U(0), U(65) << 20);
	expect(&c, OP_MEM_ALLOC, 0, ST_BAD_ARGUMENT, NULL, "[uu]", U(5), U(64)); /* no device 5 */
	expect(&c, OP_MEM_ALLOC, 0, ST_PROTOCOL, NULL, "[uu]", U(64), U(64));    /* u32≤63 */
	ck_assert_uint_ne(alloc(&c, 64), 0);
	conn_close(&c);
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--session-mem", "1M", NULL});
	sess(&c, &d);
	alloc(&c, 1 << 19);
	struct reply r;
	expect(&c, OP_MEM_ALLOC, 0, ST_QUOTA, &r, "[uu]", U(0), U(1) << 20);
	ck_assert_msg(strstr(r.msg, "--session-mem") != NULL, "the message names the option: %s", r.msg);
	reply_free(&r);
	conn_close(&c);
	dmn_stop(&d);
	dmn_start(&d, (const char *const[]){"--session-mem", "0", NULL}); /* no limit: the device says no */
	sess(&c, &d);
	expect(&c, OP_MEM_ALLOC, 0, ST_NO_MEMORY, NULL, "[uu]", U(0), U(1) << 30);
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

START_TEST(r_memset)
{
	struct conn c;
	sess(&c, &D);
	uint64_t p = alloc(&c, 16);
	uint8_t out[16], want[16];
	expect(&c, OP_MEMSET, 0, ST_OK, NULL, "[uuuuu]", p, U(0xab), U(1), U(16), U(0));
	memset(want, 0xab, 16);
	dtoh(&c, p, 0, out, 16);
	ck_assert_int_eq(memcmp(out, want, 16), 0);
	expect(&c, OP_MEMSET, 0, ST_OK, NULL, "[uuuuu]", p, U(0x1234), U(2), U(2), U(0)); /* count: elements */
	expect(&c, OP_MEMSET, 0, ST_OK, NULL, "[uuuuu]", p + 8, U(0xdeadbeef), U(4), U(1), U(0));
	memcpy(want, "\x34\x12\x34\x12", 4);
	memcpy(want + 8, "\xef\xbe\xad\xde", 4);
	dtoh(&c, p, 0, out, 16);
	ck_assert_int_eq(memcmp(out, want, 16), 0);
	expect(&c, OP_MEMSET, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", p, U(0), U(3), U(1), U(0));
	expect(&c, OP_MEMSET, 0, ST_PROTOCOL, NULL, "[uuuuu]", p, U(0), U(8), U(1), U(0)); /* over u32≤4 */
	expect(&c, OP_MEMSET, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", p, U(256), U(1), U(1), U(0));
	expect(&c, OP_MEMSET, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", p, U(65536), U(2), U(1), U(0));
	expect(&c, OP_MEMSET, 0, ST_PROTOCOL, NULL, "[uuuuu]", p, U(1) << 32, U(4), U(1), U(0)); /* not a u32 */
	/* zero-byte copies */
	expect(&c, OP_MEMCPY_HTOD, 0, ST_BAD_ARGUMENT, NULL, "[uub]", p, U(0), "", (size_t)0);
	expect(&c, OP_MEMCPY_DTOH, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", p, U(0), U(0));
	expect(&c, OP_MEMCPY_DTOD, 0, ST_BAD_ARGUMENT, NULL, "[uuuu]", p, p + 8, U(0), U(0));
	conn_close(&c);
}
END_TEST

START_TEST(r_dtoh_limit)
{
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--max-message", "1M", NULL});
	struct conn c;
	uint64_t max;
	conn_open(&c, d.url);
	conn_hello(&c, &max);
	ck_assert_uint_eq(max, 1 << 20);
	uint64_t p = alloc(&c, max);
	struct reply r;
	expect(&c, OP_MEMCPY_DTOH, 0, ST_OK, &r, "[uuu]", p, max - 4096, U(0)); /* exactly the limit */
	ck_assert_uint_eq(r.body->a[0].len, max - 4096);
	reply_free(&r);
	expect(&c, OP_MEMCPY_DTOH, 0, ST_TOO_LARGE, &r, "[uuu]", p, max - 4095, U(0));
	char lim[32];
	snprintf(lim, sizeof(lim), "%llu", (unsigned long long)(max - 4096));
	ck_assert_msg(strstr(r.msg, lim) != NULL, "the message names the limit %s: %s", lim, r.msg);
	reply_free(&r);
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

START_TEST(r_launch_pdl)
{
	struct conn c;
	sess(&c, &D); /* sm_90: PDL runs */
	uint64_t m = module_load(&c), f = function_get(&c, m, "pdl_count"), p = alloc(&c, 4);
	expect(&c, OP_MEMSET, 0, ST_OK, NULL, "[uuuuu]", p, U(0), U(4), U(1), U(0));
	ck_assert_uint_eq(launch_one(&c, f, true, p, 0, 1, NULL), ST_OK);
	uint32_t v;
	dtoh(&c, p, 0, &v, 4);
	ck_assert_uint_eq(v, 1);
	conn_close(&c);
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--emu-sm", "80", NULL});
	sess(&c, &d);
	m = module_load(&c);
	f = function_get(&c, m, "pdl_count");
	p = alloc(&c, 4);
	struct reply r;
	ck_assert_uint_eq(launch_one(&c, f, true, p, 0, 1, &r), ST_PDL_UNSUPPORTED);
	ck_assert_str_eq(r.msg, "programmatic dependent launch requires sm_90 or newer; target sm_80");
	reply_free(&r);
	ck_assert_uint_eq(launch_one(&c, f, true, p, 0, 0, NULL), ST_OK); /* without PDL it runs */
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

/* A LAUNCH of f with a 1-D grid/block and args from fmt (count values); returns the status. */
static uint64_t
launch_args(struct conn *c, uint64_t f, uint64_t grid, uint64_t block, uint64_t flags, uint32_t count, const char *fmt,
	    ...)
{
	struct mpb a = {0}, body = {0}, m = {0};
	va_list ap;
	va_start(ap, fmt);
	mpb_vfmt(&a, fmt, &ap);
	va_end(ap);
	launch_body(&body, f, grid, block, 0, flags, &a, count);
	msg_build(&m, PV, OP_LAUNCH, 0, "r", body.p, body.n);
	struct reply r;
	conn_raw(c, m.p, m.n, &r);
	uint64_t st = r.status;
	ck_assert_uint_eq(r.op, OP_LAUNCH);
	if (st == ST_BAD_ARGUMENT)
		ck_assert_msg(strlen(r.msg) > 0, "BAD_ARGUMENT names the argument");
	reply_free(&r);
	mpb_free(&a);
	mpb_free(&body);
	mpb_free(&m);
	return st;
}

START_TEST(r_launch_args)
{
	struct conn c;
	sess(&c, &D);
	uint64_t m = module_load(&c), f = function_get(&c, m, "fill_u32"), p = alloc(&c, 256), n = 8;
	uint32_t v = 7;
	static uint8_t big[32765];
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 3, "ubb", p, &v, U(4), &n, U(8)), ST_OK);
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 2, "ub", p, &v, U(4)), ST_BAD_ARGUMENT); /* count */
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 4, "ubbb", p, &v, U(4), &n, U(8), &v, U(4)), ST_BAD_ARGUMENT);
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 3, "ubb", p, &n, U(8), &n, U(8)), ST_BAD_ARGUMENT); /* size */
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 3, "uub", p, p, &n, U(8)), ST_BAD_ARGUMENT); /* ptr is 8 */
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 3, "ubb", p + 256, &v, U(4), &n, U(8)), ST_BAD_ARGUMENT);
	ck_assert_uint_eq(launch_args(&c, f, 0, 32, 0, 3, "ubb", p, &v, U(4), &n, U(8)), ST_BAD_ARGUMENT); /* grid */
	ck_assert_uint_eq(launch_args(&c, f, 1, 0, 0, 3, "ubb", p, &v, U(4), &n, U(8)), ST_BAD_ARGUMENT);  /* block */
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 3, "ubb", p, &v, U(0), &n, U(8)), ST_PROTOCOL);     /* 0 B */
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 3, "ubb", p, big, U(4097), &n, U(8)), ST_BAD_ARGUMENT);
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 3, "ubb", p, big, U(32765), &n, U(8)), ST_PROTOCOL);
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 0, 3, "usb", p, "abcd", &n, U(8)), ST_PROTOCOL);   /* a str */
	ck_assert_uint_eq(launch_args(&c, f, 1, 32, 8, 3, "ubb", p, &v, U(4), &n, U(8)), ST_PROTOCOL); /* flags */
	uint32_t out[8];
	dtoh(&c, p, 0, out, sizeof(out));
	ck_assert_uint_eq(out[7], 7);
	conn_close(&c);
}
END_TEST

/* ------------------------------------------------------------------ §4 shared host memory */

/* A memfd of n bytes, sealed against shrinking when seal. */
static int
memfd(size_t n, bool seal)
{
	int fd = memfd_create("conformance", MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)n), 0);
	if (seal)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

/* A free TCP port on 127.0.0.1 (bound then released). */
static int
free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
	close(s);
	return ntohs(a.sin_port);
}

START_TEST(r_hostbuf_ipc)
{
	char tcp[64];
	snprintf(tcp, sizeof(tcp), "tcp://127.0.0.1:%d", free_port());
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--listen", tcp, "--allow-insecure-tcp", NULL});
	int fd = memfd(4096, true);
	struct conn c;
	sess(&c, &d);
	struct reply r;
	expect(&c, OP_HOST_REGISTER, 0, ST_OK, &r, "[uuu]", U(0), U(fd), U(4096)); /* over ipc:// */
	ck_assert_uint_ne(r.body->a[0].u, 0);
	reply_free(&r);
	conn_close(&c);
	conn_open(&c, tcp);
	conn_hello(&c, NULL);
	expect(&c, OP_HOST_REGISTER, 0, ST_UNSUPPORTED, NULL, "[uuu]", U(0), U(fd), U(4096));
	conn_close(&c);
	close(fd);
	dmn_stop(&d);
}
END_TEST

START_TEST(r_hostbuf_range)
{
	struct conn c;
	sess(&c, &D);
	int fd = memfd(8192, true), loose = memfd(8192, false);
	char path[128];
	snprintf(path, sizeof(path), "%s/plain", D.dir);
	int plain = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(plain, 0);
	ck_assert_int_eq(ftruncate(plain, 8192), 0);
	expect(&c, OP_HOST_REGISTER, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", U(0), U(plain), U(8192)); /* not a memfd */
	expect(&c, OP_HOST_REGISTER, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", U(0), U(loose), U(8192)); /* not sealed */
	expect(&c, OP_HOST_REGISTER, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", U(0), U(fd), U(8193));    /* too small */
	struct reply r;
	expect(&c, OP_HOST_REGISTER, 0, ST_OK, &r, "[uuu]", U(0), U(fd), U(8192));
	uint64_t h = r.body->a[0].u, p = alloc(&c, 8192);
	reply_free(&r);
	uint8_t *map = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	memcpy(map + 4096, "host", 4);
	expect(&c, OP_MEMCPY_HTOD_HOST, 0, ST_OK, NULL, "[uuuuu]", p, U(0), h, U(4096), U(4096));
	expect(&c, OP_MEMCPY_DTOH_HOST, 0, ST_OK, NULL, "[uuuuu]", p, U(0), h, U(0), U(4));
	ck_assert_int_eq(memcmp(map, "host", 4), 0);
	expect(&c, OP_MEMCPY_HTOD_HOST, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", p, U(0), h, U(4097), U(4096));
	expect(&c, OP_MEMCPY_DTOH_HOST, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", p, U(0), h, U(8192), U(1));
	expect(&c, OP_MEMCPY_DTOH_HOST, 0, ST_BAD_ARGUMENT, NULL, "[uuuuu]", p, U(0), h, U(0), U(8193));
	expect(&c, OP_HOST_UNREGISTER, 0, ST_OK, NULL, "[u]", h);
	munmap(map, 8192);
	close(fd);
	close(loose);
	close(plain);
	conn_close(&c);
}
END_TEST

/* ------------------------------------------------------------------ §4 BATCH and SYNCHRONIZE */

/* Sends BATCH [flags, items] with items pre-encoded (count of them); the reply in r. */
static void
batch(struct conn *c, const struct mpb *items, uint32_t count, struct reply *r)
{
	struct mpb m = {0};
	msg_build(&m, PV, OP_BATCH, 0, "");
	mpb_arr(&m, 2);
	mpb_uint(&m, 0);
	mpb_arr(&m, count);
	mpb_raw(&m, items->p, items->n);
	conn_raw(c, m.p, m.n, r);
	mpb_free(&m);
}

/* Asserts result k of a BATCH reply: [status, name, message, data] with data of n bytes. */
static const struct mpv *
result_is(const struct reply *r, uint32_t k, uint64_t status, uint32_t n)
{
	ck_assert_uint_eq(r->status, ST_OK);
	const struct mpv *res = &r->body->a[0].a[k];
	ck_assert_uint_eq(res->len, 4);
	ck_assert_msg(res->a[0].u == status, "item %u: %llu, expected %s", k, (unsigned long long)res->a[0].u,
		      st_name(status));
	ck_assert_int_eq(res->a[1].t, MP_STR);
	ck_assert_int_eq(memcmp(res->a[1].p, st_name(status), res->a[1].len), 0);
	ck_assert_int_eq(res->a[3].t, MP_BIN);
	ck_assert_uint_eq(res->a[3].len, n);
	return &res->a[3];
}

START_TEST(r_batch_items)
{
	struct conn c;
	sess(&c, &D);
	uint64_t p = alloc(&c, 64);
	struct mpb it = {0};
	struct reply r;
	/* a kind not allowed (8, MEM_FREE): PROTOCOL as a whole, and the HTOD before it did not run */
	mpb_fmt(&it, "[u[uub]] [u[u]]", U(OP_MEMCPY_HTOD), p, U(0), "XXXX", (size_t)4, U(OP_MEM_FREE), p);
	batch(&c, &it, 2, &r);
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	it.n = 0; /* a body of the wrong shape */
	mpb_fmt(&it, "[u[uub]] [u[uu]]", U(OP_MEMCPY_HTOD), p, U(0), "XXXX", (size_t)4, U(OP_MEMCPY_DTOH), p, U(4));
	batch(&c, &it, 2, &r);
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	it.n = 0; /* a value out of its table range (width is u32, value 2^32 is not) */
	mpb_fmt(&it, "[u[uuuuu]]", U(OP_MEMSET), p, U(1) << 32, U(4), U(1), U(0));
	batch(&c, &it, 1, &r);
	ck_assert_str_eq(r.name, "PROTOCOL");
	reply_free(&r);
	uint8_t out[4];
	dtoh(&c, p, 0, out, 4);
	ck_assert_int_eq(memcmp(out, "\0\0\0\0", 4), 0);
	uint64_t s = stream_new(&c);
	it.n = 0; /* values checked item by item */
	mpb_fmt(&it, "[u[uub]] [u[uuuuu]] [u[uuu]] [u[uuu]]", U(OP_MEMCPY_HTOD), p, s, "abcd", (size_t)4, U(OP_MEMSET),
		p, U(0), U(3), U(1), s, U(OP_MEMCPY_DTOH), p, U(4), s, U(OP_MEMCPY_DTOH), p + 4096, U(4), s);
	batch(&c, &it, 4, &r);
	result_is(&r, 0, ST_OK, 0);
	result_is(&r, 1, ST_BAD_ARGUMENT, 0);
	ck_assert_int_eq(memcmp(result_is(&r, 2, ST_OK, 4)->p, "abcd", 4), 0);
	result_is(&r, 3, ST_BAD_ARGUMENT, 0);
	ck_assert_uint_eq(r.body->a[0].len, 4);
	reply_free(&r);
	mpb_free(&it);
	conn_close(&c);
}
END_TEST

START_TEST(r_batch_dtoh)
{
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--max-message", "1M", NULL});
	struct conn c;
	uint64_t max;
	conn_open(&c, d.url);
	conn_hello(&c, &max);
	uint64_t lim = max - 4096, half = lim / 2, p = alloc(&c, max);
	struct mpb it = {0};
	struct reply r;
	/* the limit in all, less room for the two results around the data (about 24 bytes each) */
	mpb_fmt(&it, "[u[uuu]] [u[uuu]]", U(OP_MEMCPY_DTOH), p, half, U(0), U(OP_MEMCPY_DTOH), p, lim - half - 64,
		U(0));
	batch(&c, &it, 2, &r);
	result_is(&r, 0, ST_OK, (uint32_t)half);
	result_is(&r, 1, ST_OK, (uint32_t)(lim - half - 64));
	reply_free(&r);
	it.n = 0;
	mpb_fmt(&it, "[u[uuu]] [u[uuu]] [u[uuu]]", U(OP_MEMCPY_DTOH), p, half, U(0), U(OP_MEMCPY_DTOH), p,
		lim - half + 1, U(0), U(OP_MEMCPY_DTOH), p, U(16), U(0));
	batch(&c, &it, 3, &r); /* the second would pass the limit; the third fits after it */
	result_is(&r, 0, ST_OK, (uint32_t)half);
	result_is(&r, 1, ST_TOO_LARGE, 0);
	result_is(&r, 2, ST_OK, 16);
	reply_free(&r);
	mpb_free(&it);
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

START_TEST(r_synchronize)
{
	struct conn c;
	sess(&c, &D);
	expect(&c, OP_SYNCHRONIZE, 0, ST_OK, NULL, "[]");
	uint64_t m = module_load(&c), spin = function_get(&c, m, "spin"), fill = function_get(&c, m, "fill_u32");
	uint64_t s = stream_new(&c), s2 = stream_new(&c), p = alloc(&c, 64);
	/* fire-and-forget work on s: SYNCHRONIZE returns after it completed */
	ck_assert_uint_eq(launch_one(&c, spin, false, 300000000, s, 2, NULL), ST_OK);
	ck_assert_uint_eq(launch_fill(&c, 0, fill, p, 0x77, 16, s, 2, NULL), ST_OK);
	expect(&c, OP_SYNCHRONIZE, 0, ST_OK, NULL, "[]");
	uint32_t out[16];
	dtoh(&c, p, s2, out, sizeof(out));
	ck_assert_uint_eq(out[15], 0x77);
	/* a fire-and-forget execution error comes back from the next SYNCHRONIZE, once */
	uint64_t bad = function_get(&c, m, "bad_write");
	ck_assert_uint_eq(launch_one(&c, bad, true, p, s, 2, NULL), ST_OK);
	struct reply r;
	conn_req(&c, PV, OP_SYNCHRONIZE, 0, &r, "[]");
	ck_assert_msg(r.status == ST_DEVICE, "%s %s", r.name, r.msg);
	ck_assert_msg(strncmp(r.msg, "CUDA_ERROR_", 11) == 0, "%s", r.msg);
	reply_free(&r);
	expect(&c, OP_SYNCHRONIZE, 0, ST_OK, NULL, "[]");
	conn_close(&c);
}
END_TEST

/* ------------------------------------------------------------------ §5 status codes */

START_TEST(r_status_order)
{
	struct conn c;
	conn_open(&c, D.url);
	/* the message before the connection: no HELLO yet, yet these are not NO_SESSION */
	expect(&c, OP_MEM_ALLOC, 0, ST_PROTOCOL, NULL, "[ur]", U(0), "\xc0", (size_t)1);
	expect(&c, OP_MEM_ALLOC, 0, ST_PROTOCOL, NULL, "[u]", U(0));
	expect(&c, 200, 0, ST_UNKNOWN_OP, NULL, "[]");
	struct reply r;
	conn_req(&c, 2, OP_MEM_ALLOC, 0, &r, "[uu]", U(0), U(64));
	ck_assert_str_eq(r.name, "VERSION");
	reply_free(&r);
	/* the connection before the values */
	expect(&c, OP_STREAM_SYNC, 0, ST_NO_SESSION, NULL, "[u]", U(0));
	expect(&c, OP_MEM_ALLOC, 0, ST_NO_SESSION, NULL, "[uu]", U(0), U(0));
	conn_hello(&c, NULL);
	/* the values before the device: no device 7 is BAD_ARGUMENT, not NO_MEMORY */
	expect(&c, OP_MEM_ALLOC, 0, ST_BAD_ARGUMENT, NULL, "[uu]", U(7), U(1) << 40);
	conn_close(&c);
}
END_TEST

/* ------------------------------------------------------------------ §6 limits */

START_TEST(r_pending_quota)
{
	enum { N = 4, SENT = 8 };
	struct dmn d;
	/* the early ones wait for seq 1 longer than the default gap timeout while this test looks at them */
	dmn_start(&d, (const char *const[]){"--session-pending", "4", "--seq-gap-timeout", "60000", NULL});
	struct conn c;
	sess(&c, &d);
	struct flight f[SENT + 1];
	for (int k = 0; k < SENT; k++) /* seq 2..9 while seq 1 is missing: they stay unanswered */
		ping_flight(&c, &f[k], (uint64_t)k + 2);
	int quota = 0;
	bool answered[SENT] = {false};
	for (int k = 0; k < SENT; k++) {
		answered[k] = flight_wait(&f[k], k < N ? 300 : 3000);
		if (answered[k]) {
			struct reply r;
			flight_reply(&f[k], &r);
			ck_assert_msg(r.status == ST_QUOTA, "seq %d: %s", k + 2, r.name);
			ck_assert_msg(strstr(r.msg, "--session-pending") != NULL, "names the option: %s", r.msg);
			reply_free(&r);
			quota++;
		}
	}
	ck_assert_msg(quota == SENT - N, "%d of %d answered QUOTA at once, expected %d", quota, SENT, SENT - N);
	ping_flight(&c, &f[SENT], 1); /* its turn, but N are unanswered: QUOTA too, and its seq is used up */
	flight_expect(&f[SENT], ST_QUOTA, OP_PING);
	for (int k = 0; k < SENT; k++)
		if (!answered[k])
			flight_expect(&f[k], ST_OK, OP_PING);
	struct reply r; /* the QUOTA ones used up their seq: seq 10 is next */
	conn_req(&c, PV, OP_PING, SENT + 2, &r, "[u]", U(1));
	ck_assert_msg(r.status == ST_OK, "seq %d after the QUOTA ones: %s", SENT + 2, r.name);
	reply_free(&r);
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

START_TEST(r_malformed_survives)
{
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--max-message", "1M", NULL});
	struct conn a, b;
	sess(&a, &d);
	sess(&b, &d);
	static const struct {
		const char *bytes;
		size_t n;
	} junk[] = {
		{"\xc1", 1},
		{"\x94\x01\x02", 3},
		{"\xdd\xff\xff\xff\xff", 5},
		{"\x91\x91\x91\x91\x91\x91\x91\x91\x91\x90", 10},
		{"\x94\x01\x02\x00\xdc\xff\xff", 7},
		{"", 0},
	};
	for (size_t k = 0; k < sizeof(junk) / sizeof(junk[0]); k++) {
		struct reply r;
		conn_raw(&a, junk[k].bytes, junk[k].n, &r);
		ck_assert_msg(r.status == ST_PROTOCOL || r.status == ST_TOO_LARGE, "junk %zu: %s", k, r.name);
		reply_free(&r);
		ping_ok(&a, k);
		ping_ok(&b, k);
	}
	size_t n = (2u << 20);
	uint8_t *big = calloc(1, n);
	ck_assert_ptr_nonnull(big);
	struct mpb m = {0};
	msg_build(&m, PV, OP_MEMCPY_HTOD, 0, "[uub]", U(1), U(0), big, n);
	free(big);
	struct flight f;
	flight_send(&a, &f, m.p, m.n);
	mpb_free(&m);
	/* answered TOO_LARGE when NNG delivered it; otherwise NNG closed the connection */
	if (flight_wait(&f, 2000) && nng_aio_result(f.aio) == 0) {
		struct reply r;
		flight_reply(&f, &r);
		ck_assert_str_eq(r.name, "TOO_LARGE");
		reply_free(&r);
	} else
		flight_drop(&f);
	ping_ok(&b, 99);
	expect(&b, OP_STATUS, 0, ST_OK, NULL, "[]");
	conn_close(&a);
	conn_close(&b);
	dmn_stop(&d);
}
END_TEST

/* STATUS's devices[0].in_flight. */
static uint64_t
dev_in_flight(struct conn *c)
{
	struct reply r;
	expect(c, OP_STATUS, 0, ST_OK, &r, "[]");
	uint64_t v = r.body->a[4].a[0].a[3].u;
	reply_free(&r);
	return v;
}

/* --isolation session: a session's fault ends its own context only; another session's memory and data live on. */
START_TEST(r_isolation)
{
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--isolation", "session", NULL});
	struct conn a, b;
	sess(&a, &d);
	sess(&b, &d);
	uint64_t p = alloc(&b, 64);
	uint8_t in[64], out[64];
	for (int i = 0; i < 64; i++)
		in[i] = (uint8_t)(i * 7 + 1);
	expect(&b, OP_MEMCPY_HTOD, 0, ST_OK, NULL, "[uub]", p, U(0), in, sizeof(in));
	make_fault(&a);
	dtoh(&b, p, 0, out, sizeof(out)); /* asserts OK: b's context was not a's */
	ck_assert_int_eq(memcmp(in, out, sizeof(in)), 0);
	conn_close(&a);
	conn_close(&b);
	dmn_stop(&d);
}
END_TEST

START_TEST(r_fault)
{
	struct conn a, b;
	sess(&a, &D);
	sess(&b, &D);
	uint64_t m = module_load(&b), spin = function_get(&b, m, "spin"), fill = function_get(&b, m, "fill_u32");
	uint64_t s = stream_new(&b), p = alloc(&b, 64);
	struct mpb args = {0}, body = {0}, msg = {0};
	int64_t ns = 2000000000; /* running when the fault hits */
	mpb_bin(&args, &ns, sizeof(ns));
	launch_body(&body, spin, 1, 1, s, 0, &args, 1);
	msg_build(&msg, PV, OP_LAUNCH, 0, "r", body.p, body.n);
	struct flight running, queued;
	flight_send(&b, &running, msg.p, msg.n);
	int k = 0;
	for (; k < 500 && dev_in_flight(&b) < 1; k++) /* bounded poll: STATUS is the only way to see it */
		usleep(10000);
	ck_assert_msg(k < 500, "b's work never was in flight");
	/* behind it on s, sent once the spin runs (unordered requests may be handled in any order): not started */
	msg_fill(&msg, 0, fill, p, 1, 1, s);
	flight_send(&b, &queued, msg.p, msg.n);
	for (k = 0; k < 500 && dev_in_flight(&b) < 2; k++)
		usleep(10000);
	ck_assert_msg(k < 500, "b's second launch never was in flight");
	make_fault(&a);
	struct reply r;
	flight_reply(&running, &r);
	/* The emulated device knows which kernel faulted: another session's running work gets CONTEXT_LOST (a GPU
	 * cannot tell, and gives it DEVICE). */
	ck_assert_msg(r.status == ST_CONTEXT_LOST, "work in flight of another session: %s (%s), expected CONTEXT_LOST",
		      r.name, r.msg);
	reply_free(&r);
	flight_expect(&queued, ST_CONTEXT_LOST, OP_LAUNCH);
	mpb_free(&args);
	mpb_free(&body);
	mpb_free(&msg);
	conn_close(&a);
	conn_close(&b);
}
END_TEST

/* ------------------------------------------------------------------ §7 the emulated device */

/* DEVICES must list n emulated devices of compute capability major.minor. */
static void
devices_are(const struct dmn *d, uint64_t n, uint64_t major, uint64_t minor)
{
	struct conn c;
	sess(&c, d);
	struct reply r;
	expect(&c, OP_DEVICES, 0, ST_OK, &r, "[]");
	const struct mpv *l = &r.body->a[0];
	ck_assert_uint_eq(l->len, n);
	for (uint32_t k = 0; k < n; k++) {
		const struct mpv *i = l->a[k].a;
		ck_assert_uint_eq(l->a[k].len, 14);
		ck_assert_uint_eq(i[10].u, major >= 7 ? 32764 : 4096); /* max_param_bytes (§7) */
		ck_assert_uint_eq(i[12].u, major >= 9);                /* cluster_launch */
		ck_assert_uint_eq(i[13].u, major >= 6);                /* cooperative_launch */
		ck_assert_uint_eq(i[0].u, k);
		ck_assert_uint_eq(i[2].u, major);
		ck_assert_uint_eq(i[3].u, minor);
		ck_assert_uint_eq(i[4].u, 256u << 20); /* --emu-mem 256M */
		ck_assert_int_eq(memcmp(i[8].p, "emu", 3), 0);
		ck_assert_uint_eq(i[8].len, 3);
		int64_t least = i[6].t == MP_INT ? i[6].i : (int64_t)i[6].u;
		int64_t greatest = i[7].t == MP_INT ? i[7].i : (int64_t)i[7].u;
		ck_assert_int_le(greatest, least);
	}
	reply_free(&r);
	conn_close(&c);
}

START_TEST(r_emu_sm)
{
	devices_are(&D, 1, 9, 0);
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--emu-sm", "80", "--emu-devices", "2", NULL});
	devices_are(&d, 2, 8, 0);
	dmn_stop(&d);
}
END_TEST

/* ------------------------------------------------------------------ the rule table */

/* The cases, one row per tag (Check's test objects are not constant expressions: filled at run time). */
static size_t
rules_get(struct rule *out, size_t cap)
{
	const struct rule rules[] = {
		{"framing", r_framing},
		{"types", r_types},
		{"int-width", r_int_width},
		{"field-count", r_field_count},
		{"seq-unordered", r_seq_unordered},
		{"seq-order", r_seq_order},
		{"seq-consumed", r_seq_consumed},
		{"seq-reused", r_seq_reused},
		{"seq-window", r_seq_window},
		{"seq-gap", r_seq_gap},
		{"reply-op", r_reply_op},
		{"reply-shape", r_reply_shape},
		{"reply-body", r_reply_body},
		{"version", r_version},
		{"hello-version", r_hello_version},
		{"hello-first", r_hello_first},
		{"session-release", r_session_release},
		{"status-private", r_status_private},
		{"sessions-private", r_sessions_private},
		{"disconnect", r_disconnect},
		{"drain", r_drain},
		{"isolation", r_isolation},
		{"handle-scope", r_handle_scope},
		{"handle-stale", r_handle_stale},
		{"stream-zero", r_stream_zero},
		{"pointer-check", r_pointer_check},
		{"pointer-stale", r_pointer_stale},
		{"free-check", r_free_check},
		{"pointer-bytes", r_pointer_bytes},
		{"module-reject", r_module_reject},
		{"function-get", r_function_get},
		{"alloc", r_alloc},
		{"memset", r_memset},
		{"dtoh-limit", r_dtoh_limit},
		{"launch-pdl", r_launch_pdl},
		{"launch-args", r_launch_args},
		{"hostbuf-ipc", r_hostbuf_ipc},
		{"hostbuf-range", r_hostbuf_range},
		{"batch-items", r_batch_items},
		{"batch-dtoh", r_batch_dtoh},
		{"synchronize", r_synchronize},
		{"status-order", r_status_order},
		{"fault", r_fault},
		{"pending-quota", r_pending_quota},
		{"malformed-survives", r_malformed_survives},
		{"emu-sm", r_emu_sm},
		{"auth-first", conf_auth_first()},
		{"hello-token", conf_hello_token()},
		{"operator-identity", conf_operator_identity()},
	};
	size_t n = sizeof(rules) / sizeof(rules[0]);
	if (n + 32 > cap)
		abort(); /* a bug in this file: raise the callers' cap */
	memcpy(out, rules, sizeof(rules));
	n += kfeat_rules(out + n);
	n += lattr_rules(out + n);
	n += event_rules(out + n);
	return n + graph_rules(out + n);
}

static bool
has_case(const struct rule *rules, size_t n, const char *tag)
{
	for (size_t k = 0; k < n; k++)
		if (strcmp(rules[k].tag, tag) == 0)
			return true;
	return false;
}

/* Every [R:tag] of PROTOCOL.md has a case, and every case a tag; the failure lists both kinds. */
START_TEST(spec_coverage)
{
	FILE *f = fopen(CUA_SRCDIR "/proto/PROTOCOL.md", "r");
	ck_assert_msg(f != NULL, "cannot read %s/proto/PROTOCOL.md", CUA_SRCDIR);
	static char text[1 << 20];
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	char missing[4096] = "", stale[4096] = "";
	struct rule rules[128];
	size_t nrules = rules_get(rules, sizeof(rules) / sizeof(rules[0]));
	for (const char *p = text; (p = strstr(p, "[R:")) != NULL; p += 3) {
		const char *end = strchr(p, ']');
		char tag[64];
		if (end == NULL || end - p - 3 >= (long)sizeof(tag))
			continue;
		snprintf(tag, sizeof(tag), "%.*s", (int)(end - p - 3), p + 3);
		if (!has_case(rules, nrules, tag) && strstr(missing, tag) == NULL)
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s", tag);
	}
	for (size_t k = 0; k < nrules; k++) {
		char want[80];
		snprintf(want, sizeof(want), "[R:%s]", rules[k].tag);
		if (strstr(text, want) == NULL)
			snprintf(stale + strlen(stale), sizeof(stale) - strlen(stale), " %s", rules[k].tag);
	}
	ck_assert_msg(missing[0] == '\0' && stale[0] == '\0', "rules without a case:%s; cases without a rule:%s",
		      missing[0] ? missing : " none", stale[0] ? stale : " none");
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("conformance");
	TCase *cov = tcase_create("spec-coverage");
	tcase_add_test(cov, spec_coverage);
	suite_add_tcase(s, cov);
	struct rule rules[128];
	size_t nrules = rules_get(rules, sizeof(rules) / sizeof(rules[0]));
	for (size_t k = 0; k < nrules; k++) {
		TCase *tc = tcase_create(rules[k].tag); /* one case per tag, named after it */
		tcase_add_checked_fixture(tc, up, down);
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, rules[k].test);
		suite_add_tcase(s, tc);
	}
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
