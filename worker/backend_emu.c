/*
 * backend_emu.c — the emulated device: device memory is host memory behind fake device addresses, kernels
 * come from the built-in library (emu_kernels.c). Stream work runs on a bounded pool of threads (--emu-threads):
 * each stream is a FIFO served by at most one thread at a time, so its order holds, and the streams that have
 * work take turns, one job each, so up to the pool's size of streams run at once whatever their number. A
 * fault (an illegal address, bad_write) ends the worker exactly as a sticky CUDA fault does.
 */
#include "config.h"

#include "backend.h"
#include "cua_arena.h"
#include "cua_log.h"
#include "emu_impl.h"
#include "extent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <unistd.h>

#define EMU_MAX_STREAMS 4096u
#define EMU_THREADS_MIN 8u /* the derived pool size: twice the cores, within these bounds */
#define EMU_THREADS_MAX 32u

void *
emu_ptr(struct emu *E, uint64_t addr, uint64_t len)
{
	if (addr < E->base || addr - E->base > E->size || len > E->size - (addr - E->base))
		return NULL;
	return E->mem + (addr - E->base);
}

static void run_job(struct emu *E, struct emu_job *j);

static void
job_free(struct emu *E, struct emu_job *j)
{
	if (j->kind == EJ_LAUNCH)
		cua_arena_fini(&j->u.launch.args);
	if (j->kind == EJ_RECORD || j->kind == EJ_WAIT)
		emu_event_job_free(E, j);
	free(j);
}

/* A pool thread: serves ready streams, one job per turn, until stopped with nothing ready. */
static void *
pool_main(void *arg)
{
	struct emu *E = arg;
	struct emu_pool *P = &E->pool;
	pthread_setname_np(pthread_self(), "cuaw-emu");
	pthread_mutex_lock(&P->qlock);
	for (;;) {
		struct emu_stream *s;
		while ((s = TAILQ_FIRST(&P->ready)) == NULL && !P->stop)
			pthread_cond_wait(&P->work, &P->qlock);
		if (s == NULL) /* stop requested and nothing ready */
			break;
		TAILQ_REMOVE(&P->ready, s, ready_link);
		P->nready--;
		s->on_ready = false;
		struct emu_job *j = TAILQ_FIRST(&s->jobs);
		if (emu_event_blocks(s, j)) /* parked on its event until the record runs: no thread waits */
			continue;
		s->running = true;
		P->busy++;
		TAILQ_REMOVE(&s->jobs, j, link);
		pthread_mutex_unlock(&P->qlock);
		run_job(E, j);
		job_free(E, j);
		pthread_mutex_lock(&P->qlock);
		P->busy--;
		s->done++;
		s->running = false;
		if (!TAILQ_EMPTY(&s->jobs)) {
			TAILQ_INSERT_TAIL(&P->ready, s, ready_link);
			s->on_ready = true;
			if (++P->nready > 1) /* this thread takes one; a waiting one may take the other */
				pthread_cond_signal(&P->work);
		}
		if (P->drainers)
			pthread_cond_broadcast(&P->idle);
	}
	pthread_mutex_unlock(&P->qlock);
	return NULL;
}

/* Starts one more pool thread. 0 or an errno. Caller holds qlock (or is init). */
static int
pool_grow(struct emu *E)
{
	struct emu_pool *P = &E->pool;
	if (P->nthreads == P->max)
		return EAGAIN;
	int rc = pthread_create(&P->threads[P->nthreads], NULL, pool_main, E);
	if (rc == 0)
		P->nthreads++;
	return rc;
}

/* The pool of at most opts.emu_threads threads (0: twice the cores, EMU_THREADS_MIN..MAX), one started. */
static int
pool_init(struct emu *E, cua_err *e)
{
	struct emu_pool *P = &E->pool;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned max = E->w->opts.emu_threads;
	if (max == 0) {
		max = cores > 0 ? 2 * (unsigned)cores : EMU_THREADS_MIN;
		max = max < EMU_THREADS_MIN ? EMU_THREADS_MIN : max > EMU_THREADS_MAX ? EMU_THREADS_MAX : max;
	}
	pthread_mutex_init(&P->qlock, NULL);
	pthread_cond_init(&P->work, NULL);
	pthread_cond_init(&P->idle, NULL);
	TAILQ_INIT(&P->ready);
	P->threads = calloc(max, sizeof(*P->threads));
	if (P->threads == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	P->max = max;
	if (pool_grow(E) != 0)
		return cua_err_set(e, CUA_ENOMEM, "emulated device: cannot start a stream thread");
	return 0;
}

/* Stops the pool's threads once nothing is ready (callers drain the streams first). */
static void
pool_fini(struct emu *E)
{
	struct emu_pool *P = &E->pool;
	pthread_mutex_lock(&P->qlock);
	P->stop = true;
	pthread_cond_broadcast(&P->work);
	pthread_mutex_unlock(&P->qlock);
	for (unsigned i = 0; i < P->nthreads; i++)
		pthread_join(P->threads[i], NULL);
	free(P->threads);
	pthread_mutex_destroy(&P->qlock);
	pthread_cond_destroy(&P->work);
	pthread_cond_destroy(&P->idle);
}

/* Waits until everything queued on s so far has run. Main thread; allocates nothing. */
static void
stream_drain(struct emu *E, struct emu_stream *s)
{
	struct emu_pool *P = &E->pool;
	pthread_mutex_lock(&P->qlock);
	uint64_t target = s->queued;
	P->drainers++;
	while (s->done < target)
		pthread_cond_wait(&P->idle, &P->qlock);
	P->drainers--;
	pthread_mutex_unlock(&P->qlock);
}

/* Runs what is queued on s, then frees it; s is no longer in the table, so nothing more is queued on it. */
static void
stream_stop(struct emu *E, struct emu_stream *s)
{
	stream_drain(E, s);
	free(s);
}

/* A stream in a free slot. Caller holds E->lock. */
static int
stream_new(struct emu *E, int priority, uint32_t *sid, cua_err *e)
{
	if (E->nstreams >= EMU_MAX_STREAMS)
		return cua_err_set(e, CUA_EQUOTA, "emulated device: more than %u streams", EMU_MAX_STREAMS);
	/* reuse a destroyed slot */
	size_t slot = E->nstreams;
	for (size_t i = E->w->info.pool_streams; i < E->nstreams; i++)
		if (E->streams[i] == NULL) {
			slot = i;
			break;
		}
	if (slot == E->nstreams) {
		struct emu_stream **n = realloc(E->streams, (E->nstreams + 1) * sizeof(*n));
		if (n == NULL)
			return cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory");
		E->streams = n;
		E->streams[E->nstreams++] = NULL;
	}
	struct emu_stream *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory");
	TAILQ_INIT(&s->jobs);
	s->priority = priority;
	E->streams[slot] = s; /* transferred */
	*sid = (uint32_t)slot;
	return 0;
}

static int
emu_init(struct wk *w, struct wdev_info *info, cua_err *e)
{
	struct emu *E = calloc(1, sizeof(*E));
	if (E == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	E->w = w;
	w->be_state = E;
	E->size = w->opts.emu_mem ? w->opts.emu_mem : (1ull << 30);
	if (E->size > (1ull << 36))
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "emulated memory over 64 GiB");
	/* Fake device addresses: distinct per device and per worker generation, never host addresses. */
	E->base = (0x100ull + (uint64_t)w->opts.device) << 40 | (uint64_t)(w->opts.generation % 16) << 36;
	E->mem = mmap(NULL, E->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (E->mem == MAP_FAILED)
		return cua_err_set(e, CUA_ENOMEM, "cannot reserve %llu bytes of emulated memory",
				   (unsigned long long)E->size);
	long page = sysconf(_SC_PAGESIZE);
	E->page = page > 0 ? (uint64_t)page : 4096;
	pthread_mutex_init(&E->lock, NULL);
	if (extent_init(&E->alloc, E->size, EMU_ALIGN) != 0)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	int r = pool_init(E, e);
	if (r != 0)
		return r;
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "cuasync emulated device %d", w->opts.device);
	snprintf(info->backend, sizeof(info->backend), "emu");
	info->sm_major = (uint32_t)w->opts.emu_sm / 10;
	info->sm_minor = (uint32_t)w->opts.emu_sm % 10;
	info->total_mem = E->size;
	info->multiprocessors = 4;
	info->prio_least = 0;
	info->prio_greatest = -5;
	/* as CUDA 12.1+ has them: large kernel parameters from sm_70, opt-in shared memory per architecture */
	info->max_param_bytes = w->opts.emu_sm >= 70 ? CUA_MAX_PARAM_BYTES : CUA_MAX_PARAM_BYTES_OLD;
	info->max_shared_optin = w->opts.emu_sm >= 90   ? 232448u
				 : w->opts.emu_sm >= 80 ? 166912u
				 : w->opts.emu_sm >= 70 ? 98304u
							: 49152u;
	info->cluster_launch = w->opts.emu_sm >= 90;     /* as CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH */
	info->cooperative_launch = w->opts.emu_sm >= 60; /* as CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH */
	info->pool_streams = w->opts.pool_streams ? w->opts.pool_streams : 4;
	for (unsigned i = 0; i < info->pool_streams; i++) {
		uint32_t sid;
		r = stream_new(E, 0, &sid, e);
		if (r != 0)
			return r;
	}
	return 0;
}

static void
emu_fini(struct wk *w)
{
	struct emu *E = w->be_state;
	for (size_t i = 0; i < E->nstreams; i++)
		if (E->streams[i])
			stream_stop(E, E->streams[i]);
	pool_fini(E);
	emu_graphs_fini(E);
	emu_events_fini(E);
	free(E->streams);
	for (size_t i = 0; i < E->nmodules; i++)
		free(E->modules[i].globals);
	free(E->modules);
	free(E->allocs);
	extent_fini(&E->alloc);
	munmap(E->mem, E->size);
	free(E);
}

static int
emu_mem_alloc(struct wk *w, uint64_t bytes, uint64_t *addr, cua_err *e)
{
	struct emu *E = w->be_state;
	uint64_t off;
	int r = 0;
	pthread_mutex_lock(&E->lock);
	if (E->nallocs == E->allocs_cap) {
		size_t cap = E->allocs_cap ? 2 * E->allocs_cap : 64;
		struct emu_alloc *n = realloc(E->allocs, cap * sizeof(*n));
		if (n == NULL) {
			r = cua_err_set(e, CUA_ENOMEM, "out of host memory");
			goto out;
		}
		E->allocs = n;
		E->allocs_cap = cap;
	}
	if (extent_get(&E->alloc, bytes, &off) != 0) {
		r = cua_err_set(e, CUA_ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY: %llu bytes requested, %llu of %llu in use",
				(unsigned long long)bytes, (unsigned long long)E->alloc.used,
				(unsigned long long)E->size);
		goto out;
	}
	/* Memory never allocated before reads as zero (a fresh mapping); reused memory reads as zero only because
	 * emu_mem_free cleared it (--scrub on). CUDA promises neither. */
	E->allocs[E->nallocs++] = (struct emu_alloc){E->base + off, bytes};
	*addr = E->base + off;
out:
	pthread_mutex_unlock(&E->lock);
	return r;
}

/*
 * Clears the block [off, off + len) of the emulated memory and nothing else: the whole pages inside it are
 * given back to the system (MADV_DONTNEED: they read as zeros next time and cost no memory until then), the
 * partial pages at its ends are memset, since a page may be shared with a neighbour's live block.
 */
void
emu_clear(struct emu *E, uint64_t off, uint64_t len)
{
	uint64_t page = E->page, end = off + len;
	uint64_t lo = (off + page - 1) / page * page, hi = end / page * page;
	if (hi <= lo) { /* no whole page inside the block */
		memset(E->mem + off, 0, len);
		return;
	}
	memset(E->mem + off, 0, lo - off);
	if (madvise(E->mem + lo, hi - lo, MADV_DONTNEED) != 0)
		memset(E->mem + lo, 0, hi - lo);
	memset(E->mem + hi, 0, end - hi);
}

/* The core calls this after all work on the block has run (backend.h), so no stream thread touches it. The
 * block is cleared (with --scrub on) before it goes back to the allocator; with --scrub off its contents survive
 * and the next allocation of the same range reads them, as on a GPU. */
static int
emu_mem_free(struct wk *w, uint64_t addr, struct wk_tag tag, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	for (size_t i = 0; i < E->nallocs; i++) {
		if (E->allocs[i].addr == addr) {
			uint64_t off = addr - E->base, len = E->allocs[i].len;
			/* the whole extent: its rounding up to EMU_ALIGN is this block's too (the last one may end
			 * with the memory) */
			uint64_t ext = (len + EMU_ALIGN - 1) / EMU_ALIGN * EMU_ALIGN;
			if (w->opts.scrub)
				emu_clear(E, off, ext < E->size - off ? ext : E->size - off);
			extent_put(&E->alloc, off, len);
			E->allocs[i] = E->allocs[--E->nallocs];
			pthread_mutex_unlock(&E->lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&E->lock);
	return cua_err_set(e, CUA_ENOT_FOUND, "no allocation at 0x%llx", (unsigned long long)addr);
}

static int
emu_stream_create(struct wk *w, int priority, uint32_t *sid, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	int r = stream_new(E, priority, sid, e);
	pthread_mutex_unlock(&E->lock);
	return r;
}

static int
emu_stream_destroy(struct wk *w, uint32_t sid, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	if (sid < w->info.pool_streams || sid >= E->nstreams || E->streams[sid] == NULL) {
		pthread_mutex_unlock(&E->lock);
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	}
	struct emu_stream *s = E->streams[sid];
	E->streams[sid] = NULL;
	pthread_mutex_unlock(&E->lock);
	stream_stop(E, s); /* runs what is queued first */
	return 0;
}

/* ------------------------------------------------------------------ stream work */

struct launch_ctx {
	struct emu *E;
	const struct emu_kernel *k;
	const struct emu_dims *d;
	char fault[256];
};

static int
call_kernel(void **params, size_t n, void *ud)
{
	struct launch_ctx *L = ud;
	return L->k->fn(L->E, L->d, params, L->fault, sizeof(L->fault)) == 0 ? 0 : -1;
}

/* Runs a kernel over its copied argument buffer, on a pool thread. */
static void
run_launch(struct emu *E, struct emu_job *j)
{
	struct launch_ctx L = {E, j->u.launch.k, &j->u.launch.dims, ""};
	int r = cua_arena_with_params(&j->u.launch.args, call_kernel, &L);
	if (r == -1)
		wk_fatal(E->w, j->tag, L.fault);
	if (r != 0)
		wk_report(E->w, j->tag, (uint32_t)r, L.fault);
}

static void
run_memset(struct emu *E, struct emu_job *j)
{
	uint32_t width = j->u.set.width;
	uint64_t count = j->u.set.count;
	unsigned char *dst = count <= UINT64_MAX / width ? emu_ptr(E, j->u.set.dst, count * width) : NULL;
	if (dst == NULL)
		wk_fatal(E->w, j->tag, "CUDA_ERROR_ILLEGAL_ADDRESS: memset of unmapped device memory");
	if (width == 1)
		memset(dst, (int)j->u.set.value, count);
	else
		for (uint64_t i = 0; i < count; i++)
			memcpy(dst + i * width, &j->u.set.value, width); /* little-endian low bytes */
}

/* Runs one job on a pool thread. A fault ends the worker (wk_fatal). */
static void
run_job(struct emu *E, struct emu_job *j)
{
	static const char unmapped[] = "CUDA_ERROR_ILLEGAL_ADDRESS: copy touches unmapped device memory";
	switch (j->kind) {
	case EJ_HTOD:
	case EJ_DTOH: {
		void *dev = emu_ptr(E, j->u.copy.dev, j->u.copy.bytes);
		if (dev == NULL)
			wk_fatal(E->w, j->tag, unmapped);
		if (j->kind == EJ_HTOD)
			memcpy(dev, j->u.copy.host, j->u.copy.bytes);
		else
			memcpy(j->u.copy.host, dev, j->u.copy.bytes);
		break;
	}
	case EJ_DTOD: {
		void *dst = emu_ptr(E, j->u.dtod.dst, j->u.dtod.bytes),
		     *src = emu_ptr(E, j->u.dtod.src, j->u.dtod.bytes);
		if (dst == NULL || src == NULL)
			wk_fatal(E->w, j->tag, unmapped);
		memmove(dst, src, j->u.dtod.bytes);
		break;
	}
	case EJ_MEMSET: run_memset(E, j); break;
	case EJ_LAUNCH: run_launch(E, j); break;
	case EJ_NOTICE: j->u.done(E->w, j->tag); break;
	case EJ_RECORD: emu_event_reached(E, j); break;
	case EJ_WAIT: break; /* it ran: the record it waited for was reached */
	}
}

struct emu_job *
emu_job_new(enum emu_job_kind kind, struct wk_tag tag, cua_err *e)
{
	struct emu_job *j = calloc(1, sizeof(*j));
	if (j == NULL) {
		cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory");
		return NULL;
	}
	j->kind = kind;
	j->tag = tag;
	if (kind == EJ_LAUNCH)
		cua_arena_init(&j->u.launch.args);
	return j;
}

static struct emu_stream *
stream_get(struct emu *E, uint32_t sid)
{
	pthread_mutex_lock(&E->lock);
	struct emu_stream *s = sid < E->nstreams ? E->streams[sid] : NULL;
	pthread_mutex_unlock(&E->lock);
	return s;
}

void
emu_stream_ready_locked(struct emu *E, struct emu_stream *s)
{
	struct emu_pool *P = &E->pool;
	if (!s->running && !s->on_ready && !s->parked) {
		TAILQ_INSERT_TAIL(&P->ready, s, ready_link);
		s->on_ready = true;
		P->nready++;
		/* more streams to run than threads that could take them: one more thread, up to the bound */
		if (P->busy + P->nready > P->nthreads && P->nthreads < P->max) {
			int rc = pool_grow(E);
			if (rc != 0)
				log_warn("emulated device: cannot start stream thread %u: %s", P->nthreads + 1,
					 strerror(rc));
		}
		pthread_cond_signal(&P->work);
	}
}

/* Queues j on stream sid; takes j in every case. */
int
emu_enqueue(struct emu *E, uint32_t sid, struct emu_job *j, cua_err *e)
{
	struct emu_stream *s = stream_get(E, sid);
	if (s == NULL) {
		job_free(E, j);
		return cua_err_set(e, CUA_ENOT_FOUND, "no stream %u", sid);
	}
	struct emu_pool *P = &E->pool;
	pthread_mutex_lock(&P->qlock);
	TAILQ_INSERT_TAIL(&s->jobs, j, link); /* transferred */
	s->queued++;
	emu_stream_ready_locked(E, s);
	pthread_mutex_unlock(&P->qlock);
	return 0;
}

static int
emu_copy(struct wk *w, enum emu_job_kind kind, uint32_t sid, uint64_t dev, void *host, uint64_t bytes,
	 struct wk_tag tag, cua_err *e)
{
	struct emu_job *j = emu_job_new(kind, tag, e);
	if (j == NULL)
		return e->code;
	j->u.copy.dev = dev;
	j->u.copy.host = host;
	j->u.copy.bytes = bytes;
	return emu_enqueue(w->be_state, sid, j, e);
}

static int
emu_htod(struct wk *w, uint32_t sid, uint64_t dst, const void *src, uint64_t bytes, struct wk_tag tag, cua_err *e)
{
	return emu_copy(w, EJ_HTOD, sid, dst, (void *)(uintptr_t)src, bytes, tag, e);
}

static int
emu_dtoh(struct wk *w, uint32_t sid, void *dst, uint64_t src, uint64_t bytes, struct wk_tag tag, cua_err *e)
{
	return emu_copy(w, EJ_DTOH, sid, src, dst, bytes, tag, e);
}

static int
emu_dtod(struct wk *w, uint32_t sid, uint64_t dst, uint64_t src, uint64_t bytes, struct wk_tag tag, cua_err *e)
{
	struct emu_job *j = emu_job_new(EJ_DTOD, tag, e);
	if (j == NULL)
		return e->code;
	j->u.dtod.dst = dst;
	j->u.dtod.src = src;
	j->u.dtod.bytes = bytes;
	return emu_enqueue(w->be_state, sid, j, e);
}

static int
emu_memset(struct wk *w, uint32_t sid, uint64_t dst, uint32_t value, uint32_t width, uint64_t count, struct wk_tag tag,
	   cua_err *e)
{
	struct emu_job *j = emu_job_new(EJ_MEMSET, tag, e);
	if (j == NULL)
		return e->code;
	j->u.set.dst = dst;
	j->u.set.count = count;
	j->u.set.value = value;
	j->u.set.width = width;
	return emu_enqueue(w->be_state, sid, j, e);
}

/* The cluster a launch runs with, as CUDA picks it: the launch's (checked against the kernel's attributes by
 * launch_attr.c), else the kernel's REQUIRED_CLUSTER_* when all three are set (the grid must be a multiple of
 * it), else 1x1x1. */
static int
emu_cluster_of(const struct wk_launch *l, const struct emu_fattr *a, uint32_t cluster[3], cua_err *e)
{
	const int32_t *q = a->req_cluster;
	for (int i = 0; i < 3; i++)
		cluster[i] = l->cluster[i] ? l->cluster[i] : 1;
	if ((l->cluster[0] | l->cluster[1] | l->cluster[2]) != 0 || q[0] <= 0 || q[1] <= 0 || q[2] <= 0)
		return 0;
	uint32_t size = (uint32_t)q[0] * (uint32_t)q[1] * (uint32_t)q[2]; /* each at most 16 (FUNC_SET_ATTRIBUTE) */
	uint32_t limit = a->nonportable ? CUA_MAX_CLUSTER_SIZE : CUA_MAX_CLUSTER_PORTABLE;
	if (size > limit)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "CUDA_ERROR_INVALID_CLUSTER_SIZE: the kernel's required cluster %dx%dx%d has %u "
				   "blocks, more than %u",
				   q[0], q[1], q[2], size, limit);
	for (int i = 0; i < 3; i++) {
		if (l->grid[i] % (uint32_t)q[i] != 0)
			return cua_err_set(e, CUA_EBAD_ARGUMENT,
					   "CUDA_ERROR_INVALID_CLUSTER_SIZE: grid %ux%ux%u is not a multiple of the "
					   "kernel's required cluster %dx%dx%d",
					   l->grid[0], l->grid[1], l->grid[2], q[0], q[1], q[2]);
		cluster[i] = (uint32_t)q[i];
	}
	return 0;
}

/* Copies the arguments (they live only during this call) and queues the kernel. Dynamic shared memory over the
 * function's maximum fails the launch as cuLaunchKernel does (CUDA_ERROR_INVALID_VALUE), without a fault. */
static int
emu_launch(struct wk *w, uint32_t sid, const struct wk_launch *l, struct wk_tag tag, cua_err *e)
{
	struct emu *E = w->be_state;
	const struct emu_kernel *k;
	struct emu_fattr attr;
	uint64_t global;
	int r = emu_fn_resolve(E, l->fn, &k, &attr, &global, e);
	if (r != 0)
		return r;
	if (l->nparams != k->nparams)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "CUDA_ERROR_INVALID_VALUE: %zu arguments for %u parameters",
				   l->nparams, k->nparams);
	if (l->shared_mem > (uint32_t)attr.max_dyn_shared)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "CUDA_ERROR_INVALID_VALUE: %u bytes of dynamic shared memory, more than kernel '%s' "
				   "may use (%d; raise its MAX_DYNAMIC_SHARED_SIZE_BYTES attribute)",
				   l->shared_mem, k->name, attr.max_dyn_shared);
	uint32_t cluster[3];
	if ((r = emu_cluster_of(l, &attr, cluster, e)) != 0)
		return r;
	struct emu_job *j = emu_job_new(EJ_LAUNCH, tag, e);
	if (j == NULL)
		return e->code;
	j->u.launch.k = k;
	memcpy(j->u.launch.dims.cluster, cluster, sizeof(cluster));
	j->u.launch.dims.cooperative = (l->flags & WREC_LAUNCH_COOPERATIVE) != 0;
	memcpy(j->u.launch.dims.grid, l->grid, sizeof(l->grid));
	memcpy(j->u.launch.dims.block, l->block, sizeof(l->block));
	j->u.launch.dims.shared_mem = l->shared_mem;
	j->u.launch.dims.global = global;
	for (size_t i = 0; i < l->nparams; i++)
		if (cua_arena_push(&j->u.launch.args, l->params[i], l->sizes[i]) != 0) {
			job_free(E, j);
			return cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory for arguments");
		}
	return emu_enqueue(w->be_state, sid, j, e);
}

/* A marker job after what is queued; without memory for one, waits for the stream here. */
static void
emu_notify(struct wk *w, uint32_t sid, struct wk_tag tag, wk_done_fn done)
{
	struct emu *E = w->be_state;
	cua_err e;
	struct emu_job *j = emu_job_new(EJ_NOTICE, tag, &e);
	if (j != NULL) {
		j->u.done = done;
		if (emu_enqueue(E, sid, j, &e) == 0)
			return;
	} else {
		struct emu_stream *s = stream_get(E, sid);
		log_warn("emulated device: no memory for a completion marker on stream %u; waiting for it", sid);
		if (s != NULL)
			stream_drain(E, s);
	}
	done(w, tag); /* an unknown stream has nothing queued */
}

const struct wk_backend backend_emu = {
	.name = "emu",
	.init = emu_init,
	.fini = emu_fini,
	.module_load = emu_module_load,
	.module_unload = emu_module_unload,
	.function_get = emu_function_get,
	.mem_alloc = emu_mem_alloc,
	.mem_free = emu_mem_free,
	.stream_create = emu_stream_create,
	.stream_destroy = emu_stream_destroy,
	.htod = emu_htod,
	.dtoh = emu_dtoh,
	.dtod = emu_dtod,
	.memset = emu_memset,
	.launch = emu_launch,
	.notify = emu_notify,
	.module_get_global = emu_module_get_global,
	.func_get_attr = emu_func_get_attr,
	.func_set_attr = emu_func_set_attr,
	.occupancy = emu_occupancy,
	.graph_create = emu_graph_create,
	.graph_set_args = emu_graph_set_args,
	.graph_destroy = emu_graph_destroy,
	.graph_launch = emu_graph_launch,
	.event_create = emu_event_create,
	.event_destroy = emu_event_destroy,
	.event_record = emu_event_record,
	.stream_wait_event = emu_stream_wait_event,
	.event_notify = emu_event_notify,
	.event_elapsed = emu_event_elapsed,
	.event_query = emu_event_query,
};
