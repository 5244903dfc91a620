#include "config.h"

#include "worker.h"

#include "cua_log.h"
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

/* Exit status of a worker that stopped on a sticky fault (the front-end restarts it). */
#define WORKER_EXIT_FAULT 3

void
tracker_hold(struct tracker *t)
{
	atomic_fetch_add(&t->pending, 1);
}

void
tracker_set(struct tracker *t, uint32_t idx, uint32_t status, uint64_t value, const char *detail)
{
	struct titem *it = &t->items[idx];
	it->status = status;
	it->value = value;
	free(it->detail);
	it->detail = detail && *detail ? strdup(detail) : NULL;
}

void *
wk_staging(struct wk *w, uint64_t off, uint64_t len)
{
	if (off > w->staging_size || len > w->staging_size - off)
		return NULL;
	return w->staging + off;
}

int
wk_launch_args(const struct wcmd *c, const struct wlaunch_dims **dims, cua_arena *arena)
{
	const unsigned char *p = (const unsigned char *)(c + 1), *end = (const unsigned char *)c + c->size;
	if ((size_t)(end - p) < sizeof(**dims))
		return CUA_EINTERNAL;
	*dims = (const struct wlaunch_dims *)p;
	p += sizeof(**dims);
	for (uint64_t i = 0; i < c->c; i++) {
		uint32_t sz;
		if ((size_t)(end - p) < 8)
			return CUA_EINTERNAL;
		memcpy(&sz, p, 4);
		if ((size_t)(end - p) - 8 < w_align8(sz))
			return CUA_EINTERNAL;
		int r = cua_arena_push(arena, p + 8, sz);
		if (r != 0)
			return r;
		p += 8 + w_align8(sz);
	}
	return 0;
}

void *
wk_copy_host(struct wk *w, const struct wcmd *c)
{
	if (c->format == 0)
		return wk_staging(w, c->b, c->c);
	if (c->format > w->nhostbufs || w->hostbufs[c->format - 1].p == NULL)
		return NULL;
	struct hostbuf *h = &w->hostbufs[c->format - 1];
	if (c->b > h->len || c->c > h->len - c->b)
		return NULL;
	return h->p + c->b;
}

/* Maps the client's memfd, which the front-end holds open as its fd number fd. */
static int
host_register(struct wk *w, int fd, uint64_t len, uint64_t *id, cua_err *e)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getppid(), fd);
	int f = open(path, O_RDWR | O_CLOEXEC);
	if (f < 0)
		return cua_err_set(e, CUA_EINTERNAL, "worker cannot open %s: %s", path, strerror(errno));
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	close(f);
	if (p == MAP_FAILED)
		return cua_err_set(e, CUA_ENOMEM, "cannot map the %llu-byte host buffer: %s", (unsigned long long)len,
				   strerror(errno));
	int r = w->be->host_register ? w->be->host_register(w, p, len, e) : 0;
	if (r != 0) {
		munmap(p, len);
		return r;
	}
	size_t slot = w->nhostbufs;
	for (size_t i = 0; i < w->nhostbufs; i++)
		if (w->hostbufs[i].p == NULL) {
			slot = i;
			break;
		}
	if (slot == w->nhostbufs) {
		struct hostbuf *n = realloc(w->hostbufs, (w->nhostbufs + 1) * sizeof(*n));
		if (n == NULL) {
			if (w->be->host_unregister)
				w->be->host_unregister(w, p);
			munmap(p, len);
			return cua_err_set(e, CUA_ENOMEM, "out of host memory");
		}
		w->hostbufs = n;
		w->nhostbufs++;
	}
	w->hostbufs[slot] = (struct hostbuf){p, len};
	*id = slot + 1;
	return 0;
}

static int
host_unregister(struct wk *w, uint64_t id, cua_err *e)
{
	if (id == 0 || id > w->nhostbufs || w->hostbufs[id - 1].p == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no host buffer %llu", (unsigned long long)id);
	struct hostbuf *h = &w->hostbufs[id - 1];
	if (w->be->host_unregister)
		w->be->host_unregister(w, h->p);
	munmap(h->p, h->len);
	h->p = NULL;
	return 0;
}

static size_t
cpl_size(const struct tracker *t)
{
	size_t n = sizeof(struct wcpl_req);
	for (uint32_t i = 0; i < t->ncmds; i++) {
		const struct titem *it = &t->items[i];
		n += sizeof(struct wcpl) + w_align8((uint32_t)(it->detail ? strlen(it->detail) : 0) + it->data_len);
	}
	return n;
}

/* Caller holds cpl_lock. */
static void
emit(struct wk *w, struct tracker *t, uint32_t fatal)
{
	size_t len = cpl_size(t);
	unsigned char *p;
	while ((p = ring_reserve(w->cpl, len)) == NULL) {
		if (len > ring_max_record(w->cpl)) {
			log_error("completion of %zu bytes exceeds the ring", len);
			_exit(1);
		}
		ring_wait_space(w->cpl, len, 100);
	}
	struct wcpl_req *h = (struct wcpl_req *)p;
	h->req = t->req;
	h->ncmds = t->ncmds;
	h->fatal = fatal;
	size_t off = sizeof(*h);
	for (uint32_t i = 0; i < t->ncmds; i++) {
		const struct titem *it = &t->items[i];
		struct wcpl c = {it->status, it->detail ? (uint32_t)strlen(it->detail) : 0, it->data_len, 0, it->value};
		memcpy(p + off, &c, sizeof(c));
		off += sizeof(c);
		if (c.detail_len)
			memcpy(p + off, it->detail, c.detail_len);
		if (c.data_len)
			memcpy(p + off + c.detail_len, it->data, c.data_len);
		off += w_align8(c.detail_len + c.data_len);
	}
	ring_commit(w->cpl, len);
}

static void
tracker_free(struct tracker *t)
{
	for (uint32_t i = 0; i < t->ncmds; i++) {
		free(t->items[i].detail);
		free(t->items[i].data);
	}
	free(t);
}

void
tracker_put(struct wk *w, struct tracker *t)
{
	if (atomic_fetch_sub(&t->pending, 1) != 1)
		return;
	pthread_mutex_lock(&w->cpl_lock);
	emit(w, t, 0);
	pthread_mutex_unlock(&w->cpl_lock);
	tracker_free(t);
}

_Noreturn void
wk_fatal(struct wk *w, struct tracker *t, uint32_t idx, const char *detail)
{
	log_error("sticky device fault: %s; exiting so the front-end starts a fresh worker", detail);
	pthread_mutex_lock(&w->cpl_lock); /* held until exit: nothing else may complete after a fault */
	for (uint32_t i = 0; i < t->ncmds; i++)
		if (i != idx && t->items[i].status == CUA_OK && i > idx)
			t->items[i].status = CUA_ECONTEXT_LOST;
	t->items[idx].status = CUA_EDEVICE;
	free(t->items[idx].detail);
	t->items[idx].detail = strdup(detail);
	emit(w, t, 1);
	_exit(WORKER_EXIT_FAULT);
}

_Noreturn void
wk_fatal_many(struct wk *w, struct tracker **t, const uint32_t *idx, size_t n, const char *detail)
{
	log_error("sticky device fault: %s; %zu request(s) had work in flight; exiting so the front-end starts a "
		  "fresh worker", detail, n);
	pthread_mutex_lock(&w->cpl_lock); /* held until exit */
	for (size_t i = 0; i < n; i++) {
		struct titem *it = &t[i]->items[idx[i]];
		it->status = CUA_EDEVICE;
		free(it->detail);
		it->detail = strdup(detail);
	}
	for (size_t i = 0; i < n; i++) {
		int seen = 0;
		for (size_t k = 0; k < i; k++)
			seen |= t[k] == t[i];
		if (seen)
			continue;
		for (uint32_t k = 0; k < t[i]->ncmds; k++) /* what had not finished in that request */
			if (t[i]->items[k].status == CUA_OK && k > idx[i])
				t[i]->items[k].status = CUA_ECONTEXT_LOST;
		emit(w, t[i], i + 1 == n);
	}
	_exit(WORKER_EXIT_FAULT);
}

static struct tracker *
tracker_new(uint64_t req, uint32_t ncmds)
{
	struct tracker *t = calloc(1, sizeof(*t) + (size_t)ncmds * sizeof(struct titem));
	if (t == NULL)
		return NULL;
	t->req = req;
	t->ncmds = ncmds;
	atomic_init(&t->pending, 1);
	return t;
}

static void
run_sync(struct wk *w, const struct wcmd *c, struct tracker *t, uint32_t i)
{
	cua_err e;
	cua_err_clear(&e);
	uint64_t v = 0;
	int r;
	switch (c->op) {
	case W_MODULE_LOAD: {
		const void *img = wk_staging(w, c->a, c->b);
		r = img ? w->be->module_load(w, img, c->b, c->format, &v, &e)
			: cua_err_set(&e, CUA_EINTERNAL, "module image outside the staging area");
		break;
	}
	case W_MODULE_UNLOAD: r = w->be->module_unload(w, c->a, &e); break;
	case W_FUNCTION_GET: {
		const char *name = (const char *)(c + 1);
		size_t room = c->size - sizeof(*c);
		cua_param_info *params = NULL;
		uint32_t n = 0;
		if (room == 0 || memchr(name, '\0', room) == NULL) {
			r = cua_err_set(&e, CUA_EINTERNAL, "function name not terminated");
			break;
		}
		r = w->be->function_get(w, c->a, name, &v, &params, &n, &e);
		if (r == 0) {
			t->items[i].data = params;
			t->items[i].data_len = n * (uint32_t)sizeof(*params);
		} else {
			free(params);
		}
		break;
	}
	case W_MEM_ALLOC: r = w->be->mem_alloc(w, c->a, &v, &e); break;
	case W_MEM_FREE: r = w->be->mem_free(w, c->a, &e); break;
	case W_STREAM_CREATE: {
		uint32_t sid = 0;
		r = w->be->stream_create(w, (int)(int64_t)c->a, &sid, &e);
		v = sid;
		break;
	}
	case W_STREAM_DESTROY: r = w->be->stream_destroy(w, c->stream, &e); break;
	case W_HOST_REGISTER: r = host_register(w, (int)c->a, c->b, &v, &e); break;
	case W_HOST_UNREGISTER: r = host_unregister(w, c->a, &e); break;
	default: r = cua_err_set(&e, CUA_EINTERNAL, "unknown worker command %u", c->op); break;
	}
	tracker_set(t, i, (uint32_t)r, v, r ? (e.detail[0] ? e.detail : cua_strerror(r)) : NULL);
}

static int
is_stream_op(uint32_t op)
{
	return op == W_HTOD || op == W_DTOH || op == W_DTOD || op == W_MEMSET || op == W_LAUNCH || op == W_STREAM_SYNC;
}

/* Runs one command record. The record is released as soon as its commands were copied or run. */
static void
handle_record(struct wk *w, const unsigned char *rec, size_t len)
{
	struct wcmd_req h;
	if (len < sizeof(h)) {
		log_error("short command record");
		return;
	}
	memcpy(&h, rec, sizeof(h));
	struct tracker *t = tracker_new(h.req, h.ncmds);
	if (t == NULL) {
		log_error("out of memory for request %llu", (unsigned long long)h.req);
		_exit(1);
	}
	size_t off = sizeof(h);
	for (uint32_t i = 0; i < h.ncmds; i++) {
		const struct wcmd *c = (const struct wcmd *)(rec + off);
		if (off + sizeof(*c) > len || c->size < sizeof(*c) || c->size > len - off) {
			tracker_set(t, i, CUA_EINTERNAL, 0, "malformed worker command");
			break;
		}
		off += c->size;
		if (!is_stream_op(c->op)) {
			run_sync(w, c, t, i);
			continue;
		}
		struct wop *op = malloc(sizeof(*op));
		struct wcmd *copy = malloc(c->size);
		if (op == NULL || copy == NULL) {
			free(op);
			free(copy);
			tracker_set(t, i, CUA_ENOMEM, 0, "worker out of memory");
			continue;
		}
		memcpy(copy, c, c->size);
		*op = (struct wop){copy, t, i, NULL};
		w->be->submit(w, op);
	}
	w->be->flush(w, t);
	tracker_put(w, t);
}

static void
hello(struct wk *w, int status, const char *detail)
{
	struct tracker *t = tracker_new(0, 1);
	if (t == NULL)
		_exit(1);
	tracker_set(t, 0, (uint32_t)status, 0, detail);
	if (status == 0) {
		t->items[0].data = malloc(sizeof(w->info));
		memcpy(t->items[0].data, &w->info, sizeof(w->info));
		t->items[0].data_len = sizeof(w->info);
	}
	tracker_put(w, t);
}

int
worker_main(const struct worker_opts *o)
{
	static char ident[32];
	snprintf(ident, sizeof(ident), "cuasyncd-worker[%d]", o->device);
	cua_log_set_ident(ident);
	/* Die with the front-end: a worker must never outlive the process that owns its clients. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		return 1;
	signal(SIGPIPE, SIG_IGN);

	struct wk w;
	memset(&w, 0, sizeof(w));
	w.opts = *o;
	pthread_mutex_init(&w.cpl_lock, NULL);
	struct shm_hdr hdr;
	if (pread(o->shm_fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) || hdr.magic != SHM_MAGIC) {
		log_error("bad shared-memory region on fd %d", o->shm_fd);
		return 1;
	}
	w.shm = mmap(NULL, hdr.total, PROT_READ | PROT_WRITE, MAP_SHARED, o->shm_fd, 0);
	if (w.shm == MAP_FAILED) {
		log_error("mmap of the shared region failed");
		return 1;
	}
	close(o->shm_fd);
	w.hdr = (struct shm_hdr *)w.shm;
	w.cmd = (struct ring *)(w.shm + hdr.cmd_off);
	w.cpl = (struct ring *)(w.shm + hdr.cpl_off);
	w.staging = w.shm + hdr.staging_off;
	w.staging_size = hdr.staging_size;

	if (strcmp(o->backend, "emu") == 0)
		w.be = &backend_emu;
#ifdef HAVE_CUDA_H
	else if (strcmp(o->backend, "cuda") == 0)
		w.be = &backend_cuda;
#endif
	if (w.be == NULL) {
		hello(&w, CUA_EUNSUPPORTED, "unknown backend");
		return 1;
	}
	cua_err e;
	cua_err_clear(&e);
	int r = w.be->init(&w, &w.info, &e);
	if (r != 0) {
		log_error("device %d (%s) unusable: %s", o->device, w.be->name, e.detail);
		hello(&w, r, e.detail);
		return 1;
	}
	log_info("device %d ready: %s sm_%u%u, %s backend, generation %u", o->device, w.info.name, w.info.sm_major,
		 w.info.sm_minor, w.be->name, o->generation);
	hello(&w, 0, NULL);

	for (;;) {
		size_t len;
		const void *rec = ring_peek(w.cmd, &len);
		if (rec == NULL) {
			ring_wait_data(w.cmd, 1000);
			if (getppid() == 1)
				_exit(0);
			continue;
		}
		if (len == 0) /* the front-end's shutdown record */
			break;
		handle_record(&w, rec, len);
		ring_release(w.cmd);
	}
	if (w.be->fini)
		w.be->fini(&w);
	return 0;
}
