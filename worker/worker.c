/*
 * worker.c — the worker core: the main loop over the command ring, request tracking and completion records,
 * the streams a request touched and their notices, and fault exits. See core.h for a request's life.
 */
#include "config.h"

#include "core.h"

#include "cua_log.h"
#include "ring.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* Exit status of a worker that stopped on a sticky fault (the front-end restarts it). */
#define WORKER_EXIT_FAULT 3
/* The derived number of submit threads, at most (the measured knee: docs/ARCHITECTURE.md) */
#define SUBMIT_THREADS_MAX 8u

static const char oom_detail[] = "worker out of memory";

/* ------------------------------------------------------------------ outcomes */

/* Sets command idx's outcome; detail may be NULL. Thread-safe for distinct idx. Without memory for the
 * detail the status stands and the completion says cua_strerror(status). */
static void
item_set(struct tracker *t, uint32_t idx, uint32_t status, uint64_t value, const char *detail)
{
	struct titem *it = &t->items[idx];
	it->status = status;
	it->value = value;
	free(it->detail);
	it->detail = detail && *detail ? strdup(detail) : NULL;
}

void
wk_report(struct wk *w, struct wk_tag tag, uint32_t status, const char *detail)
{
	(void)w;
	item_set(tag.t, tag.idx, status, 0, detail);
}

static const char *
item_detail(const struct titem *it)
{
	return it->detail ? it->detail : it->status ? cua_strerror((int)it->status) : NULL;
}

/* The length of an item's detail in its completion: at most cap bytes. */
static uint32_t
detail_len(const struct titem *it, size_t cap)
{
	const char *d = item_detail(it);
	size_t n = d ? strlen(d) : 0;
	return (uint32_t)(n < cap ? n : cap);
}

static size_t
cpl_size(const struct tracker *t, size_t cap)
{
	size_t n = sizeof(struct wcpl_req);
	for (uint32_t i = 0; i < t->ncmds; i++)
		n += sizeof(struct wcpl) + wrec_align8(detail_len(&t->items[i], cap) + t->items[i].data_len);
	return n;
}

/*
 * The longest detail each item's completion may carry so that t's record fits the ring: all of them when they
 * fit (always, but for a batch of thousands of failures with long messages), else cut to an equal share. A
 * worker that could not write a completion would have to end, taking every session's context with it.
 */
static size_t
detail_cap(const struct wk *w, const struct tracker *t)
{
	size_t max = ring_max_record(w->cpl), cap = CUA_ERR_DETAIL_MAX;
	while (cap > 0 && cpl_size(t, cap) > max)
		cap /= 2;
	return cap;
}

/* Room for len bytes in the completion ring; waits for the front-end to read. Caller holds cpl_lock. */
static unsigned char *
cpl_reserve(struct wk *w, size_t len)
{
	unsigned char *p;
	while ((p = ring_reserve(w->cpl, len)) == NULL) {
		if (len > ring_max_record(w->cpl)) {
			log_error("completion of %zu bytes exceeds the ring", len);
			_exit(1);
		}
		ring_wait_space(w->cpl, len, 100);
	}
	return p;
}

/* Writes t's completion record. Caller holds cpl_lock. */
static void
emit(struct wk *w, struct tracker *t, uint32_t fatal)
{
	size_t cap = detail_cap(w, t), len = cpl_size(t, cap);
	unsigned char *p = cpl_reserve(w, len);
	struct wcpl_req h = {t->req, t->ncmds, fatal, atomic_load(&t->busy_ns)};
	memcpy(p, &h, sizeof(h));
	size_t off = sizeof(h);
	for (uint32_t i = 0; i < t->ncmds; i++) {
		const struct titem *it = &t->items[i];
		const char *d = item_detail(it);
		struct wcpl c = {it->status, detail_len(it, cap), it->data_len, 0, it->value};
		memcpy(p + off, &c, sizeof(c));
		off += sizeof(c);
		if (c.detail_len)
			memcpy(p + off, d, c.detail_len);
		if (c.data_len)
			memcpy(p + off + c.detail_len, it->data, c.data_len);
		off += wrec_align8(c.detail_len + c.data_len);
	}
	t->emitted = true;
	ring_commit(w->cpl, len);
}

/* A completion of ncmds commands that all share one outcome, written without allocating (the hello record,
 * a request the worker has no memory to track). ncmds is cut to what the ring can carry. Any thread. */
static void
emit_uniform(struct wk *w, uint64_t req, uint32_t ncmds, uint32_t status, const char *detail, const void *data,
	     uint32_t data_len)
{
	uint32_t dlen = detail ? (uint32_t)strlen(detail) : 0;
	size_t one = sizeof(struct wcpl) + wrec_align8(dlen + data_len);
	size_t room = (ring_max_record(w->cpl) - sizeof(struct wcpl_req)) / one;
	if (ncmds > room)
		ncmds = (uint32_t)room;
	size_t len = sizeof(struct wcpl_req) + ncmds * one;
	pthread_mutex_lock(&w->cpl_lock);
	unsigned char *p = cpl_reserve(w, len);
	struct wcpl_req h = {req, ncmds, 0, 0};
	memcpy(p, &h, sizeof(h));
	for (uint32_t i = 0; i < ncmds; i++) {
		unsigned char *q = p + sizeof(h) + i * one;
		struct wcpl c = {status, dlen, data_len, 0, 0};
		memcpy(q, &c, sizeof(c));
		if (dlen)
			memcpy(q + sizeof(c), detail, dlen);
		if (data_len)
			memcpy(q + sizeof(c) + dlen, data, data_len);
	}
	ring_commit(w->cpl, len);
	pthread_mutex_unlock(&w->cpl_lock);
}

/* ------------------------------------------------------------------ trackers */

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
tracker_free(struct tracker *t)
{
	for (uint32_t i = 0; i < t->ncmds; i++) {
		free(t->items[i].detail);
		free(t->items[i].data);
	}
	free(t);
}

/* Drops one hold; the last writes the completion. Any thread. */
static void
tracker_put(struct wk *w, struct tracker *t)
{
	if (atomic_fetch_sub(&t->pending, 1) != 1)
		return;
	pthread_mutex_lock(&w->cpl_lock);
	emit(w, t, 0);
	pthread_mutex_unlock(&w->cpl_lock);
	tracker_free(t);
}

static uint64_t
mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* sid's "last notice done" clock, or NULL when it has none (wk_stream_add makes them). Any thread. */
static _Atomic uint64_t *
done_at(struct wk *w, uint32_t sid)
{
	if (sid / WK_DONE_CHUNK >= WK_DONE_CHUNKS)
		return NULL;
	_Atomic uint64_t *c = atomic_load_explicit(&w->done_at[sid / WK_DONE_CHUNK], memory_order_acquire);
	return c ? &c[sid % WK_DONE_CHUNK] : NULL;
}

/*
 * Busy time, the measure tenants' weights are kept by (front-end: tenant.c). A request's work on a stream runs
 * between the later of two moments — its notice was asked for (the work had just been issued), or the
 * stream's previous notice was done (the work before it finished) — and its own notice being done: that span
 * is added to the request, for each stream it used. Notices of one stream are done in order, by one thread at
 * a time, so the stream's clock moves forward. What it measures is the stream's occupancy: time the work
 * waited on the device for other streams' work counts too. Backends' notice callbacks, any thread.
 */
void
wk_notice(struct wk *w, uint32_t sid, struct wk_tag tag, wk_done_fn done)
{
	tag.sid = sid;
	tag.t0 = mono_ns();
	w->be->notify(w, sid, tag, done);
}

/* The notice callback given to backends. */
static void
notice_done(struct wk *w, struct wk_tag tag)
{
	uint64_t now = mono_ns(), from = tag.t0;
	_Atomic uint64_t *last = done_at(w, tag.sid);
	if (last != NULL) {
		uint64_t prev = atomic_exchange(last, now);
		from = prev > from ? prev : from;
	}
	if (now > from)
		atomic_fetch_add(&tag.t->busy_ns, now - from);
	tracker_put(w, tag.t);
}

/* Marks the unfinished commands of t after idx lost, and idx faulted. Caller holds cpl_lock. */
static void
blame(struct tracker *t, uint32_t idx, const char *detail)
{
	for (uint32_t i = idx + 1; i < t->ncmds; i++)
		if (t->items[i].status == CUA_OK)
			t->items[i].status = CUA_ECONTEXT_LOST;
	t->items[idx].status = CUA_EDEVICE;
	free(t->items[idx].detail);
	t->items[idx].detail = strdup(detail);
}

_Noreturn void
wk_fatal(struct wk *w, struct wk_tag tag, const char *detail)
{
	wk_fatal_many(w, &tag, 1, detail);
}

_Noreturn void
wk_fatal_many(struct wk *w, const struct wk_tag *tags, size_t n, const char *detail)
{
	log_error("sticky device fault: %s; %zu request(s) had work in flight; exiting so the front-end starts a "
		  "fresh worker",
		  detail, n);
	pthread_mutex_lock(&w->cpl_lock); /* held until exit: nothing else may complete after a fault */
	for (size_t i = 0; i < n; i++) {  /* every blamed command first: a request may be named more than once */
		struct titem *it = &tags[i].t->items[tags[i].idx];
		it->status = CUA_EDEVICE;
		free(it->detail);
		it->detail = strdup(detail);
	}
	size_t last = n;
	for (size_t i = 0; i < n; i++)
		if (!tags[i].t->emitted) {
			tags[i].t->emitted = true; /* first mention: its blamed command decides what is lost */
			last = i;
		}
	for (size_t i = 0; i < n; i++)
		tags[i].t->emitted = false;
	for (size_t i = 0; i < n; i++) {
		if (tags[i].t->emitted)
			continue;
		blame(tags[i].t, tags[i].idx, detail);
		emit(w, tags[i].t, i == last); /* the last record says fatal: the worker exits after it */
	}
	_exit(WORKER_EXIT_FAULT);
}

/* ------------------------------------------------------------------ streams and notices */

int
wk_stream_add(struct wk *w, uint32_t sid)
{
	if (sid >= w->nstreams) {
		size_t n = w->nstreams ? w->nstreams : 16;
		while (n <= sid)
			n *= 2;
		struct wk_stream *s = realloc(w->streams, n * sizeof(*s));
		if (s == NULL)
			return CUA_ENOMEM;
		memset(s + w->nstreams, 0, (n - w->nstreams) * sizeof(*s));
		w->streams = s;
		w->nstreams = n;
	}
	w->streams[sid] = (struct wk_stream){0, 1};
	if (sid / WK_DONE_CHUNK < WK_DONE_CHUNKS && atomic_load(&w->done_at[sid / WK_DONE_CHUNK]) == NULL) {
		_Atomic uint64_t *c = calloc(WK_DONE_CHUNK, sizeof(*c));
		if (c != NULL) /* else its work is timed from its notices */
			atomic_store_explicit(&w->done_at[sid / WK_DONE_CHUNK], c, memory_order_release);
	}
	_Atomic uint64_t *last = done_at(w, sid);
	if (last != NULL)
		atomic_store(last, 0);
	return 0;
}

bool
wk_stream_live(const struct wk *w, uint32_t sid)
{
	return sid < w->nstreams && w->streams[sid].live;
}

/* Notes that the current request queued work on sid (idx is blamed if it faults). 0, or CUA_ENOMEM: then
 * the caller waits for the stream's notice at once instead. */
static int
touch(struct wk *w, uint32_t sid, uint32_t idx)
{
	if (w->streams[sid].mark == w->serial)
		return 0;
	if (w->ntouched == w->touched_cap) {
		size_t cap = w->touched_cap ? 2 * w->touched_cap : 16;
		struct wk_touch *n = realloc(w->touched, cap * sizeof(*n));
		if (n == NULL)
			return CUA_ENOMEM;
		w->touched = n;
		w->touched_cap = cap;
	}
	w->touched[w->ntouched++] = (struct wk_touch){sid, idx};
	w->streams[sid].mark = w->serial;
	return 0;
}

static void
notify(struct wk *w, struct tracker *t, uint32_t sid, uint32_t blame_idx)
{
	atomic_fetch_add(&t->pending, 1);
	wk_notice(w, sid, (struct wk_tag){t, blame_idx, 0, 0}, notice_done);
}

void
wk_stream_retire(struct wk *w, uint32_t sid)
{
	if (!wk_stream_live(w, sid))
		return;
	if (w->streams[sid].mark == w->serial) {
		for (size_t i = 0; i < w->ntouched; i++)
			if (w->touched[i].sid == sid) {
				notify(w, w->issuing, sid, w->touched[i].blame);
				break;
			}
	}
	w->streams[sid] = (struct wk_stream){0, 0};
}

/* ------------------------------------------------------------------ requests */

/* Runs the handlers of command i: a sync command's, or a stream command's preparer and, issuing on this thread,
 * its issuer. Main thread, --submit-threads 1: what the worker always did. */
static int
run_inline(struct wk *w, const struct wk_cmd *k, const struct wrec_hdr *c, struct wk_run *x, cua_err *e)
{
	if (!k->stream)
		return k->run(w, c, x, e);
	struct wk_op op = {x->tag, 0, NULL, c};
	int r = k->prep(w, c, &op, e);
	if (r == 0 && k->held) { /* the issuer ends the hold; no notice (core.h) */
		atomic_fetch_add(&x->tag.t->pending, 1);
		return k->issue(w, &op, e);
	}
	if (r == 0 && k->issue)
		r = k->issue(w, &op, e);
	x->queued = r == 0;
	x->sid = op.sid;
	return r;
}

/*
 * Hands the streams this request touched since the last flush their notices, each to the batch of the stream's
 * owner after the request's work there (counted in the tracker first: it cannot complete before them), then every
 * batch to its thread. The next touch of any stream is noted afresh. Main thread, submit threads on.
 */
static void
flush(struct wk *w)
{
	for (size_t i = 0; i < w->ntouched; i++) {
		const struct wk_touch *k = &w->touched[i];
		if (w->streams[k->sid].mark != w->serial)
			continue;
		atomic_fetch_add(&w->issuing->pending, 1);
		wksub_notice(w->sub, k->sid, (struct wk_tag){w->issuing, k->blame});
	}
	w->ntouched = 0;
	w->serial++;
	wksub_push(w->sub);
}

void
wk_hold_done(struct wk *w, struct wk_tag tag)
{
	tracker_put(w, tag.t);
}

void
wk_after_owner(struct wk *w, uint32_t sid, uint32_t next)
{
	if (w->sub == NULL || wksub_owner(w->sub, sid) == wksub_owner(w->sub, next))
		return; /* one thread issues both, in order */
	flush(w);
	wksub_drain(w->sub, (int)wksub_owner(w->sub, sid));
}

/* A barrier command waits until the submit threads concerned have issued all they were handed (core.h). */
static void
barrier(struct wk *w, const struct wk_cmd *k, const struct wrec_hdr *c)
{
	if (k->barrier == WK_BARRIER_NONE)
		return;
	flush(w);
	int owner = -1;
	if (k->barrier == WK_BARRIER_STREAM)
		owner = (int)wksub_owner(w->sub, ((const struct wrec_stream *)c)->stream);
	wksub_drain(w->sub, owner);
}

/* Prepares stream command i and appends it to its stream's owner's batch, noting the stream (its notice room is
 * reserved with it). 0 or a CUA_E* code with the reason in e: nothing was handed over. Main thread. */
static int
dispatch(struct wk *w, const struct wk_cmd *k, const struct wrec_hdr *c, uint32_t i, cua_err *e)
{
	struct wk_op op = {{w->issuing, i}, 0, NULL, NULL};
	int r = k->prep(w, c, &op, e);
	if (r != 0)
		return r;
	op.c = k->issue ? c : NULL;
	bool fresh = !k->held && w->streams[op.sid].mark != w->serial;
	if (wksub_op(w->sub, &op, fresh) != 0)
		return cua_err_set(e, CUA_ENOMEM, "worker out of memory for stream work");
	if (k->held) { /* counted before the batch is handed over (flush): the issuer ends it */
		atomic_fetch_add(&w->issuing->pending, 1);
		return 0;
	}
	if (fresh && touch(w, op.sid, i) != 0) {
		/* no room to note the stream: its notice goes right after the work (in the room reserved) */
		atomic_fetch_add(&w->issuing->pending, 1);
		wksub_notice(w->sub, op.sid, op.tag);
	}
	return 0;
}

/* Runs command i (at c, whose size lies inside the record) of the request being issued. */
static void
run_cmd(struct wk *w, struct tracker *t, uint32_t i, const struct wrec_hdr *c)
{
	const struct wk_cmd *k = c->op < WR_OP_MAX ? &wk_cmds[c->op] : NULL;
	struct wk_run x = {{t, i}, 0, NULL, 0, false, 0};
	cua_err e;
	cua_err_clear(&e);
	int r;
	if (k == NULL || (k->run == NULL && k->prep == NULL))
		r = cua_err_set(&e, CUA_EINTERNAL, "unknown worker command %u", c->op);
	else if (c->size < k->fixed)
		r = cua_err_set(&e, CUA_EINTERNAL, "malformed worker command %s (%u bytes)", k->name, c->size);
	else if (w->sub && k->stream) {
		/* its outcome is the submit thread's to set; only a failure to hand it over is set here */
		if ((r = dispatch(w, k, c, i, &e)) != 0)
			item_set(t, i, (uint32_t)r, 0, e.detail[0] ? e.detail : cua_strerror(r));
		return;
	} else {
		if (w->sub)
			barrier(w, k, c);
		r = run_inline(w, k, c, &x, &e);
		if (r == 0 && k->held)
			return; /* its outcome is its issuer's to set (wk_report), maybe already done */
	}
	if (r == 0 && x.queued && touch(w, x.sid, i) != 0) {
		/* no room to note the stream: take its notice now (the request still completes after the work) */
		notify(w, t, x.sid, i);
	}
	item_set(t, i, (uint32_t)r, x.value, r ? (e.detail[0] ? e.detail : cua_strerror(r)) : NULL);
	if (r == 0 && x.data) {
		t->items[i].data = x.data; /* transferred */
		t->items[i].data_len = x.data_len;
		x.data = NULL;
	}
	free(x.data);
}

/* Runs one command record; the record may be released when this returns (stream work keeps no pointer into
 * it). Main thread. */
static void
handle_record(struct wk *w, const unsigned char *rec, size_t len)
{
	struct wrec_req h;
	if (len < sizeof(h)) {
		log_error("short command record (%zu bytes)", len);
		return;
	}
	memcpy(&h, rec, sizeof(h));
	if (h.ncmds > (len - sizeof(h)) / sizeof(struct wrec_hdr)) {
		log_error("request %llu: %u commands cannot fit its %zu bytes", (unsigned long long)h.req, h.ncmds,
			  len);
		emit_uniform(w, h.req, h.ncmds, CUA_EINTERNAL, "malformed worker command record", NULL, 0);
		return;
	}
	struct tracker *t = tracker_new(h.req, h.ncmds);
	if (t == NULL) {
		log_error("out of memory for request %llu (%u commands)", (unsigned long long)h.req, h.ncmds);
		emit_uniform(w, h.req, h.ncmds, CUA_ENOMEM, oom_detail, NULL, 0);
		return;
	}
	w->serial++;
	w->issuing = t;
	w->ntouched = 0;
	size_t off = sizeof(h);
	for (uint32_t i = 0; i < h.ncmds; i++) {
		const struct wrec_hdr *c = (const struct wrec_hdr *)(rec + off);
		if (len - off < sizeof(*c) || c->size < sizeof(*c) || c->size % 8 != 0 || c->size > len - off) {
			for (uint32_t k = i; k < h.ncmds; k++) /* the rest cannot be found */
				item_set(t, k, CUA_EINTERNAL, 0, "malformed worker command");
			break;
		}
		off += c->size;
		run_cmd(w, t, i, c);
	}
	if (w->sub)
		flush(w);
	for (size_t i = 0; i < w->ntouched; i++) {
		const struct wk_touch *k = &w->touched[i];
		if (w->streams[k->sid].mark == w->serial)
			notify(w, t, k->sid, k->blame);
	}
	w->ntouched = 0;
	w->issuing = NULL;
	tracker_put(w, t);
}

/* The first completion record: the device, or why it cannot be used. */
static void
hello(struct wk *w, int status, const char *detail)
{
	if (status == 0)
		emit_uniform(w, 0, 1, 0, NULL, &w->info, sizeof(w->info));
	else
		emit_uniform(w, 0, 1, (uint32_t)status, detail && *detail ? detail : cua_strerror(status), NULL, 0);
}

/* ------------------------------------------------------------------ heartbeat */

static uint64_t
mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * The heartbeat thread: bumps the region's heartbeat every WSHM_HEARTBEAT_MS and does nothing else, so that it
 * beats while the command loop waits on the device (a long kernel, a module load waiting for running kernels,
 * a drain) and stops only when the process stops being scheduled. The front-end's watchdog (devlink.c) kills a
 * worker whose heartbeat stands while it has work in flight. Runs until the process exits.
 */
static void *
heartbeat_main(void *arg)
{
	struct wshm_hdr *h = arg;
	pthread_setname_np(pthread_self(), "cuaw-heartbeat");
	const struct timespec period = {0, WSHM_HEARTBEAT_MS * 1000000L};
	for (;;) {
		atomic_fetch_add_explicit(&h->heartbeat, 1, memory_order_relaxed);
		nanosleep(&period, NULL);
	}
	return NULL;
}

/* Starts the heartbeat thread (detached, all signals blocked). 0, or -1 after logging why. */
static int
heartbeat_start(struct wk *w)
{
	pthread_t t;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&t, NULL, heartbeat_main, w->shm);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		log_error("cannot start the heartbeat thread: %s", strerror(rc));
		return -1;
	}
	pthread_detach(t);
	return 0;
}

/* Maps the shared region from fd (and closes it). 0, or -1 after logging why. */
static int
map_region(struct wk *w, int fd)
{
	struct wshm_hdr hdr;
	if (pread(fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) || hdr.magic != WSHM_MAGIC) {
		log_error("bad shared-memory region on fd %d", fd);
		return -1;
	}
	w->shm = mmap(NULL, hdr.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (w->shm == MAP_FAILED) {
		log_error("mmap of the shared region failed: %s", strerror(errno));
		return -1;
	}
	close(fd);
	w->cmd = (struct ring *)(w->shm + hdr.cmd_off);
	w->cpl = (struct ring *)(w->shm + hdr.cpl_off);
	w->staging = w->shm + hdr.staging_off;
	w->staging_size = hdr.staging_size;
	return 0;
}

/* Opens the backend and notes its pool streams. 0, or a CUA_E* code with the reason in e. */
static int
open_device(struct wk *w, cua_err *e)
{
	if (strcmp(w->opts.backend, "emu") == 0)
		w->be = &backend_emu;
#ifdef HAVE_CUDA_H
	else if (strcmp(w->opts.backend, "cuda") == 0)
		w->be = &backend_cuda;
#endif
	if (w->be == NULL)
		return cua_err_set(e, CUA_EUNSUPPORTED, "unknown backend");
	int r = w->be->init(w, &w->info, e);
	if (r != 0)
		return r;
	for (uint32_t i = 0; i < w->info.pool_streams; i++)
		if (wk_stream_add(w, i) != 0)
			return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	return 0;
}

/* --submit-threads, or when 0, half the cores up to SUBMIT_THREADS_MAX: one thread issues ~310 k launches/s and
 * owns its streams, so a tenant's own stream of ~10 us kernels blocks its thread's other streams when its
 * queue fills. On the H200 host (16 cores, BENCHMARKS.md 2026-11-30 23:05) 8 tenants' own streams reached
 * 191/332/517/509 k/s with 2/4/8/16 threads, empty kernels 340/556/724/716 k/s; the rest of the cores are the
 * front-end's. */
static unsigned
submit_threads(const struct worker_opts *o)
{
	if (o->submit_threads)
		return o->submit_threads;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = cores > 1 ? (unsigned)cores / 2 : 1;
	return n > SUBMIT_THREADS_MAX ? SUBMIT_THREADS_MAX : n;
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
	/* Load every kernel of a module when the module is loaded. With CUDA's lazy loading (the default since
	 * 12.2) a kernel is loaded at its first use, and loading waits for the kernels running in the context: in
	 * a context that sessions share, one session's launch would stall behind another's long kernel. Eagerly,
	 * only MODULE_LOAD waits (README.md, "Isolation"). The operator may still choose with the variable. */
	setenv("CUDA_MODULE_LOADING", "EAGER", 0);
	/* The driver maps a context's streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware work queues (8 unless set).
	 * Streams sharing a queue are served in order, as if one stream: a kernel of one session waits behind
	 * another session's kernel queued in the same queue although nothing orders them. With a stream pool per
	 * session and the clients' own streams the worker holds far more than 8 busy streams, so ask for the most
	 * (32) before cuInit reads it; the operator may still choose with the variable. */
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);

	static struct wk w; /* static: backends' threads may still hold it while the process exits */
	memset(&w, 0, sizeof(w));
	w.opts = *o;
	pthread_mutex_init(&w.cpl_lock, NULL);
	if (map_region(&w, o->shm_fd) != 0 || heartbeat_start(&w) != 0)
		return 1;
	cua_err e;
	cua_err_clear(&e);
	int r = open_device(&w, &e);
	if (r != 0) {
		log_error("device %d (%s) unusable: %s", o->device, w.be ? w.be->name : o->backend, e.detail);
		hello(&w, r, e.detail);
		return 1;
	}
	log_info("device %d ready: %s sm_%u%u, %s backend, generation %u", o->device, w.info.name, w.info.sm_major,
		 w.info.sm_minor, w.be->name, o->generation);
	hello(&w, 0, NULL);
	unsigned nsub = submit_threads(o);
	if (nsub > 1 && (w.sub = wksub_start(&w, nsub, notice_done, wk_report)) != NULL)
		log_info("device %d: %u submit threads", o->device, nsub);

	struct wshm_hdr *hdr = (struct wshm_hdr *)w.shm;
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
		atomic_store_explicit(&hdr->busy_since_ms, mono_ms(), memory_order_relaxed);
		handle_record(&w, rec, len);
		atomic_store_explicit(&hdr->busy_since_ms, 0, memory_order_relaxed);
		ring_release(w.cmd);
	}
	wksub_stop(w.sub); /* issues what it was handed first */
	w.sub = NULL;
	w.be->fini(&w);
	free(w.streams);
	free(w.touched);
	free(w.events);
	for (size_t i = 0; i < WK_DONE_CHUNKS; i++)
		free(atomic_load(&w.done_at[i]));
	return 0;
}
