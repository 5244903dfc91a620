/*
 * event.c — conformance cases of events (PROTOCOL.md §3, §4: [R:event-scope], [R:event-create], [R:event-record],
 * [R:event-wait], [R:event-sync], [R:event-query], [R:event-elapsed], [R:event-destroy]), driven by raw messages
 * like the rest of the suite, against the daemon of conf_dmn (emulated device).
 */
#include "config.h"

#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D conf_dmn
#define DISABLE_TIMING 2u

static uint64_t
event_new(struct conn *c, uint64_t flags)
{
	struct reply r;
	expect(c, OP_EVENT_CREATE, 0, ST_OK, &r, "[uu]", U(0), flags);
	ck_assert_uint_eq(r.body->len, 1);
	uint64_t e = r.body->a[0].u;
	reply_free(&r);
	ck_assert_uint_ne(e, 0);
	return e;
}

/* Sends, ordered as seq, a LAUNCH of spin for ns nanoseconds on stream (the reply comes when it ran). */
static void
send_spin(struct conn *c, struct flight *f, uint64_t seq, uint64_t spin, uint64_t ns, uint64_t stream)
{
	struct mpb a = {0}, body = {0}, m = {0};
	mpb_fmt(&a, "b", (const void *)&ns, U(8));
	launch_body(&body, spin, 1, 1, stream, 0, &a, 1);
	msg_build(&m, PV, OP_LAUNCH, seq, "r", body.p, body.n);
	flight_send(c, f, m.p, m.n);
	mpb_free(&a);
	mpb_free(&body);
	mpb_free(&m);
}

/* Sends an ordered request without waiting for its reply. */
static void
send_ordered(struct conn *c, struct flight *f, uint64_t op, uint64_t seq, const char *fmt, uint64_t a, uint64_t b,
	     uint64_t d)
{
	struct mpb m = {0};
	msg_build(&m, PV, op, seq, fmt, a, b, d);
	flight_send(c, f, m.p, m.n);
	mpb_free(&m);
}

/* The reply of f, asserting its status; its first body value when it has one, else 0. */
static uint64_t
reply_of(struct flight *f, uint64_t status)
{
	struct reply r;
	flight_reply(f, &r);
	ck_assert_msg(r.status == status, "%s: %s (want %s)", r.name, r.msg, st_name(status));
	uint64_t v = r.body != NULL && r.body->len > 0 ? r.body->a[0].u : 0;
	reply_free(&r);
	return v;
}

START_TEST(r_event_scope)
{
	struct conn c, o;
	sess(&c, &D);
	sess(&o, &D);
	uint64_t e = event_new(&c, 0), oe = event_new(&o, 0), s = stream_new(&c), os = stream_new(&o);
	struct reply r;
	expect(&c, OP_EVENT_RECORD, 0, ST_BAD_ARGUMENT, &r, "[uu]", e, U(0)); /* the pool */
	ck_assert_msg(strstr(r.msg, "ordered stream (1)") != NULL, "%s", r.msg);
	reply_free(&r);
	expect(&c, OP_STREAM_WAIT_EVENT, 0, ST_BAD_ARGUMENT, NULL, "[uu]", U(0), e);
	expect(&c, OP_EVENT_RECORD, 0, ST_OK, NULL, "[uu]", e, U(1)); /* the ordered stream */
	expect(&c, OP_EVENT_RECORD, 0, ST_OK, NULL, "[uu]", e, s);
	/* another session's event, or stream, is not this session's */
	expect(&c, OP_EVENT_RECORD, 0, ST_NOT_FOUND, NULL, "[uu]", oe, s);
	expect(&c, OP_EVENT_RECORD, 0, ST_NOT_FOUND, NULL, "[uu]", e, os);
	expect(&c, OP_STREAM_WAIT_EVENT, 0, ST_NOT_FOUND, NULL, "[uu]", s, oe);
	expect(&c, OP_STREAM_WAIT_EVENT, 0, ST_NOT_FOUND, NULL, "[uu]", os, e);
	expect(&c, OP_EVENT_SYNC, 0, ST_NOT_FOUND, NULL, "[u]", oe);
	expect(&c, OP_EVENT_QUERY, 0, ST_NOT_FOUND, NULL, "[u]", oe);
	expect(&c, OP_EVENT_ELAPSED, 0, ST_NOT_FOUND, NULL, "[uu]", e, oe);
	expect(&c, OP_EVENT_DESTROY, 0, ST_NOT_FOUND, NULL, "[u]", oe);
	/* handles of another kind */
	expect(&c, OP_EVENT_SYNC, 0, ST_NOT_FOUND, NULL, "[u]", s);
	expect(&c, OP_EVENT_RECORD, 0, ST_NOT_FOUND, NULL, "[uu]", e, e);
	expect(&c, OP_EVENT_SYNC, 0, ST_NOT_FOUND, NULL, "[u]", U(0));
	expect(&o, OP_EVENT_SYNC, 0, ST_OK, NULL, "[u]", oe); /* still the owner's */
	conn_close(&o);
	conn_close(&c);
}
END_TEST

START_TEST(r_event_create)
{
	struct conn c;
	sess(&c, &D);
	event_new(&c, 0);
	event_new(&c, DISABLE_TIMING);
	expect(&c, OP_EVENT_CREATE, 0, ST_PROTOCOL, NULL, "[uu]", U(0), U(3));     /* u32≤2 */
	expect(&c, OP_EVENT_CREATE, 0, ST_PROTOCOL, NULL, "[uu]", U(64), U(0));    /* u32≤63 */
	expect(&c, OP_EVENT_CREATE, 0, ST_BAD_ARGUMENT, NULL, "[uu]", U(5), U(0)); /* no such device */
	expect(&c, OP_EVENT_CREATE, 0, ST_PROTOCOL, NULL, "[u]", U(0));
	conn_close(&c);
	struct dmn few;
	const char *const args[] = {"--session-events", "3", NULL};
	dmn_start(&few, args);
	sess(&c, &few);
	uint64_t e = event_new(&c, 0);
	event_new(&c, 0);
	event_new(&c, 0);
	struct reply r;
	expect(&c, OP_EVENT_CREATE, 0, ST_QUOTA, &r, "[uu]", U(0), U(0));
	ck_assert_msg(strstr(r.msg, "--session-events") != NULL, "%s", r.msg);
	reply_free(&r);
	expect(&c, OP_EVENT_DESTROY, 0, ST_OK, NULL, "[u]", e); /* one destroyed, one more fits */
	event_new(&c, 0);
	conn_close(&c);
	dmn_stop(&few);
}
END_TEST

/* A record is answered when enqueued: while the spin before it runs, QUERY says not reached; SYNC waits for it. */
START_TEST(r_event_record)
{
	struct conn c;
	sess(&c, &D);
	uint64_t spin = function_get(&c, module_load(&c), "spin"), s = stream_new(&c), e = event_new(&c, 0);
	struct flight f1, f2, f3, f4, f5;
	send_spin(&c, &f1, 1, spin, 2000000000, s); /* long enough for a loaded machine */
	send_ordered(&c, &f2, OP_EVENT_RECORD, 2, "[uu]", e, s, 0);
	send_ordered(&c, &f3, OP_EVENT_QUERY, 3, "[u]", e, 0, 0);
	reply_of(&f2, ST_OK);
	ck_assert_uint_eq(reply_of(&f3, ST_OK), 0); /* not reached */
	ck_assert(!flight_wait(&f1, 0));            /* the spin still runs */
	send_ordered(&c, &f4, OP_EVENT_SYNC, 4, "[u]", e, 0, 0);
	reply_of(&f4, ST_OK);
	ck_assert(flight_wait(&f1, 5000)); /* reached means the spin before it has completed */
	reply_of(&f1, ST_OK);
	send_ordered(&c, &f5, OP_EVENT_QUERY, 5, "[u]", e, 0, 0);
	ck_assert_uint_eq(reply_of(&f5, ST_OK), 1);
	conn_close(&c);
}
END_TEST

/* Stream b's later work waits for the event recorded on a after a slow fill; a wait for an event never recorded
 * holds nothing. */
START_TEST(r_event_wait)
{
	struct conn c;
	sess(&c, &D);
	uint64_t m = module_load(&c), spin = function_get(&c, m, "spin"), fill = function_get(&c, m, "fill_u32");
	uint64_t a = stream_new(&c), b = stream_new(&c), e = event_new(&c, 0), never = event_new(&c, 0);
	uint64_t p = alloc(&c, 256);
	expect(&c, OP_STREAM_WAIT_EVENT, 0, ST_OK, NULL, "[uu]", b, never);
	uint32_t got[64];
	dtoh(&c, p, b, got, sizeof(got)); /* not held */
	struct flight f1, f2, f3, f4, f5;
	struct mpb msg = {0};
	send_spin(&c, &f1, 1, spin, 300000000, a);
	msg_fill(&msg, 2, fill, p, 0x5eed, 64, a);
	flight_send(&c, &f2, msg.p, msg.n);
	send_ordered(&c, &f3, OP_EVENT_RECORD, 3, "[uu]", e, a, 0);
	send_ordered(&c, &f4, OP_STREAM_WAIT_EVENT, 4, "[uu]", b, e, 0);
	send_ordered(&c, &f5, OP_MEMCPY_DTOH, 5, "[uuu]", p, U(sizeof(got)), b);
	struct reply r;
	flight_reply(&f5, &r);
	ck_assert_msg(r.status == ST_OK, "%s: %s", r.name, r.msg);
	ck_assert_uint_eq(r.body->a[0].len, sizeof(got));
	memcpy(got, r.body->a[0].p, sizeof(got));
	reply_free(&r);
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(got[i], 0x5eed);
	reply_of(&f1, ST_OK);
	reply_of(&f2, ST_OK);
	reply_of(&f3, ST_OK);
	reply_of(&f4, ST_OK);
	mpb_free(&msg);
	conn_close(&c);
}
END_TEST

/* EVENT_SYNC of an event never recorded is answered at once; of a recorded one, when the record is reached —
 * while another session is served meanwhile. */
START_TEST(r_event_sync)
{
	struct conn c, o;
	sess(&c, &D);
	sess(&o, &D);
	uint64_t spin = function_get(&c, module_load(&c), "spin"), s = stream_new(&c), e = event_new(&c, 0);
	expect(&c, OP_EVENT_SYNC, 0, ST_OK, NULL, "[u]", e);
	struct flight f1, f2, f3;
	send_spin(&c, &f1, 1, spin, 2000000000, s);
	send_ordered(&c, &f2, OP_EVENT_RECORD, 2, "[uu]", e, s, 0);
	send_ordered(&c, &f3, OP_EVENT_SYNC, 3, "[u]", e, 0, 0);
	reply_of(&f2, ST_OK);
	expect(&o, OP_PING, 0, ST_OK, NULL, "[u]", U(7)); /* the daemon serves others meanwhile */
	ck_assert(!flight_wait(&f3, 100));
	reply_of(&f3, ST_OK);
	ck_assert(flight_wait(&f1, 5000));
	reply_of(&f1, ST_OK);
	conn_close(&o);
	conn_close(&c);
}
END_TEST

START_TEST(r_event_query)
{
	struct conn c;
	struct reply r;
	sess(&c, &D);
	uint64_t e = event_new(&c, DISABLE_TIMING);
	expect(&c, OP_EVENT_QUERY, 0, ST_OK, &r, "[u]", e); /* never recorded: nothing to wait for */
	ck_assert_int_eq(r.body->a[0].t, MP_UINT);
	ck_assert_uint_eq(r.body->a[0].u, 1);
	reply_free(&r);
	expect(&c, OP_EVENT_RECORD, 0, ST_OK, NULL, "[uu]", e, U(1));
	expect(&c, OP_EVENT_SYNC, 0, ST_OK, NULL, "[u]", e);
	expect(&c, OP_EVENT_QUERY, 0, ST_OK, &r, "[u]", e);
	ck_assert_uint_eq(r.body->a[0].u, 1);
	reply_free(&r);
	conn_close(&c);
}
END_TEST

static float
ms_of(uint64_t bits)
{
	uint32_t b = (uint32_t)bits;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

START_TEST(r_event_elapsed)
{
	struct conn c;
	sess(&c, &D);
	uint64_t spin = function_get(&c, module_load(&c), "spin"), s = stream_new(&c);
	uint64_t a = event_new(&c, 0), b = event_new(&c, 0), nt = event_new(&c, DISABLE_TIMING);
	struct reply r;
	expect(&c, OP_EVENT_ELAPSED, 0, ST_BAD_ARGUMENT, &r, "[uu]", a, b);
	ck_assert_msg(strstr(r.msg, "never recorded") != NULL, "%s", r.msg);
	reply_free(&r);
	struct flight f1, f2, f3, f4, f5;
	send_ordered(&c, &f1, OP_EVENT_RECORD, 1, "[uu]", a, s, 0);
	send_spin(&c, &f2, 2, spin, 2000000000, s);
	send_ordered(&c, &f3, OP_EVENT_RECORD, 3, "[uu]", b, s, 0);
	send_ordered(&c, &f4, OP_EVENT_RECORD, 4, "[uu]", nt, s, 0);
	send_ordered(&c, &f5, OP_EVENT_ELAPSED, 5, "[uu]", a, b, 0);
	reply_of(&f1, ST_OK);
	reply_of(&f3, ST_OK);
	reply_of(&f4, ST_OK);
	flight_reply(&f5, &r); /* b not reached */
	ck_assert_msg(r.status == ST_BUSY && strstr(r.msg, "CUDA_ERROR_NOT_READY"), "%s: %s", r.name, r.msg);
	reply_free(&r);
	reply_of(&f2, ST_OK);
	expect(&c, OP_EVENT_SYNC, 0, ST_OK, NULL, "[u]", b);
	expect(&c, OP_EVENT_ELAPSED, 0, ST_OK, &r, "[uu]", a, b);
	ck_assert_int_eq(r.body->a[0].t, MP_UINT);
	float ms = ms_of(r.body->a[0].u);
	ck_assert_msg(ms >= 1900.0f && ms < 60000.0f, "%f ms around a 2 s spin", (double)ms);
	reply_free(&r);
	expect(&c, OP_EVENT_ELAPSED, 0, ST_BAD_ARGUMENT, &r, "[uu]", a, nt);
	ck_assert_msg(strstr(r.msg, "timing disabled") != NULL, "%s", r.msg);
	reply_free(&r);
	conn_close(&c);
}
END_TEST

/* Released at once (a second destroy and every use: NOT_FOUND naming the request), not refused while in use: a
 * wait queued before it still holds its stream until the record is reached. */
START_TEST(r_event_destroy)
{
	struct conn c;
	sess(&c, &D);
	uint64_t m = module_load(&c), spin = function_get(&c, m, "spin"), fill = function_get(&c, m, "fill_u32");
	uint64_t a = stream_new(&c), b = stream_new(&c), e = event_new(&c, 0), p = alloc(&c, 256);
	struct flight f1, f2, f3, f4, f5, f6;
	struct mpb msg = {0};
	send_spin(&c, &f1, 1, spin, 300000000, a);
	msg_fill(&msg, 2, fill, p, 0xd00d, 64, a);
	flight_send(&c, &f2, msg.p, msg.n);
	send_ordered(&c, &f3, OP_EVENT_RECORD, 3, "[uu]", e, a, 0);
	send_ordered(&c, &f4, OP_STREAM_WAIT_EVENT, 4, "[uu]", b, e, 0);
	send_ordered(&c, &f5, OP_EVENT_DESTROY, 5, "[u]", e, 0, 0);
	send_ordered(&c, &f6, OP_EVENT_SYNC, 6, "[u]", e, 0, 0);
	struct reply r;
	flight_reply(&f6, &r);
	/* released by seq 5, or already gone when the destroy completed first (it waits for nothing) */
	ck_assert_msg(r.status == ST_NOT_FOUND &&
			      (strstr(r.msg, "released by") || strstr(r.msg, "is not an object of this session")),
		      "%s: %s", r.name, r.msg);
	reply_free(&r);
	reply_of(&f5, ST_OK);
	uint32_t got[64];
	dtoh(&c, p, b, got, sizeof(got)); /* b still waited for the record */
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(got[i], 0xd00d);
	reply_of(&f1, ST_OK);
	reply_of(&f2, ST_OK);
	reply_of(&f3, ST_OK);
	reply_of(&f4, ST_OK);
	expect(&c, OP_EVENT_DESTROY, 0, ST_NOT_FOUND, NULL, "[u]", e);
	expect(&c, OP_EVENT_RECORD, 0, ST_NOT_FOUND, NULL, "[uu]", e, a);
	mpb_free(&msg);
	conn_close(&c);
}
END_TEST

size_t
event_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"event-scope", r_event_scope},     {"event-create", r_event_create},
		{"event-record", r_event_record},   {"event-wait", r_event_wait},
		{"event-sync", r_event_sync},       {"event-query", r_event_query},
		{"event-elapsed", r_event_elapsed}, {"event-destroy", r_event_destroy},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
