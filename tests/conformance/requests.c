/*
 * requests.c — conformance cases of modules, functions, memory and launches (PROTOCOL.md §4: [R:module-reject],
 * [R:function-get], [R:alloc], [R:memset], [R:dtoh-limit], [R:launch-pdl], [R:launch-args]), driven by raw messages
 * like the rest of the suite, against the daemon of conf_dmn (emulated device).
 */
#include "config.h"

#include "rules.h"

#include <stdio.h>
#include <string.h>

#define D conf_dmn

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

size_t
request_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"module-reject", r_module_reject},
		{"function-get", r_function_get},
		{"alloc", r_alloc},
		{"memset", r_memset},
		{"dtoh-limit", r_dtoh_limit},
		{"launch-pdl", r_launch_pdl},
		{"launch-args", r_launch_args},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
