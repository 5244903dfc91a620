/*
 * batch.c — conformance cases of BATCH and SYNCHRONIZE (PROTOCOL.md §4: [R:batch-items], [R:batch-dtoh],
 * [R:synchronize]), driven by raw messages like the rest of the suite, against the daemon of conf_dmn (emulated
 * device).
 */
#include "config.h"

#include "rules.h"

#include <string.h>

#define D conf_dmn

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

size_t
batch_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"batch-items", r_batch_items},
		{"batch-dtoh", r_batch_dtoh},
		{"synchronize", r_synchronize},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
