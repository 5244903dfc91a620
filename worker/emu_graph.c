/*
 * emu_graph.c — graphs on the emulated device: a graph is its stored list of nodes (kernels with a copy of their
 * arguments, memsets, device-to-device copies), queued in order on the stream it is launched on. The arguments
 * are copied into each queued job when the graph is launched, so GRAPH_SET_ARGS changes later launches only,
 * as cuGraphExecKernelNodeSetParams does. Launches of one graph run one after the other, whatever their streams,
 * as cuGraphLaunch's do: each waits for an event the one before recorded. Graph ids come from E->graphs (1 and up).
 */
#include "config.h"

#include "emu_impl.h"

#include <stdlib.h>
#include <string.h>

struct emu_gnode {
	struct wk_gnode n;   /* launch.params points into args; launch.sizes is sizes */
	unsigned char *args; /* the arguments, each 16-byte aligned */
	uint32_t *sizes;
	void **params;
};

struct emu_graph {
	struct emu_gnode *nodes;
	uint32_t n;
	uint64_t ev; /* an event of the device recorded after each launch's last node: the next launch, on whatever
		      * stream, waits for it (cuGraphLaunch orders a graph's launches behind each other) */
};

static void
node_args_free(struct emu_gnode *gn)
{
	free(gn->args);
	free(gn->sizes);
	free(gn->params);
	gn->args = NULL;
	gn->sizes = NULL;
	gn->params = NULL;
}

/* Copies l's arguments into gn (replacing what it had). 0 or CUA_ENOMEM. */
static int
node_args_set(struct emu_gnode *gn, const struct wk_launch *l)
{
	size_t total = 0, n = l->nparams;
	for (size_t i = 0; i < n; i++)
		total += (l->sizes[i] + 15u) & ~(size_t)15u;
	unsigned char *args = aligned_alloc(16, total ? total : 16);
	uint32_t *sizes = calloc(n ? n : 1, sizeof(*sizes));
	void **params = calloc(n ? n : 1, sizeof(*params));
	if (args == NULL || sizes == NULL || params == NULL) {
		free(args);
		free(sizes);
		free(params);
		return CUA_ENOMEM;
	}
	for (size_t i = 0, off = 0; i < n; i++) {
		memcpy(args + off, l->params[i], l->sizes[i]);
		sizes[i] = l->sizes[i];
		params[i] = args + off;
		off += (l->sizes[i] + 15u) & ~(size_t)15u;
	}
	node_args_free(gn);
	gn->args = args;
	gn->sizes = sizes;
	gn->params = params;
	gn->n.launch.params = params;
	gn->n.launch.sizes = sizes;
	gn->n.launch.nparams = n;
	return 0;
}

/* Frees graph p (a struct emu_graph *; NULL is fine); a callback of wk_idtab_fini (ud unused). */
static void
graph_free(void *ud, void *p)
{
	struct emu_graph *g = p;
	(void)ud;
	if (g == NULL)
		return;
	for (uint32_t i = 0; i < g->n; i++)
		node_args_free(&g->nodes[i]);
	free(g->nodes);
	free(g);
}

/* A kernel node's function must exist and take as many arguments as given (cuGraphAddKernelNode's check). */
static int
check_kernel(struct emu *E, uint32_t i, const struct wk_launch *l, cua_err *e)
{
	const struct emu_kernel *k;
	uint64_t global;
	int r = emu_fn_resolve(E, l->fn, &k, NULL, &global, e);
	if (r == 0 && l->nparams != k->nparams)
		r = cua_err_set(e, CUA_EBAD_ARGUMENT,
				"CUDA_ERROR_INVALID_VALUE: node %u: %zu arguments for %u parameters", i, l->nparams,
				k->nparams);
	return r;
}

static int
graph_build(struct emu *E, const struct wk_gnode *nodes, uint32_t n, struct emu_graph **out, cua_err *e)
{
	struct emu_graph *g = calloc(1, sizeof(*g));
	if (g == NULL || (g->nodes = calloc(n, sizeof(*g->nodes))) == NULL) {
		free(g);
		return cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory for a graph");
	}
	g->n = n;
	for (uint32_t i = 0; i < n; i++) {
		g->nodes[i].n = nodes[i];
		g->nodes[i].n.launch.params = NULL;
		g->nodes[i].n.launch.sizes = NULL;
		if (nodes[i].kind != WR_LAUNCH)
			continue;
		int r = check_kernel(E, i, &nodes[i].launch, e);
		if (r == 0 && node_args_set(&g->nodes[i], &nodes[i].launch) != 0)
			r = cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory for a graph");
		if (r != 0) {
			graph_free(NULL, g);
			return r;
		}
	}
	*out = g;
	return 0;
}

int
emu_graph_create(struct wk *w, const struct wk_gnode *nodes, uint32_t n, uint64_t *id, cua_err *e)
{
	struct emu *E = w->be_state;
	struct emu_graph *g = NULL;
	int r = graph_build(E, nodes, n, &g, e);
	if (r != 0)
		return r;
	if ((r = emu_event_create(w, CUA_EVENT_DISABLE_TIMING, &g->ev, e)) != 0) {
		graph_free(NULL, g);
		return r;
	}
	if ((r = wk_idtab_add(&E->graphs, g, id)) != 0) {
		cua_err ee;
		emu_event_destroy(w, g->ev, &ee);
		graph_free(NULL, g);
		return cua_err_set(e, r,
				   r == CUA_EQUOTA ? "emulated device: too many graphs"
						   : "emulated device: out of host memory");
	}
	return 0;
}

/* Graph id, or NULL. Caller holds E->graphs.lock, which keeps it from changing while used (set_args) or from
 * going while its nodes are queued (launch). */
static struct emu_graph *
graph_get(struct emu *E, uint64_t id)
{
	return cua_idmap_find(&E->graphs.map, id);
}

int
emu_graph_set_args(struct wk *w, uint64_t id, uint32_t node, const struct wk_launch *l, cua_err *e)
{
	struct emu *E = w->be_state;
	int r = 0;
	pthread_mutex_lock(&E->graphs.lock);
	struct emu_graph *g = graph_get(E, id);
	if (g == NULL)
		r = cua_err_set(e, CUA_ENOT_FOUND, "no graph %llu", (unsigned long long)id);
	else if (node >= g->n || g->nodes[node].n.kind != WR_LAUNCH)
		r = cua_err_set(e, CUA_EBAD_ARGUMENT, "graph %llu has no kernel node %u", (unsigned long long)id, node);
	else if (l->nparams != g->nodes[node].n.launch.nparams)
		r = cua_err_set(e, CUA_EBAD_ARGUMENT, "CUDA_ERROR_INVALID_VALUE: %zu arguments for %zu parameters",
				l->nparams, g->nodes[node].n.launch.nparams);
	else if (node_args_set(&g->nodes[node], l) != 0)
		r = cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory");
	pthread_mutex_unlock(&E->graphs.lock);
	return r;
}

int
emu_graph_destroy(struct wk *w, uint64_t id, cua_err *e)
{
	struct emu *E = w->be_state;
	struct emu_graph *g = wk_idtab_take(&E->graphs, id);
	if (g == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no graph %llu", (unsigned long long)id);
	cua_err ee;
	emu_event_destroy(w, g->ev, &ee); /* queued records and waits keep it until they ran */
	graph_free(NULL, g);              /* its queued jobs hold copies */
	return 0;
}

/* Queues node i of a graph on sid. */
static int
node_queue(struct wk *w, uint32_t sid, const struct wk_gnode *n, struct wk_tag tag, cua_err *e)
{
	switch (n->kind) {
	case WR_LAUNCH: return emu_launch(w, sid, &n->launch, tag, e);
	case WR_MEMSET: return emu_memset(w, sid, n->dst, n->value, n->width, n->count, tag, e);
	default: return emu_dtod(w, sid, n->dst, n->src, n->bytes, tag, e);
	}
}

int
emu_graph_launch(struct wk *w, uint32_t sid, uint64_t id, struct wk_tag tag, cua_err *e)
{
	struct emu *E = w->be_state;
	int r = 0;
	pthread_mutex_lock(&E->graphs.lock);
	struct emu_graph *g = graph_get(E, id);
	if (g == NULL)
		r = cua_err_set(e, CUA_ENOT_FOUND, "no graph %llu", (unsigned long long)id);
	else /* after the graph's previous launch, on whichever stream it ran */
		r = emu_stream_wait_event(w, sid, g->ev, e);
	for (uint32_t i = 0; g != NULL && i < g->n && r == 0; i++)
		r = node_queue(w, sid, &g->nodes[i].n, tag, e);
	if (r == 0)
		r = emu_event_record(w, sid, g->ev, e);
	pthread_mutex_unlock(&E->graphs.lock);
	return r;
}

void
emu_graphs_fini(struct emu *E)
{
	wk_idtab_fini(&E->graphs, graph_free, NULL);
}
