/*
 * handles.c — conformance cases of handles and pointers (PROTOCOL.md §3: [R:handle-scope], [R:handle-stale], [R:stream-
 * zero], [R:pointer-check], [R:pointer-stale], [R:free-check], [R:pointer-bytes]), driven by raw messages like the rest
 * of the suite, against the daemon of conf_dmn (emulated device).
 */
#include "config.h"

#include "rules.h"

#include <string.h>

#define D conf_dmn

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

size_t
handle_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"handle-scope", r_handle_scope},   {"handle-stale", r_handle_stale},   {"stream-zero", r_stream_zero},
		{"pointer-check", r_pointer_check}, {"pointer-stale", r_pointer_stale}, {"free-check", r_free_check},
		{"pointer-bytes", r_pointer_bytes},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
