/*
 * kfeat.c — conformance cases of module globals, kernel parameters and function attributes (PROTOCOL.md §3, §4:
 * [R:get-global], [R:param-bytes], [R:dyn-shared], [R:func-attribute], [R:occupancy]), driven by raw messages
 * like the rest of the suite, against the daemon of conf_dmn (emulated device, sm_90 unless started otherwise).
 */
#include "config.h"

#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D conf_dmn

/* An emulated-device image with the feature kernels and the 1 KiB global const_data (§7). */
static const char image[] = "cuasync-emu-module\ncopy_u32\nconst_copy\nbig_param_copy\ndyn_shared_copy\n"
			    "global const_data 1024\n";

static uint64_t
feature_module(struct conn *c)
{
	struct reply r;
	expect(c, OP_MODULE_LOAD, 0, ST_OK, &r, "[uub]", U(0), U(4), image, sizeof(image) - 1);
	uint64_t m = r.body->a[0].u;
	reply_free(&r);
	return m;
}

/* MODULE_GET_GLOBAL of name in m, asserting OK; its size in *bytes. */
static uint64_t
get_global(struct conn *c, uint64_t m, const char *name, uint64_t *bytes)
{
	struct reply r;
	expect(c, OP_MODULE_GET_GLOBAL, 0, ST_OK, &r, "[us]", m, name);
	ck_assert_uint_eq(r.body->len, 2);
	uint64_t p = r.body->a[0].u;
	*bytes = r.body->a[1].u;
	reply_free(&r);
	return p;
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

START_TEST(r_get_global)
{
	struct conn c, o;
	sess(&c, &D);
	sess(&o, &D);
	uint64_t m = feature_module(&c), kernels = module_load(&c), bytes = 0, w = 0x01020304;
	uint64_t g = get_global(&c, m, "const_data", &bytes), spin = function_get(&c, kernels, "spin");
	ck_assert_uint_eq(bytes, 1024);
	expect(&c, OP_MODULE_GET_GLOBAL, 0, ST_NOT_FOUND, NULL, "[us]", m, "nope");
	expect(&c, OP_MODULE_GET_GLOBAL, 0, ST_BAD_ARGUMENT, NULL, "[us]", m, "");
	htod(&c, g + 1020, 0, &w, 4); /* the whole range inside the global */
	expect(&c, OP_MEMCPY_HTOD, 0, ST_BAD_ARGUMENT, NULL, "[uub]", g + 1021, U(0), &w, U(4));
	expect(&o, OP_MEMCPY_HTOD, 0, ST_BAD_ARGUMENT, NULL, "[uub]", g, U(0), &w, U(4)); /* not o's */
	expect(&c, OP_MEM_FREE, 0, ST_BAD_ARGUMENT, NULL, "[u]", g);
	/* seq 1 keeps the session busy for 0.5 s; seq 2 unloads (after it); seq 3, validated before the unload
	 * completed, is refused NOT_FOUND; once it completed, BAD_ARGUMENT */
	struct flight f1, f2, f3;
	struct mpb a = {0}, body = {0}, msg = {0};
	mpb_fmt(&a, "b", (const void *)&(int64_t){500000000}, U(8));
	launch_body(&body, spin, 1, 1, 0, 0, &a, 1);
	msg_build(&msg, PV, OP_LAUNCH, 1, "r", body.p, body.n);
	flight_send(&c, &f1, msg.p, msg.n);
	send_ordered(&c, &f2, OP_MODULE_UNLOAD, 2, "[u]", m, 0, 0);
	send_ordered(&c, &f3, OP_MEMCPY_DTOH, 3, "[uuu]", g, U(4), U(0));
	struct reply r;
	flight_reply(&f3, &r);
	ck_assert_msg(r.status == ST_NOT_FOUND && strstr(r.msg, "unloaded by request seq 2"), "%s: %s", r.name, r.msg);
	reply_free(&r);
	flight_reply(&f1, &r);
	ck_assert_uint_eq(r.status, ST_OK);
	reply_free(&r);
	flight_reply(&f2, &r);
	ck_assert_uint_eq(r.status, ST_OK);
	reply_free(&r);
	expect(&c, OP_MEMCPY_HTOD, 0, ST_BAD_ARGUMENT, NULL, "[uub]", g, U(0), &w, U(4));
	mpb_free(&a);
	mpb_free(&body);
	mpb_free(&msg);
	conn_close(&o);
	conn_close(&c);
}
END_TEST

/* A LAUNCH of f, 1 block of `block` threads with shared_mem bytes, args pre-encoded; returns the reply. */
static void
launch_shared(struct conn *c, uint64_t f, uint64_t block, uint64_t shared_mem, const struct mpb *args, uint32_t n,
	      struct reply *out)
{
	struct mpb body = {0}, m = {0};
	mpb_arr(&body, 7);
	mpb_fmt(&body, "u[uuu][uuu]uuu", f, U(1), U(1), U(1), block, U(1), U(1), shared_mem, U(0), U(0));
	mpb_arr(&body, n);
	mpb_raw(&body, args->p, args->n);
	msg_build(&m, PV, OP_LAUNCH, 0, "r", body.p, body.n);
	conn_raw(c, m.p, m.n, out);
	mpb_free(&body);
	mpb_free(&m);
}

START_TEST(r_param_bytes)
{
	struct conn c;
	sess(&c, &D);
	uint64_t f = function_get(&c, feature_module(&c), "big_param_copy"), p = alloc(&c, 32000);
	static uint8_t s[32757];
	for (size_t i = 0; i < sizeof(s); i++)
		s[i] = (uint8_t)(i * 13);
	struct mpb a = {0};
	struct reply r;
	mpb_fmt(&a, "ub", p, s, U(32000)); /* 32008 bytes: under the limit, runs */
	launch_shared(&c, f, 32, 0, &a, 2, &r);
	ck_assert_msg(r.status == ST_OK, "%s: %s", r.name, r.msg);
	reply_free(&r);
	uint8_t back[64];
	dtoh(&c, p + 31936, 0, back, 64);
	ck_assert_mem_eq(back, s + 31936, 64);
	a.n = 0;
	mpb_fmt(&a, "ub", p, s, U(32757)); /* 32765 bytes: refused before the layout is looked at */
	launch_shared(&c, f, 32, 0, &a, 2, &r);
	ck_assert_msg(r.status == ST_BAD_ARGUMENT && strstr(r.msg, "arguments take 32765 bytes, more than the 32764"),
		      "%s: %s", r.name, r.msg);
	reply_free(&r);
	conn_close(&c);
	/* sm_60: 4096 bytes in all */
	struct dmn old;
	const char *const args[] = {"--emu-sm", "60", NULL};
	dmn_start(&old, args);
	sess(&c, &old);
	f = function_get(&c, feature_module(&c), "big_param_copy");
	p = alloc(&c, 32000);
	a.n = 0;
	mpb_fmt(&a, "ub", p, s, U(32000));
	launch_shared(&c, f, 32, 0, &a, 2, &r);
	ck_assert_msg(r.status == ST_BAD_ARGUMENT && strstr(r.msg, "32008 bytes, more than the 4096 bytes"), "%s: %s",
		      r.name, r.msg);
	reply_free(&r);
	mpb_free(&a);
	conn_close(&c);
	dmn_stop(&old);
}
END_TEST

START_TEST(r_dyn_shared)
{
	struct conn c;
	sess(&c, &D);
	uint64_t f = function_get(&c, feature_module(&c), "dyn_shared_copy"), in = alloc(&c, 65536),
		 out = alloc(&c, 65536);
	struct mpb a = {0};
	struct reply r;
	mpb_fmt(&a, "uub", out, in, (const void *)&(uint64_t){16384}, U(8));
	launch_shared(&c, f, 1024, 65536, &a, 3, &r); /* over the default 48 KiB */
	ck_assert_msg(r.status == ST_BAD_ARGUMENT && strncmp(r.msg, "CUDA_ERROR_INVALID_VALUE", 24) == 0, "%s: %s",
		      r.name, r.msg);
	reply_free(&r);
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_OK, NULL, "[uuu]", f, U(8), U(65536));
	launch_shared(&c, f, 1024, 65536, &a, 3, &r); /* the context was not harmed; now it runs */
	ck_assert_msg(r.status == ST_OK, "%s: %s", r.name, r.msg);
	reply_free(&r);
	mpb_free(&a);
	conn_close(&c);
}
END_TEST

START_TEST(r_func_attribute)
{
	struct conn c;
	struct reply r;
	sess(&c, &D);
	uint64_t f = function_get(&c, feature_module(&c), "copy_u32");
	expect(&c, OP_FUNC_GET_ATTRIBUTE, 0, ST_OK, &r, "[uu]", f, U(4)); /* NUM_REGS */
	ck_assert_int_eq(r.body->a[0].t, MP_UINT);
	ck_assert_uint_gt(r.body->a[0].u, 0);
	reply_free(&r);
	expect(&c, OP_FUNC_GET_ATTRIBUTE, 0, ST_PROTOCOL, NULL, "[uu]", f, U(16));                /* u32≤15 */
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", f, U(4), U(16));     /* not settable */
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", f, U(8), U(232449)); /* optin + 1 */
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_BAD_ARGUMENT, NULL, "[uui]", f, U(9), (int64_t)-2);
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_OK, NULL, "[uui]", f, U(9), (int64_t)-1);
	expect(&c, OP_FUNC_GET_ATTRIBUTE, 0, ST_OK, &r, "[uu]", f, U(9));
	ck_assert_int_eq(r.body->a[0].t, MP_INT);
	ck_assert_int_eq(r.body->a[0].i, -1);
	reply_free(&r);
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_OK, NULL, "[uuu]", f, U(8), U(232448));
	expect(&c, OP_FUNC_GET_ATTRIBUTE, 0, ST_OK, &r, "[uu]", f, U(8));
	ck_assert_uint_eq(r.body->a[0].u, 232448);
	reply_free(&r);
	expect(&c, OP_FUNC_GET_ATTRIBUTE, 0, ST_NOT_FOUND, NULL, "[uu]", U(1), U(4)); /* not a function */
	conn_close(&c);
}
END_TEST

START_TEST(r_occupancy)
{
	struct conn c;
	struct reply r;
	sess(&c, &D);
	uint64_t f = function_get(&c, feature_module(&c), "copy_u32");
	expect(&c, OP_OCCUPANCY, 0, ST_OK, &r, "[uuu]", f, U(256), U(0));
	ck_assert_uint_gt(r.body->a[0].u, 0);
	reply_free(&r);
	expect(&c, OP_OCCUPANCY, 0, ST_OK, &r, "[uuu]", f, U(256), U(65536)); /* over the kernel's maximum */
	ck_assert_uint_eq(r.body->a[0].u, 0);
	reply_free(&r);
	expect(&c, OP_OCCUPANCY, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", f, U(0), U(0));
	expect(&c, OP_OCCUPANCY, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", f, U(1025), U(0));
	expect(&c, OP_OCCUPANCY, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", f, U(32), U(232449));
	conn_close(&c);
}
END_TEST

/* Stream 1: the session's ordered stream. Work on it runs in order (a memset then a copy see each other without
 * a SYNCHRONIZE between them, 64 times over); it can be synchronised, not destroyed. */
START_TEST(r_stream_ordered)
{
	struct conn c;
	sess(&c, &D);
	uint64_t p = alloc(&c, 256);
	for (uint32_t k = 0; k < 64; k++) {
		uint32_t got[64];
		expect(&c, OP_MEMSET, 0, ST_OK, NULL, "[uuuuu]", p, U(k * 2654435761u), U(4), U(64), U(1));
		dtoh(&c, p, 1, got, sizeof(got));
		for (int i = 0; i < 64; i++)
			ck_assert_uint_eq(got[i], k * 2654435761u);
	}
	expect(&c, OP_STREAM_SYNC, 0, ST_OK, NULL, "[u]", U(1));
	expect(&c, OP_STREAM_DESTROY, 0, ST_BAD_ARGUMENT, NULL, "[u]", U(1));
	conn_close(&c);
}
END_TEST

size_t
kfeat_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"get-global", r_get_global}, {"param-bytes", r_param_bytes},
		{"dyn-shared", r_dyn_shared}, {"func-attribute", r_func_attribute},
		{"occupancy", r_occupancy},   {"stream-ordered", r_stream_ordered},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
