/*
 * graph.c — CUDA graphs and stream capture through the runtime API, for libcuasync-cudart (docs/DROPIN.md).
 *
 * A graph is a client-side DAG: nodes (kernels, copies, memsets, host functions, empty nodes) and the edges
 * "runs after". cudaGraphInstantiate snapshots it in a topological order (creation order among nodes that are
 * ready together) and cudaGraphLaunch replays that order on the launch stream — one valid schedule of the DAG,
 * the stream's order giving every edge. Each maximal run of device-only nodes (kernels, memsets,
 * device-to-device copies) goes to cuasyncd as one batch request; host copies go through the library's normal
 * copy path and host nodes through cudaLaunchHostFunc's mechanism, so they run when the stream reaches them.
 * Batches rather than cuasyncd graphs: a cuasyncd graph pins the memory its nodes use (cudaFree would answer
 * busy while the program still holds the exec, which CUDA allows) and refuses host copies.
 *
 * Stream capture: a capturing stream records its work as nodes instead of running it (the core hands it over
 * through crt_capture_hooks). Each stream of a capture keeps the set of nodes its next work depends on; an
 * event recorded in a capture remembers its stream's set, and a stream that waits on it takes the set over
 * (joining the capture if it was not in it: CUDA's fork/join across streams). cudaStreamEndCapture on the
 * origin stream needs every other stream's last work to be joined back into the origin's.
 *
 * Every structure here is guarded by gs_mu, except an exec's node copies: an exec is used by one thread at a
 * time, as CUDA asks of graph objects. No libcuasync call is made while holding it (the core calls the hooks).
 */
#include "cua_tsa.h"
#include "rt.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define SEGMENT_MAX 4096u /* items of one cuasyncd batch (CUA_MAX_BATCH, proto/PROTOCOL.md) */

static cua_mutex gs_mu = PTHREAD_MUTEX_INITIALIZER;

enum node_kind { NODE_KERNEL, NODE_MEMCPY, NODE_MEMSET, NODE_HOST, NODE_EMPTY };

struct node_list {
	struct CUgraphNode_st **v;
	size_t n, cap;
};

struct CUgraphNode_st {
	enum node_kind kind;
	size_t index;                      /* position in its graph (an exec's copies: in the schedule) */
	struct node_list deps;             /* the nodes this one runs after (empty in an exec's copies) */
	const struct CUgraphNode_st *orig; /* an exec's copy: the graph's node it was made from */
	union {
		struct {
			const struct crt_func *f;
			dim3 grid, block;
			size_t shmem;
			unsigned char *args; /* the parameters back to back, f->sizes[i] bytes each */
		} k;
		struct {
			void *dst;
			const void *src;
			size_t n;
			enum cudaMemcpyKind kind; /* never cudaMemcpyDefault */
		} copy;
		struct {
			char *dst;
			size_t pitch, width, height; /* width in elements */
			unsigned value, elem;
		} set;
		struct {
			cudaHostFn_t fn;
			void *arg;
		} host;
	} u;
};

struct CUgraph_st {
	struct node_list nodes CUA_GUARDED_BY(gs_mu);
};

struct CUgraphExec_st {
	size_t n;
	struct CUgraphNode_st *nodes; /* copies of the graph's nodes in the order launches run them */
};

/* One stream taking part in a capture, and the nodes its next work depends on. */
struct member {
	struct CUstream_st *st;
	struct node_list deps;
	cudaGraphEdgeData *edges; /* deps.n default edges, for cudaStreamGetCaptureInfo */
};

struct crt_capture {
	struct CUgraph_st *graph;
	struct CUstream_st *origin;
	unsigned long long id;
	enum cudaStreamCaptureMode mode;
	pthread_t thread;
	bool invalidated CUA_GUARDED_BY(gs_mu); /* an error or a forbidden call: cudaStreamEndCapture fails */
	struct member *m CUA_GUARDED_BY(gs_mu);
	size_t nm CUA_GUARDED_BY(gs_mu);
};

/* An event recorded in a capture: the nodes a stream that waits on it will depend on. */
struct evrec {
	const struct CUevent_st *ev;
	struct crt_capture *cap;
	struct node_list deps;
};

static struct {
	struct node_list graphs CUA_GUARDED_BY(gs_mu), execs CUA_GUARDED_BY(gs_mu); /* live handles */
	struct evrec *ev CUA_GUARDED_BY(gs_mu);
	size_t nev CUA_GUARDED_BY(gs_mu);
	unsigned long long next_id CUA_GUARDED_BY(gs_mu);
} GS;

/* ---- lists ---- */
static int
list_push(struct node_list *l, void *p)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct CUgraphNode_st **v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return cudaErrorMemoryAllocation;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = p;
	return cudaSuccess;
}

/* Whether p is among the first n of v. */
static bool
among(struct CUgraphNode_st *const *v, size_t n, const void *p)
{
	bool found = false;
	for (size_t i = 0; i < n && !found; i++)
		found = (const void *)v[i] == p;
	return found;
}

static bool
list_has(const struct node_list *l, const void *p)
{
	return among(l->v, l->n, p);
}

static void
list_remove(struct node_list *l, const void *p)
{
	for (size_t i = 0; i < l->n; i++)
		if ((const void *)l->v[i] == p) {
			l->v[i] = l->v[--l->n];
			return;
		}
}

/* dst becomes a copy of src. */
static int
list_assign(struct node_list *dst, const struct node_list *src)
{
	int e = cudaSuccess;
	dst->n = 0;
	for (size_t i = 0; e == cudaSuccess && i < src->n; i++)
		e = list_push(dst, src->v[i]);
	return e;
}

/* ---- nodes and graphs ---- */
static void
node_free(struct CUgraphNode_st *n)
{
	if (n->kind == NODE_KERNEL)
		free(n->u.k.args);
	free(n->deps.v);
}

static void
graph_free(struct CUgraph_st *g) CUA_REQUIRES(gs_mu)
{
	for (size_t i = 0; g && i < g->nodes.n; i++) {
		node_free(g->nodes.v[i]);
		free(g->nodes.v[i]);
	}
	if (g)
		free(g->nodes.v);
	free(g);
}

/* The kernel's parameters copied out of CUDA's args[] (CUDA copies them when the node is made). */
static unsigned char *
args_pack(const struct crt_func *f, void **args, int *e)
{
	size_t total = 0;
	for (uint32_t i = 0; i < f->nparams; i++)
		total += f->sizes[i];
	unsigned char *blob = malloc(total ? total : 1);
	*e = !blob ? cudaErrorMemoryAllocation : f->nparams && !args ? cudaErrorInvalidValue : cudaSuccess;
	for (uint32_t i = 0, off = 0; *e == cudaSuccess && i < f->nparams; off += f->sizes[i], i++)
		memcpy(blob + off, args[i], f->sizes[i]);
	if (*e != cudaSuccess) {
		free(blob);
		blob = NULL;
	}
	return blob;
}

/* A deep copy of n (its arguments duplicated), without its edges. */
static int
node_copy(struct CUgraphNode_st *dst, const struct CUgraphNode_st *n)
{
	*dst = *n;
	dst->deps = (struct node_list){0};
	if (n->kind != NODE_KERNEL)
		return cudaSuccess;
	size_t total = 0;
	for (uint32_t i = 0; i < n->u.k.f->nparams; i++)
		total += n->u.k.f->sizes[i];
	dst->u.k.args = malloc(total ? total : 1);
	if (!dst->u.k.args)
		return cudaErrorMemoryAllocation;
	memcpy(dst->u.k.args, n->u.k.args, total);
	return cudaSuccess;
}

static bool
graph_live(const struct CUgraph_st *g) CUA_REQUIRES(gs_mu)
{
	return g && list_has(&GS.graphs, g);
}

/* Adds proto's node to g after deps; takes proto's argument copy (freed on failure). */
static int
node_add(struct CUgraph_st *g, struct CUgraphNode_st *const *deps, size_t ndeps, const struct CUgraphNode_st *proto,
	 cudaGraphNode_t *out) CUA_REQUIRES(gs_mu)
{
	int e = ndeps && !deps ? cudaErrorInvalidValue : cudaSuccess;
	for (size_t i = 0; e == cudaSuccess && i < ndeps; i++) /* each a node of g, none twice */
		if (!list_has(&g->nodes, deps[i]) || among(deps, i, deps[i]))
			e = cudaErrorInvalidValue;
	struct CUgraphNode_st *n = e == cudaSuccess ? malloc(sizeof(*n)) : NULL;
	if (e == cudaSuccess && !n)
		e = cudaErrorMemoryAllocation;
	if (n) {
		*n = *proto;
		n->index = g->nodes.n;
		n->deps = (struct node_list){0};
		n->orig = NULL;
	}
	for (size_t i = 0; e == cudaSuccess && i < ndeps; i++)
		e = list_push(&n->deps, deps[i]);
	if (e == cudaSuccess)
		e = list_push(&g->nodes, n);
	if (e != cudaSuccess && n)
		node_free(n); /* with the argument copy it took */
	else if (e != cudaSuccess && proto->kind == NODE_KERNEL)
		free(proto->u.k.args);
	if (e != cudaSuccess) {
		free(n);
		n = NULL;
	}
	if (out && n)
		*out = n;
	return e;
}

/* ---- capture ---- */
static struct member *
member_of(struct crt_capture *cap, const struct CUstream_st *st) CUA_REQUIRES(gs_mu)
{
	for (size_t i = 0; i < cap->nm; i++)
		if (cap->m[i].st == st)
			return &cap->m[i];
	return NULL;
}

static struct member *
member_add(struct crt_capture *cap, struct CUstream_st *st, const struct node_list *deps) CUA_REQUIRES(gs_mu)
{
	struct member *m = realloc(cap->m, (cap->nm + 1) * sizeof(*m));
	if (!m)
		return NULL;
	cap->m = m;
	m = &cap->m[cap->nm];
	*m = (struct member){st, {0}, NULL};
	if (list_assign(&m->deps, deps) != cudaSuccess) {
		free(m->deps.v);
		return NULL;
	}
	cap->nm++;
	st->cap = cap;
	return m;
}

static struct evrec *
evrec_of(const struct CUevent_st *ev) CUA_REQUIRES(gs_mu)
{
	for (size_t i = 0; i < GS.nev; i++)
		if (GS.ev[i].ev == ev)
			return &GS.ev[i];
	return NULL;
}

static void
evrec_drop(struct evrec *r) CUA_REQUIRES(gs_mu)
{
	free(r->deps.v);
	*r = GS.ev[--GS.nev];
}

/* Ends cap: its streams leave it, its events forget it, and it is freed (its graph is the caller's). */
static void
capture_end(struct crt_capture *cap) CUA_REQUIRES(gs_mu)
{
	for (size_t i = 0; i < cap->nm; i++) {
		cap->m[i].st->cap = NULL;
		free(cap->m[i].deps.v);
		free(cap->m[i].edges);
	}
	for (size_t i = 0; i < GS.nev;)
		if (GS.ev[i].cap == cap)
			evrec_drop(&GS.ev[i]);
		else
			i++;
	free(cap->m);
	free(cap);
}

/* Records proto as st's next node in its capture; st->cap is set. An error invalidates the
 * capture, as in CUDA. */
static int
capture_node(struct CUstream_st *st, const struct CUgraphNode_st *proto) CUA_REQUIRES(gs_mu)
{
	struct crt_capture *cap = st->cap;
	struct member *m = member_of(cap, st);
	cudaGraphNode_t n = NULL;
	bool dead = cap->invalidated;
	int e = dead ? cudaErrorStreamCaptureInvalidated : node_add(cap->graph, m->deps.v, m->deps.n, proto, &n);
	if (dead && proto->kind == NODE_KERNEL) /* node_add took it, or freed it on failure */
		free(proto->u.k.args);
	if (e == cudaSuccess) {
		m->deps.n = 0;
		e = list_push(&m->deps, n);
	}
	if (e != cudaSuccess)
		cap->invalidated = true;
	return e;
}

/* The hooks record a node made from proto when st is capturing; proto's argument copy is theirs. */
static int
capture_proto(struct CUstream_st *st, const struct CUgraphNode_st *proto) CUA_EXCLUDES(gs_mu)
{
	cua_mutex_lock(&gs_mu);
	int e = st->cap ? capture_node(st, proto) : CRT_NOT_CAPTURED;
	cua_mutex_unlock(&gs_mu);
	if (e == CRT_NOT_CAPTURED && proto->kind == NODE_KERNEL)
		free(proto->u.k.args);
	return e;
}

static int
hook_kernel(struct CUstream_st *st, const struct crt_func *f, dim3 grid, dim3 block, size_t shmem, void **args)
	CUA_EXCLUDES(gs_mu)
{
	cua_mutex_lock(&gs_mu);
	bool on = st->cap != NULL; /* the argument copy only when it is needed */
	cua_mutex_unlock(&gs_mu);
	if (!on)
		return CRT_NOT_CAPTURED;
	struct CUgraphNode_st proto = {.kind = NODE_KERNEL, .u.k = {f, grid, block, shmem, NULL}};
	int e;
	proto.u.k.args = args_pack(f, args, &e);
	return e == cudaSuccess ? capture_proto(st, &proto) : e;
}

static int
hook_copy(struct CUstream_st *st, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) CUA_EXCLUDES(gs_mu)
{
	struct CUgraphNode_st proto = {.kind = NODE_MEMCPY, .u.copy = {dst, src, n, kind}};
	return capture_proto(st, &proto);
}

static int
hook_memset(struct CUstream_st *st, void *dst, int value, size_t n) CUA_EXCLUDES(gs_mu)
{
	struct CUgraphNode_st proto = {.kind = NODE_MEMSET, .u.set = {dst, 0, n, 1, (uint8_t)value, 1}};
	return capture_proto(st, &proto);
}

static int
hook_host(struct CUstream_st *st, cudaHostFn_t fn, void *arg) CUA_EXCLUDES(gs_mu)
{
	struct CUgraphNode_st proto = {.kind = NODE_HOST, .u.host = {fn, arg}};
	if (fn)
		return capture_proto(st, &proto);
	/* cudaStreamAddCallback: CUDA refuses it in a capture (cudaLaunchHostFunc is the way) */
	cua_mutex_lock(&gs_mu);
	int e = st->cap ? cudaErrorStreamCaptureUnsupported : CRT_NOT_CAPTURED;
	if (st->cap)
		st->cap->invalidated = true;
	cua_mutex_unlock(&gs_mu);
	return e;
}

static int
hook_event_record(struct CUstream_st *st, struct CUevent_st *ev) CUA_EXCLUDES(gs_mu)
{
	cua_mutex_lock(&gs_mu);
	struct crt_capture *cap = st->cap;
	int e = !cap ? CRT_NOT_CAPTURED : cap->invalidated ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
	struct evrec *r = e == cudaSuccess ? evrec_of(ev) : NULL;
	if (e == cudaSuccess && !r) {
		struct evrec *v = realloc(GS.ev, (GS.nev + 1) * sizeof(*v));
		if (v) {
			GS.ev = v;
			r = &GS.ev[GS.nev++];
			*r = (struct evrec){ev, cap, {0}};
		} else
			e = cudaErrorMemoryAllocation;
	}
	if (r) {
		r->cap = cap;
		e = list_assign(&r->deps, &member_of(cap, st)->deps);
	}
	cua_mutex_unlock(&gs_mu);
	return e;
}

static int
hook_stream_wait(struct CUstream_st *st, struct CUevent_st *ev) CUA_EXCLUDES(gs_mu)
{
	cua_mutex_lock(&gs_mu);
	struct evrec *r = evrec_of(ev);
	struct crt_capture *cap = r ? r->cap : st->cap;
	int e = cudaSuccess;
	if (!r && !st->cap)
		e = CRT_NOT_CAPTURED; /* an ordinary wait */
	else if (cap->invalidated)
		e = cudaErrorStreamCaptureInvalidated;
	else if (!r) /* a capturing stream waits on work outside its capture */
		e = cudaErrorStreamCaptureIsolation;
	else if (st->cap && st->cap != cap)
		e = cudaErrorStreamCaptureMerge;
	else if (!st->cap && st == crt_stream_of(NULL))
		/* the default stream (every thread's: legacy and per-thread are one here) cannot join a capture, as
		 * BeginCapture refuses it: its synchronous copies would be captured, not run */
		e = cudaErrorStreamCaptureImplicit;
	else if (!st->cap) /* a fork: st joins the capture after the event's nodes */
		e = member_add(cap, st, &r->deps) ? cudaSuccess : cudaErrorMemoryAllocation;
	else { /* a join: st's next work also runs after the event's nodes */
		struct member *m = member_of(cap, st);
		for (size_t i = 0; e == cudaSuccess && i < r->deps.n; i++)
			if (!list_has(&m->deps, r->deps.v[i]))
				e = list_push(&m->deps, r->deps.v[i]);
	}
	if (e != cudaSuccess && e != CRT_NOT_CAPTURED && cap)
		cap->invalidated = true;
	cua_mutex_unlock(&gs_mu);
	return e;
}

static void
hook_event_forget(struct CUevent_st *ev) CUA_EXCLUDES(gs_mu)
{
	cua_mutex_lock(&gs_mu);
	struct evrec *r = evrec_of(ev);
	if (r)
		evrec_drop(r);
	cua_mutex_unlock(&gs_mu);
}

static int
hook_stream_use(struct CUstream_st *st) CUA_EXCLUDES(gs_mu)
{
	cua_mutex_lock(&gs_mu);
	int e = st->cap ? cudaErrorStreamCaptureUnsupported : CRT_NOT_CAPTURED;
	if (st->cap)
		st->cap->invalidated = true;
	cua_mutex_unlock(&gs_mu);
	return e;
}

/* For what the core does differently in a capture (a launch with attributes is refused there). */
static bool
hook_is_capturing(struct CUstream_st *st) CUA_EXCLUDES(gs_mu)
{
	cua_mutex_lock(&gs_mu);
	bool on = st->cap != NULL;
	cua_mutex_unlock(&gs_mu);
	return on;
}

static const struct crt_capture_ops capture_ops = {
	hook_kernel,      hook_copy,         hook_memset,     hook_host,         hook_event_record,
	hook_stream_wait, hook_event_forget, hook_stream_use, hook_is_capturing,
};

/* The capturable streams: the program's own. The default streams are the session's one ordered stream, which
 * legacy-stream work also uses. */
static int
capture_stream(cudaStream_t stream, struct CUstream_st **st)
{
	*st = crt_stream_of(stream);
	if (stream == cudaStreamPerThread)
		return crt_unsupported("stream capture on cudaStreamPerThread",
				       "the default streams are one stream through cuasyncd; capture a created stream");
	return *st == crt_stream_of(NULL) ? crt_record(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

EXPORT cudaError_t
cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
	cua_client *c;
	struct CUstream_st *st;
	int e = crt_enter(&c);
	if (e == cudaSuccess)
		e = capture_stream(stream, &st);
	if (e != cudaSuccess)
		return e;
	if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
	    mode != cudaStreamCaptureModeRelaxed)
		return crt_record(cudaErrorInvalidValue);
	struct crt_capture *cap = calloc(1, sizeof(*cap));
	struct CUgraph_st *g = calloc(1, sizeof(*g));
	e = cap && g ? cudaSuccess : cudaErrorMemoryAllocation;
	atomic_store(&crt_capture_hooks, &capture_ops);
	cua_mutex_lock(&gs_mu);
	if (e == cudaSuccess && st->cap)
		e = cudaErrorIllegalState; /* already capturing */
	if (e == cudaSuccess) {
		*cap = (struct crt_capture){g, st, ++GS.next_id, mode, pthread_self(), false, NULL, 0};
		e = member_add(cap, st, &(struct node_list){0}) ? cudaSuccess : cudaErrorMemoryAllocation;
	}
	cua_mutex_unlock(&gs_mu);
	if (e != cudaSuccess) {
		free(cap);
		free(g);
	}
	return crt_record(e);
}

/* Marks n and everything it runs after. */
static void
mark_ancestors(const struct CUgraphNode_st *n, bool *seen)
{
	if (seen[n->index])
		return;
	seen[n->index] = true;
	for (size_t i = 0; i < n->deps.n; i++)
		mark_ancestors(n->deps.v[i], seen);
}

/* Whether every stream's last work is joined into the origin's (CUDA: else cudaErrorStreamCaptureUnjoined). */
static int
capture_joined(const struct crt_capture *cap) CUA_REQUIRES(gs_mu)
{
	bool *seen = calloc(cap->graph->nodes.n + 1, sizeof(*seen));
	if (!seen)
		return cudaErrorMemoryAllocation;
	const struct member *o = member_of((struct crt_capture *)cap, cap->origin); /* always one */
	for (size_t i = 0; o && i < o->deps.n; i++)
		mark_ancestors(o->deps.v[i], seen);
	int e = o ? cudaSuccess : cudaErrorStreamCaptureUnjoined;
	for (size_t i = 0; i < cap->nm; i++)
		for (size_t k = 0; k < cap->m[i].deps.n; k++)
			if (!seen[cap->m[i].deps.v[k]->index])
				e = cudaErrorStreamCaptureUnjoined;
	free(seen);
	return e;
}

EXPORT cudaError_t
cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
	cua_client *c;
	int e = crt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!pGraph)
		return crt_record(cudaErrorInvalidValue);
	struct CUstream_st *st = crt_stream_of(stream);
	struct CUgraph_st *g = NULL;
	cua_mutex_lock(&gs_mu);
	struct crt_capture *cap = st->cap;
	e = !cap                ? cudaErrorIllegalState
	    : cap->origin != st ? cudaErrorStreamCaptureUnmatched
	    : cap->mode != cudaStreamCaptureModeRelaxed && !pthread_equal(cap->thread, pthread_self())
		    ? cudaErrorStreamCaptureWrongThread
	    : cap->invalidated ? cudaErrorStreamCaptureInvalidated
			       : capture_joined(cap);
	if (e == cudaErrorStreamCaptureUnmatched)
		cap->invalidated = true; /* CUDA: ending in another stream of the capture invalidates it */
	bool ends = cap && e != cudaErrorStreamCaptureUnmatched && e != cudaErrorStreamCaptureWrongThread;
	if (ends) {
		g = cap->graph;
		capture_end(cap);
	}
	if (e == cudaSuccess)
		e = list_push(&GS.graphs, g);
	if (ends && e != cudaSuccess)
		graph_free(g);
	cua_mutex_unlock(&gs_mu);
	if (ends) /* the capture is over, with or without a graph */
		*pGraph = e == cudaSuccess ? g : NULL;
	return crt_record(e);
}

EXPORT cudaError_t
cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus)
{
	if (!pCaptureStatus)
		return crt_record(cudaErrorInvalidValue);
	const struct CUstream_st *st = crt_stream_of(stream);
	cua_mutex_lock(&gs_mu);
	*pCaptureStatus = !st->cap               ? cudaStreamCaptureStatusNone
			  : st->cap->invalidated ? cudaStreamCaptureStatusInvalidated
						 : cudaStreamCaptureStatusActive;
	cua_mutex_unlock(&gs_mu);
	return cudaSuccess;
}

EXPORT cudaError_t
cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *captureStatus_out,
			 unsigned long long *id_out, cudaGraph_t *graph_out, const cudaGraphNode_t **dependencies_out,
			 const cudaGraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
	if (!captureStatus_out || (edgeData_out && !dependencies_out))
		return crt_record(cudaErrorInvalidValue);
	const struct CUstream_st *st = crt_stream_of(stream);
	int e = cudaSuccess;
	cua_mutex_lock(&gs_mu);
	struct crt_capture *cap = st->cap;
	*captureStatus_out = !cap               ? cudaStreamCaptureStatusNone
			     : cap->invalidated ? cudaStreamCaptureStatusInvalidated
						: cudaStreamCaptureStatusActive;
	struct member *m = cap ? member_of(cap, st) : NULL;
	if (m && !cap->invalidated) {
		/* the edge array: as many default (all-zero) edges as dependencies, valid until the next call */
		cudaGraphEdgeData *edges = edgeData_out ? calloc(m->deps.n + 1, sizeof(*edges)) : NULL;
		e = edgeData_out && !edges ? cudaErrorMemoryAllocation : cudaSuccess;
		if (e == cudaSuccess && edges) {
			free(m->edges);
			m->edges = edges;
			*edgeData_out = edges;
		}
		if (id_out)
			*id_out = cap->id;
		if (graph_out)
			*graph_out = cap->graph;
		if (dependencies_out)
			*dependencies_out = (const cudaGraphNode_t *)m->deps.v;
		if (numDependencies_out)
			*numDependencies_out = m->deps.n;
	}
	cua_mutex_unlock(&gs_mu);
	return crt_record(e);
}

/* ---- building graphs ---- */
EXPORT cudaError_t
cudaGraphCreate(cudaGraph_t *pGraph, unsigned flags)
{
	if (!pGraph || flags != 0)
		return crt_record(cudaErrorInvalidValue);
	struct CUgraph_st *g = calloc(1, sizeof(*g));
	int e = g ? cudaSuccess : cudaErrorMemoryAllocation;
	cua_mutex_lock(&gs_mu);
	if (e == cudaSuccess)
		e = list_push(&GS.graphs, g);
	cua_mutex_unlock(&gs_mu);
	if (e != cudaSuccess)
		free(g);
	else
		*pGraph = g;
	return crt_record(e);
}

EXPORT cudaError_t
cudaGraphDestroy(cudaGraph_t graph)
{
	cua_mutex_lock(&gs_mu);
	bool live = graph_live(graph);
	if (live) {
		list_remove(&GS.graphs, graph);
		graph_free(graph);
	}
	cua_mutex_unlock(&gs_mu);
	return live ? cudaSuccess : crt_record(cudaErrorInvalidValue);
}

/* Adds proto to graph after deps: the cudaGraphAdd*Node's common end. */
static int
add(cudaGraphNode_t *pNode, cudaGraph_t graph, const cudaGraphNode_t *deps, size_t ndeps,
    const struct CUgraphNode_st *proto)
{
	cua_mutex_lock(&gs_mu);
	int e = !pNode || !graph_live(graph) ? cudaErrorInvalidValue : cudaSuccess;
	if (e == cudaSuccess)
		e = node_add(graph, (struct CUgraphNode_st *const *)deps, ndeps, proto, pNode);
	else if (proto->kind == NODE_KERNEL)
		free(proto->u.k.args);
	cua_mutex_unlock(&gs_mu);
	return crt_record(e);
}

/* A kernel node's content from CUDA's parameters; cudaSuccess and *k, or the error (recorded). */
static int
kernel_params(const struct cudaKernelNodeParams *p, struct CUgraphNode_st *k)
{
	cua_client *c;
	int e = crt_enter(&c);
	if (e != cudaSuccess)
		return e;
	if (!p || !p->func)
		return crt_record(cudaErrorInvalidValue);
	if (p->extra)
		return crt_unsupported("a kernel node's extra (packed) arguments",
				       "pass the arguments through kernelParams");
	if (!crt_config_ok(p->gridDim, p->blockDim))
		return crt_record(cudaErrorInvalidConfiguration);
	const struct crt_func *f = crt_func_resolve(c, p->func, &e);
	if (!f)
		return crt_record(e);
	*k = (struct CUgraphNode_st){.kind = NODE_KERNEL, .u.k = {f, p->gridDim, p->blockDim, p->sharedMemBytes, NULL}};
	k->u.k.args = args_pack(f, p->kernelParams, &e);
	return crt_record(e);
}

EXPORT cudaError_t
cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
		       size_t numDependencies, const struct cudaKernelNodeParams *pNodeParams)
{
	struct CUgraphNode_st proto;
	int e = kernel_params(pNodeParams, &proto);
	return e != cudaSuccess ? e : add(pGraphNode, graph, pDependencies, numDependencies, &proto);
}

/* A copy node's content; the kind resolved where memory lies (cudaMemcpyDefault). */
static int
copy_params(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, struct CUgraphNode_st *out)
{
	cua_client *c;
	int e = crt_enter(&c); /* where device memory lies is the session's */
	if (e != cudaSuccess)
		return e;
	if ((unsigned)kind > cudaMemcpyDefault)
		return crt_record(cudaErrorInvalidMemcpyDirection);
	if (n && (!dst || !src))
		return crt_record(cudaErrorInvalidValue);
	*out = (struct CUgraphNode_st){.kind = NODE_MEMCPY, .u.copy = {dst, src, n, crt_copy_kind(dst, src, kind)}};
	return cudaSuccess;
}

EXPORT cudaError_t
cudaGraphAddMemcpyNode1D(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
			 size_t numDependencies, void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	struct CUgraphNode_st proto;
	int e = copy_params(dst, src, count, kind, &proto);
	return e != cudaSuccess ? e : add(pGraphNode, graph, pDependencies, numDependencies, &proto);
}

/* An address inside a pitched allocation. */
static char *
pitched_at(struct cudaPitchedPtr p, struct cudaPos pos)
{
	return (char *)p.ptr + pos.x + pos.y * p.pitch + pos.z * p.pitch * p.ysize;
}

EXPORT cudaError_t
cudaGraphAddMemcpyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
		       size_t numDependencies, const struct cudaMemcpy3DParms *p)
{
	if (!p)
		return crt_record(cudaErrorInvalidValue);
	if (p->srcArray || p->dstArray)
		return crt_unsupported("cudaGraphAddMemcpyNode with a CUDA array",
				       "CUDA arrays (textures and surfaces)");
	const struct cudaExtent x = p->extent; /* width in bytes for linear memory */
	if (!x.width || !x.height || !x.depth)
		return crt_record(cudaErrorInvalidValue);
	/* one contiguous range on both sides: a single row, or rows whose pitch is their width (and planes whose
	 * height is the extent's): what make_cudaPitchedPtr of a 1D buffer gives */
	bool contiguous = (x.height == 1 && x.depth == 1) ||
			  (p->srcPtr.pitch == x.width && p->dstPtr.pitch == x.width &&
			   (x.depth == 1 || (p->srcPtr.ysize == x.height && p->dstPtr.ysize == x.height)));
	if (!contiguous)
		return crt_unsupported("cudaGraphAddMemcpyNode with a pitched 2D or 3D copy",
				       "pitched 2D and 3D copies; copy contiguous ranges");
	struct CUgraphNode_st proto;
	int e = copy_params(pitched_at(p->dstPtr, p->dstPos), pitched_at(p->srcPtr, p->srcPos),
			    x.width * x.height * x.depth, p->kind, &proto);
	return e != cudaSuccess ? e : add(pGraphNode, graph, pDependencies, numDependencies, &proto);
}

EXPORT cudaError_t
cudaGraphAddMemsetNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
		       size_t numDependencies, const struct cudaMemsetParams *p)
{
	if (!p || !p->dst || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->width ||
	    !p->height || (p->height > 1 && p->pitch < p->width * p->elementSize))
		return crt_record(cudaErrorInvalidValue);
	bool contiguous = p->height == 1 || p->pitch == p->width * p->elementSize;
	if (!contiguous && p->height > SEGMENT_MAX)
		return crt_unsupported("cudaGraphAddMemsetNode with more than 4096 pitched rows",
				       "one request per row; set fewer rows per node");
	unsigned mask = p->elementSize == 4 ? 0xffffffffu : (1u << (8 * p->elementSize)) - 1;
	struct CUgraphNode_st proto = {
		.kind = NODE_MEMSET,
		.u.set = {p->dst, contiguous ? 0 : p->pitch, contiguous ? p->width * p->height : p->width,
			  contiguous ? 1 : p->height, p->value & mask, p->elementSize},
	};
	return add(pGraphNode, graph, pDependencies, numDependencies, &proto);
}

EXPORT cudaError_t
cudaGraphAddHostNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
		     size_t numDependencies, const struct cudaHostNodeParams *p)
{
	if (!p || !p->fn)
		return crt_record(cudaErrorInvalidValue);
	struct CUgraphNode_st proto = {.kind = NODE_HOST, .u.host = {p->fn, p->userData}};
	return add(pGraphNode, graph, pDependencies, numDependencies, &proto);
}

EXPORT cudaError_t
cudaGraphAddEmptyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph, const cudaGraphNode_t *pDependencies,
		      size_t numDependencies)
{
	struct CUgraphNode_st proto = {.kind = NODE_EMPTY};
	return add(pGraphNode, graph, pDependencies, numDependencies, &proto);
}

EXPORT cudaError_t
cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t *from, const cudaGraphNode_t *to,
			 const cudaGraphEdgeData *edgeData, size_t numDependencies)
{
	static const cudaGraphEdgeData plain; /* the default edge: full completion, no ports */
	for (size_t i = 0; edgeData && i < numDependencies; i++)
		if (memcmp(&edgeData[i], &plain, sizeof(plain)) != 0)
			return crt_unsupported("cudaGraphAddDependencies with edge data",
					       "programmatic graph edges; use plain dependencies");
	cua_mutex_lock(&gs_mu);
	int e = !graph_live(graph) || (numDependencies && (!from || !to)) ? cudaErrorInvalidValue : cudaSuccess;
	for (size_t i = 0; e == cudaSuccess && i < numDependencies; i++) /* all checked before any is added */
		if (!list_has(&graph->nodes, from[i]) || !list_has(&graph->nodes, to[i]) || from[i] == to[i] ||
		    list_has(&to[i]->deps, from[i]))
			e = cudaErrorInvalidValue;
	for (size_t i = 0; e == cudaSuccess && i < numDependencies; i++)
		e = list_has(&to[i]->deps, from[i]) ? cudaErrorInvalidValue : list_push(&to[i]->deps, from[i]);
	cua_mutex_unlock(&gs_mu);
	return crt_record(e);
}

/* The nodes of graph that pass keep, into CUDA's (array, count) convention: a NULL array asks the count; a
 * larger count than there are nodes gets NULLs after them and the real count. */
static int
list_nodes(cudaGraph_t graph, cudaGraphNode_t *out, size_t *num, bool roots_only)
{
	cua_mutex_lock(&gs_mu);
	int e = !num || !graph_live(graph) ? cudaErrorInvalidValue : cudaSuccess;
	size_t k = 0;
	for (size_t i = 0; e == cudaSuccess && i < graph->nodes.n; i++) {
		if (roots_only && graph->nodes.v[i]->deps.n)
			continue;
		if (out && k < *num)
			out[k] = graph->nodes.v[i];
		k++;
	}
	for (size_t i = k; e == cudaSuccess && out && i < *num; i++)
		out[i] = NULL;
	if (e == cudaSuccess)
		*num = out && *num < k ? *num : k;
	cua_mutex_unlock(&gs_mu);
	return crt_record(e);
}

EXPORT cudaError_t
cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes)
{
	return list_nodes(graph, nodes, numNodes, false);
}

EXPORT cudaError_t
cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t *pRootNodes, size_t *pNumRootNodes)
{
	return list_nodes(graph, pRootNodes, pNumRootNodes, true);
}

EXPORT cudaError_t
cudaGraphClone(cudaGraph_t *pGraphClone, cudaGraph_t originalGraph)
{
	if (!pGraphClone)
		return crt_record(cudaErrorInvalidValue);
	cua_mutex_lock(&gs_mu);
	int e = graph_live(originalGraph) ? cudaSuccess : cudaErrorInvalidValue;
	struct CUgraph_st *g = e == cudaSuccess ? calloc(1, sizeof(*g)) : NULL;
	if (e == cudaSuccess && !g)
		e = cudaErrorMemoryAllocation;
	for (size_t i = 0; e == cudaSuccess && i < originalGraph->nodes.n; i++) {
		const struct CUgraphNode_st *o = originalGraph->nodes.v[i];
		struct CUgraphNode_st *n = malloc(sizeof(*n));
		e = !n ? cudaErrorMemoryAllocation : node_copy(n, o);
		if (n && list_push(&g->nodes, n) != cudaSuccess) {
			node_free(n);
			free(n);
			e = cudaErrorMemoryAllocation;
		}
		/* edges point at the clone's nodes of the same index: dependencies always come earlier */
		for (size_t k = 0; e == cudaSuccess && k < o->deps.n; k++)
			e = list_push(&n->deps, g->nodes.v[o->deps.v[k]->index]);
	}
	if (e == cudaSuccess)
		e = list_push(&GS.graphs, g);
	if (e != cudaSuccess)
		graph_free(g);
	cua_mutex_unlock(&gs_mu);
	if (e == cudaSuccess)
		*pGraphClone = g;
	return crt_record(e);
}

/* ---- executable graphs ---- */
static bool
exec_live(const struct CUgraphExec_st *x) CUA_REQUIRES(gs_mu)
{
	return x && list_has(&GS.execs, x);
}

static void
exec_free(struct CUgraphExec_st *x)
{
	for (size_t i = 0; x && i < x->n; i++)
		node_free(&x->nodes[i]);
	if (x)
		free(x->nodes);
	free(x);
}

/* x's nodes: copies of g's in a topological order, nodes ready at the same time in creation order (so a
 * captured stream's work keeps its order). A cycle (cudaGraphAddDependencies can make one) is refused. */
static int
exec_build(const struct CUgraph_st *g, struct CUgraphExec_st *x) CUA_REQUIRES(gs_mu)
{
	size_t n = g->nodes.n;
	size_t *waiting = calloc(n + 1, sizeof(*waiting)); /* per node: dependencies not yet scheduled */
	bool *done = calloc(n + 1, sizeof(*done));
	x->nodes = calloc(n + 1, sizeof(*x->nodes));
	int e = waiting && done && x->nodes ? cudaSuccess : cudaErrorMemoryAllocation;
	for (size_t i = 0; e == cudaSuccess && i < n; i++)
		waiting[i] = g->nodes.v[i]->deps.n;
	while (e == cudaSuccess && x->n < n) {
		size_t pick = n;
		for (size_t i = 0; i < n && pick == n; i++)
			if (!done[i] && waiting[i] == 0)
				pick = i;
		if (pick == n) {
			e = cudaErrorInvalidValue; /* a cycle */
			break;
		}
		done[pick] = true;
		e = node_copy(&x->nodes[x->n], g->nodes.v[pick]);
		x->nodes[x->n].orig = g->nodes.v[pick];
		x->nodes[x->n].index = x->n;
		if (e == cudaSuccess)
			x->n++;
		for (size_t i = 0; i < n; i++) /* its dependants wait for one fewer */
			for (size_t k = 0; k < g->nodes.v[i]->deps.n; k++)
				waiting[i] -= g->nodes.v[i]->deps.v[k] == g->nodes.v[pick];
	}
	free(waiting);
	free(done);
	return e;
}

EXPORT cudaError_t
cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
	/* auto-free-on-launch concerns memory-allocation nodes (there are none) and node priorities are the
	 * kernels' streams': both hold as they are */
	const unsigned long long known =
		cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUseNodePriority;
	if (!pGraphExec)
		return crt_record(cudaErrorInvalidValue);
	if (flags & ~known)
		return crt_unsupported("cudaGraphInstantiate with upload or device-launch flags",
				       "graphs are uploaded at launch and launched from the host");
	struct CUgraphExec_st *x = calloc(1, sizeof(*x));
	int e = x ? cudaSuccess : cudaErrorMemoryAllocation;
	cua_mutex_lock(&gs_mu);
	if (e == cudaSuccess)
		e = graph_live(graph) ? exec_build(graph, x) : cudaErrorInvalidValue;
	if (e == cudaSuccess)
		e = list_push(&GS.execs, x);
	cua_mutex_unlock(&gs_mu);
	if (e != cudaSuccess)
		exec_free(x);
	else
		*pGraphExec = x;
	return crt_record(e);
}

EXPORT cudaError_t
cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
	return cudaGraphInstantiateWithFlags(pGraphExec, graph, flags);
}

EXPORT cudaError_t
cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
	cua_mutex_lock(&gs_mu);
	bool live = exec_live(graphExec);
	if (live)
		list_remove(&GS.execs, graphExec);
	cua_mutex_unlock(&gs_mu);
	if (!live)
		return crt_record(cudaErrorInvalidValue);
	exec_free(graphExec); /* a launch copied what it needed when it was made: nothing in flight reads x */
	return cudaSuccess;
}

EXPORT cudaError_t
cudaGraphExecKernelNodeSetParams(cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
				 const struct cudaKernelNodeParams *pNodeParams)
{
	struct CUgraphNode_st proto;
	int e = kernel_params(pNodeParams, &proto);
	if (e != cudaSuccess)
		return e;
	cua_mutex_lock(&gs_mu);
	struct CUgraphNode_st *k = NULL;
	for (size_t i = 0; exec_live(hGraphExec) && i < hGraphExec->n && !k; i++)
		if (hGraphExec->nodes[i].orig == node && hGraphExec->nodes[i].kind == NODE_KERNEL)
			k = &hGraphExec->nodes[i];
	if (k) { /* launches made before keep the arguments they copied */
		free(k->u.k.args);
		k->u.k = proto.u.k;
	} else
		free(proto.u.k.args);
	cua_mutex_unlock(&gs_mu);
	return k ? cudaSuccess : crt_record(cudaErrorInvalidValue);
}

/* Nodes the daemon runs by itself, sent together in one batch. */
static bool
device_only(const struct CUgraphNode_st *n)
{
	return n->kind == NODE_KERNEL || n->kind == NODE_MEMSET ||
	       (n->kind == NODE_MEMCPY && n->u.copy.kind == cudaMemcpyDeviceToDevice);
}

static size_t
batch_items(const struct CUgraphNode_st *n)
{
	return n->kind == NODE_MEMSET ? n->u.set.height : 1;
}

/* Adds device-only node n to b on stream s; a libcuasync status. */
static int
batch_add(cua_client *c, cua_batch *b, const struct CUgraphNode_st *n, cua_stream s)
{
	int r = CUA_OK;
	if (n->kind == NODE_KERNEL) {
		void *argv[CRT_MAX_PARAMS];
		for (uint32_t i = 0, off = 0; i < n->u.k.f->nparams; off += n->u.k.f->sizes[i], i++)
			argv[i] = n->u.k.args + off;
		cua_launch *l = crt_launch_new(c, n->u.k.f, n->u.k.grid, n->u.k.block, n->u.k.shmem, argv, s, &r);
		return l ? cua_batch_add_launch(b, l) : r;
	}
	if (n->kind == NODE_MEMCPY)
		return n->u.copy.n ? cua_batch_add_memcpy_dtod(b, (uintptr_t)n->u.copy.dst, (uintptr_t)n->u.copy.src,
							       n->u.copy.n, s)
				   : CUA_OK;
	for (size_t row = 0; r == CUA_OK && row < n->u.set.height; row++)
		r = cua_batch_add_memset(b, (uintptr_t)(n->u.set.dst + row * n->u.set.pitch), n->u.set.value,
					 n->u.set.elem, n->u.set.width, s);
	return r;
}

/* A node the library runs on the host side of the stream: host copies and host functions. */
static int
host_side(cua_client *c, const struct CUgraphNode_st *n, cudaStream_t s)
{
	if (n->kind == NODE_HOST)
		return crt_host_func(s, n->u.host.fn, n->u.host.arg);
	if (n->kind != NODE_MEMCPY || n->u.copy.n == 0)
		return cudaSuccess; /* empty nodes */
	/* host-to-device waits too: it then takes the shared-memory path from cudaMallocHost memory, with no
	 * message-size limit, and reads the host memory when the stream is there, as CUDA's node does */
	if (n->u.copy.kind != cudaMemcpyHostToHost)
		return crt_copy(c, n->u.copy.dst, n->u.copy.src, n->u.copy.n, n->u.copy.kind, s, false);
	int r = cua_stream_synchronize(c, crt_use_stream(s)); /* a host-to-host node runs when the stream is there */
	if (r == CUA_OK)
		memmove(n->u.copy.dst, n->u.copy.src, n->u.copy.n);
	return crt_status(r);
}

static int
batch_flush(cua_batch **b)
{
	int r = *b ? cua_batch_submit(*b, NULL) : CUA_OK;
	*b = NULL;
	return r == CUA_OK ? cudaSuccess : crt_status(r);
}

EXPORT cudaError_t
cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	cua_client *c;
	int e = crt_enter(&c);
	if (e != cudaSuccess)
		return e;
	struct CUstream_st *st = crt_stream_of(stream);
	cua_mutex_lock(&gs_mu);
	e = !exec_live(graphExec) ? cudaErrorInvalidValue : st->cap ? cudaErrorNotSupported : cudaSuccess;
	cua_mutex_unlock(&gs_mu);
	if (e == cudaErrorNotSupported)
		return crt_unsupported("cudaGraphLaunch into a capturing stream", "child graphs");
	if (e != cudaSuccess)
		return crt_record(e);
	cua_batch *b = NULL;
	cua_stream s = {0};
	for (size_t i = 0; e == cudaSuccess && i < graphExec->n; i++) {
		const struct CUgraphNode_st *n = &graphExec->nodes[i];
		if (n->kind == NODE_EMPTY)
			continue;
		if (!device_only(n) || (b && cua_batch_count(b) + batch_items(n) > SEGMENT_MAX))
			e = batch_flush(&b);
		if (e == cudaSuccess && !device_only(n)) {
			e = host_side(c, n, stream);
			continue;
		}
		if (e == cudaSuccess && !b) {
			s = crt_use_stream(stream); /* after the stream's pending host function */
			b = cua_batch_new(c);
			e = b ? cudaSuccess : crt_record(cudaErrorMemoryAllocation);
		}
		int r = e == cudaSuccess ? batch_add(c, b, n, s) : CUA_OK;
		if (r != CUA_OK)
			e = crt_status(r);
	}
	if (e == cudaSuccess)
		e = batch_flush(&b);
	cua_batch_free(b);
	return e;
}

/* ---- the per-thread default stream's names ---- */
#define PTSZ(name, real) extern __typeof__(real) name __attribute__((alias(#real), visibility("default")));
PTSZ(cudaGraphLaunch_ptsz, cudaGraphLaunch)
PTSZ(cudaStreamBeginCapture_ptsz, cudaStreamBeginCapture)
PTSZ(cudaStreamEndCapture_ptsz, cudaStreamEndCapture)
PTSZ(cudaStreamIsCapturing_ptsz, cudaStreamIsCapturing)
PTSZ(cudaStreamGetCaptureInfo_ptsz, cudaStreamGetCaptureInfo)
