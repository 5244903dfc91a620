/*
 * backend_emu.c — the emulated device: device memory is host memory behind fake device addresses, kernels
 * come from the built-in library (emu_kernels.c) and run on one thread per stream, in stream order. A fault
 * (an illegal address, bad_write) ends the worker exactly as a sticky CUDA fault does.
 */
#include "config.h"

#include "cua_arena.h"
#include "cua_log.h"
#include "emu_kernels.h"
#include "extent.h"
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define EMU_ALIGN 256u
#define EMU_MAX_STREAMS 4096u

struct emu_stream {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct wop *head, *tail;
	int priority;
	int stop;
};

struct emu_alloc {
	uint64_t addr, len;
};

struct emu_module {
	unsigned char *image;
	size_t len;
};

struct emu {
	struct wk *w;
	unsigned char *mem;
	uint64_t base, size;
	pthread_mutex_t lock; /* allocator, modules, streams table */
	struct extent_alloc alloc;
	struct emu_alloc *allocs;
	size_t nallocs, allocs_cap;
	struct emu_module *modules;
	size_t nmodules;
	struct emu_stream **streams;
	size_t nstreams;
};

void *
emu_ptr(struct emu *E, uint64_t addr, uint64_t len)
{
	if (addr < E->base || addr - E->base > E->size || len > E->size - (addr - E->base))
		return NULL;
	return E->mem + (addr - E->base);
}

static void run_op(struct emu *E, struct wop *op);

static void *
stream_main(void *arg)
{
	void **a = arg;
	struct emu *E = a[0];
	struct emu_stream *s = a[1];
	free(arg);
	for (;;) {
		pthread_mutex_lock(&s->lock);
		while (s->head == NULL && !s->stop)
			pthread_cond_wait(&s->cond, &s->lock);
		struct wop *op = s->head;
		if (op == NULL) { /* stop requested and drained */
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		s->head = op->next;
		if (s->head == NULL)
			s->tail = NULL;
		pthread_mutex_unlock(&s->lock);
		run_op(E, op);
	}
}

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
	struct emu_stream *s = calloc(1, sizeof(*s));
	void **arg = malloc(2 * sizeof(void *));
	if (s == NULL || arg == NULL) {
		free(s);
		free(arg);
		return cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory");
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->priority = priority;
	arg[0] = E;
	arg[1] = s;
	if (pthread_create(&s->thread, NULL, stream_main, arg) != 0) {
		free(s);
		free(arg);
		return cua_err_set(e, CUA_ENOMEM, "emulated device: cannot start a stream thread");
	}
	if (slot == E->nstreams) {
		struct emu_stream **n = realloc(E->streams, (E->nstreams + 1) * sizeof(*n));
		if (n == NULL) {
			pthread_mutex_lock(&s->lock);
			s->stop = 1;
			pthread_cond_signal(&s->cond);
			pthread_mutex_unlock(&s->lock);
			pthread_join(s->thread, NULL);
			free(s);
			return cua_err_set(e, CUA_ENOMEM, "emulated device: out of host memory");
		}
		E->streams = n;
		E->nstreams++;
	}
	E->streams[slot] = s;
	*sid = (uint32_t)slot;
	return 0;
}

static void
stream_stop(struct emu_stream *s)
{
	pthread_mutex_lock(&s->lock);
	s->stop = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
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
	pthread_mutex_init(&E->lock, NULL);
	if (extent_init(&E->alloc, E->size, EMU_ALIGN) != 0)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory");
	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "cuasync emulated device %d", w->opts.device);
	snprintf(info->backend, sizeof(info->backend), "emu");
	info->sm_major = (uint32_t)w->opts.emu_sm / 10;
	info->sm_minor = (uint32_t)w->opts.emu_sm % 10;
	info->total_mem = E->size;
	info->multiprocessors = 4;
	info->prio_least = 0;
	info->prio_greatest = -5;
	info->pool_streams = w->opts.pool_streams ? w->opts.pool_streams : 4;
	for (unsigned i = 0; i < info->pool_streams; i++) {
		uint32_t sid;
		int r = stream_new(E, 0, &sid, e);
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
			stream_stop(E->streams[i]);
	free(E->streams);
	for (size_t i = 0; i < E->nmodules; i++)
		free(E->modules[i].image);
	free(E->modules);
	free(E->allocs);
	extent_fini(&E->alloc);
	munmap(E->mem, E->size);
	free(E);
}

static int
emu_module_load(struct wk *w, const void *img, size_t len, uint32_t fmt, uint64_t *id, cua_err *e)
{
	struct emu *E = w->be_state;
	if (len == 0)
		return cua_err_set(e, CUA_EMODULE, "empty module image");
	struct emu_module m = {malloc(len), len};
	if (m.image == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of host memory for a %zu-byte module", len);
	memcpy(m.image, img, len);
	pthread_mutex_lock(&E->lock);
	size_t slot = E->nmodules;
	for (size_t i = 0; i < E->nmodules; i++)
		if (E->modules[i].image == NULL) {
			slot = i;
			break;
		}
	if (slot == E->nmodules) {
		struct emu_module *n = realloc(E->modules, (E->nmodules + 1) * sizeof(*n));
		if (n == NULL) {
			pthread_mutex_unlock(&E->lock);
			free(m.image);
			return cua_err_set(e, CUA_ENOMEM, "out of host memory");
		}
		E->modules = n;
		E->nmodules++;
	}
	E->modules[slot] = m;
	pthread_mutex_unlock(&E->lock);
	*id = slot + 1;
	return 0;
}

static int
emu_module_unload(struct wk *w, uint64_t id, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	int r = 0;
	if (id == 0 || id > E->nmodules || E->modules[id - 1].image == NULL)
		r = cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)id);
	else {
		free(E->modules[id - 1].image);
		E->modules[id - 1].image = NULL;
	}
	pthread_mutex_unlock(&E->lock);
	return r;
}

static int
emu_function_get(struct wk *w, uint64_t mod, const char *name, uint64_t *fn, cua_param_info **params,
		 uint32_t *nparams, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	int present = mod >= 1 && mod <= E->nmodules && E->modules[mod - 1].image != NULL;
	/* The kernel must be named in the image, as it is in a real module. */
	int named = present && memmem(E->modules[mod - 1].image, E->modules[mod - 1].len, name, strlen(name)) != NULL;
	pthread_mutex_unlock(&E->lock);
	if (!present)
		return cua_err_set(e, CUA_ENOT_FOUND, "no module %llu", (unsigned long long)mod);
	for (size_t k = 0; named && k < emu_nkernels; k++) {
		if (strcmp(emu_kernels[k].name, name) != 0)
			continue;
		uint32_t n = emu_kernels[k].nparams;
		*params = malloc(n ? n * sizeof(cua_param_info) : 1);
		if (*params == NULL)
			return cua_err_set(e, CUA_ENOMEM, "out of host memory");
		memcpy(*params, emu_kernels[k].params, n * sizeof(cua_param_info));
		*nparams = n;
		*fn = k + 1;
		return 0;
	}
	return cua_err_set(e, CUA_ENOT_FOUND, "CUDA_ERROR_NOT_FOUND: no kernel named '%s' in the module", name);
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
				(unsigned long long)bytes, (unsigned long long)E->alloc.used, (unsigned long long)E->size);
		goto out;
	}
	/* Fresh memory reads as zero on this device (not promised by CUDA): give back pages of freed memory. */
	E->allocs[E->nallocs++] = (struct emu_alloc){E->base + off, bytes};
	*addr = E->base + off;
out:
	pthread_mutex_unlock(&E->lock);
	return r;
}

static int
emu_mem_free(struct wk *w, uint64_t addr, cua_err *e)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	for (size_t i = 0; i < E->nallocs; i++) {
		if (E->allocs[i].addr == addr) {
			uint64_t len = E->allocs[i].len;
			extent_put(&E->alloc, addr - E->base, len);
			E->allocs[i] = E->allocs[--E->nallocs];
			pthread_mutex_unlock(&E->lock);
			madvise(E->mem + (addr - E->base), len, MADV_DONTNEED);
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
	stream_stop(s); /* runs what is queued first */
	return 0;
}

struct launch_ctx {
	struct emu *E;
	const struct emu_kernel *k;
	const struct wlaunch_dims *d;
	char fault[256];
};

static int
call_kernel(void **params, size_t n, void *ud)
{
	struct launch_ctx *L = ud;
	if (n != L->k->nparams)
		return snprintf(L->fault, sizeof(L->fault), "CUDA_ERROR_INVALID_VALUE: %zu arguments for %u parameters", n,
				L->k->nparams),
		       CUA_EBAD_ARGUMENT;
	return L->k->fn(L->E, L->d, params, L->fault, sizeof(L->fault)) == 0 ? 0 : -1;
}

/* Runs on the stream's thread. */
static void
run_op(struct emu *E, struct wop *op)
{
	struct wk *w = E->w;
	const struct wcmd *c = op->cmd;
	char fault[256] = "";
	uint32_t status = CUA_OK;
	switch (c->op) {
	case W_STREAM_SYNC: break;
	case W_HTOD:
	case W_DTOH: {
		void *stg = wk_copy_host(w, c);
		void *dev = emu_ptr(E, c->a, c->c);
		if (stg == NULL) {
			status = CUA_EINTERNAL;
			snprintf(fault, sizeof(fault), "copy outside the staging area or host buffer");
			break;
		}
		if (dev == NULL)
			wk_fatal(w, op->t, op->idx, "CUDA_ERROR_ILLEGAL_ADDRESS: copy touches unmapped device memory");
		if (c->op == W_HTOD)
			memcpy(dev, stg, c->c);
		else
			memcpy(stg, dev, c->c);
		break;
	}
	case W_DTOD: {
		void *dst = emu_ptr(E, c->a, c->c), *src = emu_ptr(E, c->b, c->c);
		if (dst == NULL || src == NULL)
			wk_fatal(w, op->t, op->idx, "CUDA_ERROR_ILLEGAL_ADDRESS: copy touches unmapped device memory");
		memmove(dst, src, c->c);
		break;
	}
	case W_MEMSET: {
		uint32_t width = c->format;
		if (width != 1 && width != 2 && width != 4) {
			status = CUA_EBAD_ARGUMENT;
			snprintf(fault, sizeof(fault), "memset width %u", width);
			break;
		}
		unsigned char *dst = c->c <= UINT64_MAX / width ? emu_ptr(E, c->a, c->c * width) : NULL;
		if (dst == NULL)
			wk_fatal(w, op->t, op->idx, "CUDA_ERROR_ILLEGAL_ADDRESS: memset of unmapped device memory");
		if (width == 1)
			memset(dst, (int)c->b, c->c);
		else
			for (uint64_t i = 0; i < c->c; i++)
				memcpy(dst + i * width, &c->b, width); /* little-endian low bytes */
		break;
	}
	case W_LAUNCH: {
		if (c->a == 0 || c->a > emu_nkernels) {
			status = CUA_ENOT_FOUND;
			snprintf(fault, sizeof(fault), "no function %llu", (unsigned long long)c->a);
			break;
		}
		/* Rebuild the argument buffer as cuLaunchKernel would read it, and run the kernel over it. */
		const struct wlaunch_dims *d;
		cua_arena arena;
		cua_arena_init(&arena);
		int r = wk_launch_args(c, &d, &arena);
		if (r != 0) {
			cua_arena_fini(&arena);
			status = (uint32_t)r;
			snprintf(fault, sizeof(fault), "malformed launch arguments");
			break;
		}
		struct launch_ctx L = {E, &emu_kernels[c->a - 1], d, ""};
		r = cua_arena_with_params(&arena, call_kernel, &L);
		cua_arena_fini(&arena);
		if (r == -1)
			wk_fatal(w, op->t, op->idx, L.fault);
		if (r != 0) {
			status = (uint32_t)r;
			snprintf(fault, sizeof(fault), "%s", L.fault);
		}
		break;
	}
	default:
		status = CUA_EINTERNAL;
		snprintf(fault, sizeof(fault), "not a stream command: %u", c->op);
	}
	tracker_set(op->t, op->idx, status, 0, status ? fault : NULL);
	tracker_put(w, op->t);
	free(op->cmd);
	free(op);
}

static void
emu_submit(struct wk *w, struct wop *op)
{
	struct emu *E = w->be_state;
	pthread_mutex_lock(&E->lock);
	struct emu_stream *s = op->cmd->stream < E->nstreams ? E->streams[op->cmd->stream] : NULL;
	pthread_mutex_unlock(&E->lock);
	if (s == NULL) {
		tracker_set(op->t, op->idx, CUA_ENOT_FOUND, 0, "no such stream");
		free(op->cmd);
		free(op);
		return;
	}
	tracker_hold(op->t);
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

static void
emu_flush(struct wk *w, struct tracker *t)
{
	/* every stream op completes its own part of the tracker */
}

const struct backend backend_emu = {
	.name = "emu",
	.init = emu_init,
	.module_load = emu_module_load,
	.module_unload = emu_module_unload,
	.function_get = emu_function_get,
	.mem_alloc = emu_mem_alloc,
	.mem_free = emu_mem_free,
	.stream_create = emu_stream_create,
	.stream_destroy = emu_stream_destroy,
	.submit = emu_submit,
	.flush = emu_flush,
	.fini = emu_fini,
};
