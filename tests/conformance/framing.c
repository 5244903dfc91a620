/*
 * framing.c — conformance cases of framing, types and replies (PROTOCOL.md §1: [R:framing], [R:types], [R:int-width],
 * [R:field-count], [R:reply-op], [R:reply-shape], [R:reply-body]), driven by raw messages like the rest of the suite,
 * against the daemon of conf_dmn (emulated device).
 */
#include "config.h"

#include "rules.h"

#include <string.h>

#define D conf_dmn

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

size_t
framing_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"framing", r_framing},         {"types", r_types},       {"int-width", r_int_width},
		{"field-count", r_field_count}, {"reply-op", r_reply_op}, {"reply-shape", r_reply_shape},
		{"reply-body", r_reply_body},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
