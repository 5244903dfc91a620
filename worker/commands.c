/*
 * commands.c — the worker's command table: one row per enum wrec_op ({name, fixed size, sync or stream,
 * barrier, handlers}), and the handlers, which turn a checked record into a typed backend call. Sync handlers
 * (c_*) and stream preparers (p_*) run on the worker's main thread; stream issuers (i_*) run on the thread that
 * owns the stream (the main thread with --submit-threads 1, else a submit thread, submit.c) and read only the
 * command and what the preparer resolved. The caller (worker.c) has checked that the command lies inside its
 * record and is at least its row's fixed size.
 */
#include "config.h"

#include "core.h"

#include "cua_arena.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Bounds-checked view of the staging area; NULL when [off, off+len) is outside it. */
static void *
staging_at(struct wk *w, uint64_t off, uint64_t len)
{
	if (off > w->staging_size || len > w->staging_size - off)
		return NULL;
	return w->staging + off;
}

/* The host side of a copy: the staging area (hostbuf 0) or a registered host buffer; NULL when outside. */
static void *
copy_host(struct wk *w, const struct wrec_copy *c)
{
	if (c->hostbuf == 0)
		return staging_at(w, c->host_off, c->bytes);
	const struct hostbuf *h = cua_idmap_find(&w->hostbufs, c->hostbuf);
	if (h == NULL || c->host_off > h->len || c->bytes > h->len - c->host_off)
		return NULL;
	return h->p + c->host_off;
}

/* Stream work goes on sid: it must exist. */
static int
use_stream(struct wk *w, struct wk_op *op, uint32_t sid, cua_err *e)
{
	if (!wk_stream_live(w, sid))
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	op->sid = sid;
	return 0;
}

/* ------------------------------------------------------------------ modules, functions, memory */

static int
c_module_load(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	const struct wrec_module_load *c = (const struct wrec_module_load *)h;
	const void *img = staging_at(w, c->staging_off, c->len);
	if (img == NULL)
		return cua_err_set(e, CUA_EINTERNAL, "module image outside the staging area");
	return w->be->module_load(w, img, c->len, c->format, &x->value, e);
}

static int
c_module_unload(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	return w->be->module_unload(w, ((const struct wrec_module_unload *)h)->module, e);
}

static int
c_function_get(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	const struct wrec_function_get *c = (const struct wrec_function_get *)h;
	const char *name = (const char *)(c + 1);
	size_t room = h->size - sizeof(*c);
	if (room == 0 || memchr(name, '\0', room) == NULL)
		return cua_err_set(e, CUA_EINTERNAL, "function name not terminated");
	cua_param_info *params = NULL;
	uint32_t n = 0;
	int r = w->be->function_get(w, c->module, name, &x->value, &params, &n, e);
	if (r != 0) {
		free(params);
		return r;
	}
	x->data = params; /* transferred */
	x->data_len = n * (uint32_t)sizeof(*params);
	return 0;
}

static int
c_mem_alloc(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	return w->be->mem_alloc(w, ((const struct wrec_mem_alloc *)h)->bytes, &x->value, e);
}

static int
c_mem_free(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	return w->be->mem_free(w, ((const struct wrec_mem_free *)h)->addr, x->tag, e);
}

/* A name that follows command c's fixed part of `fixed` bytes: NUL-terminated inside the command, or NULL. */
static const char *
cmd_name(const struct wrec_hdr *h, size_t fixed)
{
	const char *name = (const char *)h + fixed;
	size_t room = h->size - fixed;
	return room > 0 && memchr(name, '\0', room) != NULL ? name : NULL;
}

static int
c_module_get_global(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	const struct wrec_module_get_global *c = (const struct wrec_module_get_global *)h;
	const char *name = cmd_name(h, sizeof(*c));
	uint64_t bytes = 0;
	if (name == NULL)
		return cua_err_set(e, CUA_EINTERNAL, "global name not terminated");
	if (w->be->module_get_global == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "the %s backend has no module globals", w->be->name);
	int r = w->be->module_get_global(w, c->module, name, &x->value, &bytes, e);
	if (r != 0)
		return r;
	uint64_t *d = malloc(sizeof(*d));
	if (d == NULL)
		return cua_err_set(e, CUA_ENOMEM, "worker out of memory");
	*d = bytes;
	x->data = d; /* transferred */
	x->data_len = sizeof(*d);
	return 0;
}

/* WR_FUNC_GET_ATTR and WR_FUNC_SET_ATTR */
static int
c_func_attr(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	const struct wrec_func_attr *c = (const struct wrec_func_attr *)h;
	if (w->be->func_get_attr == NULL || w->be->func_set_attr == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "the %s backend has no function attributes", w->be->name);
	if (h->op == WR_FUNC_SET_ATTR)
		return w->be->func_set_attr(w, c->function, c->attribute, c->value, e);
	int32_t v = 0;
	int r = w->be->func_get_attr(w, c->function, c->attribute, &v, e);
	x->value = (uint64_t)(int64_t)v;
	return r;
}

static int
c_occupancy(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	const struct wrec_occupancy *c = (const struct wrec_occupancy *)h;
	uint32_t blocks = 0;
	if (w->be->occupancy == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "the %s backend has no occupancy calculator", w->be->name);
	int r = w->be->occupancy(w, c->function, c->block_size, c->shared_mem, &blocks, e);
	x->value = blocks;
	return r;
}

/* ------------------------------------------------------------------ streams */

static int
c_stream_create(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	uint32_t sid = 0;
	int r = w->be->stream_create(w, ((const struct wrec_stream_create *)h)->priority, &sid, e);
	if (r != 0)
		return r;
	if (wk_stream_add(w, sid) != 0) {
		cua_err ignored;
		w->be->stream_destroy(w, sid, &ignored);
		return cua_err_set(e, CUA_ENOMEM, "worker out of memory for a stream");
	}
	x->value = sid;
	return 0;
}

static int
c_stream_destroy(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	uint32_t sid = ((const struct wrec_stream *)h)->stream;
	if (sid < w->info.pool_streams || !wk_stream_live(w, sid))
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	wk_stream_retire(w, sid); /* what this request queued on it completes through its own notice */
	return w->be->stream_destroy(w, sid, e);
}

/* Queues nothing: the stream's notice completes the request after everything before it on the stream. */
static int
p_stream_sync(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	return use_stream(w, op, ((const struct wrec_stream *)h)->stream, e);
}

/* ------------------------------------------------------------------ copies and memset */

static int
p_copy(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	const struct wrec_copy *c = (const struct wrec_copy *)h;
	int r = use_stream(w, op, c->stream, e);
	if (r != 0)
		return r;
	op->host = copy_host(w, c);
	if (op->host == NULL)
		return cua_err_set(e, CUA_EINTERNAL, "copy outside the staging area or host buffer");
	return 0;
}

static int
i_copy(struct wk *w, const struct wk_op *op, cua_err *e)
{
	const struct wrec_copy *c = (const struct wrec_copy *)op->c;
	return c->h.op == WR_HTOD ? w->be->htod(w, op->sid, c->dev, op->host, c->bytes, op->tag, e)
				  : w->be->dtoh(w, op->sid, op->host, c->dev, c->bytes, op->tag, e);
}

static int
p_dtod(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	return use_stream(w, op, ((const struct wrec_dtod *)h)->stream, e);
}

static int
i_dtod(struct wk *w, const struct wk_op *op, cua_err *e)
{
	const struct wrec_dtod *c = (const struct wrec_dtod *)op->c;
	return w->be->dtod(w, op->sid, c->dst, c->src, c->bytes, op->tag, e);
}

static int
p_memset(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	const struct wrec_memset *c = (const struct wrec_memset *)h;
	int r = use_stream(w, op, c->stream, e);
	if (r != 0)
		return r;
	if (c->width != 1 && c->width != 2 && c->width != 4)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "memset width %u", c->width);
	return 0;
}

static int
i_memset(struct wk *w, const struct wk_op *op, cua_err *e)
{
	const struct wrec_memset *c = (const struct wrec_memset *)op->c;
	return w->be->memset(w, op->sid, c->dst, (uint32_t)c->value, c->width, c->count, op->tag, e);
}

/* ------------------------------------------------------------------ launch */

struct launch_call {
	struct wk *w;
	const struct wk_op *op;
	struct wk_launch l;
	cua_err *e;
	int r;
};

static int
launch_with(void **params, size_t n, void *ud)
{
	struct launch_call *L = ud;
	L->l.params = params;
	L->l.nparams = n;
	L->r = wk_launch_attr_check(L->w, &L->l, L->e);
	if (L->r == 0)
		L->r = L->w->be->launch(L->w, L->op->sid, &L->l, L->op->tag, L->e);
	return 0;
}

/* Pushes the launch's arguments (nargs × (wrec_arg, bytes padded to 8) after c) into arena and their sizes
 * into sizes[CUA_MAX_PARAMS]. 0, CUA_EINTERNAL (malformed) or CUA_ENOMEM. */
static int
launch_args(const struct wrec_launch *c, cua_arena *arena, uint32_t *sizes)
{
	const unsigned char *p = (const unsigned char *)(c + 1), *end = (const unsigned char *)c + c->h.size;
	if (c->nargs > CUA_MAX_PARAMS)
		return CUA_EINTERNAL;
	for (uint32_t i = 0; i < c->nargs; i++) {
		struct wrec_arg a;
		if ((size_t)(end - p) < sizeof(a))
			return CUA_EINTERNAL;
		memcpy(&a, p, sizeof(a));
		if ((size_t)(end - p) - sizeof(a) < wrec_align8(a.size) || a.size > CUA_MAX_PARAM_BYTES)
			return CUA_EINTERNAL;
		int r = cua_arena_push(arena, p + sizeof(a), a.size);
		if (r != 0)
			return r == CUA_ENOMEM ? r : CUA_EINTERNAL;
		sizes[i] = a.size;
		p += sizeof(a) + wrec_align8(a.size);
	}
	return 0;
}

static int
p_launch(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e)
{
	return use_stream(w, op, ((const struct wrec_launch *)h)->stream, e);
}

/* Decodes the arguments here, on the issuing thread: building them is part of a launch's cost. */
static int
i_launch(struct wk *w, const struct wk_op *op, cua_err *e)
{
	const struct wrec_launch *c = (const struct wrec_launch *)op->c;
	uint32_t sizes[CUA_MAX_PARAMS];
	cua_arena arena;
	cua_arena_init(&arena);
	int r = launch_args(c, &arena, sizes);
	if (r != 0) {
		r = cua_err_set(e, r,
				r == CUA_ENOMEM ? "worker out of memory for launch arguments"
						: "malformed launch arguments");
		goto out;
	}
	struct launch_call L = {w,
				op,
				{c->function, {0}, {0}, c->shared_mem, c->flags, {0}, c->priority, NULL, sizes, 0},
				e,
				0};
	memcpy(L.l.cluster, c->cluster, sizeof(L.l.cluster));
	memcpy(L.l.grid, c->grid, sizeof(L.l.grid));
	memcpy(L.l.block, c->block, sizeof(L.l.block));
	r = cua_arena_with_params(&arena, launch_with, &L);
	if (r != 0) {
		r = cua_err_set(e, r, "out of host memory for arguments");
		goto out;
	}
	r = L.r;
out:
	cua_arena_fini(&arena);
	return r;
}

/* ------------------------------------------------------------------ host buffers */

/* Maps the client's memfd, which the front-end holds open as its fd number c->fd. */
static int
c_host_register(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	const struct wrec_host_register *c = (const struct wrec_host_register *)h;
	char path[64];
	int r = CUA_EINTERNAL;
	void *p = MAP_FAILED;
	struct hostbuf *b = NULL;
	uint64_t id;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getppid(), c->fd);
	int f = open(path, O_RDWR | O_CLOEXEC);
	if (f < 0)
		return cua_err_set(e, CUA_EINTERNAL, "worker cannot open %s: %s", path, strerror(errno));
	p = mmap(NULL, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	close(f);
	if (p == MAP_FAILED)
		return cua_err_set(e, CUA_ENOMEM, "cannot map the %llu-byte host buffer: %s",
				   (unsigned long long)c->bytes, strerror(errno));
	if ((b = malloc(sizeof(*b))) == NULL) {
		r = cua_err_set(e, CUA_ENOMEM, "out of host memory");
		goto out;
	}
	*b = (struct hostbuf){p, c->bytes};
	if ((r = cua_idmap_alloc(&w->hostbufs, &id, b)) != 0) {
		r = cua_err_set(e, r, r == CUA_EQUOTA ? "too many host buffers" : "out of host memory");
		goto out;
	}
	if (w->be->host_register && (r = w->be->host_register(w, p, c->bytes, e)) != 0) {
		cua_idmap_remove(&w->hostbufs, id);
		goto out;
	}
	b = NULL;       /* transferred */
	p = MAP_FAILED; /* transferred */
	x->value = id;
	r = 0;
out:
	free(b);
	if (p != MAP_FAILED)
		munmap(p, c->bytes);
	return r;
}

static int
c_host_unregister(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e)
{
	uint64_t id = ((const struct wrec_host_unregister *)h)->buffer;
	struct hostbuf *b = cua_idmap_remove(&w->hostbufs, id);
	if (b == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no host buffer %llu", (unsigned long long)id);
	if (w->be->host_unregister)
		w->be->host_unregister(w, b->p);
	munmap(b->p, b->len);
	free(b);
	return 0;
}

void
wk_hostbufs_fini(struct wk *w)
{
	wk_idmap_fini_each(&w->hostbufs, wk_free_obj, NULL); /* the mappings go with the process */
}

/* ------------------------------------------------------------------ the table */

#define SYNC(op, name, type, fn) [op] = {name, sizeof(type), false, WK_BARRIER_NONE, fn, NULL, NULL}
/* A sync command that must not run while a submit thread still has unissued work (worker.c, barrier). */
#define BARRIER(op, name, type, fn, b) [op] = {name, sizeof(type), false, b, fn, NULL, NULL}
#define STREAM(op, name, type, prep, issue) [op] = {name, sizeof(type), true, WK_BARRIER_NONE, NULL, prep, issue}
/* A stream command whose issuer ends a hold instead of a stream notice (core.h, commands_event.c). */
#define HELD(op, name, type, prep, issue) [op] = {name, sizeof(type), true, WK_BARRIER_NONE, NULL, prep, issue, true}

/* clang-format off */
const struct wk_cmd wk_cmds[WR_OP_MAX] = {
	SYNC(WR_MODULE_LOAD, "module_load", struct wrec_module_load, c_module_load),
	BARRIER(WR_MODULE_UNLOAD, "module_unload", struct wrec_module_unload, c_module_unload, WK_BARRIER_ALL),
	SYNC(WR_FUNCTION_GET, "function_get", struct wrec_function_get, c_function_get),
	SYNC(WR_MEM_ALLOC, "mem_alloc", struct wrec_mem_alloc, c_mem_alloc),
	BARRIER(WR_MEM_FREE, "mem_free", struct wrec_mem_free, c_mem_free, WK_BARRIER_ALL),
	SYNC(WR_STREAM_CREATE, "stream_create", struct wrec_stream_create, c_stream_create),
	BARRIER(WR_STREAM_DESTROY, "stream_destroy", struct wrec_stream, c_stream_destroy, WK_BARRIER_STREAM),
	STREAM(WR_STREAM_SYNC, "stream_sync", struct wrec_stream, p_stream_sync, NULL),
	STREAM(WR_HTOD, "htod", struct wrec_copy, p_copy, i_copy),
	STREAM(WR_DTOH, "dtoh", struct wrec_copy, p_copy, i_copy),
	STREAM(WR_DTOD, "dtod", struct wrec_dtod, p_dtod, i_dtod),
	STREAM(WR_MEMSET, "memset", struct wrec_memset, p_memset, i_memset),
	STREAM(WR_LAUNCH, "launch", struct wrec_launch, p_launch, i_launch),
	SYNC(WR_HOST_REGISTER, "host_register", struct wrec_host_register, c_host_register),
	BARRIER(WR_HOST_UNREGISTER, "host_unregister", struct wrec_host_unregister, c_host_unregister, WK_BARRIER_ALL),
	SYNC(WR_MODULE_GET_GLOBAL, "module_get_global", struct wrec_module_get_global, c_module_get_global),
	SYNC(WR_FUNC_GET_ATTR, "func_get_attr", struct wrec_func_attr, c_func_attr),
	/* later launches must see the value, earlier ones not: they are issued first */
	BARRIER(WR_FUNC_SET_ATTR, "func_set_attr", struct wrec_func_attr, c_func_attr, WK_BARRIER_ALL),
	SYNC(WR_OCCUPANCY, "occupancy", struct wrec_occupancy, c_occupancy),
	SYNC(WR_GRAPH_CREATE, "graph_create", struct wrec_graph_create, wk_c_graph_create),
	STREAM(WR_GRAPH_LAUNCH, "graph_launch", struct wrec_graph_launch, wk_p_graph_launch, wk_i_graph_launch),
	/* launches issued before it keep the old arguments, later ones get the new */
	BARRIER(WR_GRAPH_SET_ARGS, "graph_set_args", struct wrec_graph_set_args, wk_c_graph_set_args, WK_BARRIER_ALL),
	BARRIER(WR_GRAPH_DESTROY, "graph_destroy", struct wrec_graph_destroy, wk_c_graph_destroy, WK_BARRIER_ALL),
	SYNC(WR_EVENT_CREATE, "event_create", struct wrec_event_create, wk_c_event_create),
	BARRIER(WR_EVENT_DESTROY, "event_destroy", struct wrec_event, wk_c_event_destroy, WK_BARRIER_ALL),
	HELD(WR_EVENT_RECORD, "event_record", struct wrec_event_stream, wk_p_event_record, wk_i_event_record),
	HELD(WR_STREAM_WAIT_EVENT, "stream_wait_event", struct wrec_event_stream, wk_p_stream_wait_event,
	     wk_i_stream_wait_event),
	HELD(WR_EVENT_SYNC, "event_sync", struct wrec_event, wk_p_event_sync, wk_i_event_sync),
	BARRIER(WR_EVENT_ELAPSED, "event_elapsed", struct wrec_event_elapsed, wk_c_event_elapsed, WK_BARRIER_ALL),
	BARRIER(WR_EVENT_QUERY, "event_query", struct wrec_event, wk_c_event_query, WK_BARRIER_ALL),
};
/* clang-format on */
