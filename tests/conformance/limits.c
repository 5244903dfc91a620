/*
 * limits.c — conformance cases of status codes, limits and faults, the emulated device (PROTOCOL.md §5, §6, §7:
 * [R:isolation], [R:status-order], [R:fault], [R:pending-quota], [R:malformed-survives], [R:emu-sm]), driven by raw
 * messages like the rest of the suite, against the daemon of conf_dmn (emulated device).
 */
#include "config.h"

#include "rules.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define D conf_dmn

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

/* [R:quota-reserve] Requests sent before any reply is read cannot pass a limit together: twelve MEM_ALLOCs of
 * 8 MiB under --session-mem 32M, the first sent last so that all are admitted at once (the others wait for its
 * seq), get exactly four OK and eight QUOTA naming the option; another session is served meanwhile. */
START_TEST(r_quota_reserve)
{
	enum { N = 12 };
	struct dmn d;
	dmn_start(&d, (const char *const[]){"--session-mem", "32M", NULL});
	struct conn a, b;
	sess(&a, &d);
	sess(&b, &d);
	struct flight f[N];
	struct mpb m = {0};
	msg_build(&m, PV, OP_MEM_ALLOC, 0, "[uu]", U(0), U(8) << 20);
	for (int k = N - 1; k >= 0; k--) {
		mpb_free(&m);
		msg_build(&m, PV, OP_MEM_ALLOC, (uint64_t)k + 1, "[uu]", U(0), U(8) << 20);
		flight_send(&a, &f[k], m.p, m.n);
	}
	mpb_free(&m);
	int ok = 0;
	for (int k = 0; k < N; k++) {
		struct reply r;
		flight_reply(&f[k], &r);
		ck_assert_msg(r.status == ST_OK || (r.status == ST_QUOTA && strstr(r.msg, "--session-mem") != NULL),
			      "seq %d: %s (%s)", k + 1, r.name, r.msg);
		ok += r.status == ST_OK;
		reply_free(&r);
	}
	ck_assert_msg(ok == 4, "%d of %d pipelined 8 MiB allocations granted under --session-mem 32M, want 4", ok, N);
	ping_ok(&b, 1);
	alloc(&b, 8u << 20);
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
		ck_assert_uint_eq(l->a[k].len, 15);
		/* attrs: [id, value] pairs in increasing id order; the emulated device's agree with the fields */
		const struct mpv *at = &i[14];
		uint64_t prev = 0, seen = 0;
		ck_assert_uint_gt(at->len, 30);
		for (uint32_t j = 0; j < at->len; j++) {
			const struct mpv *kv = at->a[j].a;
			ck_assert_uint_eq(at->a[j].len, 2);
			ck_assert_uint_gt(kv[0].u, prev);
			prev = kv[0].u;
			uint64_t want = kv[0].u == 75   ? major /* compute capability */
					: kv[0].u == 76 ? minor
					: kv[0].u == 16 ? i[5].u  /* multiprocessors */
					: kv[0].u == 13 ? 1000000 /* CLOCK_RATE, kHz */
							: UINT64_MAX;
			if (want != UINT64_MAX) {
				ck_assert_uint_eq(kv[1].u, want);
				seen++;
			}
		}
		ck_assert_uint_eq(seen, 4);
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

size_t
limit_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"isolation", r_isolation},
		{"status-order", r_status_order},
		{"fault", r_fault},
		{"pending-quota", r_pending_quota},
		{"malformed-survives", r_malformed_survives},
		{"emu-sm", r_emu_sm},
		{"quota-reserve", r_quota_reserve},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
