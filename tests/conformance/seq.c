/*
 * seq.c — conformance cases of sequence numbers (PROTOCOL.md §1: [R:seq-unordered], [R:seq-order], [R:seq-consumed],
 * [R:seq-reused], [R:seq-window], [R:seq-gap]), driven by raw messages like the rest of the suite, against the daemon
 * of conf_dmn (emulated device).
 */
#include "config.h"

#include "rules.h"

#include <stdlib.h>
#include <string.h>

#define D conf_dmn

/* ------------------------------------------------------------------ §1 sequence numbers */

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

size_t
seq_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"seq-unordered", r_seq_unordered}, {"seq-order", r_seq_order},   {"seq-consumed", r_seq_consumed},
		{"seq-reused", r_seq_reused},       {"seq-window", r_seq_window}, {"seq-gap", r_seq_gap},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
