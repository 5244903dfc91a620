/*
 * test_core_graph.c — unit tests of the daemon's core (libcuadcore): graphs. The stub edge, the session states and the
 * table-driven request case are in core_fixture.h.
 */
#include "config.h"

#include "core_fixture.h"

#include <string.h>

/* setup_std, and a graph gr0 on device 0 with one node, fn0 on ADDR_A + 16 (pinned). */
static void
setup_graph(struct env *e)
{
	setup_std(e);
	struct session *s = e->s;
	e->gr0 = add_handle(s, CUA_HK_GRAPH, 0, 1, 7);
	struct fgraph *g = do_graph_new(s, 0, 1, 1, 0);
	ck_assert_ptr_nonnull(g);
	g->slot = cua_handle_slot(e->gr0);
	g->req = 0;
	g->nodes[0] = (struct gnode){CUA_OP_LAUNCH, e->fn0, {8, 1, 1}, {32, 1, 1}, 0};
	ck_assert_int_eq(do_graph_pin(s, g, 0, ADDR_A + 16, 1, 0), 0);
	s->ngraphs = 1;
	s->graph_nodes = 1;
}

/* setup_graph, then device 0's worker restarted (generation 2): gr0 is of the lost context. */
static void
setup_graph_lost(struct env *e)
{
	setup_graph(e);
	e->fe.devs[0].gen = 2;
	add_alloc(e->s, 0, 2, ADDR_A, ALLOC_LEN); /* the same address again, live */
}

/* setup_std with room for one graph node in all. */
static void
setup_graph_nodes_1(struct env *e)
{
	setup_std(e);
	e->fe.cfg.session_graph_nodes = 1;
}

/* setup_graph, and another session (pipe 2) holds ADDR_X. */
static void
setup_graph_other(struct env *e)
{
	setup_graph(e);
	struct session *o = do_session_new(&e->fe, PIPE_OTHER);
	ck_assert_ptr_nonnull(o);
	o->hello = true;
	add_alloc(o, 0, 1, ADDR_X, ALLOC_LEN);
}

#define GITEMS(n) (b->graph_create = (struct cua_req_graph_create){0, e->items, (n)})

BODY(b_gcreate_ok, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32;
     e->items[0] = (cua_batch_item){.kind = CUA_OP_LAUNCH, .u.launch = LAUNCH(e->fn0, 8, 0, 2)};
     e->items[1] = (cua_batch_item){.kind = CUA_OP_MEMSET, .u.memset = {ADDR_A, 0, 4, 16, 0}}; GITEMS(2))

BODY(b_gcreate_foreign, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32;
     e->items[0] = (cua_batch_item){.kind = CUA_OP_LAUNCH, .u.launch = LAUNCH(e->fn0, 8, 0, 2)};
     e->items[1] = (cua_batch_item){.kind = CUA_OP_MEMSET, .u.memset = {ADDR_X, 0, 4, 16, 0}}; GITEMS(2))

BODY(b_gcreate_stream, e->items[0] = (cua_batch_item){.kind = CUA_OP_MEMSET, .u.memset = {ADDR_A, 0, 4, 16, e->st0}};
     GITEMS(1))

BODY(b_gcreate_htod, e->items[0] = (cua_batch_item){.kind = CUA_OP_MEMCPY_HTOD, .u.htod = {ADDR_A, 0, {bytes16, 16}}};
     GITEMS(1))

BODY(b_gcreate_pdl80, e->args[0] = DEVPTR(ADDR_B); e->args[1] = INT32;
     e->items[0] = (cua_batch_item){.kind = CUA_OP_LAUNCH, .u.launch = LAUNCH(e->fn1, 8, CUA_LAUNCH_PDL, 2)}; GITEMS(1))

BODY(b_gcreate_pdl90, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32;
     e->items[0] = (cua_batch_item){.kind = CUA_OP_LAUNCH, .u.launch = LAUNCH(e->fn0, 8, CUA_LAUNCH_PDL, 2)}; GITEMS(1))

BODY(b_gcreate_prio, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32;
     e->items[0] = (cua_batch_item){.kind = CUA_OP_LAUNCH, .u.launch = LAUNCH(e->fn0, 8, 0, 2)};
     e->items[0].u.launch.nfields = CUA_LAUNCH_FIELDS_PRIORITY; GITEMS(1))

BODY(b_gcreate_empty, GITEMS(0))

BODY(b_glaunch, b->graph_launch = (struct cua_req_graph_launch){e->gr0, CUA_STREAM_ORDERED_ID, 0})

BODY(b_glaunch_fn, b->graph_launch = (struct cua_req_graph_launch){e->fn0, 0, 0})

BODY(b_gset_ok, e->args[0] = DEVPTR(ADDR_A + 32); e->args[1] = INT32;
     b->graph_set_args = (struct cua_req_graph_set_args){e->gr0, 0, e->args, 2})

BODY(b_gset_count, e->args[0] = DEVPTR(ADDR_A);
     b->graph_set_args = (struct cua_req_graph_set_args){e->gr0, 0, e->args, 1})

BODY(b_gset_foreign, e->args[0] = DEVPTR(ADDR_X); e->args[1] = INT32;
     b->graph_set_args = (struct cua_req_graph_set_args){e->gr0, 0, e->args, 2})

BODY(b_gset_node1, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32;
     b->graph_set_args = (struct cua_req_graph_set_args){e->gr0, 1, e->args, 2})

BODY(b_gdestroy, b->graph_destroy.graph = e->gr0)

BODY(b_free_a_graph, b->mem_free.ptr = ADDR_A)

BODY(b_gunload_mod0, b->module_unload.module = e->mod0)

static void
chk_graph_pinned_new(struct env *e)
{
	struct fgraph *g = do_graph_by_slot(e->s, cua_handle_slot(e->gr0));
	ck_assert_ptr_nonnull(g);
	ck_assert_uint_eq(g->npins, 2); /* the old pin and the pending new one, until it completes */
}

static void
chk_graph_forgotten(struct env *e)
{
	ck_assert_ptr_null(do_graph_by_slot(e->s, cua_handle_slot(e->gr0)));
	ck_assert_uint_eq(e->s->ngraphs, 0);
	ck_assert_uint_eq(e->s->graph_nodes, 0);
}

static void
chk_graph_pending(struct env *e)
{
	ck_assert_uint_eq(e->s->ngraphs, 1);
	ck_assert_uint_eq(e->s->graph_nodes, 2);
	ck_assert_ptr_nonnull(LIST_FIRST(&e->s->graphs));
	ck_assert_uint_eq(LIST_FIRST(&e->s->graphs)->npins, 2); /* the launch's pointer and the memset's range */
}

/* ------------------------------------------------------------------ the cases */

static const struct ccase cases[] = {
	/* graphs (issue 13) */
	{"graph_create of a launch and a memset queues one command", setup_std, CUA_OP_GRAPH_CREATE, 0, b_gcreate_ok,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1, .check = chk_graph_pending},
	{"graph_create: node 1 in another session's memory", setup_other_session, CUA_OP_GRAPH_CREATE, 0,
	 b_gcreate_foreign, .status = CUA_EBAD_ARGUMENT, .msg = "node 1: ", .outcome = ANSWERED},
	{"graph_create: a node names a stream", setup_std, CUA_OP_GRAPH_CREATE, 0, b_gcreate_stream,
	 .status = CUA_EBAD_ARGUMENT, .msg = "node 0: a graph's node names no stream", .outcome = ANSWERED},
	{"graph_create: a host copy node", setup_std, CUA_OP_GRAPH_CREATE, 0, b_gcreate_htod,
	 .status = CUA_EUNSUPPORTED, .msg = "(MEMCPY_HTOD) cannot be kept safe", .outcome = ANSWERED},
	{"graph_create: the PDL gate holds for nodes", setup_std, CUA_OP_GRAPH_CREATE, 0, b_gcreate_pdl80,
	 .status = CUA_EPDL_UNSUPPORTED, .msg = "node 0: programmatic dependent launch requires sm_90 or newer",
	 .outcome = ANSWERED},
	{"graph_create: PDL in a graph on sm_90", setup_std, CUA_OP_GRAPH_CREATE, 0, b_gcreate_pdl90,
	 .status = CUA_EUNSUPPORTED, .msg = "inside a graph is not supported", .outcome = ANSWERED},
	{"graph_create: a launch attribute in a node", setup_std, CUA_OP_GRAPH_CREATE, 0, b_gcreate_prio,
	 .status = CUA_EUNSUPPORTED, .msg = "node 0: cluster dimensions, cooperative launch and per-launch priority",
	 .outcome = ANSWERED},
	{"graph_create: no node", setup_std, CUA_OP_GRAPH_CREATE, 0, b_gcreate_empty, .status = CUA_EBAD_ARGUMENT,
	 .msg = "at least one node", .outcome = ANSWERED},
	{"graph_create: past --session-graph-nodes", setup_graph_nodes_1, CUA_OP_GRAPH_CREATE, 0, b_gcreate_ok,
	 .status = CUA_EQUOTA, .msg = "--session-graph-nodes", .outcome = ANSWERED},
	{"graph_launch queues", setup_graph, CUA_OP_GRAPH_LAUNCH, 0, b_glaunch, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 1},
	{"graph_launch of a function handle", setup_graph, CUA_OP_GRAPH_LAUNCH, 0, b_glaunch_fn,
	 .status = CUA_ENOT_FOUND, .msg = "graph handle", .outcome = ANSWERED},
	{"graph_launch of a lost context's graph", setup_graph_lost, CUA_OP_GRAPH_LAUNCH, 0, b_glaunch,
	 .status = CUA_ECONTEXT_LOST, .msg = "recreate it", .outcome = ANSWERED},
	{"graph_set_args queues and pins the new pointer", setup_graph, CUA_OP_GRAPH_SET_ARGS, 0, b_gset_ok,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1, .check = chk_graph_pinned_new},
	{"graph_set_args: wrong count", setup_graph, CUA_OP_GRAPH_SET_ARGS, 0, b_gset_count,
	 .status = CUA_EBAD_ARGUMENT, .msg = "the kernel takes 2 arguments, the launch has 1", .outcome = ANSWERED},
	{"graph_set_args: another session's memory", setup_graph_other, CUA_OP_GRAPH_SET_ARGS, 0, b_gset_foreign,
	 .status = CUA_EBAD_ARGUMENT, .msg = "argument 0: ", .outcome = ANSWERED},
	{"graph_set_args: no node 1", setup_graph, CUA_OP_GRAPH_SET_ARGS, 0, b_gset_node1, .status = CUA_EBAD_ARGUMENT,
	 .msg = "node 1: the graph has 1 nodes", .exact = true, .outcome = ANSWERED},
	{"mem_free of memory a graph uses", setup_graph, CUA_OP_MEM_FREE, 0, b_free_a_graph, .status = CUA_EBUSY,
	 .msg = "is used by node 0 of graph 0x6", .outcome = ANSWERED},
	{"module_unload of a graph's kernel", setup_graph, CUA_OP_MODULE_UNLOAD, 0, b_gunload_mod0, .status = CUA_EBUSY,
	 .msg = "destroy the graph first", .outcome = ANSWERED},
	{"mem_free once a lost context's graph pins nothing", setup_graph_lost, CUA_OP_MEM_FREE, 0, b_free_a_graph,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"graph_destroy queues, a barrier, its pins gone", setup_graph, CUA_OP_GRAPH_DESTROY, 0, b_gdestroy,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1, .check = chk_graph_forgotten},
	{"graph_destroy of a lost context's graph forgets it", setup_graph_lost, CUA_OP_GRAPH_DESTROY, 0, b_gdestroy,
	 .status = CUA_ECONTEXT_LOST, .msg = "recreate it", .outcome = ANSWERED, .check = chk_graph_forgotten},
};

#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

int
main(void)
{
	return core_run(core_cases_suite("core-graph", cases, NCASES, NULL));
}
