/*
 * backend_cuda_graph.c — graphs on the GPU: explicit nodes (cuGraphAddKernelNode, cuGraphAddMemsetNode,
 * cuGraphAddMemcpyNode), each depending on the one before (a chain, in batch order), instantiated once
 * (cuGraphInstantiateWithFlags) and launched with cuGraphLaunch. Explicit nodes rather than stream capture: no
 * stream is put in capture mode, so nothing else issued meanwhile can be captured by mistake or invalidate it.
 *
 * CUDA's graph objects are not thread-safe: a graph's launches (submit threads, several at once) and its
 * argument updates (main thread) take the graph's own lock. cuGraphExecKernelNodeSetParams affects launches
 * issued after it, not those already issued, which is GRAPH_SET_ARGS's contract. Graph ids come from C->graphs.
 */
#include "config.h"

#include "cuda_impl.h"

#include <stdlib.h>
#include <string.h>

struct cu_graph {
	pthread_mutex_t lock; /* cuGraphLaunch and cuGraphExecKernelNodeSetParams of this graph */
	CUgraph graph;
	CUgraphExec exec;
	uint32_t n;
	CUgraphNode *nodes;
	CUDA_KERNEL_NODE_PARAMS *kp; /* per node: a kernel node's parameters (kernelParams NULL), else zeros */
};

/* Frees graph p (a struct cu_graph *; NULL is fine); a callback of wk_idtab_fini (ud unused). */
static void
graph_free(void *ud, void *p)
{
	struct cu_graph *g = p;
	(void)ud;
	if (g == NULL)
		return;
	if (g->exec)
		drv.cuGraphExecDestroy(g->exec); /* launches still running finish first (CUDA frees it then) */
	if (g->graph)
		drv.cuGraphDestroy(g->graph);
	pthread_mutex_destroy(&g->lock);
	free(g->nodes);
	free(g->kp);
	free(g);
}

static CUresult
add_node(struct cu *C, struct cu_graph *g, uint32_t i, const struct wk_gnode *n, cua_err *e)
{
	const CUgraphNode *dep = i > 0 ? &g->nodes[i - 1] : NULL;
	size_t ndep = i > 0 ? 1 : 0;
	if (n->kind == WR_LAUNCH) {
		CUDA_KERNEL_NODE_PARAMS *p = &g->kp[i];
		p->func = function_of(C, n->launch.fn);
		if (p->func == NULL) {
			cua_err_set(e, CUA_ENOT_FOUND, "node %u: no function %llu", i,
				    (unsigned long long)n->launch.fn);
			return CUDA_ERROR_NOT_FOUND;
		}
		p->gridDimX = n->launch.grid[0];
		p->gridDimY = n->launch.grid[1];
		p->gridDimZ = n->launch.grid[2];
		p->blockDimX = n->launch.block[0];
		p->blockDimY = n->launch.block[1];
		p->blockDimZ = n->launch.block[2];
		p->sharedMemBytes = n->launch.shared_mem;
		p->kernelParams = n->launch.params; /* copied by the driver */
		CUresult r = drv.cuGraphAddKernelNode(&g->nodes[i], g->graph, dep, ndep, p);
		p->kernelParams = NULL;
		return r;
	}
	if (n->kind == WR_MEMSET) {
		CUDA_MEMSET_NODE_PARAMS m;
		memset(&m, 0, sizeof(m));
		m.dst = (CUdeviceptr)n->dst;
		m.value = n->value;
		m.elementSize = n->width;
		m.width = n->count;
		m.height = 1;
		return drv.cuGraphAddMemsetNode(&g->nodes[i], g->graph, dep, ndep, &m, C->ctx);
	}
	CUDA_MEMCPY3D c;
	memset(&c, 0, sizeof(c));
	c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
	c.srcDevice = (CUdeviceptr)n->src;
	c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c.dstDevice = (CUdeviceptr)n->dst;
	c.WidthInBytes = n->bytes;
	c.Height = 1;
	c.Depth = 1;
	return drv.cuGraphAddMemcpyNode(&g->nodes[i], g->graph, dep, ndep, &c, C->ctx);
}

/* A failed call of a synchronous command fails it (a sticky error surfaces in the next stream work or notice,
 * which ends the worker, as for the other synchronous commands). */
static int
graph_err(struct cu *C, CUresult r, const char *what, cua_err *e)
{
	(void)C;
	return cerr(e, r, what);
}

static int
graph_build(struct cu *C, const struct wk_gnode *nodes, uint32_t n, struct cu_graph **out, cua_err *e)
{
	struct cu_graph *g = calloc(1, sizeof(*g));
	if (g == NULL)
		return cua_err_set(e, CUA_ENOMEM, "worker out of memory for a graph");
	pthread_mutex_init(&g->lock, NULL);
	g->n = n;
	g->nodes = calloc(n, sizeof(*g->nodes));
	g->kp = calloc(n, sizeof(*g->kp));
	int rc = 0;
	CUresult r;
	if (g->nodes == NULL || g->kp == NULL)
		rc = cua_err_set(e, CUA_ENOMEM, "worker out of memory for a graph");
	else if ((r = drv.cuGraphCreate(&g->graph, 0)) != CUDA_SUCCESS)
		rc = graph_err(C, r, "cuGraphCreate", e);
	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		cua_err ne;
		cua_err_clear(&ne);
		if ((r = add_node(C, g, i, &nodes[i], &ne)) != CUDA_SUCCESS)
			rc = ne.code ? cua_err_set(e, ne.code, "%s", ne.detail)
				     : cua_err_set(e, r == CUDA_ERROR_INVALID_VALUE ? CUA_EBAD_ARGUMENT : CUA_EDEVICE,
						   "node %u: %s: %s", i, errname(r), errstr(r));
	}
	if (rc == 0 && (r = drv.cuGraphInstantiateWithFlags(&g->exec, g->graph, 0)) != CUDA_SUCCESS)
		rc = graph_err(C, r, "cuGraphInstantiateWithFlags", e);
	if (rc != 0) {
		graph_free(NULL, g);
		return rc;
	}
	*out = g;
	return 0;
}

int
cu_graph_create(struct wk *w, const struct wk_gnode *nodes, uint32_t n, uint64_t *id, cua_err *e)
{
	struct cu *C = w->be_state;
	struct cu_graph *g = NULL;
	int rc = graph_build(C, nodes, n, &g, e);
	if (rc != 0)
		return rc;
	if ((rc = wk_idtab_add(&C->graphs, g, id)) != 0) {
		graph_free(NULL, g);
		return cua_err_set(e, rc, rc == CUA_EQUOTA ? "too many graphs" : "worker out of memory");
	}
	return 0;
}

/* Graph id, or NULL. The graph itself stays until destroy, which comes after every launch of it was issued. */
static struct cu_graph *
graph_get(struct cu *C, uint64_t id)
{
	return wk_idtab_get(&C->graphs, id);
}

int
cu_graph_set_args(struct wk *w, uint64_t id, uint32_t node, const struct wk_launch *l, cua_err *e)
{
	struct cu *C = w->be_state;
	struct cu_graph *g = graph_get(C, id);
	if (g == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no graph %llu", (unsigned long long)id);
	if (node >= g->n || g->kp[node].func == NULL)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "graph %llu has no kernel node %u", (unsigned long long)id,
				   node);
	CUDA_KERNEL_NODE_PARAMS p = g->kp[node];
	p.kernelParams = l->params;
	pthread_mutex_lock(&g->lock);
	CUresult r = drv.cuGraphExecKernelNodeSetParams(g->exec, g->nodes[node], &p);
	pthread_mutex_unlock(&g->lock);
	return r == CUDA_SUCCESS ? 0 : graph_err(C, r, "cuGraphExecKernelNodeSetParams", e);
}

int
cu_graph_destroy(struct wk *w, uint64_t id, cua_err *e)
{
	struct cu *C = w->be_state;
	struct cu_graph *g = wk_idtab_take(&C->graphs, id);
	if (g == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no graph %llu", (unsigned long long)id);
	graph_free(NULL, g);
	return 0;
}

int
cu_graph_launch(struct wk *w, uint32_t sid, uint64_t id, struct wk_tag tag, cua_err *e)
{
	struct cu *C = w->be_state;
	CUstream s = cu_stream_of(C, sid);
	if (s == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	struct cu_graph *g = graph_get(C, id);
	if (g == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no graph %llu", (unsigned long long)id);
	pthread_mutex_lock(&g->lock);
	CUresult r = drv.cuGraphLaunch(g->exec, s);
	pthread_mutex_unlock(&g->lock);
	return issued(C, r, tag, e);
}

void
cu_graphs_fini(struct cu *C)
{
	wk_idtab_fini(&C->graphs, graph_free, NULL);
}
