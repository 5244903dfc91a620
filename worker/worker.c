/*
 * worker.c — the worker core's top: the main loop over the command ring, each record's commands run or handed to
 * the submit threads in order (core.h for a request's life), the hello record, the heartbeat and the process's
 * setup. Tracking and completion records are tracker.c's, streams and notices streams.c's (core.h, "Layers").
 */
#include "config.h"

#include "core.h"

#include "cua_clock.h"
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

/* The derived number of submit threads, at most (the measured knee: docs/ARCHITECTURE.md) */
#define SUBMIT_THREADS_MAX 8u

static const char oom_detail[] = "worker out of memory";

/* ------------------------------------------------------------------ what the layers below are given */

/* The submit threads' callbacks (submit.c calls nothing of the core by name): a prepared command's issuer, its
 * failure going to the command's outcome, and a stream's notice. On a submit thread. */
static void
sub_issue(struct wk *w, const struct wk_op *op)
{
	cua_err e;
	cua_err_clear(&e);
	int r = wk_cmds[op->c->op].issue(w, op, &e);
	if (r != 0)
		wk_report(w, op->tag, (uint32_t)r, e.detail[0] ? e.detail : cua_strerror(r));
}

static void
sub_notice(struct wk *w, uint32_t sid, struct wk_tag tag)
{
	wk_notice(w, sid, tag, wk_notice_done);
}

static const struct wksub_ops sub_ops = {sub_issue, sub_notice};

/* What a backend reports through (backend.h): it never calls the core by name. */
static const struct wk_host host = {wk_report, wk_fatal_many};

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

/* A barrier command waits until the submit threads concerned have issued all they were handed (core.h). */
static void
barrier(struct wk *w, const struct wk_cmd *k, const struct wrec_hdr *c)
{
	if (k->barrier == WK_BARRIER_NONE)
		return;
	wk_flush(w);
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
	bool fresh = !k->held && !wk_stream_touched(w, op.sid);
	if (wksub_op(w->sub, &op, fresh) != 0)
		return cua_err_set(e, CUA_ENOMEM, "worker out of memory for stream work");
	if (k->held) { /* counted before the batch is handed over (flush): the issuer ends it */
		atomic_fetch_add(&w->issuing->pending, 1);
		return 0;
	}
	if (fresh && wk_touch(w, op.sid, i) != 0) {
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
			wk_item_set(w, t, i, (uint32_t)r, 0, e.detail[0] ? e.detail : cua_strerror(r));
		return;
	} else {
		if (w->sub)
			barrier(w, k, c);
		r = run_inline(w, k, c, &x, &e);
		if (r == 0 && k->held)
			return; /* its outcome is its issuer's to set (wk_report), maybe already done */
	}
	if (r == 0 && x.queued && wk_touch(w, x.sid, i) != 0) {
		/* no room to note the stream: take its notice now (the request still completes after the work) */
		wk_notify(w, t, x.sid, i);
	}
	if (r == 0 && x.queued) {
		/* its work may have run already on its stream's thread, failed (wk_report) or faulted the device
		 * (wk_fatal_many): OK is where a tracker's items start, the rest is theirs to say */
		if (x.value != 0 || x.data != NULL)
			wk_item_result(w, t, i, x.value, x.data, x.data_len);
		return;
	}
	if (r == 0 && x.data != NULL) {
		wk_item_result(w, t, i, x.value, x.data, x.data_len); /* transferred */
		return;
	}
	wk_item_set(w, t, i, (uint32_t)r, x.value, r ? (e.detail[0] ? e.detail : cua_strerror(r)) : NULL);
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
		wk_emit_uniform(w, h.req, h.ncmds, CUA_EINTERNAL, "malformed worker command record", NULL, 0);
		return;
	}
	struct tracker *t = wk_tracker_new(h.req, h.ncmds);
	if (t == NULL) {
		log_error("out of memory for request %llu (%u commands)", (unsigned long long)h.req, h.ncmds);
		wk_emit_uniform(w, h.req, h.ncmds, CUA_ENOMEM, oom_detail, NULL, 0);
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
				wk_item_set(w, t, k, CUA_EINTERNAL, 0, "malformed worker command");
			break;
		}
		off += c->size;
		run_cmd(w, t, i, c);
	}
	if (w->sub)
		wk_flush(w);
	wk_notify_touched(w); /* without submit threads: the streams it touched, each after its work */
	w->issuing = NULL;
	wk_tracker_put(w, t);
}

/* The first completion record: the device, or why it cannot be used. */
static void
hello(struct wk *w, int status, const char *detail)
{
	if (status == 0)
		wk_emit_uniform(w, 0, 1, 0, NULL, &w->info, sizeof(w->info));
	else
		wk_emit_uniform(w, 0, 1, (uint32_t)status, detail && *detail ? detail : cua_strerror(status), NULL, 0);
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
	int r = w->be->init(w, &host, &w->info, e);
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
	uint64_t t0 = cua_now_ms(); /* the restart's phases (devlink.c "Recovery"): how long a worker takes to serve */
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
	cua_idmap_init(&w.hostbufs, 1, UINT32_MAX);
	cua_idmap_init(&w.streams, 0, 0); /* ids are the backend's: set, never allocated here */
	cua_idmap_init(&w.events, 0, 0);
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
	log_info("device %d ready: %s sm_%u%u, %s backend, generation %u, %llu ms after the worker started", o->device,
		 w.info.name, w.info.sm_major, w.info.sm_minor, w.be->name, o->generation,
		 (unsigned long long)(cua_now_ms() - t0));
	hello(&w, 0, NULL);
	unsigned nsub = submit_threads(o);
	if (nsub > 1 && (w.sub = wksub_start(&w, nsub, &sub_ops)) != NULL)
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
		w.alone = !ring_has_next(w.cmd);
		handle_record(&w, rec, len);
		atomic_store_explicit(&hdr->busy_since_ms, 0, memory_order_relaxed);
		ring_release(w.cmd);
	}
	wksub_stop(w.sub); /* issues what it was handed first */
	w.sub = NULL;
	w.be->fini(&w);
	wk_streams_fini(&w);
	wk_events_fini(&w);
	wk_hostbufs_fini(&w);
	return 0;
}
