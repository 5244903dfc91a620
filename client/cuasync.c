/*
 * cuasync.c — libcuasync: synchronous calls over one REQ context each, and asynchronous launches that are
 * coalesced into BATCH messages while earlier ones are in flight.
 *
 * Locking: c->lock guards the pending-launch queue, the in-flight batch count and every future's state.
 * NNG aio callbacks take it; no NNG call that waits is made while holding it.
 */
#include "config.h"

#include "cua_arena.h"
#include "cua_error.h"
#include "cua_nngmsg.h"
#include "cua_wire.h"
#include "cuasync.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 120000
#define MAX_INFLIGHT_BATCHES 4
#define MAX_ARG_SLOTS CUA_ARENA_INLINE

static _Thread_local char last_error[CUA_MAX_MESSAGE_TEXT / 16];

const char *
cua_last_error(void)
{
	return last_error;
}

static int
fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int
fail(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return status;
}

/* ------------------------------------------------------------------ types */

struct cua_future {
	cua_client *c;
	bool done, abandoned;
	int status;
	char *error;
	size_t nitems, remaining;
	int *item_status;
	char **item_msg;
	void **dtoh_dst; /* per item: where DTOH data goes */
	size_t *dtoh_len;
};

struct cua_launch {
	cua_client *c;
	cua_function f;
	cua_launch_config cfg;
	bool has_cfg;
	cua_stream stream;
	uint32_t flags;
	cua_arena vals;
	uint32_t sizes_inline[MAX_ARG_SLOTS];
	uint8_t kinds_inline[MAX_ARG_SLOTS];
	uint32_t *sizes;
	uint8_t *kinds;
	size_t nargs, cap;
	int error; /* first push error, reported at submit */
};

/* One item waiting to be sent, and whose future it feeds. */
struct pending {
	cua_batch_item item;
	cua_launch *launch;   /* LAUNCH items: owns the argument storage */
	const void *htod_src; /* HTOD: copied when encoded */
	cua_future *fut;      /* NULL: fire-and-forget */
	size_t fut_idx;
	struct pending *next;
};

struct cua_batch {
	cua_client *c;
	struct pending *head, *tail;
	size_t n;
};

/* One BATCH message in flight. */
struct flight {
	cua_client *c;
	nng_ctx ctx;
	nng_aio *aio;
	bool receiving;
	struct pending *items;
	size_t n;
	cua_wire_arg *args; /* scratch for encoding */
};

struct cua_client {
	nng_socket sock;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int timeout_ms;
	uint64_t session;
	cua_device_info devs[CUA_MAX_DEVICES];
	int ndevs;
	struct pending *qhead, *qtail;
	size_t queued;
	unsigned inflight;
	uint64_t seq; /* last sequence number sent: requests are handled by the daemon in this order */
	int deferred_status;
	char deferred_msg[256];
	struct fn_layout *layouts; /* parameter layouts of the functions looked up, newest first */
	struct host_buffer *hostbufs;
};

struct host_buffer {
	unsigned char *p;
	size_t len;
	int fd;
	int dev;
	uint64_t handle;
	struct host_buffer *next;
};

struct fn_layout {
	uint64_t id;
	uint32_t n;
	cua_param_info *params;
	struct fn_layout *next;
};

/* ------------------------------------------------------------------ synchronous calls */

static int
nng_status(int rv)
{
	switch (rv) {
	case NNG_ETIMEDOUT: return CUA_ETIMEOUT;
	case NNG_ECLOSED: return CUA_ECLOSED;
	case NNG_ENOMEM: return CUA_ENOMEM;
	case NNG_EMSGSIZE: return CUA_ETOO_LARGE;
	default: return CUA_ETRANSPORT;
	}
}

static int
open_ctx(cua_client *c, nng_ctx *ctx)
{
	int rv = nng_ctx_open(ctx, c->sock);
	if (rv != 0)
		return fail(nng_status(rv), "cannot open a request context: %s", nng_strerror(rv));
	/* Requests are not idempotent: never resend. */
	nng_ctx_set_ms(*ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	return 0;
}

static void send_in_order(cua_client *c, nng_ctx ctx, nng_aio *aio, nng_msg *m);
static int rpc_ordered(cua_client *c, uint32_t op, const void *body, cua_wire_reply *reply, nng_msg **keep,
		       bool ordered);

/* Sends a request and waits for its reply. On CUA_OK, *reply is decoded and *keep owns its bytes (free with
 * nng_msg_free after using the reply). On failure last_error says why. */
static int
rpc(cua_client *c, uint32_t op, const void *body, cua_wire_reply *reply, nng_msg **keep)
{
	return rpc_ordered(c, op, body, reply, keep, true);
}

/* Stamps m with the session's next sequence number and sends it; the daemon then handles requests in the
 * order they were sent, whichever of its contexts receives them first. Caller holds c->lock. */
static void
send_in_order(cua_client *c, nng_ctx ctx, nng_aio *aio, nng_msg *m)
{
	cua_wire_patch_seq(nng_msg_body(m), nng_msg_len(m), ++c->seq);
	nng_aio_set_msg(aio, m);
	nng_ctx_send(ctx, aio);
}

/* rpc() with a choice: ordered requests carry the next sequence number, HELLO goes unordered (seq 0). */
static int
rpc_ordered(cua_client *c, uint32_t op, const void *body, cua_wire_reply *reply, nng_msg **keep, bool ordered)
{
	nng_ctx ctx;
	nng_aio *aio = NULL;
	nng_msg *m = NULL;
	int r = open_ctx(c, &ctx), rv;
	*keep = NULL;
	memset(reply, 0, sizeof(*reply));
	if (r != 0)
		return r;
	if ((rv = nng_aio_alloc(&aio, NULL, NULL)) != 0 || (rv = nng_msg_alloc(&m, 0)) != 0) {
		r = fail(CUA_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = cua_wire_pack_request(cua_nngmsg_out(m), op, 0, body)) != 0) {
		r = fail(r, "cannot encode the request");
		goto out;
	}
	nng_aio_set_timeout(aio, c->timeout_ms);
	if (ordered) {
		pthread_mutex_lock(&c->lock);
		send_in_order(c, ctx, aio, m);
		pthread_mutex_unlock(&c->lock);
	} else {
		nng_aio_set_msg(aio, m);
		nng_ctx_send(ctx, aio);
	}
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) != 0) {
		r = fail(nng_status(rv), "sending to cuasyncd: %s", nng_strerror(rv));
		goto out; /* m still ours */
	}
	m = NULL;
	nng_ctx_recv(ctx, aio);
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) != 0) {
		r = fail(nng_status(rv), "waiting for cuasyncd: %s", nng_strerror(rv));
		goto out;
	}
	m = nng_aio_get_msg(aio);
	cua_err e;
	cua_err_clear(&e);
	cua_wire_reply_free(reply);
	if ((r = cua_wire_decode_reply(nng_msg_body(m), nng_msg_len(m), reply, &e)) != 0) {
		r = fail(r, "undecodable reply from cuasyncd: %s", e.detail);
		goto out;
	}
	if (reply->status != CUA_OK) {
		r = fail((int)reply->status, "%.*s", (int)reply->message.len, (const char *)reply->message.ptr);
		goto out;
	}
	*keep = m;
	m = NULL;
	r = 0;
out:
	if (m)
		nng_msg_free(m);
	if (aio)
		nng_aio_free(aio);
	nng_ctx_close(ctx);
	return r;
}

/* Releases a reply obtained from rpc(). */
static void
reply_done(cua_wire_reply *rep, nng_msg *keep)
{
	cua_wire_reply_free(rep);
	if (keep)
		nng_msg_free(keep);
}

/* A call whose reply body is not needed. */
static int
call(cua_client *c, uint32_t op, const void *body)
{
	cua_wire_reply rep;
	nng_msg *keep;
	int r = rpc(c, op, body, &rep, &keep);
	reply_done(&rep, keep);
	return r;
}

/* A call whose reply body is one u64 (handles, pointers). */
static int
call_u64(cua_client *c, uint32_t op, const void *body, uint64_t *out)
{
	cua_wire_reply rep;
	nng_msg *keep;
	int r = rpc(c, op, body, &rep, &keep);
	if (r == 0)
		memcpy(out, &rep.body, sizeof(*out)); /* every one-u64 reply body starts with that u64 */
	reply_done(&rep, keep);
	return r;
}

/* ------------------------------------------------------------------ connection */

static const char *
default_url(char *buf, size_t len)
{
	const char *env = getenv("CUASYNC_URL");
	if (env && *env)
		return env;
	if (geteuid() == 0) {
		snprintf(buf, len, "ipc:///run/cuasyncd/cuasyncd.sock");
	} else {
		const char *dir = getenv("XDG_RUNTIME_DIR");
		snprintf(buf, len, "ipc://%s/cuasyncd.sock", dir && *dir ? dir : "/tmp");
	}
	return buf;
}

static int
tls_setup(nng_dialer d, const char *url)
{
	const char *ca = getenv("CUASYNC_TLS_CA");
	nng_tls_config *cfg;
	int rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT);
	if (rv != 0)
		return rv;
	char host[256] = "";
	const char *h = strstr(url, "://");
	if (h) {
		h += 3;
		size_t n = strcspn(h, ":/");
		if (n < sizeof(host)) {
			memcpy(host, h, n);
			host[n] = '\0';
		}
	}
	if (ca && *ca) {
		if ((rv = nng_tls_config_ca_file(cfg, ca)) == 0)
			rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED);
	} else {
		rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_NONE);
	}
	if (rv == 0 && host[0])
		rv = nng_tls_config_server_name(cfg, host);
	if (rv == 0)
		rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
	nng_tls_config_free(cfg);
	return rv;
}

static int
load_devices(cua_client *c)
{
	cua_wire_reply rep;
	nng_msg *keep;
	int r = rpc(c, CUA_OP_DEVICES, NULL, &rep, &keep);
	if (r == 0) {
		const struct cua_rep_devices *d = &rep.body.devices;
		pthread_mutex_lock(&c->lock);
		c->ndevs = 0;
		for (uint32_t i = 0; i < d->ndevices && i < CUA_MAX_DEVICES; i++) {
			cua_device_info *o = &c->devs[c->ndevs++];
			memset(o, 0, sizeof(*o));
			o->index = (int)d->devices[i].index;
			snprintf(o->name, sizeof(o->name), "%.*s", (int)d->devices[i].name.len, (const char *)d->devices[i].name.ptr);
			o->sm_major = (int)d->devices[i].sm_major;
			o->sm_minor = (int)d->devices[i].sm_minor;
			o->total_mem = d->devices[i].total_mem;
			o->multiprocessors = (int)d->devices[i].multiprocessors;
			o->priority_least = d->devices[i].prio_least;
			o->priority_greatest = d->devices[i].prio_greatest;
			snprintf(o->backend, sizeof(o->backend), "%.*s", (int)d->devices[i].backend.len,
				 (const char *)d->devices[i].backend.ptr);
			o->generation = d->devices[i].generation;
		}
		pthread_mutex_unlock(&c->lock);
	}
	reply_done(&rep, keep);
	return r;
}

int
cua_connect(const char *url, cua_client **out)
{
	char buf[512];
	*out = NULL;
	last_error[0] = '\0';
	if (url == NULL)
		url = default_url(buf, sizeof(buf));
	cua_client *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return fail(CUA_ENOMEM, "out of memory");
	c->timeout_ms = DEFAULT_TIMEOUT_MS;
	const char *t = getenv("CUASYNC_TIMEOUT_MS");
	if (t && *t)
		c->timeout_ms = atoi(t);
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	int rv = nng_req0_open(&c->sock);
	if (rv != 0) {
		free(c);
		return fail(nng_status(rv), "cannot open a socket: %s", nng_strerror(rv));
	}
	nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_size(c->sock, NNG_OPT_RECVMAXSZ, CUA_WIRE_MAX_MESSAGE);
	nng_dialer d;
	if ((rv = nng_dialer_create(&d, c->sock, url)) != 0 ||
	    (strncmp(url, "tls+", 4) == 0 && (rv = tls_setup(d, url)) != 0) || (rv = nng_dialer_start(d, 0)) != 0) {
		nng_close(c->sock);
		free(c);
		return fail(nng_status(rv), "cannot connect to cuasyncd at %s: %s (is the daemon running? set $CUASYNC_URL)",
			    url, nng_strerror(rv));
	}
	struct cua_req_hello h = {CUA_PROTO_VERSION_MIN, CUA_PROTO_VERSION, {"libcuasync", 10}, (uint32_t)getpid()};
	cua_wire_reply rep;
	nng_msg *keep;
	int r;
	/* HELLO is safe to repeat: a connection reset before the daemon's socket took the pipe (a listener
	 * being restarted) loses nothing, and the dialer reconnects by itself. */
	for (int attempt = 0;; attempt++) {
		r = rpc_ordered(c, CUA_OP_HELLO, &h, &rep, &keep, false);
		if (r == 0)
			c->session = rep.body.hello.session;
		reply_done(&rep, keep);
		if (r != CUA_ETRANSPORT || attempt == 4)
			break;
	}
	if (r == 0)
		r = load_devices(c);
	if (r != 0) {
		nng_close(c->sock);
		free(c);
		return r;
	}
	*out = c;
	return 0;
}

static void flush_locked(cua_client *c);

void
cua_disconnect(cua_client *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	while (c->inflight > 0 || c->qhead != NULL) {
		if (c->inflight == 0)
			flush_locked(c);
		pthread_cond_wait(&c->cond, &c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	nng_close(c->sock); /* the daemon releases the buffers with the session */
	while (c->hostbufs) {
		struct host_buffer *hb = c->hostbufs;
		c->hostbufs = hb->next;
		munmap(hb->p, hb->len);
		close(hb->fd);
		free(hb);
	}
	while (c->layouts) {
		struct fn_layout *fl = c->layouts;
		c->layouts = fl->next;
		free(fl->params);
		free(fl);
	}
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

void
cua_set_timeout(cua_client *c, int timeout_ms)
{
	c->timeout_ms = timeout_ms < 0 ? NNG_DURATION_INFINITE : timeout_ms;
}

int
cua_ping(cua_client *c)
{
	struct cua_req_ping p = {(uint64_t)time(NULL)};
	uint64_t back = 0;
	int r = call_u64(c, CUA_OP_PING, &p, &back);
	if (r == 0 && back != p.nonce)
		return fail(CUA_EPROTOCOL, "ping answered with a different nonce");
	return r;
}

int
cua_status(cua_client *c, cua_daemon_status *out)
{
	cua_wire_reply rep;
	nng_msg *keep;
	int r = rpc(c, CUA_OP_STATUS, NULL, &rep, &keep);
	if (r == 0) {
		const struct cua_rep_status *s = &rep.body.status;
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
		}
		memcpy(&out->session, &s->session, sizeof(out->session));
		memcpy(&out->total, &s->total, sizeof(out->total));
	}
	reply_done(&rep, keep);
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
	int r = load_devices(c); /* fresh: the generation moves when a context is lost */
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
	return r == 0 ? 0 : fail(r, "no device %d (%d devices)", dev, n);
}

/* ------------------------------------------------------------------ modules, memory, streams */

int
cua_module_load(cua_client *c, int dev, const void *image, size_t len, cua_module *out)
{
	if (image == NULL || len == 0 || len > UINT32_MAX)
		return fail(CUA_EBAD_ARGUMENT, "module image must be 1 byte to 4 GiB");
	struct cua_req_module_load q = {(uint32_t)dev, CUA_IMAGE_AUTO, {image, (uint32_t)len}};
	return call_u64(c, CUA_OP_MODULE_LOAD, &q, &out->id);
}

int
cua_module_load_file(cua_client *c, int dev, const char *path, cua_module *out)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return fail(CUA_EBAD_ARGUMENT, "cannot open module %s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st) != 0 || st.st_size <= 0) {
		fclose(f);
		return fail(CUA_EBAD_ARGUMENT, "module %s is empty or unreadable", path);
	}
	void *buf = malloc((size_t)st.st_size);
	size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
	fclose(f);
	int r = got == (size_t)st.st_size ? cua_module_load(c, dev, buf, got, out)
					  : fail(CUA_EBAD_ARGUMENT, "cannot read module %s", path);
	free(buf);
	return r;
}

int
cua_module_unload(cua_client *c, cua_module m)
{
	struct cua_req_module_unload q = {m.id};
	return call(c, CUA_OP_MODULE_UNLOAD, &q);
}

int
cua_module_get_function(cua_client *c, cua_module m, const char *name, cua_function *out)
{
	size_t n = strlen(name);
	if (n == 0 || n > CUA_MAX_NAME)
		return fail(CUA_EBAD_ARGUMENT, "kernel name must be 1..%u bytes", CUA_MAX_NAME);
	struct cua_req_function_get q = {m.id, {name, (uint32_t)n}};
	cua_wire_reply rep;
	nng_msg *keep;
	int r = rpc(c, CUA_OP_FUNCTION_GET, &q, &rep, &keep);
	if (r == 0) {
		const struct cua_rep_function_get *g = &rep.body.function_get;
		struct fn_layout *fl = calloc(1, sizeof(*fl));
		cua_param_info *p = malloc((g->nparams ? g->nparams : 1) * sizeof(*p));
		if (fl == NULL || p == NULL) {
			free(fl);
			free(p);
			r = fail(CUA_ENOMEM, "out of memory");
		} else {
			if (g->nparams)
				memcpy(p, g->params, g->nparams * sizeof(*p));
			*fl = (struct fn_layout){g->function, g->nparams, p, NULL};
			out->id = g->function;
			pthread_mutex_lock(&c->lock);
			fl->next = c->layouts;
			c->layouts = fl;
			pthread_mutex_unlock(&c->lock);
		}
	}
	reply_done(&rep, keep);
	return r;
}

int
cua_function_get_params(cua_client *c, cua_function f, uint32_t *n, uint32_t *offsets, uint32_t *sizes)
{
	int r = fail(CUA_ENOT_FOUND, "function 0x%llx was not looked up by this client", (unsigned long long)f.id);
	pthread_mutex_lock(&c->lock);
	for (struct fn_layout *fl = c->layouts; fl; fl = fl->next) {
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

int
cua_mem_alloc(cua_client *c, int dev, size_t bytes, cua_deviceptr *out)
{
	struct cua_req_mem_alloc q = {(uint32_t)dev, bytes};
	return call_u64(c, CUA_OP_MEM_ALLOC, &q, out);
}

int
cua_mem_free(cua_client *c, cua_deviceptr p)
{
	struct cua_req_mem_free q = {p};
	return call(c, CUA_OP_MEM_FREE, &q);
}

int
cua_host_alloc(cua_client *c, int dev, size_t bytes, void **out)
{
	*out = NULL;
	if (bytes == 0)
		return fail(CUA_EBAD_ARGUMENT, "cannot allocate 0 bytes");
	int fd = memfd_create("cuasync-host", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return fail(CUA_ENOMEM, "memfd_create: %s", strerror(errno));
	void *p = MAP_FAILED;
	/* sealed against shrinking: the daemon refuses a buffer that could vanish under the GPU worker */
	if (ftruncate(fd, (off_t)bytes) != 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
	    (p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		int err = errno;
		close(fd);
		return fail(CUA_ENOMEM, "cannot create %zu bytes of shared memory: %s", bytes, strerror(err));
	}
	struct cua_req_host_register q = {(uint32_t)dev, (uint32_t)fd, bytes};
	uint64_t h;
	int r = call_u64(c, CUA_OP_HOST_REGISTER, &q, &h);
	struct host_buffer *hb = r == 0 ? malloc(sizeof(*hb)) : NULL;
	if (hb == NULL) {
		munmap(p, bytes);
		close(fd);
		return r != 0 ? r : fail(CUA_ENOMEM, "out of memory");
	}
	*hb = (struct host_buffer){p, bytes, fd, dev, h, NULL};
	pthread_mutex_lock(&c->lock);
	hb->next = c->hostbufs;
	c->hostbufs = hb;
	pthread_mutex_unlock(&c->lock);
	*out = p;
	return 0;
}

int
cua_host_free(cua_client *c, void *p)
{
	pthread_mutex_lock(&c->lock);
	struct host_buffer **pp = &c->hostbufs, *hb = NULL;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->p == p) {
			hb = *pp;
			*pp = hb->next;
			break;
		}
	pthread_mutex_unlock(&c->lock);
	if (hb == NULL)
		return fail(CUA_ENOT_FOUND, "%p is not a host buffer of this client", p);
	struct cua_req_host_unregister q = {hb->handle};
	int r = call(c, CUA_OP_HOST_UNREGISTER, &q); /* waits until no copy uses it */
	munmap(hb->p, hb->len);
	close(hb->fd);
	free(hb);
	return r == CUA_ECONTEXT_LOST ? 0 : r;
}

/* The registered buffer holding [p, p+len), if any: its handle and the offset of p. */
static int
host_lookup(cua_client *c, const void *p, size_t len, uint64_t *handle, uint64_t *off)
{
	int found = 0;
	pthread_mutex_lock(&c->lock);
	for (struct host_buffer *hb = c->hostbufs; hb; hb = hb->next) {
		const unsigned char *q = p;
		if (q >= hb->p && (size_t)(q - hb->p) <= hb->len && len <= hb->len - (size_t)(q - hb->p)) {
			*handle = hb->handle;
			*off = (uint64_t)(q - hb->p);
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

/* The largest copy one message carries; bigger copies are split. */
#define COPY_CHUNK ((size_t)32 << 20)

int
cua_memcpy_htod_on(cua_client *c, cua_deviceptr dst, const void *src, size_t bytes, cua_stream s)
{
	if (bytes == 0)
		return 0;
	uint64_t hb, hoff;
	if (host_lookup(c, src, bytes, &hb, &hoff)) {
		struct cua_req_memcpy_host q = {dst, s.id, hb, hoff, bytes};
		int r = call(c, CUA_OP_MEMCPY_HTOD_HOST, &q);
		if (r != CUA_EBAD_ARGUMENT) /* else: registered for another device; go through the socket */
			return r;
	}
	for (size_t off = 0; off < bytes; off += COPY_CHUNK) {
		size_t n = bytes - off < COPY_CHUNK ? bytes - off : COPY_CHUNK;
		struct cua_req_memcpy_htod q = {dst + off, s.id, {(const char *)src + off, (uint32_t)n}};
		int r = call(c, CUA_OP_MEMCPY_HTOD, &q);
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

int
cua_memcpy_dtoh_on(cua_client *c, void *dst, cua_deviceptr src, size_t bytes, cua_stream s)
{
	uint64_t hb, hoff;
	if (bytes > 0 && host_lookup(c, dst, bytes, &hb, &hoff)) {
		struct cua_req_memcpy_host q = {src, s.id, hb, hoff, bytes};
		int r = call(c, CUA_OP_MEMCPY_DTOH_HOST, &q);
		if (r != CUA_EBAD_ARGUMENT)
			return r;
	}
	for (size_t off = 0; off < bytes; off += COPY_CHUNK) {
		size_t n = bytes - off < COPY_CHUNK ? bytes - off : COPY_CHUNK;
		struct cua_req_memcpy_dtoh q = {src + off, n, s.id};
		cua_wire_reply rep;
		nng_msg *keep;
		int r = rpc(c, CUA_OP_MEMCPY_DTOH, &q, &rep, &keep);
		if (r == 0) {
			if (rep.body.memcpy_dtoh.data.len != n)
				r = fail(CUA_EPROTOCOL, "daemon returned %u bytes for a %zu-byte copy",
					 rep.body.memcpy_dtoh.data.len, n);
			else
				memcpy((char *)dst + off, rep.body.memcpy_dtoh.data.ptr, n);
		}
		reply_done(&rep, keep);
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
	struct cua_req_memcpy_dtod q = {dst, src, bytes, 0};
	return call(c, CUA_OP_MEMCPY_DTOD, &q);
}

int
cua_memset(cua_client *c, cua_deviceptr dst, uint32_t value, unsigned width, size_t count)
{
	struct cua_req_memset q = {dst, value, width, count, 0};
	return call(c, CUA_OP_MEMSET, &q);
}

int
cua_stream_create(cua_client *c, int dev, int priority, cua_stream *out)
{
	struct cua_req_stream_create q = {(uint32_t)dev, priority, 0};
	return call_u64(c, CUA_OP_STREAM_CREATE, &q, &out->id);
}

int
cua_stream_destroy(cua_client *c, cua_stream s)
{
	struct cua_req_stream q = {s.id};
	return call(c, CUA_OP_STREAM_DESTROY, &q);
}

/* Waits until every launch queued in this client has been sent (its reply may still be pending). */
static void
drain_queue(cua_client *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->qhead != NULL) {
		if (c->inflight == 0)
			flush_locked(c);
		else
			pthread_cond_wait(&c->cond, &c->lock);
	}
	pthread_mutex_unlock(&c->lock);
}

int
cua_stream_synchronize(cua_client *c, cua_stream s)
{
	drain_queue(c);
	struct cua_req_stream q = {s.id};
	return call(c, CUA_OP_STREAM_SYNC, &q);
}

int
cua_synchronize(cua_client *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->qhead != NULL || c->inflight > 0) {
		if (c->inflight == 0)
			flush_locked(c);
		else
			pthread_cond_wait(&c->cond, &c->lock);
	}
	int local = c->deferred_status;
	char msg[sizeof(c->deferred_msg)];
	memcpy(msg, c->deferred_msg, sizeof(msg));
	c->deferred_status = CUA_OK;
	pthread_mutex_unlock(&c->lock);
	int r = call(c, CUA_OP_SYNCHRONIZE, NULL);
	if (local != CUA_OK)
		return fail(local, "%s", msg);
	return r;
}

/* ------------------------------------------------------------------ futures */

static cua_future *
future_new(cua_client *c, size_t n)
{
	cua_future *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return NULL;
	f->c = c;
	f->nitems = f->remaining = n;
	f->item_status = calloc(n, sizeof(*f->item_status));
	f->item_msg = calloc(n, sizeof(*f->item_msg));
	f->dtoh_dst = calloc(n, sizeof(*f->dtoh_dst));
	f->dtoh_len = calloc(n, sizeof(*f->dtoh_len));
	if (!f->item_status || !f->item_msg || !f->dtoh_dst || !f->dtoh_len) {
		free(f->item_status);
		free(f->item_msg);
		free(f->dtoh_dst);
		free(f->dtoh_len);
		free(f);
		return NULL;
	}
	return f;
}

static void
future_destroy(cua_future *f)
{
	for (size_t i = 0; i < f->nitems; i++)
		free(f->item_msg[i]);
	free(f->item_status);
	free(f->item_msg);
	free(f->dtoh_dst);
	free(f->dtoh_len);
	free(f->error);
	free(f);
}

/* Records item i's result. Caller holds c->lock. */
static void
future_item_done(cua_future *f, size_t i, int status, const char *msg, size_t msglen)
{
	f->item_status[i] = status;
	if (status != CUA_OK) {
		f->item_msg[i] = strndup(msg, msglen);
		if (f->status == CUA_OK) {
			f->status = status;
			f->error = strndup(msg, msglen);
		}
	}
	if (--f->remaining == 0) {
		f->done = true;
		if (f->abandoned)
			future_destroy(f);
	}
}

int
cua_future_poll(cua_future *f)
{
	pthread_mutex_lock(&f->c->lock);
	int d = f->done;
	pthread_mutex_unlock(&f->c->lock);
	return d;
}

int
cua_future_wait(cua_future *f, int timeout_ms)
{
	cua_client *c = f->c;
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	if (timeout_ms >= 0) {
		dl.tv_sec += timeout_ms / 1000;
		dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&c->lock);
	while (!f->done) {
		/* launches still queued in the client must go out for this one to complete */
		if (c->inflight == 0 && c->qhead != NULL)
			flush_locked(c);
		int rc = timeout_ms < 0 ? pthread_cond_wait(&c->cond, &c->lock)
					: pthread_cond_timedwait(&c->cond, &c->lock, &dl);
		if (rc == ETIMEDOUT && !f->done) {
			pthread_mutex_unlock(&c->lock);
			return fail(CUA_ETIMEOUT, "the work did not complete within %d ms", timeout_ms);
		}
	}
	int st = f->status;
	pthread_mutex_unlock(&c->lock);
	if (st != CUA_OK)
		fail(st, "%s", f->error ? f->error : "");
	return st;
}

int
cua_future_status(cua_future *f)
{
	return f->status;
}

const char *
cua_future_error(cua_future *f)
{
	return f->error ? f->error : "";
}

size_t
cua_future_items(cua_future *f)
{
	return f->nitems;
}

int
cua_future_item(cua_future *f, size_t i, const char **message)
{
	if (i >= f->nitems)
		return CUA_EBAD_ARGUMENT;
	if (message)
		*message = f->item_msg[i] ? f->item_msg[i] : "";
	return f->item_status[i];
}

void
cua_future_free(cua_future *f)
{
	if (f == NULL)
		return;
	cua_client *c = f->c;
	pthread_mutex_lock(&c->lock);
	if (f->done)
		future_destroy(f);
	else
		f->abandoned = true;
	pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------------ launch builder */

cua_launch *
cua_launch_new(cua_client *c, cua_function f)
{
	cua_launch *l = calloc(1, sizeof(*l));
	if (l == NULL)
		return NULL;
	l->c = c;
	l->f = f;
	cua_arena_init(&l->vals);
	l->sizes = l->sizes_inline;
	l->kinds = l->kinds_inline;
	l->cap = MAX_ARG_SLOTS;
	return l;
}

void
cua_launch_free(cua_launch *l)
{
	if (l == NULL)
		return;
	cua_arena_fini(&l->vals);
	if (l->sizes != l->sizes_inline)
		free(l->sizes);
	if (l->kinds != l->kinds_inline)
		free(l->kinds);
	free(l);
}

static int
push(cua_launch *l, const void *v, size_t size, uint8_t kind)
{
	if (l->error)
		return l->error;
	if (size == 0 || size > CUA_MAX_ARG_BYTES)
		return l->error = fail(CUA_EBAD_ARGUMENT, "argument %zu: %zu bytes (1..%u allowed)", l->nargs, size,
				       CUA_MAX_ARG_BYTES);
	if (l->nargs == CUA_MAX_ARGS)
		return l->error = fail(CUA_ETOO_LARGE, "more than %u arguments", CUA_MAX_ARGS);
	if (l->nargs == l->cap) {
		size_t cap = 2 * l->cap;
		uint32_t *s = malloc(cap * sizeof(*s));
		uint8_t *k = malloc(cap);
		if (s == NULL || k == NULL) {
			free(s);
			free(k);
			return l->error = fail(CUA_ENOMEM, "out of memory");
		}
		memcpy(s, l->sizes, l->nargs * sizeof(*s));
		memcpy(k, l->kinds, l->nargs);
		if (l->sizes != l->sizes_inline)
			free(l->sizes);
		if (l->kinds != l->kinds_inline)
			free(l->kinds);
		l->sizes = s;
		l->kinds = k;
		l->cap = cap;
	}
	int r = cua_arena_push(&l->vals, v, size);
	if (r != 0)
		return l->error = fail(r, "cannot store argument %zu", l->nargs);
	l->sizes[l->nargs] = (uint32_t)size;
	l->kinds[l->nargs] = kind;
	l->nargs++;
	return 0;
}

int cua_launch_push_arg(cua_launch *l, const void *value, size_t size) { return push(l, value, size, CUA_ARG_BYTES); }
int cua_launch_push_u8(cua_launch *l, uint8_t v) { return push(l, &v, sizeof(v), CUA_ARG_BYTES); }
int cua_launch_push_u16(cua_launch *l, uint16_t v) { return push(l, &v, sizeof(v), CUA_ARG_BYTES); }
int cua_launch_push_u32(cua_launch *l, uint32_t v) { return push(l, &v, sizeof(v), CUA_ARG_BYTES); }
int cua_launch_push_u64(cua_launch *l, uint64_t v) { return push(l, &v, sizeof(v), CUA_ARG_BYTES); }
int cua_launch_push_i32(cua_launch *l, int32_t v) { return push(l, &v, sizeof(v), CUA_ARG_BYTES); }
int cua_launch_push_i64(cua_launch *l, int64_t v) { return push(l, &v, sizeof(v), CUA_ARG_BYTES); }
int cua_launch_push_f32(cua_launch *l, float v) { return push(l, &v, sizeof(v), CUA_ARG_BYTES); }
int cua_launch_push_f64(cua_launch *l, double v) { return push(l, &v, sizeof(v), CUA_ARG_BYTES); }
int cua_launch_push_device_ptr(cua_launch *l, cua_deviceptr p) { return push(l, &p, sizeof(p), CUA_ARG_DEVPTR); }

int
cua_launch_set_config(cua_launch *l, cua_launch_config cfg)
{
	l->cfg = cfg;
	l->has_cfg = true;
	return 0;
}

int
cua_launch_set_stream(cua_launch *l, cua_stream s)
{
	l->stream = s;
	return 0;
}

int
cua_launch_programmatic_dependent_launch(cua_launch *l)
{
	l->flags |= CUA_LAUNCH_PDL;
	return 0;
}

/* Checks l and turns it into a pending batch item. */
static int
launch_item(cua_launch *l, struct pending *p);

/* A new pending item for l (zeroed, l attached), or an error after freeing l. */
static int
pending_launch(cua_launch *l, struct pending **out)
{
	*out = NULL;
	struct pending *p = calloc(1, sizeof(*p));
	int r = p ? launch_item(l, p) : fail(CUA_ENOMEM, "out of memory");
	if (r != 0) {
		free(p);
		cua_launch_free(l);
		return r;
	}
	*out = p;
	return 0;
}

static int
launch_item(cua_launch *l, struct pending *p)
{
	if (l->error)
		return l->error;
	if (!l->has_cfg)
		return fail(CUA_EBAD_ARGUMENT, "launch submitted without a configuration (cua_launch_set_config)");
	memset(p, 0, sizeof(*p));
	p->item.kind = CUA_OP_LAUNCH;
	struct cua_req_launch *q = &p->item.u.launch;
	q->function = l->f.id;
	memcpy(q->grid, l->cfg.grid, sizeof(q->grid));
	memcpy(q->block, l->cfg.block, sizeof(q->block));
	q->shared_mem = l->cfg.shared_mem_bytes;
	q->stream = l->stream.id;
	q->flags = l->flags;
	q->nargs = (uint32_t)l->nargs;
	p->launch = l;
	return 0;
}

/* ------------------------------------------------------------------ batches on the wire */

static void flight_cb(void *arg);

static void
pending_free(struct pending *p)
{
	cua_launch_free(p->launch);
	free(p);
}

/* Encodes items into a BATCH message. */
static int
encode_batch(struct pending *items, size_t n, bool no_wait, nng_msg *m)
{
	cua_batch_item *bi = calloc(n, sizeof(*bi));
	size_t nargs = 0;
	for (struct pending *p = items; p; p = p->next)
		if (p->launch)
			nargs += p->launch->nargs;
	cua_wire_arg *args = calloc(nargs ? nargs : 1, sizeof(*args));
	if (bi == NULL || args == NULL) {
		free(bi);
		free(args);
		return CUA_ENOMEM;
	}
	size_t i = 0, a = 0;
	for (struct pending *p = items; p; p = p->next, i++) {
		bi[i] = p->item;
		if (p->launch) {
			cua_launch *l = p->launch;
			bi[i].u.launch.args = &args[a];
			for (size_t k = 0; k < l->nargs; k++, a++) {
				const void *v = cua_arena_arg(&l->vals, k);
				args[a].kind = l->kinds[k];
				if (l->kinds[k] == CUA_ARG_DEVPTR)
					memcpy(&args[a].devptr, v, 8);
				else
					args[a].bytes = (cua_bytes){v, l->sizes[k]};
			}
		} else if (p->item.kind == CUA_OP_MEMCPY_HTOD) {
			bi[i].u.htod.data.ptr = p->htod_src;
		}
	}
	struct cua_req_batch b = {no_wait ? CUA_FLAG_NO_WAIT : 0, bi, (uint32_t)n};
	int r = cua_wire_pack_request(cua_nngmsg_out(m), CUA_OP_BATCH, 0, &b);
	free(bi);
	free(args);
	return r;
}

/* Fails every item of a flight that could not be sent or answered. Caller holds c->lock. */
static void
flight_fail(cua_client *c, struct flight *fl, int status, const char *msg)
{
	for (struct pending *p = fl->items; p; p = p->next)
		if (p->fut)
			future_item_done(p->fut, p->fut_idx, status, msg, strlen(msg));
		else if (c->deferred_status == CUA_OK) {
			c->deferred_status = status;
			snprintf(c->deferred_msg, sizeof(c->deferred_msg), "%s", msg);
		}
}

static void
flight_free(struct flight *fl)
{
	while (fl->items) {
		struct pending *p = fl->items;
		fl->items = p->next;
		pending_free(p);
	}
	nng_ctx_close(fl->ctx);
	/* Called from the aio's own callback: nng_aio_free would wait for that callback, so reap it. */
	nng_aio_reap(fl->aio);
	free(fl);
}

/* Sends items as one BATCH message. Caller holds c->lock; items are consumed. */
static void
send_flight(cua_client *c, struct pending *items, size_t n)
{
	struct flight *fl = calloc(1, sizeof(*fl));
	nng_msg *m = NULL;
	bool no_wait = true;
	for (struct pending *p = items; p; p = p->next)
		no_wait &= p->fut == NULL;
	int rv = 0;
	if (fl == NULL) {
		struct flight tmp = {.c = c, .items = items};
		flight_fail(c, &tmp, CUA_ENOMEM, "out of memory");
		while (items) {
			struct pending *p = items;
			items = p->next;
			pending_free(p);
		}
		return;
	}
	fl->c = c;
	fl->items = items;
	fl->n = n;
	if ((rv = nng_ctx_open(&fl->ctx, c->sock)) != 0 || (rv = nng_aio_alloc(&fl->aio, flight_cb, fl)) != 0 ||
	    (rv = nng_msg_alloc(&m, 0)) != 0 || encode_batch(items, n, no_wait, m) != 0) {
		flight_fail(c, fl, CUA_ENOMEM, "cannot build the batch message");
		if (m)
			nng_msg_free(m);
		if (fl->aio == NULL)
			nng_aio_alloc(&fl->aio, NULL, NULL);
		flight_free(fl);
		return;
	}
	nng_ctx_set_ms(fl->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	c->inflight++;
	send_in_order(c, fl->ctx, fl->aio, m);
}

/* Sends everything queued (up to the batch limit per message). Caller holds c->lock. */
static void
flush_locked(cua_client *c)
{
	while (c->qhead != NULL && c->inflight < MAX_INFLIGHT_BATCHES) {
		struct pending *head = c->qhead, *tail = head;
		size_t n = 1;
		while (tail->next && n < CUA_MAX_BATCH) {
			tail = tail->next;
			n++;
		}
		c->qhead = tail->next;
		if (c->qhead == NULL)
			c->qtail = NULL;
		tail->next = NULL;
		c->queued -= n;
		send_flight(c, head, n);
	}
}

static void
flight_cb(void *arg)
{
	struct flight *fl = arg;
	cua_client *c = fl->c;
	int rv = nng_aio_result(fl->aio);
	if (rv == 0 && !fl->receiving) {
		fl->receiving = true;
		nng_ctx_recv(fl->ctx, fl->aio);
		return;
	}
	nng_msg *m = NULL;
	cua_wire_reply rep;
	memset(&rep, 0, sizeof(rep));
	pthread_mutex_lock(&c->lock);
	if (rv != 0) {
		if (!fl->receiving) {
			nng_msg *unsent = nng_aio_get_msg(fl->aio);
			if (unsent)
				nng_msg_free(unsent);
		}
		char msg[128];
		snprintf(msg, sizeof(msg), "lost the connection to cuasyncd: %s", nng_strerror(rv));
		flight_fail(c, fl, nng_status(rv), msg);
	} else {
		m = nng_aio_get_msg(fl->aio);
		cua_err e;
		cua_err_clear(&e);
		cua_wire_reply_free(&rep);
		int r = cua_wire_decode_reply(nng_msg_body(m), nng_msg_len(m), &rep, &e);
		if (r == 0 && rep.status != CUA_OK) {
			char msg[512];
			snprintf(msg, sizeof(msg), "%.*s", (int)rep.message.len, (const char *)rep.message.ptr);
			flight_fail(c, fl, (int)rep.status, msg);
		} else if (r != 0 || rep.body.batch.nresults != fl->n) {
			flight_fail(c, fl, CUA_EPROTOCOL, r != 0 ? e.detail : "batch reply has the wrong number of results");
		} else {
			size_t i = 0;
			for (struct pending *p = fl->items; p; p = p->next, i++) {
				const cua_item_result *res = &rep.body.batch.results[i];
				if (p->fut == NULL) {
					if (res->status != CUA_OK && c->deferred_status == CUA_OK) {
						c->deferred_status = (int)res->status;
						snprintf(c->deferred_msg, sizeof(c->deferred_msg), "%.*s", (int)res->message.len,
							 (const char *)res->message.ptr);
					}
					continue;
				}
				if (res->status == CUA_OK && p->item.kind == CUA_OP_MEMCPY_DTOH) {
					void *dst = p->fut->dtoh_dst[p->fut_idx];
					if (res->data.len == p->fut->dtoh_len[p->fut_idx] && dst)
						memcpy(dst, res->data.ptr, res->data.len);
				}
				future_item_done(p->fut, p->fut_idx, (int)res->status, res->message.ptr, res->message.len);
			}
		}
	}
	c->inflight--;
	flush_locked(c);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	cua_wire_reply_free(&rep);
	if (m)
		nng_msg_free(m);
	flight_free(fl);
}

int
cua_launch_submit(cua_launch *l, cua_future **out)
{
	if (out)
		*out = NULL;
	if (l == NULL)
		return fail(CUA_EBAD_ARGUMENT, "no launch");
	cua_client *c = l->c;
	struct pending *p;
	int r = pending_launch(l, &p);
	if (r != 0)
		return r;
	if (out) {
		p->fut = future_new(c, 1);
		if (p->fut == NULL) {
			pending_free(p);
			return fail(CUA_ENOMEM, "out of memory");
		}
		*out = p->fut;
	}
	pthread_mutex_lock(&c->lock);
	if (c->qtail)
		c->qtail->next = p;
	else
		c->qhead = p;
	c->qtail = p;
	c->queued++;
	/* Send now unless enough batches are already in flight: then this one rides in the next batch. */
	flush_locked(c);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* ------------------------------------------------------------------ explicit batches */

cua_batch *
cua_batch_new(cua_client *c)
{
	cua_batch *b = calloc(1, sizeof(*b));
	if (b)
		b->c = c;
	return b;
}

static int
batch_append(cua_batch *b, struct pending *p)
{
	if (b->n == CUA_MAX_BATCH) {
		pending_free(p);
		return fail(CUA_ETOO_LARGE, "a batch holds at most %u items", CUA_MAX_BATCH);
	}
	p->next = NULL;
	p->fut_idx = b->n++;
	if (b->tail)
		b->tail->next = p;
	else
		b->head = p;
	b->tail = p;
	return 0;
}

int
cua_batch_add_launch(cua_batch *b, cua_launch *l)
{
	struct pending *p;
	int r = pending_launch(l, &p);
	return r != 0 ? r : batch_append(b, p);
}

static struct pending *
copy_item(uint32_t kind)
{
	struct pending *p = calloc(1, sizeof(*p));
	if (p)
		p->item.kind = kind;
	return p;
}

int
cua_batch_add_memcpy_htod(cua_batch *b, cua_deviceptr dst, const void *src, size_t bytes, cua_stream s)
{
	struct pending *p = copy_item(CUA_OP_MEMCPY_HTOD);
	if (p == NULL)
		return fail(CUA_ENOMEM, "out of memory");
	if (bytes > UINT32_MAX) {
		free(p);
		return fail(CUA_ETOO_LARGE, "copy too large for one batch item");
	}
	p->item.u.htod = (struct cua_req_memcpy_htod){dst, s.id, {src, (uint32_t)bytes}};
	p->htod_src = src;
	return batch_append(b, p);
}

struct dtoh_target {
	void *dst;
	size_t len;
};

int
cua_batch_add_memcpy_dtoh(cua_batch *b, void *dst, cua_deviceptr src, size_t bytes, cua_stream s)
{
	struct pending *p = copy_item(CUA_OP_MEMCPY_DTOH);
	if (p == NULL)
		return fail(CUA_ENOMEM, "out of memory");
	p->item.u.dtoh = (struct cua_req_memcpy_dtoh){src, bytes, s.id};
	p->htod_src = dst; /* remembered until the future exists: see cua_batch_submit */
	return batch_append(b, p);
}

int
cua_batch_add_memcpy_dtod(cua_batch *b, cua_deviceptr dst, cua_deviceptr src, size_t bytes, cua_stream s)
{
	struct pending *p = copy_item(CUA_OP_MEMCPY_DTOD);
	if (p == NULL)
		return fail(CUA_ENOMEM, "out of memory");
	p->item.u.dtod = (struct cua_req_memcpy_dtod){dst, src, bytes, s.id};
	return batch_append(b, p);
}

int
cua_batch_add_memset(cua_batch *b, cua_deviceptr dst, uint32_t value, unsigned width, size_t count, cua_stream s)
{
	struct pending *p = copy_item(CUA_OP_MEMSET);
	if (p == NULL)
		return fail(CUA_ENOMEM, "out of memory");
	p->item.u.memset = (struct cua_req_memset){dst, value, width, count, s.id};
	return batch_append(b, p);
}

size_t
cua_batch_count(const cua_batch *b)
{
	return b->n;
}

void
cua_batch_free(cua_batch *b)
{
	if (b == NULL)
		return;
	while (b->head) {
		struct pending *p = b->head;
		b->head = p->next;
		pending_free(p);
	}
	free(b);
}

int
cua_batch_submit(cua_batch *b, cua_future **out)
{
	cua_client *c = b->c;
	if (out)
		*out = NULL;
	if (b->n == 0) {
		cua_batch_free(b);
		return fail(CUA_EBAD_ARGUMENT, "empty batch");
	}
	cua_future *f = NULL;
	if (out) {
		f = future_new(c, b->n);
		if (f == NULL) {
			cua_batch_free(b);
			return fail(CUA_ENOMEM, "out of memory");
		}
	}
	for (struct pending *p = b->head; p; p = p->next) {
		p->fut = f;
		if (p->item.kind == CUA_OP_MEMCPY_DTOH) {
			if (f) {
				f->dtoh_dst[p->fut_idx] = (void *)(uintptr_t)p->htod_src;
				f->dtoh_len[p->fut_idx] = p->item.u.dtoh.bytes;
			}
			p->htod_src = NULL;
		}
	}
	pthread_mutex_lock(&c->lock);
	send_flight(c, b->head, b->n); /* an explicit batch goes out now, as one message */
	pthread_mutex_unlock(&c->lock);
	b->head = b->tail = NULL;
	free(b);
	if (out)
		*out = f;
	return 0;
}
