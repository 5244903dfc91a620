/*
 * lattr.c — conformance cases of launch attributes (PROTOCOL.md §4 LAUNCH: [R:cluster], [R:cooperative],
 * [R:priority]): LAUNCH's optional tail [cluster, priority] and flags bit 2, driven by raw messages against the
 * daemon of conf_dmn (emulated device, sm_90, 4 multiprocessors) and an sm_80 one.
 */
#include "config.h"

#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D conf_dmn

static const char image[] = "cuasync-emu-module\ncoop_reduce\ncluster_rank\n";

static uint64_t
lattr_fn(struct conn *c, const char *name)
{
	struct reply r;
	expect(c, OP_MODULE_LOAD, 0, ST_OK, &r, "[uub]", U(0), U(4), image, sizeof(image) - 1);
	uint64_t m = r.body->a[0].u;
	reply_free(&r);
	return function_get(c, m, name);
}

/* A LAUNCH of nfields fields (7..10, or fewer to break it): grid gx x 1 x 1, block bx, args as pointers; the
 * tail cluster cl (8+) and priority prio (9+); a 10th field is a stray 0. */
struct lx {
	uint64_t f, gx, bx, flags;
	const uint64_t *args;
	uint32_t nargs;
	uint32_t by_value; /* bit i: argument i is 8 bytes by value (bin), else a device pointer (uint) */
	uint64_t cl[3];
	int64_t prio;
};

static void
lx_send(struct conn *c, const struct lx *x, uint32_t nfields, struct reply *r)
{
	struct mpb body = {0}, m = {0};
	mpb_arr(&body, nfields);
	mpb_fmt(&body, "u[uuu][uuu]uu", x->f, x->gx, U(1), U(1), x->bx, U(1), U(1), U(0), U(0));
	if (nfields >= 6)
		mpb_uint(&body, x->flags);
	if (nfields >= 7) {
		mpb_arr(&body, x->nargs);
		for (uint32_t i = 0; i < x->nargs; i++)
			if (x->by_value >> i & 1)
				mpb_bin(&body, &x->args[i], 8); /* little-endian host */
			else
				mpb_uint(&body, x->args[i]);
	}
	if (nfields >= 8)
		mpb_fmt(&body, "[uuu]", x->cl[0], x->cl[1], x->cl[2]);
	if (nfields >= 9)
		mpb_int_w(&body, x->prio, 0);
	if (nfields >= 10)
		mpb_uint(&body, 0);
	msg_build(&m, PV, OP_LAUNCH, 0, "r", body.p, body.n);
	conn_raw(c, m.p, m.n, r);
	mpb_free(&body);
	mpb_free(&m);
}

static void
lx_expect(struct conn *c, const struct lx *x, uint32_t nfields, const char *status, const char *text)
{
	struct reply r;
	lx_send(c, x, nfields, &r);
	ck_assert_msg(strcmp(r.name, status) == 0 && (text == NULL || strstr(r.msg, text) != NULL),
		      "%u fields, cluster %llux%llux%llu, flags %llu: %s: %s (want %s: %s)", nfields,
		      (unsigned long long)x->cl[0], (unsigned long long)x->cl[1], (unsigned long long)x->cl[2],
		      (unsigned long long)x->flags, r.name, r.msg, status, text ? text : "");
	reply_free(&r);
}

START_TEST(r_cluster)
{
	struct conn c;
	sess(&c, &D);
	uint64_t f = lattr_fn(&c, "cluster_rank"), out = alloc(&c, 1024);
	struct lx x = {f, 4, 32, 0, &out, 1, 0, {2, 1, 1}, 0};
	uint32_t got[12];
	lx_expect(&c, &x, 8, "OK", NULL);
	dtoh(&c, out, 0, got, sizeof(got));
	for (int b = 0; b < 4; b++)
		ck_assert_msg(got[3 * b] == (uint32_t)b % 2 && got[3 * b + 1] == 2, "block %d: %u of %u", b, got[3 * b],
			      got[3 * b + 1]);
	x.cl[0] = x.cl[1] = x.cl[2] = 0;
	lx_expect(&c, &x, 8, "OK", NULL); /* [0, 0, 0]: no cluster */
	lx_expect(&c, &x, 7, "OK", NULL); /* the tail left off */
	dtoh(&c, out, 0, got, sizeof(got));
	ck_assert_uint_eq(got[1], 1);
	lx_expect(&c, &x, 6, "PROTOCOL", "expected 7..9 fields");
	lx_expect(&c, &x, 10, "PROTOCOL", "expected 7..9 fields");
	x.cl[0] = 2, x.cl[1] = 0, x.cl[2] = 1;
	lx_expect(&c, &x, 8, "BAD_ARGUMENT", "every cluster dimension must be at least 1");
	x.gx = 6, x.cl[0] = 4, x.cl[1] = 1;
	lx_expect(&c, &x, 8, "BAD_ARGUMENT", "grid 6x1x1 is not a multiple of cluster 4x1x1");
	x.gx = 16, x.cl[0] = 16;
	lx_expect(&c, &x, 8, "BAD_ARGUMENT", "more than the portable 8");
	x.gx = 32, x.cl[0] = 32;
	lx_expect(&c, &x, 8, "BAD_ARGUMENT", "has 32 blocks; a cluster has at most 16");
	x.cl[0] = U(1) << 32; /* not a u32 */
	lx_expect(&c, &x, 8, "PROTOCOL", "LAUNCH.cluster[0]");
	expect(&c, OP_PING, 0, ST_OK, NULL, "[u]", U(1)); /* the session still works */
	conn_close(&c);

	struct dmn d;
	dmn_start(&d, (const char *const[]){"--emu-sm", "80", NULL});
	sess(&c, &d);
	f = lattr_fn(&c, "cluster_rank"), out = alloc(&c, 1024);
	struct lx y = {f, 4, 32, 0, &out, 1, 0, {2, 1, 1}, 0};
	lx_expect(&c, &y, 8, "UNSUPPORTED", "thread block clusters require sm_90 or newer; target sm_80");
	expect(&c, OP_FUNC_SET_ATTRIBUTE, 0, ST_UNSUPPORTED, NULL, "[uuu]", f, U(14), U(1));
	conn_close(&c);
	dmn_stop(&d);
}
END_TEST

START_TEST(r_cooperative)
{
	struct conn c;
	sess(&c, &D);
	uint64_t f = lattr_fn(&c, "coop_reduce"), in = alloc(&c, 4096), part = alloc(&c, 1024), out = alloc(&c, 8);
	uint32_t v[1000];
	uint64_t want = 0, got = 0;
	for (uint32_t i = 0; i < 1000; i++)
		want += v[i] = i * 40503u;
	htod(&c, in, 0, v, sizeof(v));
	uint64_t args[4] = {in, 1000, part, out};
	struct lx x = {f, 4, 256, 4, args, 4, 1u << 1, {0, 0, 0}, 0};
	lx_expect(&c, &x, 7, "OK", NULL);
	dtoh(&c, out, 0, &got, 8);
	ck_assert_uint_eq(got, want);
	x.gx = 33; /* 8 blocks of 256 threads per multiprocessor (§7), 4 of them */
	lx_expect(&c, &x, 7, "BAD_ARGUMENT",
		  "cooperative launch of 33 blocks cannot be co-resident: at most 8 blocks of 256 threads with 0 bytes "
		  "of dynamic shared memory fit a multiprocessor, x 4 multiprocessors = 32");
	x.flags = 8; /* no such flag */
	lx_expect(&c, &x, 7, "PROTOCOL", "LAUNCH.flags");
	expect(&c, OP_PING, 0, ST_OK, NULL, "[u]", U(1)); /* the session still works */
	conn_close(&c);
}
END_TEST

START_TEST(r_priority)
{
	struct conn c;
	sess(&c, &D);
	uint64_t f = lattr_fn(&c, "cluster_rank"), out = alloc(&c, 1024);
	struct lx x = {f, 4, 32, 0, &out, 1, 0, {0, 0, 0}, -5};
	lx_expect(&c, &x, 9, "OK", NULL);
	x.prio = 0;
	lx_expect(&c, &x, 9, "OK", NULL);
	x.prio = 1;
	lx_expect(&c, &x, 9, "BAD_ARGUMENT", "launch priority 1 is out of range: device 0 allows -5 (highest) .. 0");
	x.prio = -6;
	lx_expect(&c, &x, 9, "BAD_ARGUMENT", "launch priority -6 is out of range");
	x.prio = (int64_t)1 << 40; /* not an i32 */
	lx_expect(&c, &x, 9, "PROTOCOL", "LAUNCH.priority");
	conn_close(&c);
}
END_TEST

size_t
lattr_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"cluster", r_cluster},
		{"cooperative", r_cooperative},
		{"priority", r_priority},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
