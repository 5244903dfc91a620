/*
 * graphs.c — conformance cases of graphs (PROTOCOL.md §4 "Graphs": [R:graph-create], [R:graph-launch],
 * [R:graph-set-args], [R:graph-destroy], [R:graph-pin]), driven by raw messages against the daemon of conf_dmn
 * (emulated device).
 */
#include "config.h"

#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define D conf_dmn

/* A LAUNCH batch item of fill_u32(ptr, value, n) on stream, appended to it. */
static void
fill_item(struct mpb *it, uint64_t f, uint64_t ptr, uint32_t value, uint64_t n, uint64_t stream)
{
	mpb_fmt(it, "[u[u[uuu][uuu]uuu[ubb]]]", U(OP_LAUNCH), f, U(1), U(1), U(1), U(32), U(1), U(1), U(0), stream,
		U(0), ptr, &value, (size_t)4, &n, (size_t)8);
}

/* Sends GRAPH_CREATE [flags, items] (count pre-encoded items) and asserts its status; the graph when OK. */
static uint64_t
graph_create(struct conn *c, uint64_t flags, const struct mpb *items, uint32_t count, uint64_t status,
	     struct reply *out)
{
	struct mpb m = {0};
	struct reply r;
	msg_build(&m, PV, OP_GRAPH_CREATE, 0, "");
	mpb_arr(&m, 2);
	mpb_uint(&m, flags);
	mpb_arr(&m, count);
	mpb_raw(&m, items->p, items->n);
	conn_raw(c, m.p, m.n, &r);
	mpb_free(&m);
	ck_assert_msg(r.status == status, "GRAPH_CREATE: %s (%s), want %s", st_name(r.status), r.msg, st_name(status));
	uint64_t g = 0;
	if (status == ST_OK) {
		ck_assert_uint_eq(r.body->len, 2);
		g = r.body->a[0].u;
		ck_assert_uint_eq(r.body->a[1].u, count);
	}
	if (out)
		*out = r;
	else
		reply_free(&r);
	return g;
}

/* A graph of `count` fill_u32(p, value, 16) nodes. */
static uint64_t
fill_graph(struct conn *c, uint64_t f, uint64_t p, uint32_t value, uint32_t count)
{
	struct mpb it = {0};
	for (uint32_t i = 0; i < count; i++)
		fill_item(&it, f, p, value, 16, 0);
	uint64_t g = graph_create(c, 0, &it, count, ST_OK, NULL);
	mpb_free(&it);
	return g;
}

START_TEST(r_graph_create)
{
	struct conn c, o;
	struct reply r;
	sess(&c, &D);
	sess(&o, &D);
	uint64_t f = function_get(&c, module_load(&c), "fill_u32"), p = alloc(&c, 64), q = alloc(&o, 64);
	struct mpb it = {0};
	graph_create(&c, 0, &it, 0, ST_BAD_ARGUMENT, NULL); /* no node */
	fill_item(&it, f, p, 1, 16, 0);
	graph_create(&c, 1, &it, 1, ST_PROTOCOL, NULL); /* flags must be 0 */
	fill_item(&it, f, q, 1, 16, 0);                 /* node 1 names another session's memory */
	graph_create(&c, 0, &it, 2, ST_BAD_ARGUMENT, &r);
	ck_assert_msg(strstr(r.msg, "node 1:") != NULL, "%s", r.msg);
	reply_free(&r);
	it.n = 0;
	fill_item(&it, f, p, 1, 16, 1); /* a node names a stream */
	graph_create(&c, 0, &it, 1, ST_BAD_ARGUMENT, NULL);
	it.n = 0;
	mpb_fmt(&it, "[u[uuu]]", U(OP_MEMCPY_DTOH), p, U(4), U(0)); /* a host copy */
	graph_create(&c, 0, &it, 1, ST_UNSUPPORTED, NULL);
	it.n = 0;
	for (uint32_t i = 0; i < 4097; i++) /* one node more than a graph may have */
		mpb_fmt(&it, "[u[uuuuu]]", U(OP_MEMSET), p, U(0), U(4), U(16), U(0));
	graph_create(&c, 0, &it, 4097, ST_TOO_LARGE, NULL);
	it.n = 0;
	fill_item(&it, f, p, 7, 16, 0);
	mpb_fmt(&it, "[u[uuuu]]", U(OP_MEMCPY_DTOD), p + 32, p, U(32), U(0));
	uint64_t g = graph_create(&c, 0, &it, 2, ST_OK, NULL);
	ck_assert_uint_eq(g >> 60, 6); /* handle kind 6 */
	mpb_free(&it);
	conn_close(&o);
	conn_close(&c);
}
END_TEST

START_TEST(r_graph_launch)
{
	struct conn c, o;
	sess(&c, &D);
	sess(&o, &D);
	uint64_t f = function_get(&c, module_load(&c), "fill_u32"), p = alloc(&c, 64), s = stream_new(&c);
	uint64_t g = fill_graph(&c, f, p, 0x2a, 3);
	uint32_t out[16];
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_OK, NULL, "[uuu]", g, s, U(0));
	dtoh(&c, p, s, out, sizeof(out));
	ck_assert_uint_eq(out[15], 0x2a);
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_OK, NULL, "[uuu]", g, U(1), U(2));           /* ordered stream, no wait */
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_OK, NULL, "[uuu]", g, U(0), U(0));           /* the pool */
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_BAD_ARGUMENT, NULL, "[uuu]", g, U(0), U(1)); /* only NO_WAIT */
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_PROTOCOL, NULL, "[uuu]", g, U(0), U(3));     /* past the table's bound */
	expect(&o, OP_GRAPH_LAUNCH, 0, ST_NOT_FOUND, NULL, "[uuu]", g, U(0), U(0));    /* not its graph */
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_NOT_FOUND, NULL, "[uuu]", s, U(0), U(0));    /* a stream is no graph */
	expect(&c, OP_SYNCHRONIZE, 0, ST_OK, NULL, "[]");
	conn_close(&o);
	conn_close(&c);
}
END_TEST

START_TEST(r_graph_set_args)
{
	struct conn c, o;
	sess(&c, &D);
	sess(&o, &D);
	uint64_t f = function_get(&c, module_load(&c), "fill_u32"), p = alloc(&c, 64), q = alloc(&o, 64);
	uint64_t g = fill_graph(&c, f, p, 1, 2), n = 16;
	uint32_t v = 5, out[16];
	expect(&c, OP_GRAPH_SET_ARGS, 0, ST_OK, NULL, "[uu[ubb]]", g, U(1), p, &v, (size_t)4, &n, (size_t)8);
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_OK, NULL, "[uuu]", g, U(1), U(0));
	dtoh(&c, p, 1, out, sizeof(out));
	ck_assert_uint_eq(out[0], 5);
	expect(&c, OP_GRAPH_SET_ARGS, 0, ST_BAD_ARGUMENT, NULL, "[uu[ub]]", g, U(0), p, &v, (size_t)4); /* count */
	expect(&c, OP_GRAPH_SET_ARGS, 0, ST_BAD_ARGUMENT, NULL, "[uu[ubb]]", g, U(0), p, &n, (size_t)8, &n,
	       (size_t)8); /* size */
	expect(&c, OP_GRAPH_SET_ARGS, 0, ST_BAD_ARGUMENT, NULL, "[uu[ubb]]", g, U(0), q, &v, (size_t)4, &n,
	       (size_t)8); /* another session's memory */
	expect(&c, OP_GRAPH_SET_ARGS, 0, ST_BAD_ARGUMENT, NULL, "[uu[ubb]]", g, U(2), p, &v, (size_t)4, &n,
	       (size_t)8); /* no node 2 */
	expect(&c, OP_GRAPH_SET_ARGS, 0, ST_PROTOCOL, NULL, "[uu[ubb]]", g, U(4096), p, &v, (size_t)4, &n,
	       (size_t)8); /* past any graph */
	expect(&o, OP_GRAPH_SET_ARGS, 0, ST_NOT_FOUND, NULL, "[uu[ubb]]", g, U(0), q, &v, (size_t)4, &n, (size_t)8);
	conn_close(&o);
	conn_close(&c);
}
END_TEST

START_TEST(r_graph_destroy)
{
	struct conn c, o;
	sess(&c, &D);
	sess(&o, &D);
	uint64_t f = function_get(&c, module_load(&c), "fill_u32"), p = alloc(&c, 64);
	uint64_t g = fill_graph(&c, f, p, 1, 1);
	expect(&o, OP_GRAPH_DESTROY, 0, ST_NOT_FOUND, NULL, "[u]", g);
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_OK, NULL, "[uuu]", g, U(1), U(2)); /* in flight at the destroy */
	expect(&c, OP_GRAPH_DESTROY, 0, ST_OK, NULL, "[u]", g);
	expect(&c, OP_GRAPH_DESTROY, 0, ST_NOT_FOUND, NULL, "[u]", g);
	expect(&c, OP_GRAPH_LAUNCH, 0, ST_NOT_FOUND, NULL, "[uuu]", g, U(1), U(0));
	expect(&c, OP_SYNCHRONIZE, 0, ST_OK, NULL, "[]");
	conn_close(&o);
	conn_close(&c);
}
END_TEST

START_TEST(r_graph_pin)
{
	struct conn c;
	sess(&c, &D);
	uint64_t m = module_load(&c), f = function_get(&c, m, "fill_u32"), p = alloc(&c, 64);
	uint64_t g = fill_graph(&c, f, p + 16, 1, 1);
	struct reply r;
	expect(&c, OP_MEM_FREE, 0, ST_BUSY, &r, "[u]", p);
	ck_assert_msg(strstr(r.msg, "destroy the graph first") != NULL, "%s", r.msg);
	reply_free(&r);
	expect(&c, OP_MODULE_UNLOAD, 0, ST_BUSY, NULL, "[u]", m);
	expect(&c, OP_GRAPH_DESTROY, 0, ST_OK, NULL, "[u]", g);
	expect(&c, OP_MEM_FREE, 0, ST_OK, NULL, "[u]", p);
	expect(&c, OP_MODULE_UNLOAD, 0, ST_OK, NULL, "[u]", m);
	conn_close(&c);
}
END_TEST

size_t
graph_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"graph-create", r_graph_create},     {"graph-launch", r_graph_launch},
		{"graph-set-args", r_graph_set_args}, {"graph-destroy", r_graph_destroy},
		{"graph-pin", r_graph_pin},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
