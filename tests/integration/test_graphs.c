/* CUDA graphs (issue 13) through libcuasync against the real daemon: on the emulated device by default, on the
 * GPU with CUA_TEST_BACKEND=cuda (tests/gpu/run.sh). A graph of N axpy kernels adds N·a to y per launch, so every
 * result is known exactly; then the hostile cases: use after destroy, another session's graph, foreign pointers
 * in nodes and in new arguments, memory and modules a graph uses, limits, a lost context. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct daemon D;
static void
up(void)
{
	static const char *const extra[] = {"--session-graphs", "4", "--session-graph-nodes", "5000", NULL};
	daemon_start(&D, extra);
}

/* The shared worker, whatever $CUA_TEST_ISOLATION says: its restart is what the lost-context case waits for. */
static void
up_shared(void)
{
	static const char *const extra[] = {"--isolation", "shared", NULL};
	daemon_start(&D, extra);
}

static void
up_small_ring(void)
{
	static const char *const extra[] = {"--ring", "65536", "--session-graphs", "1", NULL};
	daemon_start(&D, extra);
}

static void
up_threads(void)
{
	static const char *const extra[] = {"--submit-threads", "4", NULL};
	daemon_start(&D, extra);
}

static void
down(void)
{
	daemon_stop(&D);
}

#define N 64u      /* elements */
#define KERNELS 8u /* axpy nodes of the graph */
#define ONE 0x3f800000u
#define MAX_NODES 4096u /* CUA_MAX_BATCH: the nodes of one graph */

struct fx {
	cua_client *c;
	cua_module m;
	cua_function axpy, fill, spin;
	cua_deviceptr x, y;
};

static void
fx_init(struct fx *f)
{
	f->c = connect_to(&D);
	f->m = load_kernels(f->c);
	f->axpy = get_fn(f->c, f->m, "axpy");
	f->fill = get_fn(f->c, f->m, "fill_u32");
	f->spin = get_fn(f->c, f->m, "spin");
	CK(cua_mem_alloc(f->c, 0, N * 4, &f->x));
	CK(cua_mem_alloc(f->c, 0, N * 4, &f->y));
	CK(cua_memset(f->c, f->x, ONE, 4, N));
	CK(cua_memset(f->c, f->y, 0, 4, N));
}

/* Memory of o at an address f does not hold in either isolation mode (with --isolation session every session
 * has a device of its own, whose addresses start alike). */
static cua_deviceptr
foreign(const struct fx *o)
{
	cua_deviceptr pad, q;
	CK(cua_mem_alloc(o->c, 0, 1u << 20, &pad));
	CK(cua_mem_alloc(o->c, 0, N * 4, &q));
	return q;
}

static cua_launch *
axpy(const struct fx *f, float a, cua_deviceptr x, cua_deviceptr y)
{
	cua_launch *l = launch_1d(f->c, f->axpy, 1, 64);
	cua_launch_push_f32(l, a);
	cua_launch_push_device_ptr(l, x);
	cua_launch_push_device_ptr(l, y);
	cua_launch_push_u64(l, N);
	return l;
}

/* A graph of `kernels` axpy(a) nodes on y. */
static cua_graph
axpy_graph(const struct fx *f, unsigned kernels, float a)
{
	cua_batch *b = cua_graph_begin(f->c);
	for (unsigned i = 0; i < kernels; i++)
		CK(cua_batch_add_launch(b, axpy(f, a, f->x, f->y)));
	cua_graph g;
	CK(cua_graph_instantiate(b, &g));
	return g;
}

static void
expect_all(const struct fx *f, cua_deviceptr p, float want)
{
	float v[N];
	CK(cua_memcpy_dtoh(f->c, v, p, sizeof(v)));
	for (unsigned i = 0; i < N; i++)
		ck_assert_msg(v[i] == want, "element %u is %g, want %g", i, v[i], want);
}

static int
launch_wait(cua_client *c, cua_graph g, cua_stream s, char *msg, size_t len)
{
	cua_future *fu;
	int r = cua_graph_launch(c, g, s, &fu);
	if (r != CUA_OK) {
		snprintf(msg, len, "%s", cua_last_error());
		return r;
	}
	r = cua_future_wait(fu, -1);
	snprintf(msg, len, "%s", cua_future_error(fu));
	cua_future_free(fu);
	return r;
}

START_TEST(graph_of_kernels_launched_many_times)
{
	struct fx f;
	fx_init(&f);
	cua_graph g = axpy_graph(&f, KERNELS, 1.0f);
	char msg[512];
	const unsigned times = 50;
	for (unsigned i = 0; i + 1 < times; i++) /* fire-and-forget, in order on the ordered stream */
		CK(cua_graph_launch(f.c, g, CUA_STREAM_ORDERED, NULL));
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	CK(cua_synchronize(f.c));
	expect_all(&f, f.y, (float)(times * KERNELS));
	/* on a stream of its own and on the pool too */
	cua_stream s;
	CK(cua_stream_create(f.c, 0, 0, &s));
	ck_assert_int_eq(launch_wait(f.c, g, s, msg, sizeof(msg)), CUA_OK);
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_POOL, msg, sizeof(msg)), CUA_OK);
	expect_all(&f, f.y, (float)((times + 2) * KERNELS));
	CK(cua_graph_destroy(f.c, g));
	cua_disconnect(f.c);
}
END_TEST

START_TEST(set_args_changes_later_launches_only)
{
	struct fx f;
	fx_init(&f);
	cua_graph g = axpy_graph(&f, KERNELS, 1.0f);
	char msg[512];
	/* the first launch waits behind a spin kernel: new arguments given meanwhile must not reach it */
	cua_future *slow = submit_spin(f.c, f.spin, 200, CUA_STREAM_ORDERED);
	cua_future *first;
	CK(cua_graph_launch(f.c, g, CUA_STREAM_ORDERED, &first));
	CK(cua_graph_set_kernel_args(f.c, g, 0, axpy(&f, 10.0f, f.x, f.y)));
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	ck_assert_int_eq(cua_future_wait(first, -1), CUA_OK);
	ck_assert_int_eq(cua_future_wait(slow, -1), CUA_OK);
	cua_future_free(first);
	cua_future_free(slow);
	expect_all(&f, f.y, (float)(KERNELS + (KERNELS - 1) + 10));
	/* a node's pointers can change too: node 1 now adds to z */
	cua_deviceptr z;
	CK(cua_mem_alloc(f.c, 0, N * 4, &z));
	CK(cua_memset(f.c, z, 0, 4, N));
	CK(cua_graph_set_kernel_args(f.c, g, 1, axpy(&f, 5.0f, f.x, z)));
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	expect_all(&f, z, 5.0f);
	/* and z is the graph's now: freeing it waits for the graph's end */
	ck_assert_int_eq(cua_mem_free(f.c, z), CUA_EBUSY);
	CK(cua_graph_destroy(f.c, g));
	CK(cua_mem_free(f.c, z));
	cua_disconnect(f.c);
}
END_TEST

START_TEST(memset_and_copy_nodes)
{
	struct fx f;
	fx_init(&f);
	cua_deviceptr z;
	CK(cua_mem_alloc(f.c, 0, N * 4, &z));
	cua_batch *b = cua_graph_begin(f.c);
	CK(cua_batch_add_memset(b, f.x, ONE, 4, N, CUA_STREAM_DEFAULT));
	CK(cua_batch_add_memset(b, f.y, 0, 4, N, CUA_STREAM_DEFAULT));
	for (unsigned i = 0; i < 3; i++)
		CK(cua_batch_add_launch(b, axpy(&f, 3.0f, f.x, f.y)));
	CK(cua_batch_add_memcpy_dtod(b, z, f.y, N * 4, CUA_STREAM_DEFAULT));
	cua_graph g;
	CK(cua_graph_instantiate(b, &g));
	char msg[512];
	for (int i = 0; i < 3; i++) { /* the memsets reset it: every launch computes the same */
		CK(cua_memset(f.c, z, 0, 4, N));
		ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
		expect_all(&f, z, 9.0f);
	}
	/* set_args of a memset node is refused */
	ck_assert_int_eq(cua_graph_set_kernel_args(f.c, g, 0, axpy(&f, 1.0f, f.x, f.y)), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_last_error(), "not a kernel"), "%s", cua_last_error());
	CK(cua_graph_destroy(f.c, g));
	cua_disconnect(f.c);
}
END_TEST

START_TEST(destroyed_and_foreign_graphs_are_refused)
{
	struct fx f, o;
	fx_init(&f);
	fx_init(&o);
	cua_graph g = axpy_graph(&f, 2, 1.0f);
	char msg[512];
	/* another session's graph */
	ck_assert_int_eq(launch_wait(o.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_graph_set_kernel_args(o.c, g, 0, axpy(&o, 1.0f, o.x, o.y)), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_graph_destroy(o.c, g), CUA_ENOT_FOUND);
	/* still the owner's */
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	/* destroy while a launch is in flight: the launch completes, the handle is gone */
	cua_future *slow = submit_spin(f.c, f.spin, 100, CUA_STREAM_ORDERED), *fu;
	CK(cua_graph_launch(f.c, g, CUA_STREAM_ORDERED, &fu));
	CK(cua_graph_destroy(f.c, g));
	ck_assert_int_eq(cua_future_wait(fu, -1), CUA_OK);
	ck_assert_int_eq(cua_future_wait(slow, -1), CUA_OK);
	cua_future_free(fu);
	cua_future_free(slow);
	expect_all(&f, f.y, 4.0f);
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_graph_destroy(f.c, g), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_graph_set_kernel_args(f.c, g, 0, axpy(&f, 1.0f, f.x, f.y)), CUA_ENOT_FOUND);
	/* a made-up handle */
	ck_assert_int_eq(cua_graph_destroy(f.c, (cua_graph){0x6000000000000001ull}), CUA_ENOT_FOUND);
	cua_disconnect(o.c);
	cua_disconnect(f.c);
}
END_TEST

START_TEST(nodes_are_validated_like_their_requests)
{
	struct fx f, o;
	fx_init(&f);
	fx_init(&o);
	cua_graph g;
	/* a pointer of another session in node 1 */
	cua_deviceptr q = foreign(&o);
	cua_batch *b = cua_graph_begin(f.c);
	CK(cua_batch_add_launch(b, axpy(&f, 1.0f, f.x, f.y)));
	CK(cua_batch_add_launch(b, axpy(&f, 1.0f, f.x, q)));
	ck_assert_int_eq(cua_graph_instantiate(b, &g), CUA_EBAD_ARGUMENT); /* as a launch with it is */
	ck_assert_msg(strstr(cua_last_error(), "node 1: argument 2"), "%s", cua_last_error());
	ck_assert_uint_eq(g.id, 0);
	/* a memset past the end of the allocation */
	b = cua_graph_begin(f.c);
	CK(cua_batch_add_memset(b, f.y, 0, 4, N + 1, CUA_STREAM_DEFAULT));
	ck_assert_int_ne(cua_graph_instantiate(b, &g), CUA_OK);
	ck_assert_msg(strstr(cua_last_error(), "node 0:"), "%s", cua_last_error());
	/* wrong argument count */
	b = cua_graph_begin(f.c);
	cua_launch *l = launch_1d(f.c, f.axpy, 1, 64);
	cua_launch_push_f32(l, 1.0f);
	CK(cua_batch_add_launch(b, l));
	ck_assert_int_eq(cua_graph_instantiate(b, &g), CUA_EBAD_ARGUMENT);
	/* a host copy cannot be a node */
	float host[N];
	b = cua_graph_begin(f.c);
	CK(cua_batch_add_memcpy_dtoh(b, host, f.y, sizeof(host), CUA_STREAM_DEFAULT));
	ck_assert_int_eq(cua_graph_instantiate(b, &g), CUA_EUNSUPPORTED);
	/* a function of another session */
	b = cua_graph_begin(f.c);
	CK(cua_batch_add_launch(b, axpy(&o, 1.0f, f.x, f.y)));
	ck_assert_int_eq(cua_graph_instantiate(b, &g), CUA_ENOT_FOUND);
	cua_disconnect(o.c);
	cua_disconnect(f.c);
}
END_TEST

START_TEST(set_args_is_checked_like_a_launch)
{
	struct fx f, o;
	fx_init(&f);
	fx_init(&o);
	cua_graph g = axpy_graph(&f, 2, 1.0f);
	cua_launch *l = launch_1d(f.c, f.axpy, 1, 64); /* wrong count */
	cua_launch_push_f32(l, 1.0f);
	ck_assert_int_eq(cua_graph_set_kernel_args(f.c, g, 0, l), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_last_error(), "takes 4 arguments"), "%s", cua_last_error());
	l = launch_1d(f.c, f.axpy, 1, 64); /* wrong size: a double where the float goes */
	cua_launch_push_f64(l, 1.0);
	cua_launch_push_device_ptr(l, f.x);
	cua_launch_push_device_ptr(l, f.y);
	cua_launch_push_u64(l, N);
	ck_assert_int_eq(cua_graph_set_kernel_args(f.c, g, 0, l), CUA_EBAD_ARGUMENT);
	ck_assert_int_eq(cua_graph_set_kernel_args(f.c, g, 1, axpy(&f, 1.0f, f.x, foreign(&o))), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_last_error(), "argument 2"), "%s", cua_last_error());
	ck_assert_int_eq(cua_graph_set_kernel_args(f.c, g, 2, axpy(&f, 1.0f, f.x, f.y)), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_last_error(), "has 2 nodes"), "%s", cua_last_error());
	/* none of it changed the graph */
	char msg[512];
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	expect_all(&f, f.y, 2.0f);
	CK(cua_graph_destroy(f.c, g));
	cua_disconnect(o.c);
	cua_disconnect(f.c);
}
END_TEST

START_TEST(memory_and_modules_of_a_graph_are_pinned)
{
	struct fx f;
	fx_init(&f);
	cua_graph g = axpy_graph(&f, 2, 1.0f);
	ck_assert_int_eq(cua_mem_free(f.c, f.x), CUA_EBUSY);
	ck_assert_msg(strstr(cua_last_error(), "destroy the graph first"), "%s", cua_last_error());
	ck_assert_int_eq(cua_mem_free(f.c, f.y), CUA_EBUSY);
	ck_assert_int_eq(cua_module_unload(f.c, f.m), CUA_EBUSY);
	/* still usable */
	char msg[512];
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	expect_all(&f, f.y, 2.0f);
	CK(cua_graph_destroy(f.c, g));
	CK(cua_mem_free(f.c, f.x));
	CK(cua_mem_free(f.c, f.y));
	CK(cua_module_unload(f.c, f.m));
	cua_disconnect(f.c);
}
END_TEST

START_TEST(limits_hold_and_others_are_served)
{
	struct fx f, o;
	fx_init(&f);
	fx_init(&o);
	/* more nodes than one message may carry: refused by the builder */
	cua_batch *b = cua_graph_begin(f.c);
	int r = CUA_OK;
	for (unsigned i = 0; i < 10000 && r == CUA_OK; i++)
		r = cua_batch_add_launch(b, axpy(&f, 1.0f, f.x, f.y));
	ck_assert_int_eq(r, CUA_ETOO_LARGE);
	cua_batch_free(b);
	/* 4096 nodes, twice: past --session-graph-nodes 5000 */
	cua_graph g1, g2, g[4];
	b = cua_graph_begin(f.c);
	for (unsigned i = 0; i < MAX_NODES; i++)
		CK(cua_batch_add_launch(b, axpy(&f, 1.0f, f.x, f.y)));
	CK(cua_graph_instantiate(b, &g1));
	b = cua_graph_begin(f.c);
	for (unsigned i = 0; i < 1000; i++)
		CK(cua_batch_add_launch(b, axpy(&f, 1.0f, f.x, f.y)));
	ck_assert_int_eq(cua_graph_instantiate(b, &g2), CUA_EQUOTA);
	ck_assert_msg(strstr(cua_last_error(), "--session-graph-nodes"), "%s", cua_last_error());
	/* the big one runs */
	char msg[512];
	ck_assert_int_eq(launch_wait(f.c, g1, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	expect_all(&f, f.y, (float)MAX_NODES);
	CK(cua_graph_destroy(f.c, g1));
	/* --session-graphs 4 */
	for (int i = 0; i < 4; i++)
		g[i] = axpy_graph(&f, 1, 1.0f);
	b = cua_graph_begin(f.c);
	CK(cua_batch_add_launch(b, axpy(&f, 1.0f, f.x, f.y)));
	ck_assert_int_eq(cua_graph_instantiate(b, &g2), CUA_EQUOTA);
	ck_assert_msg(strstr(cua_last_error(), "--session-graphs"), "%s", cua_last_error());
	/* another session is served meanwhile */
	cua_graph og = axpy_graph(&o, 1, 2.0f);
	ck_assert_int_eq(launch_wait(o.c, og, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	expect_all(&o, o.y, 2.0f);
	/* destroying one makes room */
	CK(cua_graph_destroy(f.c, g[0]));
	g[0] = axpy_graph(&f, 1, 1.0f);
	cua_disconnect(o.c);
	cua_disconnect(f.c); /* its graphs are destroyed with the session (the daemon's exit checks for leaks) */
}
END_TEST

START_TEST(graphs_of_a_lost_context_answer_context_lost)
{
	struct fx f;
	fx_init(&f);
	cua_graph g = axpy_graph(&f, 2, 1.0f);
	cua_function bad = get_fn(f.c, f.m, "bad_write");
	cua_launch *l = launch_1d(f.c, bad, 1, 1);
	cua_launch_push_device_ptr(l, f.x);
	cua_future *fu;
	CK(cua_launch_submit(l, &fu));
	ck_assert_int_eq(cua_future_wait(fu, -1), CUA_EDEVICE);
	cua_future_free(fu);
	/* the worker is gone: the launch fails (at validation, or at dispatch while the worker restarts); what
	 * follows its reply is validated against the new generation */
	char msg[512];
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_ECONTEXT_LOST);
	ck_assert_int_eq(cua_graph_set_kernel_args(f.c, g, 0, axpy(&f, 1.0f, f.x, f.y)), CUA_ECONTEXT_LOST);
	ck_assert_int_eq(cua_graph_destroy(f.c, g), CUA_ECONTEXT_LOST);
	ck_assert_int_eq(cua_graph_destroy(f.c, g), CUA_ENOT_FOUND); /* forgotten */
	/* recreated objects make a working graph again */
	struct fx n;
	fx_init(&n);
	cua_graph g2 = axpy_graph(&n, 3, 1.0f);
	ck_assert_int_eq(launch_wait(n.c, g2, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	expect_all(&n, n.y, 3.0f);
	cua_disconnect(n.c);
	cua_disconnect(f.c);
}
END_TEST

/* ------------------------------------------------------------------ a hostile or careless tenant (attack-eg) */

static bool
device_allocations(const cua_daemon_status *s, void *ud)
{
	return s->devices[0].allocations == *(uint64_t *)ud;
}

/* A session closes with NO_WAIT launches of its graphs still running (behind a spin) and a graph whose pins hold
 * its memory: the cleanup destroys the graphs after the launches and frees the memory; another session is served
 * meanwhile and the device's allocations come back to what they were (ASan: no leak at the daemon's exit). */
START_TEST(close_with_graph_launches_in_flight)
{
	struct fx o;
	fx_init(&o);
	cua_daemon_status st;
	CK(cua_status(o.c, &st));
	uint64_t base = st.devices[0].allocations;
	struct fx f;
	fx_init(&f);
	cua_graph g = axpy_graph(&f, KERNELS, 1.0f);
	cua_stream s;
	CK(cua_stream_create(f.c, 0, 0, &s));
	cua_future_free(submit_spin(f.c, f.spin, 300, s));
	for (unsigned i = 0; i < 40; i++)
		CK(cua_graph_launch(f.c, g, i % 3 == 0 ? s : i % 3 == 1 ? CUA_STREAM_ORDERED : CUA_STREAM_POOL, NULL));
	cua_disconnect(f.c);
	char msg[512];
	cua_graph og = axpy_graph(&o, 2, 1.0f);
	ck_assert_int_eq(launch_wait(o.c, og, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	expect_all(&o, o.y, 2.0f);
	ck_assert(wait_status(o.c, device_allocations, &base, &st));
	cua_disconnect(o.c);
}
END_TEST

/* GRAPH_SET_ARGS between NO_WAIT launches of one graph on three streams, with four submit threads: every launch
 * gets the arguments in effect when it was sent, whichever thread issues it. */
START_TEST(set_args_between_launches_on_many_streams)
{
	struct fx f;
	fx_init(&f);
	cua_graph g = axpy_graph(&f, 1, 1.0f);
	cua_stream s[2];
	CK(cua_stream_create(f.c, 0, 0, &s[0]));
	CK(cua_stream_create(f.c, 0, 0, &s[1]));
	cua_future_free(submit_spin(f.c, f.spin, 100, s[0]));
	float want = 0;
	for (unsigned i = 0; i < 60; i++) {
		float a = (float)(1u << (i % 4)); /* 1, 2, 4, 8 */
		CK(cua_graph_set_kernel_args(f.c, g, 0, axpy(&f, a, f.x, f.y)));
		cua_stream on = i % 3 == 2 ? CUA_STREAM_POOL : s[i % 3];
		CK(cua_graph_launch(f.c, g, on, NULL));
		want += a;
	}
	CK(cua_synchronize(f.c));
	expect_all(&f, f.y, want);
	CK(cua_graph_destroy(f.c, g));
	CK(cua_mem_free(f.c, f.x));
	CK(cua_mem_free(f.c, f.y));
	cua_disconnect(f.c);
}
END_TEST

struct racer {
	struct fx *f;
	cua_graph g;
	int ok, gone, other;
};

static void *
launch_loop(void *arg)
{
	struct racer *r = arg;
	for (unsigned i = 0; i < 200; i++) {
		cua_future *fu;
		int rc = cua_graph_launch(r->f->c, r->g, CUA_STREAM_POOL, &fu);
		if (rc == CUA_OK) {
			rc = cua_future_wait(fu, -1);
			cua_future_free(fu);
		}
		r->ok += rc == CUA_OK;
		r->gone += rc == CUA_ENOT_FOUND;
		r->other += rc != CUA_OK && rc != CUA_ENOT_FOUND;
		if (rc == CUA_ENOT_FOUND)
			break;
	}
	return NULL;
}

/* One thread launches a graph over and over while another changes its arguments, destroys it and makes a new
 * graph in the freed slot: the old handle is refused from then on (never the new graph), nothing else fails, and
 * the memory is free once the graphs are gone. */
START_TEST(destroy_and_reuse_while_launching)
{
	struct fx f;
	fx_init(&f);
	cua_graph g = axpy_graph(&f, 2, 1.0f);
	struct racer r = {&f, g, 0, 0, 0};
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, launch_loop, &r), 0);
	for (unsigned i = 0; i < 20; i++)
		CK(cua_graph_set_kernel_args(f.c, g, i % 2, axpy(&f, 1.0f, f.x, f.y)));
	CK(cua_graph_destroy(f.c, g));
	cua_graph n = axpy_graph(&f, 1, 1.0f);
	ck_assert_uint_ne(n.id, g.id);
	pthread_join(t, NULL);
	ck_assert_int_eq(r.other, 0);
	ck_assert_int_eq(r.gone, 1);
	ck_assert_int_eq(cua_graph_destroy(f.c, g), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_graph_set_kernel_args(f.c, g, 0, axpy(&f, 1.0f, f.x, f.y)), CUA_ENOT_FOUND);
	char msg[512];
	CK(cua_memset(f.c, f.y, 0, 4, N));
	ck_assert_int_eq(launch_wait(f.c, n, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	expect_all(&f, f.y, 1.0f);
	ck_assert_int_eq(cua_mem_free(f.c, f.y), CUA_EBUSY);
	CK(cua_graph_destroy(f.c, n));
	CK(cua_mem_free(f.c, f.x));
	CK(cua_mem_free(f.c, f.y));
	CK(cua_module_unload(f.c, f.m));
	cua_disconnect(f.c);
}
END_TEST

/* A graph's pins go with its worker: after the worker restarted, the old memory and module answer CONTEXT_LOST
 * (not BUSY), and new memory at the same addresses can be freed while the old graph's handle is still held. */
START_TEST(pins_of_a_lost_context_hold_nothing)
{
	struct fx f;
	fx_init(&f);
	cua_graph g = axpy_graph(&f, 2, 1.0f);
	cua_launch *l = launch_1d(f.c, get_fn(f.c, f.m, "bad_write"), 1, 1);
	cua_launch_push_device_ptr(l, f.x);
	cua_future *fu;
	CK(cua_launch_submit(l, &fu));
	ck_assert_int_eq(cua_future_wait(fu, -1), CUA_EDEVICE);
	cua_future_free(fu);
	uint32_t one = 1;
	cua_daemon_status st;
	ck_assert(wait_status(f.c, status_restarted, &one, &st));
	ck_assert_int_eq(cua_mem_free(f.c, f.x), CUA_ECONTEXT_LOST);
	ck_assert_int_eq(cua_module_unload(f.c, f.m), CUA_ECONTEXT_LOST);
	struct fx n;
	fx_init(&n); /* the new worker hands out the same addresses again */
	CK(cua_mem_free(n.c, n.x));
	CK(cua_module_unload(n.c, n.m));
	cua_deviceptr p;
	CK(cua_mem_alloc(f.c, 0, N * 4, &p));
	CK(cua_mem_free(f.c, p));
	ck_assert_int_eq(cua_graph_destroy(f.c, g), CUA_ECONTEXT_LOST);
	cua_disconnect(n.c);
	cua_disconnect(f.c);
}
END_TEST

/* The daemon's resident memory (VmRSS), kB. */
static long
daemon_rss_kb(const struct daemon *d)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
	FILE *fp = fopen(path, "r");
	long kb = -1;
	ck_assert_ptr_nonnull(fp);
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(fp);
	ck_assert_int_gt(kb, 0);
	return kb;
}

/* A 4096-node graph launched 300 times without waiting: the daemon's memory does not grow with the launches
 * (each is one small request), and a ping is answered meanwhile. */
START_TEST(big_graph_launched_many_times)
{
	struct fx f;
	fx_init(&f);
	cua_batch *b = cua_graph_begin(f.c);
	for (unsigned i = 0; i < MAX_NODES; i++)
		CK(cua_batch_add_memset(b, f.y, i, 4, 1, CUA_STREAM_DEFAULT));
	cua_graph g;
	CK(cua_graph_instantiate(b, &g));
	char msg[512];
	ck_assert_int_eq(launch_wait(f.c, g, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	long before = daemon_rss_kb(&D);
	cua_client *o = connect_to(&D);
	for (unsigned i = 0; i < 300; i++) {
		CK(cua_graph_launch(f.c, g, CUA_STREAM_ORDERED, NULL));
		if (i % 50 == 0)
			CK(cua_ping(o));
	}
	CK(cua_synchronize(f.c));
	long after = daemon_rss_kb(&D);
	ck_assert_msg(after - before < 32 * 1024, "daemon RSS %ld kB -> %ld kB", before, after);
	uint32_t v;
	CK(cua_memcpy_dtoh(f.c, &v, f.y, 4));
	ck_assert_uint_eq(v, MAX_NODES - 1);
	CK(cua_graph_destroy(f.c, g));
	cua_disconnect(o);
	cua_disconnect(f.c);
}
END_TEST

/* A graph too large for the worker's command ring (--ring 64 KiB here) is refused TOO_LARGE at dispatch, after
 * its nodes were validated and pinned: nothing of it may stay behind, neither its pins (the memory can be freed)
 * nor its place in the session's limits (--session-graphs 1: another graph can be made). */
START_TEST(graph_too_large_for_the_ring_leaves_nothing)
{
	struct fx f;
	fx_init(&f);
	cua_batch *b = cua_graph_begin(f.c);
	for (unsigned i = 0; i < 1000; i++)
		CK(cua_batch_add_launch(b, axpy(&f, 1.0f, f.x, f.y)));
	cua_graph g;
	ck_assert_int_eq(cua_graph_instantiate(b, &g), CUA_ETOO_LARGE);
	cua_graph small = axpy_graph(&f, 1, 1.0f); /* its place in --session-graphs is free */
	char msg[512];
	ck_assert_int_eq(launch_wait(f.c, small, CUA_STREAM_ORDERED, msg, sizeof(msg)), CUA_OK);
	expect_all(&f, f.y, 1.0f);
	CK(cua_graph_destroy(f.c, small));
	CK(cua_mem_free(f.c, f.x)); /* no pin of the refused graph holds it */
	CK(cua_mem_free(f.c, f.y));
	CK(cua_module_unload(f.c, f.m));
	cua_disconnect(f.c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("graphs");
	TCase *tc = tcase_create("graphs");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, graph_of_kernels_launched_many_times);
	tcase_add_test(tc, set_args_changes_later_launches_only);
	tcase_add_test(tc, memset_and_copy_nodes);
	tcase_add_test(tc, destroyed_and_foreign_graphs_are_refused);
	tcase_add_test(tc, nodes_are_validated_like_their_requests);
	tcase_add_test(tc, set_args_is_checked_like_a_launch);
	tcase_add_test(tc, memory_and_modules_of_a_graph_are_pinned);
	tcase_add_test(tc, limits_hold_and_others_are_served);
	tcase_add_test(tc, graphs_of_a_lost_context_answer_context_lost);
	tcase_add_test(tc, close_with_graph_launches_in_flight);
	tcase_add_test(tc, destroy_and_reuse_while_launching);
	tcase_add_test(tc, big_graph_launched_many_times);
	suite_add_tcase(s, tc);
	TCase *tl = tcase_create("graphs, lost context");
	tcase_set_timeout(tl, 120);
	tcase_add_checked_fixture(tl, up_shared, down);
	tcase_add_test(tl, pins_of_a_lost_context_hold_nothing);
	suite_add_tcase(s, tl);
	TCase *tr = tcase_create("graphs, small ring");
	tcase_set_timeout(tr, 120);
	tcase_add_checked_fixture(tr, up_small_ring, down);
	tcase_add_test(tr, graph_too_large_for_the_ring_leaves_nothing);
	suite_add_tcase(s, tr);
	TCase *tt = tcase_create("graphs, 4 submit threads");
	tcase_set_timeout(tt, 120);
	tcase_add_checked_fixture(tt, up_threads, down);
	tcase_add_test(tt, set_args_between_launches_on_many_streams);
	tcase_add_test(tt, close_with_graph_launches_in_flight);
	tcase_add_test(tt, destroy_and_reuse_while_launching);
	suite_add_tcase(s, tt);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
