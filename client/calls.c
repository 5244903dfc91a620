/*
 * calls.c — the synchronous calls: one request, one reply, the calling thread waits. HELLO, DEVICES,
 * STATUS, PING, modules and function layouts, device memory, copies (through a host buffer when the host
 * side is one), memset, streams and synchronisation.
 */
#include "config.h"

#include "cuac_builder.h"
#include "cuac_error.h"
#include "cuac_flight.h"
#include "cuac_transport.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The largest copy one message carries; bigger copies are split. */
#define COPY_CHUNK ((size_t)32 << 20)

/* A function's parameter layout, as FUNCTION_GET returned it. */
struct cuac_layout {
	uint64_t id;
	uint32_t n;
	cua_param_info *params; /* owned */
	LIST_ENTRY(cuac_layout) link;
};

/* ------------------------------------------------------------------ session and devices */

/* The token HELLO carries: $CUASYNC_TOKEN, else the first line of the file $CUASYNC_TOKEN_FILE, else none.
 * 0 (buf holds it, possibly empty) or a status with the last error set (an unreadable or too long token). */
static int
hello_token(char *buf, size_t len)
{
	const char *env = getenv("CUASYNC_TOKEN"), *path = getenv("CUASYNC_TOKEN_FILE");
	int r = 0;
	FILE *f = NULL;
	buf[0] = '\0';
	if (env && *env) {
		if (strlen(env) >= len)
			r = cuac_fail(CUA_EBAD_ARGUMENT, "$CUASYNC_TOKEN is longer than %u bytes", CUA_MAX_TOKEN);
		else
			snprintf(buf, len, "%s", env);
		goto out;
	}
	if (path == NULL || *path == '\0')
		goto out;
	if ((f = fopen(path, "re")) == NULL) {
		r = cuac_fail(CUA_EBAD_ARGUMENT, "$CUASYNC_TOKEN_FILE %s: %s", path, strerror(errno));
		goto out;
	}
	if (fgets(buf, (int)len, f) == NULL)
		buf[0] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
out:
	if (f != NULL)
		fclose(f);
	return r;
}

/* The shared-memory channel (PROTOCOL.md §10) of an ipc:// connection, unless $CUASYNC_SHM is 0: made, passed
 * over the fd channel, and handed to the transport. Any failure leaves everything on NNG (nothing is reported:
 * the connection works without it). */
static void
shm_attach(cua_client *c)
{
	const char *env = getenv("CUASYNC_SHM");
	int memfd, efd;
	if ((env != NULL && strcmp(env, "0") == 0) || cuac_transport_ipc_path(c) == NULL || !c->has_fd_secret)
		return;
	struct cuac_shm *s = cuac_shm_create(&memfd, &efd);
	if (s == NULL)
		return;
	if (cuac_fdchan_shm(c, memfd, efd) != 0) {
		cuac_shm_close(s);
		return;
	}
	if (cuac_shm_start(s) == 0)
		cuac_transport_set_shm(c, s);
}

int
cuac_hello(cua_client *c)
{
	char token[CUA_MAX_TOKEN + 2];
	struct cua_req_hello h = {CUA_PROTO_VERSION_MIN,
				  CUA_PROTO_VERSION,
				  {"libcuasync", 10},
				  (uint32_t)getpid(),
				  {token, 0}};
	struct cuac_reply rep;
	int r = hello_token(token, sizeof(token));
	if (r != 0)
		return r;
	h.token.len = (uint32_t)strlen(token);
	/* HELLO is safe to repeat: a connection reset before the daemon's socket took the pipe (a listener
	 * being restarted) loses nothing, and the dialer reconnects by itself. */
	for (int attempt = 0;; attempt++) {
		r = cuac_rpc(c, CUA_OP_HELLO, &h, false, &rep);
		if (r == 0) {
			c->session = rep.w.body.hello.session;
			const cua_bytes *sec = &rep.w.body.hello.fd_secret;
			c->has_fd_secret = sec->len == CUA_FDCHAN_SECRET;
			if (c->has_fd_secret)
				memcpy(c->fd_secret, sec->ptr, CUA_FDCHAN_SECRET);
			r = cuac_session_bind(c, &rep);
		}
		cuac_reply_done(&rep);
		if (r != CUA_ETRANSPORT || attempt == 4)
			break;
	}
	explicit_bzero(token, sizeof(token));
	if (r == 0)
		shm_attach(c);
	return r;
}

static void
device_from_wire(cua_device_info *o, const cua_wire_device *d)
{
	memset(o, 0, sizeof(*o));
	o->index = (int)d->index;
	snprintf(o->name, sizeof(o->name), "%.*s", (int)d->name.len, (const char *)d->name.ptr);
	o->sm_major = (int)d->sm_major;
	o->sm_minor = (int)d->sm_minor;
	o->total_mem = d->total_mem;
	o->multiprocessors = (int)d->multiprocessors;
	o->priority_least = d->prio_least;
	o->priority_greatest = d->prio_greatest;
	snprintf(o->backend, sizeof(o->backend), "%.*s", (int)d->backend.len, (const char *)d->backend.ptr);
	o->generation = d->generation;
	o->max_param_bytes = d->max_param_bytes;
	o->max_shared_optin = d->max_shared_optin;
	o->cluster_launch = d->cluster_launch != 0;
	o->cooperative_launch = d->cooperative_launch != 0;
}

int
cuac_load_devices(cua_client *c)
{
	struct cuac_reply rep;
	int r = cuac_rpc(c, CUA_OP_DEVICES, NULL, true, &rep);
	if (r == 0) {
		const struct cua_rep_devices *d = &rep.w.body.devices;
		pthread_mutex_lock(&c->lock);
		c->ndevs = 0;
		for (uint32_t i = 0; i < d->ndevices && i < CUA_MAX_DEVICES; i++) {
			const cua_wire_device *w = &d->devices[i];
			struct cuac_dev_attrs **a = &c->attrs[c->ndevs];
			device_from_wire(&c->devs[c->ndevs++], w);
			if (*a == NULL && w->nattrs > 0)
				*a = malloc(sizeof(**a)); /* none: cua_device_get_attribute says so */
			if (*a != NULL) {
				(*a)->n = w->nattrs;
				memcpy((*a)->a, w->attrs, w->nattrs * sizeof(w->attrs[0]));
			}
		}
		pthread_mutex_unlock(&c->lock);
	}
	cuac_reply_done(&rep);
	return r;
}

int
cua_ping(cua_client *c)
{
	struct cua_req_ping p = {(uint64_t)time(NULL)};
	uint64_t back = 0;
	int r = cuac_call_u64(c, CUA_OP_PING, &p, &back);
	if (r == 0 && back != p.nonce)
		return cuac_fail(CUA_EPROTOCOL, "ping answered with a different nonce");
	return r;
}

int
cua_status(cua_client *c, cua_daemon_status *out)
{
	struct cuac_reply rep;
	int r = cuac_rpc(c, CUA_OP_STATUS, NULL, true, &rep);
	if (r == 0) {
		const struct cua_rep_status *s = &rep.w.body.status;
		memset(out, 0, sizeof(*out));
		out->uptime_ms = s->uptime_ms;
		out->sessions = s->sessions;
		out->requests = s->requests;
		out->errors = s->errors;
		out->ndevices = s->ndevices < 64 ? s->ndevices : 64;
		for (uint32_t i = 0; i < out->ndevices; i++) {
			out->devices[i].generation = s->devices[i].generation;
			out->devices[i].restarts = s->devices[i].restarts;
			out->devices[i].in_flight = s->devices[i].in_flight;
			out->devices[i].allocations = s->devices[i].allocations;
			out->devices[i].alloc_bytes = s->devices[i].alloc_bytes;
			out->drained |= (uint64_t)(s->devices[i].drained != 0) << i;
		}
		memcpy(&out->session, &s->session, sizeof(out->session));
		memcpy(&out->total, &s->total, sizeof(out->total));
		out->insecure_listeners = s->insecure_listeners;
	}
	cuac_reply_done(&rep);
	return r;
}

int
cua_sessions(cua_client *c, cua_session_info **out, uint32_t *n)
{
	struct cuac_reply rep;
	*out = NULL;
	*n = 0;
	int r = cuac_rpc(c, CUA_OP_SESSIONS, NULL, true, &rep);
	if (r == 0) {
		const struct cua_rep_sessions *b = &rep.w.body.sessions;
		cua_session_info *rows = calloc(b->nsessions ? b->nsessions : 1, sizeof(*rows));
		for (uint32_t i = 0; rows != NULL && i < b->nsessions; i++) {
			const cua_wire_session *w = &b->sessions[i];
			rows[i] = (cua_session_info){.id = w->session,
						     .pid = w->pid,
						     .peer_pid = w->peer_pid,
						     .age_ms = w->age_ms,
						     .requests = w->requests,
						     .errors = w->errors,
						     .in_flight = w->in_flight,
						     .alloc_bytes = w->alloc_bytes,
						     .streams = w->streams,
						     .modules = w->modules,
						     .operator_endpoint = (int)w->operator,
						     .busy_ns = w->busy_ns };
			snprintf(rows[i].tenant, sizeof(rows[i].tenant), "%.*s", (int)w->tenant.len,
				 (const char *)w->tenant.ptr);
			snprintf(rows[i].client, sizeof(rows[i].client), "%.*s", (int)w->client.len,
				 (const char *)w->client.ptr);
			bool ident = w->nfields >= CUA_SESSION_FIELDS; /* an older daemon's row has none of it */
			rows[i].uid = ident ? w->uid : CUA_NO_UID;
			rows[i].gid = ident ? w->gid : CUA_NO_UID;
			snprintf(rows[i].transport, sizeof(rows[i].transport), "%.*s", (int)w->transport.len,
				 (const char *)w->transport.ptr);
			snprintf(rows[i].peer, sizeof(rows[i].peer), "%.*s", (int)w->peer.len,
				 (const char *)w->peer.ptr);
			snprintf(rows[i].token, sizeof(rows[i].token), "%.*s", (int)w->token.len,
				 (const char *)w->token.ptr);
		}
		if (rows == NULL)
			r = cuac_fail(CUA_ENOMEM, "out of memory for %u session rows", b->nsessions);
		else {
			*out = rows; /* transferred */
			*n = b->nsessions;
		}
	}
	cuac_reply_done(&rep);
	return r;
}

int
cua_disconnect_session(cua_client *c, uint64_t id)
{
	struct cua_req_disconnect q = {id};
	return cuac_call(c, CUA_OP_DISCONNECT, &q);
}

int
cua_drain_device(cua_client *c, int dev, int drain, uint32_t *holding, uint32_t *in_flight)
{
	struct cua_req_drain q = {(uint32_t)dev, drain ? 1u : 0u};
	struct cuac_reply rep;
	if (dev < 0)
		return cuac_fail(CUA_EBAD_ARGUMENT, "device %d does not exist", dev);
	int r = cuac_rpc(c, CUA_OP_DRAIN, &q, true, &rep);
	if (r == 0 && holding != NULL)
		*holding = rep.w.body.drain.holding;
	if (r == 0 && in_flight != NULL)
		*in_flight = rep.w.body.drain.in_flight;
	cuac_reply_done(&rep);
	return r;
}

int
cua_device_count(cua_client *c, int *n)
{
	pthread_mutex_lock(&c->lock);
	*n = c->ndevs;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int
cua_device_get_info(cua_client *c, int dev, cua_device_info *out)
{
	int r = cuac_load_devices(c); /* fresh: the generation moves when a context is lost */
	if (r != 0)
		return r;
	r = CUA_EBAD_ARGUMENT;
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < c->ndevs; i++)
		if (c->devs[i].index == dev) {
			*out = c->devs[i];
			r = 0;
		}
	int n = c->ndevs;
	pthread_mutex_unlock(&c->lock);
	return r == 0 ? 0 : cuac_fail(r, "no device %d (%d devices)", dev, n);
}

int
cua_device_get_attribute(cua_client *c, int dev, int attr, int *value)
{
	int r = CUA_EBAD_ARGUMENT, n;
	pthread_mutex_lock(&c->lock);
	n = c->ndevs;
	for (int i = 0; i < c->ndevs; i++) {
		const struct cuac_dev_attrs *a = c->attrs[i];
		if (c->devs[i].index != dev)
			continue;
		r = CUA_EUNSUPPORTED;
		for (uint32_t k = 0; a != NULL && k < a->n; k++)
			if (a->a[k].id == (uint32_t)attr) {
				*value = a->a[k].value;
				r = 0;
			}
	}
	pthread_mutex_unlock(&c->lock);
	if (r == CUA_EBAD_ARGUMENT)
		return cuac_fail(r, "no device %d (%d devices)", dev, n);
	return r == 0 ? 0
		      : cuac_fail(r,
				  "device %d does not report attribute %d (its driver does not answer it, or the "
				  "daemon is older than this library)",
				  dev, attr);
}

/* ------------------------------------------------------------------ modules and functions */

int
cua_module_load(cua_client *c, int dev, const void *image, size_t len, cua_module *out)
{
	if (image == NULL || len == 0 || len > UINT32_MAX)
		return cuac_fail(CUA_EBAD_ARGUMENT, "module image must be 1 byte to 4 GiB");
	struct cua_req_module_load q = {(uint32_t)dev, CUA_IMAGE_AUTO, {image, (uint32_t)len}};
	return cuac_call_u64(c, CUA_OP_MODULE_LOAD, &q, &out->id);
}

int
cua_module_load_file(cua_client *c, int dev, const char *path, cua_module *out)
{
	FILE *f = NULL;
	void *buf = NULL;
	struct stat st;
	int r;

	if ((f = fopen(path, "rb")) == NULL) {
		r = cuac_fail(CUA_EBAD_ARGUMENT, "cannot open module %s: %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fileno(f), &st) != 0 || st.st_size <= 0) {
		r = cuac_fail(CUA_EBAD_ARGUMENT, "module %s is empty or unreadable", path);
		goto out;
	}
	buf = malloc((size_t)st.st_size);
	if (buf == NULL || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		r = cuac_fail(CUA_EBAD_ARGUMENT, "cannot read module %s", path);
		goto out;
	}
	fclose(f);
	f = NULL;
	r = cua_module_load(c, dev, buf, (size_t)st.st_size, out);
out:
	if (f)
		fclose(f);
	free(buf);
	return r;
}

int
cua_module_unload(cua_client *c, cua_module m)
{
	struct cua_req_module_unload q = {m.id};
	return cuac_call(c, CUA_OP_MODULE_UNLOAD, &q);
}

/* Remembers g's parameter layout (newest first, so a reused id finds the latest). Takes c->lock. */
static int
layout_add(cua_client *c, const struct cua_rep_function_get *g)
{
	struct cuac_layout *fl = calloc(1, sizeof(*fl));
	cua_param_info *p = malloc((g->nparams ? g->nparams : 1) * sizeof(*p));
	int r;

	if (fl == NULL || p == NULL) {
		r = cuac_fail(CUA_ENOMEM, "out of memory");
		goto out;
	}
	if (g->nparams)
		memcpy(p, g->params, g->nparams * sizeof(*p));
	fl->id = g->function;
	fl->n = g->nparams;
	fl->params = p;
	p = NULL; /* transferred */
	pthread_mutex_lock(&c->lock);
	LIST_INSERT_HEAD(&c->layouts, fl, link);
	pthread_mutex_unlock(&c->lock);
	fl = NULL; /* transferred */
	r = 0;
out:
	free(fl);
	free(p);
	return r;
}

int
cua_module_get_function(cua_client *c, cua_module m, const char *name, cua_function *out)
{
	size_t n = strlen(name);
	if (n == 0 || n > CUA_MAX_NAME)
		return cuac_fail(CUA_EBAD_ARGUMENT, "kernel name must be 1..%u bytes", CUA_MAX_NAME);
	struct cua_req_function_get q = {m.id, {name, (uint32_t)n}};
	struct cuac_reply rep;
	int r = cuac_rpc(c, CUA_OP_FUNCTION_GET, &q, true, &rep);
	if (r == 0 && (r = layout_add(c, &rep.w.body.function_get)) == 0)
		out->id = rep.w.body.function_get.function;
	cuac_reply_done(&rep);
	return r;
}

int
cua_module_get_global(cua_client *c, cua_module m, const char *name, cua_deviceptr *ptr, size_t *bytes)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > CUA_MAX_GLOBAL_NAME)
		return cuac_fail(CUA_EBAD_ARGUMENT, "global name must be 1..%u bytes", CUA_MAX_GLOBAL_NAME);
	struct cua_req_module_get_global q = {m.id, {name, (uint32_t)n}};
	struct cuac_reply rep;
	int r = cuac_rpc(c, CUA_OP_MODULE_GET_GLOBAL, &q, true, &rep);
	if (r == 0) {
		if (ptr)
			*ptr = rep.w.body.module_get_global.ptr;
		if (bytes)
			*bytes = (size_t)rep.w.body.module_get_global.bytes;
	}
	cuac_reply_done(&rep);
	return r;
}

int
cua_func_get_attribute(cua_client *c, cua_function f, cua_func_attribute attr, int *value)
{
	if ((unsigned)attr > CUA_FATTR_LAST)
		return cuac_fail(CUA_EBAD_ARGUMENT, "unknown function attribute %d", (int)attr);
	struct cua_req_func_attribute q = {f.id, (uint32_t)attr, 0};
	struct cuac_reply rep;
	int r = cuac_rpc(c, CUA_OP_FUNC_GET_ATTRIBUTE, &q, true, &rep);
	if (r == 0)
		*value = rep.w.body.func_get_attribute.value;
	cuac_reply_done(&rep);
	return r;
}

int
cua_func_set_attribute(cua_client *c, cua_function f, cua_func_attribute attr, int value)
{
	if ((unsigned)attr > CUA_FATTR_LAST)
		return cuac_fail(CUA_EBAD_ARGUMENT, "unknown function attribute %d", (int)attr);
	struct cua_req_func_attribute q = {f.id, (uint32_t)attr, value};
	return cuac_call(c, CUA_OP_FUNC_SET_ATTRIBUTE, &q);
}

int
cua_occupancy_max_active_blocks(cua_client *c, cua_function f, unsigned block_size, size_t dyn_smem, int *blocks)
{
	if (dyn_smem > UINT32_MAX)
		return cuac_fail(CUA_EBAD_ARGUMENT, "dynamic shared memory of %zu bytes", dyn_smem);
	struct cua_req_occupancy q = {f.id, block_size, (uint32_t)dyn_smem};
	struct cuac_reply rep;
	int r = cuac_rpc(c, CUA_OP_OCCUPANCY, &q, true, &rep);
	if (r == 0)
		*blocks = (int)rep.w.body.occupancy.blocks;
	cuac_reply_done(&rep);
	return r;
}

int
cua_function_get_params(cua_client *c, cua_function f, uint32_t *n, uint32_t *offsets, uint32_t *sizes)
{
	int r = cuac_fail(CUA_ENOT_FOUND, "function 0x%llx was not looked up by this client", (unsigned long long)f.id);
	struct cuac_layout *fl;
	pthread_mutex_lock(&c->lock);
	LIST_FOREACH(fl, &c->layouts, link)
	{
		if (fl->id != f.id)
			continue;
		for (uint32_t i = 0; i < fl->n && offsets && sizes; i++) {
			offsets[i] = fl->params[i].offset;
			sizes[i] = fl->params[i].size;
		}
		*n = fl->n;
		r = 0;
		break;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

void
cuac_layouts_fini(cua_client *c)
{
	struct cuac_layout *fl;
	while ((fl = LIST_FIRST(&c->layouts)) != NULL) {
		LIST_REMOVE(fl, link);
		free(fl->params);
		free(fl);
	}
}

/* ------------------------------------------------------------------ memory and copies */

int
cua_mem_alloc(cua_client *c, int dev, size_t bytes, cua_deviceptr *out)
{
	struct cua_req_mem_alloc q = {(uint32_t)dev, bytes};
	return cuac_call_u64(c, CUA_OP_MEM_ALLOC, &q, out);
}

int
cua_mem_free(cua_client *c, cua_deviceptr p)
{
	struct cua_req_mem_free q = {p};
	return cuac_call(c, CUA_OP_MEM_FREE, &q);
}

int
cua_memcpy_htod_on(cua_client *c, cua_deviceptr dst, const void *src, size_t bytes, cua_stream s)
{
	if (bytes == 0)
		return 0;
	cuac_wait_sent(c); /* launches submitted before it go out first: on one stream they run first */
	uint64_t hb, hoff;
	if (cuac_host_lookup(c, src, bytes, &hb, &hoff)) {
		struct cua_req_memcpy_host q = {dst, cuac_stream(c, s), hb, hoff, bytes};
		int r = cuac_call(c, CUA_OP_MEMCPY_HTOD_HOST, &q);
		if (r != CUA_EBAD_ARGUMENT) /* else: registered for another device; go through the socket */
			return r;
	}
	int r;
	if (cuac_staged_copy(c, CUA_OP_MEMCPY_HTOD_HOST, dst, (void *)(uintptr_t)src, bytes, s, &r))
		return r;
	for (size_t off = 0; off < bytes; off += COPY_CHUNK) {
		size_t n = bytes - off < COPY_CHUNK ? bytes - off : COPY_CHUNK;
		struct cua_req_memcpy_htod q = {dst + off, cuac_stream(c, s), {(const char *)src + off, (uint32_t)n}};
		r = cuac_call(c, CUA_OP_MEMCPY_HTOD, &q);
		if (r != 0)
			return r;
	}
	return 0;
}

int
cua_memcpy_htod(cua_client *c, cua_deviceptr dst, const void *src, size_t bytes)
{
	return cua_memcpy_htod_on(c, dst, src, bytes, CUA_STREAM_DEFAULT);
}

/* One MEMCPY_DTOH message of n bytes into dst. */
static int
dtoh_chunk(cua_client *c, void *dst, cua_deviceptr src, size_t n, cua_stream s)
{
	struct cua_req_memcpy_dtoh q = {src, n, cuac_stream(c, s)};
	struct cuac_reply rep;
	int r = cuac_rpc(c, CUA_OP_MEMCPY_DTOH, &q, true, &rep);
	if (r == 0) {
		const cua_bytes *data = &rep.w.body.memcpy_dtoh.data;
		if (data->len != n)
			r = cuac_fail(CUA_EPROTOCOL, "daemon returned %u bytes for a %zu-byte copy", data->len, n);
		else
			memcpy(dst, data->ptr, n);
	}
	cuac_reply_done(&rep);
	return r;
}

int
cua_memcpy_dtoh_on(cua_client *c, void *dst, cua_deviceptr src, size_t bytes, cua_stream s)
{
	cuac_wait_sent(c); /* launches submitted before it go out first: on one stream they run first */
	uint64_t hb, hoff;
	if (bytes > 0 && cuac_host_lookup(c, dst, bytes, &hb, &hoff)) {
		struct cua_req_memcpy_host q = {src, cuac_stream(c, s), hb, hoff, bytes};
		int r = cuac_call(c, CUA_OP_MEMCPY_DTOH_HOST, &q);
		if (r != CUA_EBAD_ARGUMENT)
			return r;
	}
	int r;
	if (cuac_staged_copy(c, CUA_OP_MEMCPY_DTOH_HOST, src, dst, bytes, s, &r))
		return r;
	for (size_t off = 0; off < bytes; off += COPY_CHUNK) {
		size_t n = bytes - off < COPY_CHUNK ? bytes - off : COPY_CHUNK;
		r = dtoh_chunk(c, (char *)dst + off, src + off, n, s);
		if (r != 0)
			return r;
	}
	return 0;
}

int
cua_memcpy_dtoh(cua_client *c, void *dst, cua_deviceptr src, size_t bytes)
{
	return cua_memcpy_dtoh_on(c, dst, src, bytes, CUA_STREAM_DEFAULT);
}

int
cua_memcpy_dtod(cua_client *c, cua_deviceptr dst, cua_deviceptr src, size_t bytes)
{
	struct cua_req_memcpy_dtod q = {dst, src, bytes, cuac_stream(c, CUA_STREAM_DEFAULT)};
	cuac_wait_sent(c);
	return cuac_call(c, CUA_OP_MEMCPY_DTOD, &q);
}

int
cua_memset(cua_client *c, cua_deviceptr dst, uint32_t value, unsigned width, size_t count)
{
	struct cua_req_memset q = {dst, value, width, count, cuac_stream(c, CUA_STREAM_DEFAULT)};
	cuac_wait_sent(c);
	return cuac_call(c, CUA_OP_MEMSET, &q);
}

/* ------------------------------------------------------------------ streams and synchronisation */

int
cua_stream_create(cua_client *c, int dev, int priority, cua_stream *out)
{
	struct cua_req_stream_create q = {(uint32_t)dev, priority, 0};
	return cuac_call_u64(c, CUA_OP_STREAM_CREATE, &q, &out->id);
}

int
cua_set_default_stream(cua_client *c, cua_stream s)
{
	if (s.id == 0)
		return cuac_fail(CUA_EBAD_ARGUMENT,
				 "CUA_STREAM_DEFAULT names the default itself: choose CUA_STREAM_POOL, "
				 "CUA_STREAM_ORDERED or a stream");
	atomic_store(&c->default_stream, s.id);
	return 0;
}

int
cua_stream_destroy(cua_client *c, cua_stream s)
{
	struct cua_req_stream q = {cuac_stream(c, s)};
	return cuac_call(c, CUA_OP_STREAM_DESTROY, &q);
}

int
cua_stream_synchronize(cua_client *c, cua_stream s)
{
	cuac_wait_sent(c);
	struct cua_req_stream q = {cuac_stream(c, s)};
	return cuac_call(c, CUA_OP_STREAM_SYNC, &q);
}

int
cua_synchronize(cua_client *c)
{
	char msg[sizeof(c->deferred_msg)];
	int local = cuac_wait_idle(c, true, msg, sizeof(msg));
	int r = cuac_call(c, CUA_OP_SYNCHRONIZE, NULL);
	if (local != CUA_OK)
		return cuac_fail(local, "%s", msg);
	return r;
}

/* ---- tenants at run time */

/* kv ("key", "value", ..., NULL) as wire pairs into v (room for CUA_MAX_TENANT_KV). 0 or BAD_ARGUMENT. */
static int
tenant_pairs(const char *const *kv, cua_wire_kv *v, uint32_t *n)
{
	*n = 0;
	for (size_t i = 0; kv != NULL && kv[i] != NULL; i += 2) {
		if (kv[i + 1] == NULL)
			return cuac_fail(CUA_EBAD_ARGUMENT, "key '%s' has no value (kv is key, value, ..., NULL)",
					 kv[i]);
		if (*n == CUA_MAX_TENANT_KV)
			return cuac_fail(CUA_EBAD_ARGUMENT, "more than %u key/value pairs", CUA_MAX_TENANT_KV);
		v[(*n)++] = (cua_wire_kv){{kv[i], (uint32_t)strlen(kv[i])}, {kv[i + 1], (uint32_t)strlen(kv[i + 1])}};
	}
	return 0;
}

static cua_bytes
name_bytes(const char *name)
{
	return (cua_bytes){name ? name : "", name ? (uint32_t)strlen(name) : 0};
}

int
cua_tenant_add(cua_client *c, const char *name, const char *const *kv, char *token_out, size_t token_len)
{
	cua_wire_kv v[CUA_MAX_TENANT_KV];
	struct cua_req_tenant q = {name_bytes(name), v, 0, token_out ? CUA_TENANT_ONE_OFF_TOKEN : 0};
	struct cuac_reply rep;
	if (token_out != NULL && token_len < 65)
		return cuac_fail(CUA_EBAD_ARGUMENT, "token_out needs room for 65 bytes (64 hex digits and a NUL)");
	int r = tenant_pairs(kv, v, &q.nkv);
	if (r != 0)
		return r;
	r = cuac_rpc(c, CUA_OP_TENANT_ADD, &q, true, &rep);
	if (r == 0 && token_out != NULL) {
		const cua_bytes *t = &rep.w.body.tenant_add.token;
		if (t->len >= token_len)
			r = cuac_fail(CUA_EPROTOCOL, "the daemon's token is longer than %zu bytes", token_len - 1);
		else
			snprintf(token_out, token_len, "%.*s", (int)t->len, (const char *)t->ptr);
	}
	cuac_reply_done(&rep);
	return r;
}

int
cua_tenant_set(cua_client *c, const char *name, const char *const *kv)
{
	cua_wire_kv v[CUA_MAX_TENANT_KV];
	struct cua_req_tenant q = {name_bytes(name), v, 0, 0};
	int r = tenant_pairs(kv, v, &q.nkv);
	return r != 0 ? r : cuac_call(c, CUA_OP_TENANT_SET, &q);
}

int
cua_tenant_remove(cua_client *c, const char *name, int drain)
{
	struct cua_req_tenant q = {name_bytes(name), NULL, 0, drain ? CUA_TENANT_DRAIN : 0};
	return cuac_call(c, CUA_OP_TENANT_REMOVE, &q);
}

/* A wire string into a fixed field, cut to fit. */
static void
bytes_to(char *out, size_t cap, const cua_bytes *b)
{
	snprintf(out, cap, "%.*s", (int)b->len, (const char *)b->ptr);
}

int
cua_tenant_list(cua_client *c, cua_tenant_info **out, uint32_t *n)
{
	struct cuac_reply rep;
	*out = NULL;
	*n = 0;
	int r = cuac_rpc(c, CUA_OP_TENANT_LIST, NULL, true, &rep);
	if (r == 0) {
		const struct cua_rep_tenant_list *b = &rep.w.body.tenant_list;
		cua_tenant_info *rows = calloc(b->ntenants ? b->ntenants : 1, sizeof(*rows));
		for (uint32_t i = 0; rows != NULL && i < b->ntenants; i++) {
			const cua_wire_tenant *w = &b->tenants[i];
			cua_tenant_info *t = &rows[i];
			bytes_to(t->name, sizeof(t->name), &w->name);
			bytes_to(t->source, sizeof(t->source), &w->source);
			bytes_to(t->rule, sizeof(t->rule), &w->rule);
			for (uint32_t k = 0; k < w->nlimits && t->nlimits < 16; k++, t->nlimits++) {
				bytes_to(t->limits[k].key, sizeof(t->limits[k].key), &w->limits[k].key);
				bytes_to(t->limits[k].value, sizeof(t->limits[k].value), &w->limits[k].value);
			}
			t->removing = (int)w->removing;
			t->sessions = w->sessions;
			t->mem_bytes = w->mem_bytes;
			t->streams = w->streams;
		}
		if (rows == NULL)
			r = cuac_fail(CUA_ENOMEM, "out of memory for %u tenant rows", b->ntenants);
		else {
			*out = rows;
			*n = b->ntenants;
		}
	}
	cuac_reply_done(&rep);
	return r;
}
