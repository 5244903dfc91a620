/*
 * commands_graph.c — the worker's graph commands (rows in commands.c): WR_GRAPH_CREATE's nested node commands
 * are checked and decoded into typed nodes (struct wk_gnode) for the backend; WR_GRAPH_SET_ARGS's arguments
 * likewise. Runs on the main thread, but for wk_i_graph_launch (the stream's owner).
 */
#include "config.h"

#include "core.h"

#include <stdlib.h>
#include <string.h>

/* A launch's arguments rebuilt for a graph node: each value 16-byte aligned in one block, and the pointer
 * array CUDA reads. Unlike the arena's, the pointers stay valid until gargs_free, so that the arguments of
 * every node of a graph exist at once. */
struct gargs {
	unsigned char *block;
	void **params;
	uint32_t *sizes;
	uint32_t n;
};

static void
gargs_free(struct gargs *g)
{
	free(g->block);
	free(g->params);
	free(g->sizes);
	memset(g, 0, sizeof(*g));
}

/* Reads nargs × (struct wrec_arg, bytes padded to 8) from [p, end) into g. 0, CUA_EINTERNAL (malformed) or
 * CUA_ENOMEM; g is to be freed with gargs_free in every case. */
static int
gargs_build(const unsigned char *p, const unsigned char *end, uint32_t nargs, struct gargs *g)
{
	memset(g, 0, sizeof(*g));
	if (nargs > CUA_MAX_PARAMS)
		return CUA_EINTERNAL;
	g->params = calloc(nargs ? nargs : 1, sizeof(*g->params));
	g->sizes = calloc(nargs ? nargs : 1, sizeof(*g->sizes));
	size_t *offs = calloc(nargs ? nargs : 1, sizeof(*offs)), total = 0;
	const unsigned char *q = p;
	int r = CUA_EINTERNAL;
	if (g->params == NULL || g->sizes == NULL || offs == NULL) {
		r = CUA_ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < nargs; i++) { /* sizes and offsets first */
		struct wrec_arg a;
		if ((size_t)(end - q) < sizeof(a))
			goto out;
		memcpy(&a, q, sizeof(a));
		if (a.size == 0 || a.size > CUA_MAX_PARAM_BYTES || (size_t)(end - q) - sizeof(a) < wrec_align8(a.size))
			goto out;
		g->sizes[i] = a.size;
		offs[i] = total;
		total += (a.size + 15u) & ~(size_t)15u;
		q += sizeof(a) + wrec_align8(a.size);
	}
	if ((g->block = aligned_alloc(16, total ? total : 16)) == NULL) {
		r = CUA_ENOMEM;
		goto out;
	}
	memset(g->block, 0, total ? total : 16);
	for (uint32_t i = 0; i < nargs; i++) {
		memcpy(g->block + offs[i], p + sizeof(struct wrec_arg), g->sizes[i]);
		g->params[i] = g->block + offs[i];
		p += sizeof(struct wrec_arg) + wrec_align8(g->sizes[i]);
	}
	g->n = nargs;
	r = 0;
out:
	free(offs);
	return r;
}

/* Decodes node command h (inside its record: checked by the caller) into n; launch arguments into g. */
static int
node_decode(const struct wrec_hdr *h, struct wk_gnode *n, struct gargs *g, cua_err *e)
{
	memset(n, 0, sizeof(*n));
	n->kind = h->op;
	if (h->op == WR_MEMSET && h->size >= sizeof(struct wrec_memset)) {
		const struct wrec_memset *c = (const struct wrec_memset *)h;
		if (c->width != 1 && c->width != 2 && c->width != 4)
			return cua_err_set(e, CUA_EINTERNAL, "memset width %u", c->width);
		n->dst = c->dst;
		n->value = (uint32_t)c->value;
		n->width = c->width;
		n->count = c->count;
		return 0;
	}
	if (h->op == WR_DTOD && h->size >= sizeof(struct wrec_dtod)) {
		const struct wrec_dtod *c = (const struct wrec_dtod *)h;
		n->dst = c->dst;
		n->src = c->src;
		n->bytes = c->bytes;
		return 0;
	}
	if (h->op != WR_LAUNCH || h->size < sizeof(struct wrec_launch))
		return cua_err_set(e, CUA_EINTERNAL, "graph node of kind %u", h->op);
	const struct wrec_launch *c = (const struct wrec_launch *)h;
	int r = gargs_build((const unsigned char *)(c + 1), (const unsigned char *)h + h->size, c->nargs, g);
	if (r != 0)
		return cua_err_set(e, r, r == CUA_ENOMEM ? "worker out of memory" : "malformed node arguments");
	n->launch = (struct wk_launch){.fn = c->function,
				       .grid = {c->grid[0], c->grid[1], c->grid[2]},
				       .block = {c->block[0], c->block[1], c->block[2]},
				       .shared_mem = c->shared_mem,
				       .flags = c->flags,
				       .params = g->params,
				       .sizes = g->sizes,
				       .nparams = g->n};
	return 0;
}

/* The n node commands following c, decoded (their arguments in args[]). */
static int
nodes_decode(const struct wrec_graph_create *c, struct wk_gnode *nodes, struct gargs *args, cua_err *e)
{
	const unsigned char *p = (const unsigned char *)(c + 1), *end = (const unsigned char *)c + c->h.size;
	for (uint32_t i = 0; i < c->nnodes; i++) {
		struct wrec_hdr h;
		if ((size_t)(end - p) < sizeof(h))
			return cua_err_set(e, CUA_EINTERNAL, "graph node %u outside its command", i);
		memcpy(&h, p, sizeof(h));
		if (h.size < sizeof(h) || h.size % 8 != 0 || h.size > (size_t)(end - p))
			return cua_err_set(e, CUA_EINTERNAL, "graph node %u: bad size %u", i, h.size);
		int r = node_decode((const struct wrec_hdr *)p, &nodes[i], &args[i], e);
		if (r != 0)
			return r;
		p += h.size;
	}
	return p == end ? 0 : cua_err_set(e, CUA_EINTERNAL, "bytes after the graph's nodes");
}

int
wk_c_graph_create(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	const struct wrec_graph_create *c = (const struct wrec_graph_create *)h;
	if (w->be->graph_create == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "the %s backend has no graphs", w->be->name);
	if (c->nnodes == 0 || c->nnodes > CUA_MAX_GRAPH_NODES)
		return cua_err_set(e, CUA_EINTERNAL, "graph of %u nodes", c->nnodes);
	struct wk_gnode *nodes = calloc(c->nnodes, sizeof(*nodes));
	struct gargs *args = calloc(c->nnodes, sizeof(*args));
	int r;
	if (nodes == NULL || args == NULL)
		r = cua_err_set(e, CUA_ENOMEM, "worker out of memory for a graph");
	else if ((r = nodes_decode(c, nodes, args, e)) == 0)
		r = w->be->graph_create(w, nodes, c->nnodes, &x->value, e);
	for (uint32_t i = 0; args != NULL && i < c->nnodes; i++)
		gargs_free(&args[i]);
	free(args);
	free(nodes);
	return r;
}

int
wk_c_graph_set_args(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	(void)x;
	const struct wrec_graph_set_args *c = (const struct wrec_graph_set_args *)h;
	if (w->be->graph_set_args == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "the %s backend has no graphs", w->be->name);
	struct gargs g;
	int r = gargs_build((const unsigned char *)(c + 1), (const unsigned char *)h + h->size, c->nargs, &g);
	if (r != 0)
		r = cua_err_set(e, r, r == CUA_ENOMEM ? "worker out of memory" : "malformed node arguments");
	else
		r = w->be->graph_set_args(w, c->graph, c->node,
					  &(struct wk_launch){.params = g.params, .sizes = g.sizes, .nparams = g.n}, e);
	gargs_free(&g);
	return r;
}

int
wk_c_graph_destroy(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	(void)x;
	if (w->be->graph_destroy == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "the %s backend has no graphs", w->be->name);
	return w->be->graph_destroy(w, ((const struct wrec_graph_destroy *)h)->graph, e);
}

int
wk_p_graph_launch(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	uint32_t sid = ((const struct wrec_graph_launch *)h)->stream;
	if (w->be->graph_launch == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "the %s backend has no graphs", w->be->name);
	if (!wk_stream_live(w, sid))
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	op->sid = sid;
	return 0;
}

int
wk_i_graph_launch(struct wk *w, const struct wk_op *op, cua_err *e)
{
	return w->be->graph_launch(w, op->sid, ((const struct wrec_graph_launch *)op->c)->graph, op->tag, e);
}
