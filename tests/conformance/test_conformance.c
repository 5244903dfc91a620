/*
 * test_conformance.c — the daemon against proto/PROTOCOL.md, one case per rule tag [R:...], driven only by
 * raw messages built from the spec's tables (tests/conformance/mp.c encodes them; no libcuasync, no common/).
 * The case "spec-coverage" parses PROTOCOL.md and fails listing every tag without a case and every case
 * whose tag left the spec. Each case runs against a fresh daemon (emulated device) on a private socket.
 */
#include "config.h"

#include "rules.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct dmn D; /* each case's daemon, default options */

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
		{"map", "\x81\x01\x02", 3},	     {"empty map", "\x80", 1},
		{"nil", "\xc0", 1},		     {"false", "\xc2", 1},
		{"true", "\xc3", 1},		     {"float32", "\xca\x3f\x80\x00\x00", 5},
		{"float64", "\xcb\x3f\xf0\0\0\0\0\0\0", 9}, {"fixext1", "\xd4\x01\x00", 3},
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
	mpb_fmt(&m, "[uu[]]", U(PV), U(OP_STATUS)); /* an array of 3: the op is readable */
	raw_expect(&c, m.p, m.n, ST_PROTOCOL, OP_STATUS);
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
	} rows[] = {{1, 1, ST_OK, 1}, {1, 9, ST_OK, 1}, {0, 1, ST_OK, 1}, {0, 0, ST_VERSION, 0},
		    {2, 9, ST_VERSION, 0}, {2, 1, ST_VERSION, 0}};
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct conn c;
		struct reply r;
		conn_open(&c, D.url);
		conn_req(&c, PV, OP_HELLO, 0, &r, "[uusu]", rows[k].lo, rows[k].hi, "conf", U(getpid()));
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
	ping_ok(&c, 9);		    /* seq 0: handled on arrival, past the waiting one */
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
	dmn_start(&d, (const char *const[]){"--contexts", "8192", "--session-pending", "8192", NULL});
	struct conn c;
	sess(&c, &d);
	struct flight *f = calloc(WINDOW + 1, sizeof(*f));
	ck_assert_ptr_nonnull(f);
	for (uint64_t k = 0; k < WINDOW; k++) /* seq 2 .. 4097 wait for seq 1 */
		ping_flight(&c, &f[k], k + 2);
	struct reply r;
	conn_req(&c, PV, OP_PING, WINDOW + 2, &r, "[u]", U(1)); /* the 4097th early one */
	ck_assert_msg(r.status == ST_PROTOCOL, "%s %s", r.name, r.msg);
	reply_free(&r);
	ck_assert_msg(!flight_wait(&f[0], 100), "seq 2 was handled before seq 1");
	ping_flight(&c, &f[WINDOW], 1);
	for (uint64_t k = 0; k <= WINDOW; k++)
		flight_expect(&f[k], ST_OK, OP_PING);
	free(f);
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST
