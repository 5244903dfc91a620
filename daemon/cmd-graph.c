/*
 * cmd-graph.c — GRAPH_CREATE, GRAPH_LAUNCH, GRAPH_SET_ARGS, GRAPH_DESTROY (PROTOCOL.md "Graphs").
 *
 * GRAPH_CREATE's nodes are batch items, and each is validated by the very function that validates the single
 * request it mirrors (plan_launch, plan_memset, plan_dtod: handles, argument layout, pointer ownership, the PDL
 * gate), which plans its worker command; those commands then travel inside one WR_GRAPH_CREATE, from which the
 * worker builds and instantiates the graph. What the nodes use is pinned (graphtab.h): MEM_FREE and
 * MODULE_UNLOAD of it answer BUSY until the graph is destroyed. GRAPH_DESTROY is a barrier, so launches of the
 * graph in flight complete before it is destroyed.
 */
#include "config.h"

#include "cmd.h"
#include "graphtab.h"

#include <stdlib.h>
#include <string.h>

/* Planning a node names no stream (the graph's launch does): the pool's round-robin and the request's pool use
 * are put back as they were. */
struct pool_mark {
	bool uses_pool;
	uint32_t next_pool;
};
static struct pool_mark
pool_save(const struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	return (struct pool_mark){r->uses_pool, r->s->next_pool};
}
static void
pool_restore(struct request *r, struct pool_mark m) CUA_REQUIRES(cuad_fe_lock)
{
	r->uses_pool = m.uses_pool;
	r->s->next_pool = m.next_pool;
}

/* Pins the device pointers of a launch's arguments. */
static int
pin_args(struct session *s, struct fgraph *g, uint32_t node, const cua_wire_arg *args, uint32_t n, uint64_t req)
	CUA_REQUIRES(cuad_fe_lock)
{
	for (uint32_t i = 0; i < n; i++)
		if (args[i].kind == CUA_ARG_DEVPTR && args[i].devptr != 0 &&
		    do_graph_pin(s, g, node, args[i].devptr, 1, req) != 0)
			return CUA_ENOMEM;
	return 0;
}

static int
plan_node_launch(struct fe *fe, struct request *r, struct fgraph *g, uint32_t i, const struct cua_req_launch *q,
		 cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	struct ritem it = {-1, 0, NULL, 0, NULL, 0, -1};
	if (q->flags & CUA_FLAG_NO_WAIT)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "a node has no reply of its own: leave CUA_FLAG_NO_WAIT to "
				   "GRAPH_LAUNCH");
	int rc = plan_launch(fe, r, q, &it, e);
	if (rc != 0)
		return rc;
	if (q->flags & CUA_LAUNCH_PDL)
		return cua_err_set(e, CUA_EUNSUPPORTED,
				   "programmatic dependent launch inside a graph is not supported; launch that kernel "
				   "on its own");
	/* launch attributes (validated above like a launch's) are not carried into graph nodes yet */
	bool cluster = q->nfields >= CUA_LAUNCH_FIELDS_CLUSTER && (q->cluster[0] | q->cluster[1] | q->cluster[2]) != 0;
	if ((q->flags & CUA_LAUNCH_COOPERATIVE) || cluster || q->nfields >= CUA_LAUNCH_FIELDS_PRIORITY)
		return cua_err_set(e, CUA_EUNSUPPORTED,
				   "cluster dimensions, cooperative launch and per-launch priority inside a graph are "
				   "not supported; launch that kernel on its own");
	g->nodes[i] = (struct gnode){CUA_OP_LAUNCH,
				     q->function,
				     {q->grid[0], q->grid[1], q->grid[2]},
				     {q->block[0], q->block[1], q->block[2]},
				     q->shared_mem};
	return pin_args(r->s, g, i, q->args, q->nargs, 0) != 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static uint64_t
item_stream(const cua_batch_item *b)
{
	switch (b->kind) {
	case CUA_OP_LAUNCH: return b->u.launch.stream;
	case CUA_OP_MEMSET: return b->u.memset.stream;
	case CUA_OP_MEMCPY_DTOD: return b->u.dtod.stream;
	default: return 0;
	}
}

/* Validates node i and plans its command; pins what it uses. */
static int
plan_node(struct fe *fe, struct request *r, struct fgraph *g, uint32_t i, const cua_batch_item *b, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock)
{
	struct ritem it = {-1, 0, NULL, 0, NULL, 0, -1};
	struct session *s = r->s;
	int rc;
	if (item_stream(b) != 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "a graph's node names no stream (stream 0): GRAPH_LAUNCH names the stream the whole "
				   "graph runs on");
	switch (b->kind) {
	case CUA_OP_LAUNCH: return plan_node_launch(fe, r, g, i, &b->u.launch, e);
	case CUA_OP_MEMSET:
		if ((rc = plan_memset(fe, r, &b->u.memset, &it, e)) != 0)
			return rc;
		g->nodes[i].kind = CUA_OP_MEMSET;
		rc = do_graph_pin(s, g, i, b->u.memset.dst, b->u.memset.count * b->u.memset.width, 0);
		break;
	case CUA_OP_MEMCPY_DTOD:
		if ((rc = plan_dtod(fe, r, &b->u.dtod, &it, e)) != 0)
			return rc;
		g->nodes[i].kind = CUA_OP_MEMCPY_DTOD;
		rc = do_graph_pin(s, g, i, b->u.dtod.dst, b->u.dtod.bytes, 0);
		if (rc == 0)
			rc = do_graph_pin(s, g, i, b->u.dtod.src, b->u.dtod.bytes, 0);
		break;
	default:
		return cua_err_set(e, CUA_EUNSUPPORTED,
				   "a graph's nodes are launches, memsets and device-to-device copies; a copy from or "
				   "to the host (%s) cannot be kept safe for the graph's life: copy before or after "
				   "GRAPH_LAUNCH",
				   cua_op_name(b->kind) ? cua_op_name(b->kind) : "?");
	}
	return rc != 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* Records of graphs whose GRAPH_CREATE was validated and then failed as a whole (its context was lost before
 * it ran) never complete: they pin nothing (graphtab.c) and are dropped here. */
static void
sweep_lost(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock)
{
	struct fgraph *g, *next;
	for (g = LIST_FIRST(&s->graphs); g != NULL; g = next) {
		next = LIST_NEXT(g, link);
		if (g->slot == UINT32_MAX && g->gen != do_session_gen(fe, s, g->dev)) {
			s->ngraphs--;
			s->graph_nodes -= g->nnodes;
			do_graph_free(s, g);
		}
	}
}

static int
graph_quota(struct fe *fe, struct request *r, uint32_t n, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	struct session *s = r->s;
	sweep_lost(fe, s); /* its handle and bytes: .reserve */
	if (s->ngraphs >= fe->cfg.session_graphs)
		return cua_err_set(e, CUA_EQUOTA,
				   "the session holds %u graphs, its limit; destroy some, or raise it with "
				   "--session-graphs",
				   s->ngraphs);
	if (n > fe->cfg.session_graph_nodes -
			(s->graph_nodes < fe->cfg.session_graph_nodes ? s->graph_nodes : fe->cfg.session_graph_nodes))
		return cua_err_set(e, CUA_EQUOTA,
				   "a graph of %u nodes would take the session's graphs to %llu nodes, past its limit "
				   "of %u; destroy graphs, or raise it with --session-graph-nodes",
				   n, (unsigned long long)s->graph_nodes + n, fe->cfg.session_graph_nodes);
	return 0;
}

/* Moves the commands planned so far (the nodes') into one command rec of `fixed` bytes that they follow. */
static int
wrap_cmds(struct request *r, void *rec, size_t fixed)
{
	unsigned char *body = r->cmds;
	uint32_t len = (uint32_t)r->cmds_len;
	r->cmds = NULL;
	r->cmds_len = r->cmds_cap = 0;
	r->ncmds = 0;
	return plan_cmd(r, rec, fixed, body, len); /* body stays in r->pool, unused, until r goes */
}

static int
v_graph_create(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_graph_create *q = &r->w.body.graph_create;
	int rc;
	if (q->nitems == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "a graph needs at least one node");
	if ((rc = graph_quota(fe, r, q->nitems, e)) != 0)
		return rc;
	struct fgraph *g = do_graph_new(r->s, -1, 0, q->nitems, r->id);
	if (g == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	struct pool_mark pm = pool_save(r);
	for (uint32_t i = 0; i < q->nitems && rc == 0; i++) {
		cua_err ne;
		cua_err_clear(&ne);
		if ((rc = plan_node(fe, r, g, i, &q->items[i], &ne)) != 0)
			cua_err_set(e, rc, "node %u: %s", i, ne.detail);
	}
	pool_restore(r, pm);
	struct wrec_graph_create c = {{WR_GRAPH_CREATE, 0}, q->nitems, 0};
	if (rc == 0 && (r->items[0].cmd = wrap_cmds(r, &c, sizeof(c))) < 0)
		rc = cua_err_set(e, CUA_ENOMEM, "out of memory");
	if (rc != 0) {
		do_graph_free(r->s, g);
		return rc;
	}
	g->dev = r->dev;
	g->gen = r->dep_gen;
	r->s->ngraphs++;
	r->s->graph_nodes += q->nitems;
	return 0;
}

/* Its handle, and its bytes: the worker command that carries every node with its arguments is what the worker
 * builds the graph from and keeps while it lives (up to 32 KB of arguments a node), weighed against
 * --session-graph-bytes and the tenant's `graph-bytes`. */
static void
rs_graph_create(const struct fe *fe, const struct request *r, struct resv *want)
{
	(void)fe;
	want->n[RES_HANDLES] = 1;
	want->n[RES_GRAPH_BYTES] = r->cmds_len;
}

static void
c_graph_create(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct ritem *it = &r->items[0];
	struct fgraph *g = do_graph_by_req(r->s, r->id);
	uint64_t h;
	if (g == NULL)
		return;
	int rc = it->status == CUA_OK ? do_handle_new(r->s, CUA_HK_GRAPH, r->dev, r->wdev->gen, it->value, &h)
				      : (int)it->status;
	if (rc != 0) {
		if (it->status == CUA_OK)
			item_fail(it, rc, "cannot record the graph");
		r->s->ngraphs--;
		r->s->graph_nodes -= g->nnodes;
		do_graph_free(r->s, g);
		return;
	}
	g->slot = cua_handle_slot(h);
	g->gen = r->wdev->gen;
	g->req = 0;
	r->s->slots[g->slot].size = r->resv[RES_GRAPH_BYTES]; /* counted from now until it is forgotten */
	r->s->graph_bytes += r->resv[RES_GRAPH_BYTES];
	it->value = h;
}

/* Refused as a whole after its validation (e.g. TOO_LARGE for the worker ring): its record and pins go. */
static void
a_graph_create(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct fgraph *g = do_graph_by_req(r->s, r->id);
	if (g == NULL) /* its validation failed, and freed it */
		return;
	r->s->ngraphs--;
	r->s->graph_nodes -= g->nnodes;
	do_graph_free(r->s, g);
}

static int
r_graph_create(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	(void)fe;
	(void)scratch;
	b->graph_create = (struct cua_rep_graph_create){r->items[0].value, r->w.body.graph_create.nitems};
	return 0;
}

/* The live graph of handle h: its slot and record. */
static int
graph_get(struct fe *fe, struct request *r, uint64_t h, struct hslot **hs, struct fgraph **g, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock)
{
	int rc = do_handle_get(fe, r->s, h, CUA_HK_GRAPH, hs, e);
	if (rc != 0)
		return rc;
	*g = do_graph_by_slot(r->s, cua_handle_slot(h));
	if (*g == NULL)
		return cua_err_set(e, CUA_EINTERNAL, "graph 0x%llx has no record", (unsigned long long)h);
	return plan_bind_device(fe, r, (*g)->dev, (*hs)->gen, e);
}

static int
v_graph_launch(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_graph_launch *q = &r->w.body.graph_launch;
	struct hslot *hs;
	struct fgraph *g;
	uint32_t sid;
	int rc;
	r->no_wait = (q->flags & CUA_FLAG_NO_WAIT) != 0;
	if (q->flags & ~CUA_FLAG_NO_WAIT)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "GRAPH_LAUNCH takes only the NO_WAIT flag (2), not %u",
				   q->flags);
	if ((rc = graph_get(fe, r, q->graph, &hs, &g, e)) != 0 ||
	    (rc = plan_stream(fe, r, q->stream, g->dev, &sid, e)) != 0)
		return rc;
	struct wrec_graph_launch c = {{WR_GRAPH_LAUNCH, 0}, sid, 0, hs->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
v_graph_set_args(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_graph_set_args *q = &r->w.body.graph_set_args;
	struct ritem it = {-1, 0, NULL, 0, NULL, 0, -1};
	struct hslot *hs;
	struct fgraph *g;
	int rc;
	if ((rc = graph_get(fe, r, q->graph, &hs, &g, e)) != 0)
		return rc;
	if (q->node >= g->nnodes)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "node %u: the graph has %u nodes", q->node, g->nnodes);
	const struct gnode *n = &g->nodes[q->node];
	if (n->kind != CUA_OP_LAUNCH)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "node %u is a %s, not a kernel launch", q->node,
				   n->kind == CUA_OP_MEMSET ? "memset" : "device-to-device copy");
	/* validated as a launch of the node's function with these arguments */
	struct cua_req_launch L = {.function = n->function,
				   .grid = {n->grid[0], n->grid[1], n->grid[2]},
				   .block = {n->block[0], n->block[1], n->block[2]},
				   .shared_mem = n->shared_mem,
				   .args = q->args,
				   .nargs = q->nargs,
				   .nfields = CUA_LAUNCH_FIELDS};
	struct pool_mark pm = pool_save(r);
	rc = plan_launch(fe, r, &L, &it, e);
	pool_restore(r, pm);
	if (rc != 0)
		return rc;
	/* the launch command's arguments become the set_args command's */
	struct wrec_launch lc;
	memcpy(&lc, r->cmds, sizeof(lc));
	uint32_t plen = lc.h.size - (uint32_t)sizeof(lc);
	unsigned char *payload = malloc(plen ? plen : 1);
	if (payload == NULL || pin_args(r->s, g, q->node, q->args, q->nargs, r->id) != 0) {
		free(payload);
		do_graph_pins_commit(g, q->node, r->id, false);
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	}
	memcpy(payload, r->cmds + sizeof(lc), plen);
	r->cmds_len = 0;
	r->ncmds = 0;
	struct wrec_graph_set_args c = {{WR_GRAPH_SET_ARGS, 0}, hs->wid, q->node, q->nargs};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), payload, plen);
	free(payload);
	if (r->items[0].cmd < 0) {
		do_graph_pins_commit(g, q->node, r->id, false);
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	}
	return 0;
}

/* GRAPH_SET_ARGS r is done: its pending pins take effect (ok) or go. */
static void
set_args_settle(struct request *r, bool ok) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_graph_set_args *q = &r->w.body.graph_set_args;
	if (do_handle_slot(r->s, q->graph, CUA_HK_GRAPH) == NULL)
		return;
	struct fgraph *g = do_graph_by_slot(r->s, cua_handle_slot(q->graph));
	if (g != NULL) /* NULL: destroyed since (its pins went with it) */
		do_graph_pins_commit(g, q->node, r->id, ok);
}

static void
c_graph_set_args(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	set_args_settle(r, r->items[0].status == CUA_OK);
}

static void
a_graph_set_args(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	set_args_settle(r, false);
}

/* Forgets graph slot hs and its record (destroyed, or of a lost context). */
static void
graph_forget(struct session *s, struct hslot *hs) CUA_REQUIRES(cuad_fe_lock)
{
	struct fgraph *g = do_graph_by_slot(s, (uint32_t)(hs - s->slots));
	s->graph_bytes -= hs->size;
	hs->size = 0;
	if (g != NULL) {
		s->ngraphs--;
		s->graph_nodes -= g->nnodes;
		do_graph_free(s, g);
	}
}

static int
v_graph_destroy(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	uint64_t h = r->w.body.graph_destroy.graph;
	struct hslot *hs;
	int rc = do_handle_get(fe, r->s, h, CUA_HK_GRAPH, &hs, e);
	if (rc == CUA_ECONTEXT_LOST) { /* its worker is gone, and the graph with it: forget it, and say so */
		hs = do_handle_slot(r->s, h, CUA_HK_GRAPH);
		graph_forget(r->s, hs);
		do_handle_free(r->s, hs);
		return rc;
	}
	if (rc != 0 || (rc = plan_bind_device(fe, r, hs->dev, hs->gen, e)) != 0)
		return rc;
	r->barrier = true; /* after every earlier launch of it completed */
	struct wrec_graph_destroy c = {{WR_GRAPH_DESTROY, 0}, hs->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	if (r->items[0].cmd < 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	graph_forget(r->s, hs); /* its pins go: later requests run after the destruction */
	hs->release = (struct release){r->id, r->seq};
	return 0;
}

static void
c_graph_destroy(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct hslot *hs = do_handle_slot(r->s, r->w.body.graph_destroy.graph, CUA_HK_GRAPH);
	/* whatever the outcome: validation forgot the graph's record and pins, so no request can use it again (a
	 * graph the worker failed to destroy is the worker's until it ends) */
	if (hs != NULL && hs->release.req == r->id)
		do_handle_free(r->s, hs);
}

const struct cmd_entry cmd_graph_create_entry = {.op = CUA_OP_GRAPH_CREATE,
						 .flags = CMD_HELLO,
						 .family = SF_GRAPH,
						 .wrec = WR_GRAPH_CREATE,
						 .validate = v_graph_create,
						 .reserve = rs_graph_create,
						 .complete = c_graph_create,
						 .reply = r_graph_create,
						 .abandon = a_graph_create};
const struct cmd_entry cmd_graph_launch_entry = {.op = CUA_OP_GRAPH_LAUNCH,
						 .flags = CMD_HELLO | CMD_STREAM,
						 .family = SF_GRAPH,
						 .wrec = WR_GRAPH_LAUNCH,
						 .validate = v_graph_launch};
const struct cmd_entry cmd_graph_set_args_entry = {.op = CUA_OP_GRAPH_SET_ARGS,
						   .flags = CMD_HELLO,
						   .family = SF_GRAPH,
						   .wrec = WR_GRAPH_SET_ARGS,
						   .validate = v_graph_set_args,
						   .complete = c_graph_set_args,
						   .abandon = a_graph_set_args};
const struct cmd_entry cmd_graph_destroy_entry = {.op = CUA_OP_GRAPH_DESTROY,
						  .flags = CMD_HELLO | CMD_RELEASES,
						  .family = SF_GRAPH,
						  .wrec = WR_GRAPH_DESTROY,
						  .validate = v_graph_destroy,
						  .complete = c_graph_destroy,
						  .abandon = c_graph_destroy};
