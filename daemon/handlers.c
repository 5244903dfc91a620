/*
 * handlers.c — one row per request kind: validation (everything is checked here, before any work reaches a
 * worker), the worker commands it plans, what completion does with the results, and the reply body.
 * All functions run with fe->lock held.
 */
#include "config.h"

#include "cua_log.h"
#include "daemon.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_MAX_Z (CUA_MAX_NAME + 1)

/* ------------------------------------------------------------------ request building blocks */

static int
item_fail(struct ritem *it, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int
item_fail(struct ritem *it, int status, const char *fmt, ...)
{
	char buf[CUA_ERR_DETAIL_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	it->status = (uint32_t)status;
	free(it->msg);
	it->msg = strdup(buf);
	return status;
}

static int
item_fail_err(struct ritem *it, const cua_err *e)
{
	return item_fail(it, e->code, "%s", e->detail[0] ? e->detail : cua_strerror(e->code));
}

static int
items_init(struct request *r, uint32_t n)
{
	free(r->items); /* a batch replaces the single item planned by default */
	r->items = calloc(n ? n : 1, sizeof(*r->items));
	if (r->items == NULL)
		return CUA_ENOMEM;
	r->nitems = n;
	for (uint32_t i = 0; i < n; i++)
		r->items[i].cmd = r->items[i].stage = -1;
	return 0;
}

/* Appends a worker command; returns its index or -1 (out of memory). */
static int
cmd_add(struct request *r, uint32_t op, uint32_t stream, uint32_t format, uint64_t a, uint64_t b, uint64_t c,
	const void *payload, uint32_t plen)
{
	uint32_t size = (uint32_t)sizeof(struct wcmd) + w_align8(plen);
	if (r->cmds_len + size > r->cmds_cap) {
		size_t cap = r->cmds_cap ? r->cmds_cap : 256;
		while (cap < r->cmds_len + size)
			cap *= 2;
		unsigned char *n = realloc(r->cmds, cap);
		if (n == NULL)
			return -1;
		r->cmds = n;
		r->cmds_cap = cap;
	}
	struct wcmd w = {op, size, stream, format, a, b, c, 0};
	r->last_cmd_off = r->cmds_len;
	memcpy(r->cmds + r->cmds_len, &w, sizeof(w));
	if (plen)
		memcpy(r->cmds + r->cmds_len + sizeof(w), payload, plen);
	memset(r->cmds + r->cmds_len + sizeof(w) + plen, 0, size - sizeof(w) - plen);
	r->cmds_len += size;
	return (int)r->ncmds++;
}

/* Staging for the command added last (its byte offset is kept, to patch the staging offset at dispatch). */
static int
stage_add(struct request *r, uint64_t len, const void *src)
{
	struct stage *n = realloc(r->stages, (r->nstages + 1) * sizeof(*n));
	if (n == NULL)
		return -1;
	r->stages = n;
	r->stages[r->nstages] = (struct stage){r->last_cmd_off, len, 0, src, false};
	return (int)r->nstages++;
}

static int
need_device(struct fe *fe, uint32_t dev, cua_err *e)
{
	if ((int)dev >= fe->ndevs)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "device %u does not exist (%d devices)", dev, fe->ndevs);
	if (fe->devs[dev].state == DEV_FAILED)
		return cua_err_set(e, CUA_ENO_DEVICE, "device %u is unusable: %s", dev, fe->devs[dev].why);
	return 0;
}

/* The request's device: the first one named fixes it; later items must agree. */
static int
bind_device(struct request *r, int dev, cua_err *e)
{
	if (r->dev < 0)
		r->dev = dev;
	else if (r->dev != dev)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "one request must target one device (device %d, then %d)",
				   r->dev, dev);
	return 0;
}

static int
dep(struct fe *fe, struct request *r, int dev)
{
	r->dep_gen = fe->devs[dev].gen;
	return 0;
}

/* Resolves a stream handle (0: the next pool stream of dev) to a worker stream id. */
static int
resolve_stream(struct fe *fe, struct request *r, uint64_t h, int dev, uint32_t *wsid, cua_err *e)
{
	if (h == 0) {
		struct device *d = &fe->devs[dev];
		uint32_t n = d->info.pool_streams ? d->info.pool_streams : 1;
		*wsid = d->next_pool++ % n;
		return 0;
	}
	struct hslot *hs;
	int rc = do_handle_get(fe, r->s, h, CUA_HK_STREAM, &hs, e);
	if (rc != 0)
		return rc;
	if (hs->dev != dev)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "stream is on device %u, the work on device %d", hs->dev, dev);
	*wsid = (uint32_t)hs->wid;
	return 0;
}

static int
range(struct fe *fe, struct request *r, uint64_t p, uint64_t len, int *dev, cua_err *e)
{
	if (len == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "zero-byte range at 0x%llx", (unsigned long long)p);
	int rc = do_alloc_find(fe, r->s, p, len, dev, NULL, e);
	if (rc != 0)
		return rc;
	if ((rc = need_device(fe, (uint32_t)*dev, e)) != 0)
		return rc;
	dep(fe, r, *dev);
	return bind_device(r, *dev, e);
}

static uint64_t
max_copy(struct fe *fe)
{
	uint64_t m = fe->cfg.staging_bytes;
	return fe->cfg.max_message - 4096 < m ? fe->cfg.max_message - 4096 : m;
}

/* ------------------------------------------------------------------ stream work, shared by single and batch */

static int
plan_htod(struct fe *fe, struct request *r, const struct cua_req_memcpy_htod *q, struct ritem *it, cua_err *e)
{
	int dev, rc;
	uint32_t sid;
	if ((rc = range(fe, r, q->dst, q->data.len, &dev, e)) != 0 ||
	    (rc = resolve_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	if (q->data.len > fe->cfg.staging_bytes)
		return cua_err_set(e, CUA_ETOO_LARGE, "copy of %u bytes exceeds the staging area", q->data.len);
	it->cmd = cmd_add(r, W_HTOD, sid, 0, q->dst, 0, q->data.len, NULL, 0);
	it->stage = it->cmd < 0 ? -1 : stage_add(r, q->data.len, q->data.ptr);
	return it->stage < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
plan_dtoh(struct fe *fe, struct request *r, const struct cua_req_memcpy_dtoh *q, struct ritem *it, cua_err *e)
{
	int dev, rc;
	uint32_t sid;
	if (q->bytes > max_copy(fe))
		return cua_err_set(e, CUA_ETOO_LARGE, "copy of %llu bytes exceeds the %llu a reply can carry; split it",
				   (unsigned long long)q->bytes, (unsigned long long)max_copy(fe));
	if ((rc = range(fe, r, q->src, q->bytes, &dev, e)) != 0 ||
	    (rc = resolve_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	it->cmd = cmd_add(r, W_DTOH, sid, 0, q->src, 0, q->bytes, NULL, 0);
	it->stage = it->cmd < 0 ? -1 : stage_add(r, q->bytes, NULL);
	return it->stage < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
plan_dtod(struct fe *fe, struct request *r, const struct cua_req_memcpy_dtod *q, struct ritem *it, cua_err *e)
{
	int dev, dev2, rc;
	uint32_t sid;
	if ((rc = range(fe, r, q->dst, q->bytes, &dev, e)) != 0 || (rc = range(fe, r, q->src, q->bytes, &dev2, e)) != 0 ||
	    (rc = resolve_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	it->cmd = cmd_add(r, W_DTOD, sid, 0, q->dst, q->src, q->bytes, NULL, 0);
	return it->cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
plan_memset(struct fe *fe, struct request *r, const struct cua_req_memset *q, struct ritem *it, cua_err *e)
{
	int dev, rc;
	uint32_t sid;
	if (q->width != 1 && q->width != 2 && q->width != 4)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "memset width must be 1, 2 or 4 bytes, not %u", q->width);
	if (q->width < 4 && q->value >> (8 * q->width))
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "memset value 0x%x does not fit %u byte(s)", q->value, q->width);
	if (q->count > UINT64_MAX / q->width)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "memset count overflows");
	if ((rc = range(fe, r, q->dst, q->count * q->width, &dev, e)) != 0 ||
	    (rc = resolve_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	it->cmd = cmd_add(r, W_MEMSET, sid, q->width, q->dst, q->value, q->count, NULL, 0);
	return it->cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* A copy between device memory and a registered host buffer of the session (no data in the message). */
static int
plan_host_copy(struct fe *fe, struct request *r, uint32_t kind, const struct cua_req_memcpy_host *q, struct ritem *it,
	       cua_err *e)
{
	int dev, rc;
	uint32_t sid;
	struct hslot *hb;
	if ((rc = do_handle_get(fe, r->s, q->buffer, CUA_HK_HOSTBUF, &hb, e)) != 0)
		return rc;
	if (q->offset > hb->size || q->bytes > hb->size - q->offset)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "[%llu, +%llu) is outside the %llu-byte host buffer",
				   (unsigned long long)q->offset, (unsigned long long)q->bytes, (unsigned long long)hb->size);
	if ((rc = range(fe, r, q->dev_ptr, q->bytes, &dev, e)) != 0)
		return rc;
	if (hb->dev != dev)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "host buffer is registered with device %u, the memory is on %d",
				   hb->dev, dev);
	if ((rc = resolve_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	it->cmd = cmd_add(r, kind == CUA_OP_MEMCPY_HTOD_HOST ? W_HTOD : W_DTOH, sid, (uint32_t)hb->wid, q->dev_ptr,
			  q->offset, q->bytes, NULL, 0);
	return it->cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
plan_launch(struct fe *fe, struct request *r, const struct cua_req_launch *q, struct ritem *it, cua_err *e)
{
	struct hslot *fn;
	int rc = do_handle_get(fe, r->s, q->function, CUA_HK_FUNCTION, &fn, e);
	if (rc != 0)
		return rc;
	int dev = fn->dev;
	struct device *d = &fe->devs[dev];
	dep(fe, r, dev);
	if ((rc = bind_device(r, dev, e)) != 0)
		return rc;
	for (int i = 0; i < 3; i++)
		if (q->grid[i] == 0 || q->block[i] == 0)
			return cua_err_set(e, CUA_EBAD_ARGUMENT, "grid and block dimensions must be at least 1 (got grid %ux%ux%u, block %ux%ux%u)",
					   q->grid[0], q->grid[1], q->grid[2], q->block[0], q->block[1], q->block[2]);
	if (q->flags & CUA_LAUNCH_PDL) {
		uint32_t sm = d->info.sm_major * 10 + d->info.sm_minor;
		if (sm < 90)
			return cua_err_set(e, CUA_EPDL_UNSUPPORTED,
					   "programmatic dependent launch requires sm_90 or newer; target sm_%u%u",
					   d->info.sm_major, d->info.sm_minor);
	}
	if (q->nargs != fn->nparams)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "the kernel takes %u arguments, the launch has %u", fn->nparams,
				   q->nargs);
	uint32_t total = 0, plen = (uint32_t)sizeof(struct wlaunch_dims);
	for (uint32_t i = 0; i < q->nargs; i++) {
		const cua_wire_arg *a = &q->args[i];
		uint32_t want = fn->params[i].size;
		uint32_t have = a->kind == CUA_ARG_DEVPTR ? 8 : a->bytes.len;
		if (have != want)
			return cua_err_set(e, CUA_EBAD_ARGUMENT, "argument %u is %u bytes, the kernel's parameter %u is %u bytes",
					   i, have, i, want);
		if (a->kind == CUA_ARG_DEVPTR && a->devptr != 0) {
			int pdev;
			cua_err pe;
			if ((rc = do_alloc_find(fe, r->s, a->devptr, 1, &pdev, NULL, &pe)) != 0)
				return cua_err_set(e, rc, "argument %u: %s", i, pe.detail);
			if (pdev != dev)
				return cua_err_set(e, CUA_EBAD_ARGUMENT, "argument %u points to device %d, the kernel runs on %d",
						   i, pdev, dev);
		}
		total += have;
		plen += 8 + w_align8(have);
	}
	if (total > CUA_MAX_PARAM_BYTES)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "arguments take %u bytes, more than the %u a launch may pass", total,
				   CUA_MAX_PARAM_BYTES);
	uint32_t sid;
	if ((rc = resolve_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	unsigned char *payload = malloc(plen);
	if (payload == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	struct wlaunch_dims dims;
	memcpy(dims.grid, q->grid, sizeof(dims.grid));
	memcpy(dims.block, q->block, sizeof(dims.block));
	memcpy(payload, &dims, sizeof(dims));
	size_t off = sizeof(dims);
	for (uint32_t i = 0; i < q->nargs; i++) {
		const cua_wire_arg *a = &q->args[i];
		uint32_t sz = a->kind == CUA_ARG_DEVPTR ? 8 : a->bytes.len, zero = 0;
		memcpy(payload + off, &sz, 4);
		memcpy(payload + off + 4, &zero, 4);
		if (a->kind == CUA_ARG_DEVPTR)
			memcpy(payload + off + 8, &a->devptr, 8);
		else
			memcpy(payload + off + 8, a->bytes.ptr, sz);
		memset(payload + off + 8 + sz, 0, w_align8(sz) - sz);
		off += 8 + w_align8(sz);
	}
	it->cmd = cmd_add(r, W_LAUNCH, sid, q->flags & CUA_LAUNCH_PDL, fn->wid, q->shared_mem, q->nargs, payload, plen);
	free(payload);
	return it->cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* ------------------------------------------------------------------ validators, one per op */

typedef int (*validate_fn)(struct fe *fe, struct request *r, cua_err *e);
typedef void (*complete_fn)(struct fe *fe, struct request *r);

static int
v_hello(struct fe *fe, struct request *r, cua_err *e)
{
	const struct cua_req_hello *q = &r->w.body.hello;
	if (q->min_version > CUA_PROTO_VERSION || q->max_version < CUA_PROTO_VERSION_MIN || q->min_version > q->max_version)
		return cua_err_set(e, CUA_EVERSION, "client speaks versions %u..%u, this daemon %u..%u", q->min_version,
				   q->max_version, CUA_PROTO_VERSION_MIN, CUA_PROTO_VERSION);
	if (!r->s->hello)
		log_info("session %llu: hello from '%.*s' (pid %u)", (unsigned long long)r->s->id, (int)q->client.len,
			 (const char *)q->client.ptr, q->pid);
	r->s->hello = true;
	return 0;
}

static int
v_none(struct fe *fe, struct request *r, cua_err *e)
{
	return 0;
}

static int
v_module_load(struct fe *fe, struct request *r, cua_err *e)
{
	const struct cua_req_module_load *q = &r->w.body.module_load;
	int rc;
	if ((rc = need_device(fe, q->device, e)) != 0)
		return rc;
	if (q->image.len == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "empty module image");
	if (q->image.len > fe->cfg.staging_bytes)
		return cua_err_set(e, CUA_ETOO_LARGE, "module image of %u bytes exceeds the staging area", q->image.len);
	if (r->s->nhandles >= fe->cfg.session_handles)
		return cua_err_set(e, CUA_EQUOTA, "session has %u handles, the limit", r->s->nhandles);
	bind_device(r, (int)q->device, e);
	int c = cmd_add(r, W_MODULE_LOAD, 0, q->format, 0, q->image.len, 0, NULL, 0);
	r->items[0].cmd = c;
	/* MODULE_LOAD carries the staging offset in a (see wproto.h): swap b into place at dispatch. */
	r->items[0].stage = c < 0 ? -1 : stage_add(r, q->image.len, q->image.ptr);
	return r->items[0].stage < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static void
c_module_load(struct fe *fe, struct request *r)
{
	struct ritem *it = &r->items[0];
	if (it->status != CUA_OK)
		return;
	uint64_t h;
	int rc = do_handle_new(r->s, CUA_HK_MODULE, r->dev, fe->devs[r->dev].gen, it->value, &h);
	if (rc != 0) {
		item_fail(it, rc, "cannot record the module");
		return;
	}
	it->value = h;
	r->s->counts.modules++;
}

static int
v_module_unload(struct fe *fe, struct request *r, cua_err *e)
{
	struct hslot *m;
	uint64_t h = r->w.body.module_unload.module;
	int rc = do_handle_get(fe, r->s, h, CUA_HK_MODULE, &m, e);
	if (rc == CUA_ECONTEXT_LOST) { /* forget it; say so */
		do_handle_free(r->s, &r->s->slots[cua_handle_slot(h)]);
		return rc;
	}
	if (rc != 0)
		return rc;
	r->barrier = true;
	r->dep_gen = m->gen;
	bind_device(r, m->dev, e);
	r->items[0].cmd = cmd_add(r, W_MODULE_UNLOAD, 0, 0, m->wid, 0, 0, NULL, 0);
	return 0;
}

static void
c_module_unload(struct fe *fe, struct request *r)
{
	uint32_t slot = cua_handle_slot(r->w.body.module_unload.module);
	if (r->items[0].status != CUA_OK || slot >= r->s->nslots || r->s->slots[slot].kind != CUA_HK_MODULE)
		return;
	/* its functions go with it */
	for (uint32_t i = 0; i < r->s->nslots; i++)
		if (r->s->slots[i].kind == CUA_HK_FUNCTION && r->s->slots[i].module_slot == slot) {
			do_handle_free(r->s, &r->s->slots[i]);
			r->s->counts.functions--;
		}
	do_handle_free(r->s, &r->s->slots[slot]);
	r->s->counts.modules--;
}

static int
v_function_get(struct fe *fe, struct request *r, cua_err *e)
{
	const struct cua_req_function_get *q = &r->w.body.function_get;
	struct hslot *m;
	int rc = do_handle_get(fe, r->s, q->module, CUA_HK_MODULE, &m, e);
	if (rc != 0)
		return rc;
	if (q->name.len == 0 || memchr(q->name.ptr, '\0', q->name.len) != NULL)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "kernel name must be non-empty text without NUL bytes");
	if (r->s->nhandles >= fe->cfg.session_handles)
		return cua_err_set(e, CUA_EQUOTA, "session has %u handles, the limit", r->s->nhandles);
	char name[NAME_MAX_Z];
	memcpy(name, q->name.ptr, q->name.len);
	name[q->name.len] = '\0';
	r->dep_gen = m->gen;
	bind_device(r, m->dev, e);
	r->items[0].cmd = cmd_add(r, W_FUNCTION_GET, 0, 0, m->wid, 0, 0, name, q->name.len + 1);
	return 0;
}

static void
c_function_get(struct fe *fe, struct request *r)
{
	struct ritem *it = &r->items[0];
	if (it->status != CUA_OK)
		return;
	uint64_t h;
	if (it->data_len % sizeof(cua_param_info) != 0 || it->data_len / sizeof(cua_param_info) > CUA_MAX_PARAMS) {
		item_fail(it, CUA_EINTERNAL, "worker returned a malformed parameter layout");
		return;
	}
	int rc = do_handle_new(r->s, CUA_HK_FUNCTION, r->dev, fe->devs[r->dev].gen, it->value, &h);
	if (rc != 0) {
		item_fail(it, rc, "cannot record the function");
		return;
	}
	struct hslot *hs = &r->s->slots[cua_handle_slot(h)];
	hs->module_slot = cua_handle_slot(r->w.body.function_get.module);
	hs->nparams = it->data_len / (uint32_t)sizeof(cua_param_info);
	hs->params = it->data; /* ownership moves to the handle */
	it->data = NULL;
	it->value = h;
	r->s->counts.functions++;
}

static int
v_mem_alloc(struct fe *fe, struct request *r, cua_err *e)
{
	const struct cua_req_mem_alloc *q = &r->w.body.mem_alloc;
	int rc;
	if ((rc = need_device(fe, q->device, e)) != 0)
		return rc;
	if (q->bytes == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "cannot allocate 0 bytes");
	if (fe->cfg.session_mem && (q->bytes > fe->cfg.session_mem || r->s->counts.alloc_bytes > fe->cfg.session_mem - q->bytes))
		return cua_err_set(e, CUA_EQUOTA, "allocating %llu bytes would pass the session's memory quota of %llu (%llu in use)",
				   (unsigned long long)q->bytes, (unsigned long long)fe->cfg.session_mem,
				   (unsigned long long)r->s->counts.alloc_bytes);
	bind_device(r, (int)q->device, e);
	r->items[0].cmd = cmd_add(r, W_MEM_ALLOC, 0, 0, q->bytes, 0, 0, NULL, 0);
	return 0;
}

static void
c_mem_alloc(struct fe *fe, struct request *r)
{
	struct ritem *it = &r->items[0];
	if (it->status != CUA_OK)
		return;
	uint64_t len = r->w.body.mem_alloc.bytes;
	if (do_alloc_add(r->s, r->dev, fe->devs[r->dev].gen, it->value, len) != 0) {
		item_fail(it, CUA_ENOMEM, "cannot record the allocation");
		return;
	}
	r->s->counts.allocations++;
	r->s->counts.alloc_bytes += len;
	fe->devs[r->dev].allocations++;
	fe->devs[r->dev].alloc_bytes += len;
}

static int
v_mem_free(struct fe *fe, struct request *r, cua_err *e)
{
	uint64_t p = r->w.body.mem_free.ptr;
	int dev;
	struct alloc_rec *a;
	int rc = do_alloc_find(fe, r->s, p, 1, &dev, &a, e);
	if (rc == CUA_ECONTEXT_LOST) {
		/* drop every stale record covering p */
		for (uint32_t i = 0; i < r->s->nallocs; i++)
			if (r->s->allocs[i].addr == p && r->s->allocs[i].stale) {
				do_alloc_remove(r->s, &r->s->allocs[i]);
				break;
			}
		return rc;
	}
	if (rc != 0)
		return cua_err_set(e, CUA_ENOT_FOUND, "0x%llx is not an allocation of this session", (unsigned long long)p);
	if (a->addr != p)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "0x%llx is inside an allocation; free 0x%llx instead",
				   (unsigned long long)p, (unsigned long long)a->addr);
	r->barrier = true;
	dep(fe, r, dev);
	bind_device(r, dev, e);
	r->items[0].cmd = cmd_add(r, W_MEM_FREE, 0, 0, p, 0, 0, NULL, 0);
	return 0;
}

static void
c_mem_free(struct fe *fe, struct request *r)
{
	uint64_t p = r->w.body.mem_free.ptr;
	if (r->items[0].status != CUA_OK)
		return;
	for (uint32_t i = 0; i < r->s->nallocs; i++) {
		struct alloc_rec *a = &r->s->allocs[i];
		if (a->addr == p && !a->stale) {
			r->s->counts.allocations--;
			r->s->counts.alloc_bytes -= a->len;
			fe->devs[a->dev].allocations--;
			fe->devs[a->dev].alloc_bytes -= a->len;
			do_alloc_remove(r->s, a);
			return;
		}
	}
}

static int
v_htod(struct fe *fe, struct request *r, cua_err *e)
{
	return plan_htod(fe, r, &r->w.body.memcpy_htod, &r->items[0], e);
}
static int
v_dtoh(struct fe *fe, struct request *r, cua_err *e)
{
	return plan_dtoh(fe, r, &r->w.body.memcpy_dtoh, &r->items[0], e);
}
static int
v_dtod(struct fe *fe, struct request *r, cua_err *e)
{
	return plan_dtod(fe, r, &r->w.body.memcpy_dtod, &r->items[0], e);
}
static int
v_memset(struct fe *fe, struct request *r, cua_err *e)
{
	return plan_memset(fe, r, &r->w.body.memset, &r->items[0], e);
}

static int
v_stream_create(struct fe *fe, struct request *r, cua_err *e)
{
	const struct cua_req_stream_create *q = &r->w.body.stream_create;
	int rc;
	if ((rc = need_device(fe, q->device, e)) != 0)
		return rc;
	if (r->s->nhandles >= fe->cfg.session_handles)
		return cua_err_set(e, CUA_EQUOTA, "session has %u handles, the limit", r->s->nhandles);
	const struct wdev_info *in = &fe->devs[q->device].info;
	int prio = q->priority;
	if (prio > in->prio_least)
		prio = in->prio_least;
	if (prio < in->prio_greatest)
		prio = in->prio_greatest;
	bind_device(r, (int)q->device, e);
	r->items[0].cmd = cmd_add(r, W_STREAM_CREATE, 0, 0, (uint64_t)(int64_t)prio, 0, 0, NULL, 0);
	return 0;
}

static void
c_stream_create(struct fe *fe, struct request *r)
{
	struct ritem *it = &r->items[0];
	if (it->status != CUA_OK)
		return;
	uint64_t h;
	int rc = do_handle_new(r->s, CUA_HK_STREAM, r->dev, fe->devs[r->dev].gen, it->value, &h);
	if (rc != 0) {
		item_fail(it, rc, "cannot record the stream");
		return;
	}
	it->value = h;
	r->s->counts.streams++;
}

static int
v_stream(struct fe *fe, struct request *r, cua_err *e)
{
	uint64_t h = r->w.body.stream.stream;
	if (h == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "stream 0 is the daemon's pool; use SYNCHRONIZE");
	struct hslot *hs;
	int rc = do_handle_get(fe, r->s, h, CUA_HK_STREAM, &hs, e);
	if (rc == CUA_ECONTEXT_LOST && r->op == CUA_OP_STREAM_DESTROY) {
		do_handle_free(r->s, &r->s->slots[cua_handle_slot(h)]);
		return rc;
	}
	if (rc != 0)
		return rc;
	r->dep_gen = hs->gen;
	bind_device(r, hs->dev, e);
	if (r->op == CUA_OP_STREAM_DESTROY) {
		r->barrier = true;
		r->items[0].cmd = cmd_add(r, W_STREAM_DESTROY, (uint32_t)hs->wid, 0, 0, 0, 0, NULL, 0);
	} else {
		r->items[0].cmd = cmd_add(r, W_STREAM_SYNC, (uint32_t)hs->wid, 0, 0, 0, 0, NULL, 0);
	}
	return 0;
}

static void
c_stream_destroy(struct fe *fe, struct request *r)
{
	uint32_t slot = cua_handle_slot(r->w.body.stream.stream);
	if (r->items[0].status == CUA_OK && slot < r->s->nslots && r->s->slots[slot].kind == CUA_HK_STREAM) {
		do_handle_free(r->s, &r->s->slots[slot]);
		r->s->counts.streams--;
	}
}

static int
v_launch(struct fe *fe, struct request *r, cua_err *e)
{
	r->no_wait = (r->w.body.launch.flags & CUA_FLAG_NO_WAIT) != 0;
	return plan_launch(fe, r, &r->w.body.launch, &r->items[0], e);
}

static int
v_batch(struct fe *fe, struct request *r, cua_err *e)
{
	const struct cua_req_batch *q = &r->w.body.batch;
	r->no_wait = (q->flags & CUA_FLAG_NO_WAIT) != 0;
	if (items_init(r, q->nitems) != 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < q->nitems; i++) {
		const cua_batch_item *b = &q->items[i];
		cua_err ie;
		cua_err_clear(&ie);
		int rc;
		switch (b->kind) {
		case CUA_OP_LAUNCH: rc = plan_launch(fe, r, &b->u.launch, &r->items[i], &ie); break;
		case CUA_OP_MEMCPY_HTOD: rc = plan_htod(fe, r, &b->u.htod, &r->items[i], &ie); break;
		case CUA_OP_MEMCPY_DTOH: rc = plan_dtoh(fe, r, &b->u.dtoh, &r->items[i], &ie); break;
		case CUA_OP_MEMCPY_DTOD: rc = plan_dtod(fe, r, &b->u.dtod, &r->items[i], &ie); break;
		case CUA_OP_MEMSET: rc = plan_memset(fe, r, &b->u.memset, &r->items[i], &ie); break;
		case CUA_OP_MEMCPY_HTOD_HOST:
		case CUA_OP_MEMCPY_DTOH_HOST: rc = plan_host_copy(fe, r, b->kind, &b->u.host, &r->items[i], &ie); break;
		default: rc = cua_err_set(&ie, CUA_EPROTOCOL, "item kind %u", b->kind); break;
		}
		if (rc != 0)
			item_fail_err(&r->items[i], &ie);
	}
	return 0;
}

static int
v_host_copy(struct fe *fe, struct request *r, cua_err *e)
{
	return plan_host_copy(fe, r, r->op, &r->w.body.memcpy_host, &r->items[0], e);
}

/* The client names one of its own file descriptors: a memfd. Only over ipc://, where the kernel vouches for
 * the peer's pid; the daemon opens /proc/PID/fd/N (same user, or root) and the worker maps it. */
static int
v_host_register(struct fe *fe, struct request *r, cua_err *e)
{
	const struct cua_req_host_register *q = &r->w.body.host_register;
	int rc;
	if ((rc = need_device(fe, q->device, e)) != 0)
		return rc;
	if (q->bytes == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "cannot register 0 bytes");
	if (r->s->nhandles >= fe->cfg.session_handles)
		return cua_err_set(e, CUA_EQUOTA, "session has %u handles, the limit", r->s->nhandles);
	uint64_t pid;
	if (nng_pipe_get_uint64(r->pipe, NNG_OPT_IPC_PEER_PID, &pid) != 0)
		return cua_err_set(e, CUA_EUNSUPPORTED, "shared host memory needs a local ipc:// connection");
	char path[64];
	snprintf(path, sizeof(path), "/proc/%llu/fd/%u", (unsigned long long)pid, q->fd);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return cua_err_set(e, errno == EACCES || errno == EPERM ? CUA_EUNSUPPORTED : CUA_EBAD_ARGUMENT,
				   "cannot open the client's fd %u (%s)%s", q->fd, strerror(errno),
				   errno == EACCES || errno == EPERM ? ": run cuasyncd as root or as the client's user" : "");
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "fd %u is not a memfd (memfd_create)", q->fd);
	}
	/* A buffer that could shrink under the worker's mapping would kill it (SIGBUS) and every session with it. */
	if (!(seals & F_SEAL_SHRINK)) {
		close(fd);
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "the memfd must be sealed against shrinking (MFD_ALLOW_SEALING, then F_ADD_SEALS F_SEAL_SHRINK)");
	}
	if ((uint64_t)st.st_size < q->bytes) {
		close(fd);
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "the memfd holds %lld bytes, not %llu", (long long)st.st_size,
				   (unsigned long long)q->bytes);
	}
	r->host_fd = fd; /* the worker opens it through /proc/<daemon>/fd while the request runs */
	bind_device(r, (int)q->device, e);
	r->items[0].cmd = cmd_add(r, W_HOST_REGISTER, 0, 0, (uint64_t)fd, q->bytes, 0, NULL, 0);
	return 0;
}

static void
c_host_register(struct fe *fe, struct request *r)
{
	struct ritem *it = &r->items[0];
	if (it->status != CUA_OK)
		return;
	uint64_t h;
	if (do_handle_new(r->s, CUA_HK_HOSTBUF, r->dev, fe->devs[r->dev].gen, it->value, &h) != 0) {
		item_fail(it, CUA_ENOMEM, "cannot record the host buffer");
		return;
	}
	r->s->slots[cua_handle_slot(h)].size = r->w.body.host_register.bytes;
	r->s->host_buffers++;
	it->value = h;
}

static int
v_host_unregister(struct fe *fe, struct request *r, cua_err *e)
{
	uint64_t h = r->w.body.host_unregister.buffer;
	struct hslot *hb;
	int rc = do_handle_get(fe, r->s, h, CUA_HK_HOSTBUF, &hb, e);
	if (rc == CUA_ECONTEXT_LOST) {
		do_handle_free(r->s, &r->s->slots[cua_handle_slot(h)]);
		r->s->host_buffers--;
		return rc;
	}
	if (rc != 0)
		return rc;
	r->barrier = true; /* no copy of this session may still use it */
	r->dep_gen = hb->gen;
	bind_device(r, hb->dev, e);
	r->items[0].cmd = cmd_add(r, W_HOST_UNREGISTER, 0, 0, hb->wid, 0, 0, NULL, 0);
	return 0;
}

static void
c_host_unregister(struct fe *fe, struct request *r)
{
	uint32_t slot = cua_handle_slot(r->w.body.host_unregister.buffer);
	if (r->items[0].status == CUA_OK && slot < r->s->nslots && r->s->slots[slot].kind == CUA_HK_HOSTBUF) {
		do_handle_free(r->s, &r->s->slots[slot]);
		r->s->host_buffers--;
	}
}

static int
v_synchronize(struct fe *fe, struct request *r, cua_err *e)
{
	r->barrier = true;
	return 0;
}

static void
c_synchronize(struct fe *fe, struct request *r)
{
	struct session *s = r->s;
	if (s->deferred_status != CUA_OK) {
		item_fail(&r->items[0], (int)s->deferred_status, "%s", s->deferred_msg);
		s->deferred_status = CUA_OK;
		s->deferred_msg[0] = '\0';
	}
}

/* ------------------------------------------------------------------ reply bodies */

typedef int (*pack_fn)(struct fe *fe, struct request *r, cua_wire_out out);

static int
pack(cua_wire_out out, struct request *r, uint32_t status, const char *msg, const void *body)
{
	return cua_wire_pack_reply(out, r->op, status, msg, body);
}

static int
p_hello(struct fe *fe, struct request *r, cua_wire_out out)
{
	static const char server[] = PACKAGE_NAME " " PACKAGE_VERSION;
	struct cua_rep_hello b = {CUA_PROTO_VERSION, r->s->id, {server, sizeof(server) - 1}, fe->cfg.max_message,
				  CUA_MAX_BATCH, CUA_MAX_ARGS, (uint32_t)fe->ndevs};
	return pack(out, r, 0, NULL, &b);
}

static int
p_ping(struct fe *fe, struct request *r, cua_wire_out out)
{
	return pack(out, r, 0, NULL, &r->w.body.ping);
}

static int
p_devices(struct fe *fe, struct request *r, cua_wire_out out)
{
	cua_wire_device infos[CUA_MAX_DEVICES];
	uint32_t n = 0;
	for (int i = 0; i < fe->ndevs && n < CUA_MAX_DEVICES; i++) {
		const struct device *d = &fe->devs[i];
		if (d->state == DEV_FAILED)
			continue;
		infos[n++] = (cua_wire_device){(uint32_t)i,
					       {d->info.name, (uint32_t)strnlen(d->info.name, sizeof(d->info.name))},
					       d->info.sm_major,
					       d->info.sm_minor,
					       d->info.total_mem,
					       d->info.multiprocessors,
					       d->info.prio_least,
					       d->info.prio_greatest,
					       {d->info.backend, (uint32_t)strnlen(d->info.backend, sizeof(d->info.backend))},
					       d->gen};
	}
	struct cua_rep_devices b = {infos, n};
	return pack(out, r, 0, NULL, &b);
}

static int
p_handle(struct fe *fe, struct request *r, cua_wire_out out)
{
	uint64_t v = r->items[0].value; /* module/stream handle or device pointer: all one-u64 bodies */
	return pack(out, r, 0, NULL, &v);
}

static int
p_function_get(struct fe *fe, struct request *r, cua_wire_out out)
{
	uint64_t h = r->items[0].value;
	const struct hslot *hs = &r->s->slots[cua_handle_slot(h)];
	struct cua_rep_function_get b = {h, hs->params, hs->nparams};
	return pack(out, r, 0, NULL, &b);
}

static int
p_dtoh(struct fe *fe, struct request *r, cua_wire_out out)
{
	const struct ritem *it = &r->items[0];
	const struct stage *st = &r->stages[it->stage];
	struct cua_rep_memcpy_dtoh b = {{fe->devs[r->dev].staging + st->off, (uint32_t)st->len}};
	return pack(out, r, 0, NULL, &b);
}

static int
p_empty(struct fe *fe, struct request *r, cua_wire_out out)
{
	return pack(out, r, 0, NULL, NULL);
}

static int
p_batch(struct fe *fe, struct request *r, cua_wire_out out)
{
	cua_item_result *res = calloc(r->nitems ? r->nitems : 1, sizeof(*res));
	if (res == NULL)
		return CUA_ENOMEM;
	for (uint32_t i = 0; i < r->nitems; i++) {
		const struct ritem *it = &r->items[i];
		const char *name = cua_strerror_name((int)it->status);
		const char *msg = it->msg ? it->msg : cua_strerror((int)it->status);
		res[i].status = it->status;
		res[i].name = (cua_bytes){name, (uint32_t)strlen(name)};
		res[i].message = (cua_bytes){msg, (uint32_t)strlen(msg)};
		/* DTOH data; a fire-and-forget batch is answered before any data exists */
		if (!r->no_wait && it->status == CUA_OK && it->stage >= 0 && r->stages[it->stage].src == NULL)
			res[i].data = (cua_bytes){fe->devs[r->dev].staging + r->stages[it->stage].off,
						  (uint32_t)r->stages[it->stage].len};
	}
	struct cua_rep_batch b = {res, r->nitems};
	int rc = pack(out, r, 0, NULL, &b);
	free(res);
	return rc;
}

static int
p_status(struct fe *fe, struct request *r, cua_wire_out out)
{
	cua_wire_dev_status ds[CUA_MAX_DEVICES];
	uint32_t n = 0;
	for (int i = 0; i < fe->ndevs && n < CUA_MAX_DEVICES; i++) {
		const struct device *d = &fe->devs[i];
		ds[n++] = (cua_wire_dev_status){(uint32_t)i, d->gen, d->restarts, d->in_flight, d->allocations, d->alloc_bytes};
	}
	cua_wire_counts total = {0};
	for (const struct session *s = fe->sessions; s; s = s->next) {
		if (s->closing || s->pipe_gone)
			continue;
		total.allocations += s->counts.allocations;
		total.alloc_bytes += s->counts.alloc_bytes;
		total.modules += s->counts.modules;
		total.functions += s->counts.functions;
		total.streams += s->counts.streams;
		total.in_flight += s->in_flight + s->queued;
	}
	cua_wire_counts mine = r->s->counts;
	mine.in_flight = r->s->in_flight + r->s->queued;
	uint32_t live = 0;
	for (const struct session *s = fe->sessions; s; s = s->next)
		live += s->hello && !s->closing && !s->pipe_gone; /* connections that never said HELLO are no sessions */
	struct cua_rep_status b = {now_ms() - fe->start_ms, live, fe->requests, fe->errors, ds, n, mine, total};
	return pack(out, r, 0, NULL, &b);
}

/* ------------------------------------------------------------------ the table */

static const struct op_row {
	validate_fn validate;
	complete_fn complete; /* after the worker's results are in (or at once without worker work) */
	pack_fn pack;         /* reply body on success */
	bool needs_hello;
} ops[CUA_OP_MAX] = {
	[CUA_OP_HELLO] = {v_hello, NULL, p_hello, false},
	[CUA_OP_PING] = {v_none, NULL, p_ping, false},
	[CUA_OP_DEVICES] = {v_none, NULL, p_devices, true},
	[CUA_OP_MODULE_LOAD] = {v_module_load, c_module_load, p_handle, true},
	[CUA_OP_MODULE_UNLOAD] = {v_module_unload, c_module_unload, p_empty, true},
	[CUA_OP_FUNCTION_GET] = {v_function_get, c_function_get, p_function_get, true},
	[CUA_OP_MEM_ALLOC] = {v_mem_alloc, c_mem_alloc, p_handle, true},
	[CUA_OP_MEM_FREE] = {v_mem_free, c_mem_free, p_empty, true},
	[CUA_OP_MEMCPY_HTOD] = {v_htod, NULL, p_empty, true},
	[CUA_OP_MEMCPY_DTOH] = {v_dtoh, NULL, p_dtoh, true},
	[CUA_OP_MEMCPY_DTOD] = {v_dtod, NULL, p_empty, true},
	[CUA_OP_MEMSET] = {v_memset, NULL, p_empty, true},
	[CUA_OP_STREAM_CREATE] = {v_stream_create, c_stream_create, p_handle, true},
	[CUA_OP_STREAM_DESTROY] = {v_stream, c_stream_destroy, p_empty, true},
	[CUA_OP_STREAM_SYNC] = {v_stream, NULL, p_empty, true},
	[CUA_OP_LAUNCH] = {v_launch, NULL, p_empty, true},
	[CUA_OP_BATCH] = {v_batch, NULL, p_batch, true},
	[CUA_OP_SYNCHRONIZE] = {v_synchronize, c_synchronize, p_empty, true},
	[CUA_OP_STATUS] = {v_none, NULL, p_status, true},
	[CUA_OP_HOST_REGISTER] = {v_host_register, c_host_register, p_handle, true},
	[CUA_OP_HOST_UNREGISTER] = {v_host_unregister, c_host_unregister, p_empty, true},
	[CUA_OP_MEMCPY_HTOD_HOST] = {v_host_copy, NULL, p_empty, true},
	[CUA_OP_MEMCPY_DTOH_HOST] = {v_host_copy, NULL, p_empty, true},
};

enum handled
do_handle_request(struct fe *fe, struct request *r)
{
	const struct op_row *row = &ops[r->op];
	cua_err e;
	cua_err_clear(&e);
	r->dev = -1;
	if (items_init(r, 1) != 0) {
		r->status = CUA_ENOMEM;
		return H_REPLY;
	}
	if (row->needs_hello && !r->s->hello) {
		r->status = CUA_ENO_SESSION;
		r->status_msg = strdup("send HELLO first");
		return H_REPLY;
	}
	if (r->s->queued + r->s->in_flight >= fe->cfg.session_inflight && r->op != CUA_OP_STATUS) {
		r->status = CUA_EQUOTA;
		r->status_msg = strdup("too many requests in flight for this session; wait for some to complete");
		return H_REPLY;
	}
	int rc = row->validate(fe, r, &e);
	if (rc != 0) {
		r->status = (uint32_t)rc;
		r->status_msg = strdup(e.detail[0] ? e.detail : cua_strerror(rc));
		free(r->cmds);
		r->cmds = NULL;
		r->ncmds = 0;
		return H_REPLY;
	}
	if (r->ncmds == 0 && !r->barrier) {
		if (row->complete)
			row->complete(fe, r);
		return H_REPLY;
	}
	return H_QUEUE;
}

/* Called by the completion path with the worker's results in r->items. */
void do_complete_request(struct fe *fe, struct request *r);
void
do_complete_request(struct fe *fe, struct request *r)
{
	if (ops[r->op].complete)
		ops[r->op].complete(fe, r);
}

int
do_pack_reply(struct fe *fe, struct request *r, cua_wire_out out)
{
	if (r->status != CUA_OK)
		return cua_wire_pack_reply(out, r->op, r->status, r->status_msg, NULL);
	if (r->op != CUA_OP_BATCH && r->items && r->items[0].status != CUA_OK)
		return cua_wire_pack_reply(out, r->op, r->items[0].status, r->items[0].msg, NULL);
	return ops[r->op].pack(fe, r, out);
}

struct request *
do_cleanup_request(struct fe *fe, struct session *s, int dev)
{
	struct device *d = &fe->devs[dev];
	struct request *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->fe = fe;
	r->s = s;
	r->internal = true;
	r->barrier = true;
	r->dev = dev;
	r->dep_gen = d->gen;
	r->op = CUA_OP_SYNCHRONIZE;
	/* streams first (they drain), then functions vanish with modules, then memory */
	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct hslot *h = &s->slots[i];
		if (h->kind == CUA_HK_STREAM && h->dev == dev && !h->stale && h->gen == d->gen)
			cmd_add(r, W_STREAM_DESTROY, (uint32_t)h->wid, 0, 0, 0, 0, NULL, 0);
	}
	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct hslot *h = &s->slots[i];
		if (h->dev != dev || h->stale || h->gen != d->gen)
			continue;
		if (h->kind == CUA_HK_MODULE)
			cmd_add(r, W_MODULE_UNLOAD, 0, 0, h->wid, 0, 0, NULL, 0);
		else if (h->kind == CUA_HK_HOSTBUF)
			cmd_add(r, W_HOST_UNREGISTER, 0, 0, h->wid, 0, 0, NULL, 0);
	}
	for (uint32_t i = 0; i < s->nallocs; i++) {
		const struct alloc_rec *a = &s->allocs[i];
		if (a->dev == dev && !a->stale && a->gen == d->gen)
			cmd_add(r, W_MEM_FREE, 0, 0, a->addr, 0, 0, NULL, 0);
	}
	if (r->ncmds == 0) {
		free(r->cmds);
		free(r);
		return NULL;
	}
	return r;
}

void
request_free(struct request *r)
{
	if (r->host_fd >= 0)
		close(r->host_fd);
	if (r->decoded)
		cua_wire_request_free(&r->w);
	if (r->msg)
		nng_msg_free(r->msg);
	for (uint32_t i = 0; i < r->nitems; i++) {
		free(r->items[i].msg);
		free(r->items[i].data);
	}
	free(r->items);
	free(r->cmds);
	free(r->stages);
	free(r->status_msg);
	free(r);
}
