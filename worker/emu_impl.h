/*
 * emu_impl.h — the emulated device's state, shared by its files. Backends' internals: nothing else includes this.
 *
 * Layers (calls go down only; core.h draws the worker's whole picture):
 *   backend_emu.c                  opens and closes the device; the backend's table of calls
 *   emu_graph.c                    graphs: their nodes queued as stream work
 *   emu_work.c    emu_event.c      copies, memsets, launches | events: jobs queued on streams
 *   emu_stream.c  emu_module.c     the streams' FIFOs, pool and jobs | modules, globals, attributes
 *                 emu_image.c      module images
 *                 emu_kernels.c    the built-in kernels
 *   emu_mem.c                      device memory, and the view of it kernels and copies get (emu_ptr)
 */
#ifndef CUAW_EMU_IMPL_H
#define CUAW_EMU_IMPL_H

#include "backend.h"
#include "cua_arena.h"
#include "emu_image.h"
#include "emu_kernels.h"
#include "extent.h"
#include "idtab.h"

#include <pthread.h>
#include <stdbool.h>
#include <sys/queue.h>

#define EMU_ALIGN 256u
#define EMU_MODULES_MAX (1u << 24) /* module ids 1 .. this: a function id is the module id << 8 | kernel + 1 */

struct emu;
struct emu_event; /* emu_event.c */
struct emu_job;
struct emu_stream;

/* The engines of the emulated device, as on a GPU: kernels (and memsets, which a GPU runs as kernels) take the
 * kernel threads (--emu-threads); copies take the copy engines, so a copy never waits behind other streams'
 * kernels. Event records, stream waits and completion notices take the copy engines too: on a GPU the host
 * interface handles them, not the SMs, and they take microseconds. A stream's jobs still run one at a time in
 * order whichever engine each takes. */
enum emu_engine { EMU_ENGINE_KERNEL, EMU_ENGINE_COPY, EMU_ENGINES };

/* What a job does, given by whoever queues it: the FIFO (emu_stream.c) calls these and never a feature file. */
struct emu_job_ops {
	enum emu_engine engine; /* which threads run it */
	/* Runs the job on a pool thread, no lock held; a fault ends the worker (E->host). */
	void (*run)(struct emu *E, struct emu_job *j);
	/* Optional: releases what the job holds, before the FIFO frees it (after run, or unrun). No lock held. */
	void (*fini)(struct emu *E, struct emu_job *j);
	/* Optional: whether j, first on stream s, cannot run yet; if so it has parked s, which whoever unblocks it
	 * puts back with emu_stream_ready_locked. Caller holds pool.qlock. */
	bool (*blocks)(struct emu_stream *s, const struct emu_job *j);
};

/* One piece of stream work, queued by its stream's owner, run and freed by a pool thread. */
struct emu_job {
	TAILQ_ENTRY(emu_job) link;
	const struct emu_job_ops *ops;
	struct wk_tag tag;
	union {
		struct {
			uint64_t dev, bytes;
			void *host; /* HTOD: the source, DTOH: the destination */
		} copy;
		struct {
			uint64_t dst, src, bytes;
		} dtod;
		struct {
			uint64_t dst, count;
			uint32_t value, width;
		} set;
		struct {
			const struct emu_kernel *k;
			struct emu_dims dims;
			cua_arena args; /* a copy: the core's arguments live only during the launch call */
		} launch;
		wk_done_fn done; /* a notice */
		struct {
			struct emu_event *ev; /* a reference held by the job */
			uint64_t n;           /* a record: the record's number; a wait: the record waited for */
		} event;
	} u;
};
TAILQ_HEAD(emu_jobs, emu_job);

/* A stream: its FIFO of jobs, all under the pool's qlock. */
struct emu_stream {
	TAILQ_ENTRY(emu_stream) ready_link; /* on the ready list of its first job's engine while no thread serves it */
	struct emu_jobs jobs;
	uint64_t queued, done; /* jobs ever queued and finished */
	bool running;          /* a pool thread runs its first job now */
	bool on_ready;
	bool parked;                       /* its first job waits for an event's record (on the event's list) */
	TAILQ_ENTRY(emu_stream) park_link; /* the event's parked streams */
	int priority;                      /* kept, not used: the pool serves streams in turn */
};
TAILQ_HEAD(emu_streams, emu_stream);

/* One engine's threads. A stream with jobs is on the ready list of its first job's engine or running, never
 * both; a thread takes the first stream ready for its engine, runs one job, and puts the stream back at the tail
 * of the list of its next job's engine if it has more (round robin). All under the pool's qlock. */
struct emu_engine_threads {
	pthread_cond_t work;      /* a stream became ready for this engine, or stop */
	struct emu_streams ready; /* streams whose first job waits for this engine's thread */
	unsigned nready, busy;    /* streams on ready; threads running a job */
	pthread_t *threads;       /* started on demand, up to max */
	unsigned nthreads, max;
};

/* The stream threads: the kernel threads and the copy engines (enum emu_engine). */
struct emu_pool {
	pthread_mutex_t qlock; /* every stream's jobs and flags, and the fields below */
	pthread_cond_t idle;   /* a job finished and someone drains (drainers > 0) */
	struct emu_engine_threads eng[EMU_ENGINES];
	int drainers;
	bool stop;
};

struct emu_alloc {
	uint64_t addr, len;
};

/* A module global: device memory allocated at load, freed at unload. */
struct emu_global {
	char name[EMU_GLOBAL_NAME_MAX + 1];
	uint64_t addr, bytes;
};

/* What FUNC_SET_ATTRIBUTE changes, per kernel of a module (CUDA keeps it per CUfunction, i.e. per module). */
struct emu_fattr {
	int32_t max_dyn_shared; /* bytes; EMU_DYN_SHARED_DEFAULT until set */
	int32_t carveout;       /* -1 (the default) or 0..100 */
	int32_t req_cluster[3]; /* REQUIRED_CLUSTER_WIDTH/HEIGHT/DEPTH: 0 until set */
	int32_t nonportable;    /* NON_PORTABLE_CLUSTER_SIZE_ALLOWED: 0 or 1 */
};
#define EMU_DYN_SHARED_DEFAULT (48 << 10)

/* A loaded module: the built-in kernels its image names (bit k: emu_kernels[k]; never 0), its globals and its
 * kernels' attributes. A function id is (module id << 8) | (kernel index + 1). */
struct emu_module {
	uint64_t kernels;
	struct emu_global *globals;
	uint32_t nglobals;
	struct emu_fattr attr[64];
};

struct emu {
	struct wk *w;
	const struct wk_host *host; /* what faults and failures of stream work are reported through */
	unsigned char *mem;         /* page-aligned (mmap) */
	uint64_t base, size;
	uint64_t page;        /* the system's page size */
	pthread_mutex_t lock; /* allocator, modules, streams table */
	struct extent_alloc alloc;
	cua_idmap allocs;  /* device address -> struct emu_alloc *: the live allocations */
	cua_idmap modules; /* module id -> struct emu_module * */
	cua_idmap streams; /* stream id -> struct emu_stream * */
	struct emu_pool pool;
	struct wk_idtab graphs; /* graph id -> struct emu_graph * (emu_graph.c) */
	cua_idmap events;       /* event id -> struct emu_event *, under lock; the events' state under pool.qlock */
};

/* emu_mem.c: memory (backend.h), and clearing [off, off + len) of it (and nothing else; caller holds E->lock or
 * owns the block). */
int emu_mem_alloc(struct wk *w, uint64_t bytes, uint64_t *addr, cua_err *e);
int emu_mem_free(struct wk *w, uint64_t addr, struct wk_tag tag, cua_err *e);
void emu_clear(struct emu *E, uint64_t off, uint64_t len);

/* emu_stream.c: the pool (init: one thread of each engine started, at most opts.emu_threads kernel threads and
 * EMU_COPY_ENGINES copy engines; fini: stops the threads once the streams drained), streams (stream_new: pool stream *sid when pool (init), else a fresh id of E->streams' range
 * in *sid; caller holds E->lock; streams_fini: drains and frees every stream) and the backend's stream calls and
 * notices (backend.h). */
int emu_pool_init(struct emu *E, cua_err *e);
void emu_pool_fini(struct emu *E);
int emu_stream_new(struct emu *E, int priority, bool pool, uint32_t *sid, cua_err *e);
void emu_streams_fini(struct emu *E);
int emu_stream_create(struct wk *w, int priority, uint32_t *sid, cua_err *e);
int emu_stream_destroy(struct wk *w, uint32_t sid, cua_err *e);
void emu_notify(struct wk *w, uint32_t sid, struct wk_tag tag, wk_done_fn done);
/* A new job doing ops under tag, or NULL with e; emu_job_free releases (ops->fini) and frees one. */
struct emu_job *emu_job_new(const struct emu_job_ops *ops, struct wk_tag tag, cua_err *e);
void emu_job_free(struct emu *E, struct emu_job *j);
/* Queues j on stream sid; takes j in every case (0, or the reason in e). */
int emu_enqueue(struct emu *E, uint32_t sid, struct emu_job *j, cua_err *e);
/* Stream s may run again (it has jobs, or was parked). Caller holds pool.qlock. */
void emu_stream_ready_locked(struct emu *E, struct emu_stream *s);

/* emu_work.c: stream work (backend.h); graphs queue their nodes through dtod, memset and launch. */
int emu_htod(struct wk *w, uint32_t sid, uint64_t dst, const void *src, uint64_t bytes, struct wk_tag tag, cua_err *e);
int emu_dtoh(struct wk *w, uint32_t sid, void *dst, uint64_t src, uint64_t bytes, struct wk_tag tag, cua_err *e);
int emu_dtod(struct wk *w, uint32_t sid, uint64_t dst, uint64_t src, uint64_t bytes, struct wk_tag tag, cua_err *e);
int emu_memset(struct wk *w, uint32_t sid, uint64_t dst, uint32_t value, uint32_t width, uint64_t count,
	       struct wk_tag tag, cua_err *e);
int emu_launch(struct wk *w, uint32_t sid, const struct wk_launch *l, struct wk_tag tag, cua_err *e);

/* emu_module.c: the backend calls of modules, functions and their globals and attributes (backend.h). */
int emu_module_load(struct wk *w, const void *img, size_t len, uint32_t fmt, uint64_t *id, cua_err *e);
int emu_module_unload(struct wk *w, uint64_t id, cua_err *e);
int emu_function_get(struct wk *w, uint64_t mod, const char *name, uint64_t *fn, cua_param_info **params,
		     uint32_t *nparams, cua_err *e);
int emu_module_get_global(struct wk *w, uint64_t mod, const char *name, uint64_t *addr, uint64_t *bytes, cua_err *e);
int emu_func_get_attr(struct wk *w, uint64_t fn, uint32_t attr, int32_t *value, cua_err *e);
int emu_func_set_attr(struct wk *w, uint64_t fn, uint32_t attr, int32_t value, cua_err *e);
int emu_occupancy(struct wk *w, uint64_t fn, uint32_t block_size, uint32_t shared_mem, uint32_t *blocks, cua_err *e);
/* Frees every module left (the worker is finishing; their memory goes with the device's). */
void emu_modules_fini(struct emu *E);
/* Function fn's kernel, its module's attributes for it (attr may be NULL) and the address of the module global
 * the kernel reads (0: none; global may be NULL), or NOT_FOUND with e. Any thread (takes E->lock). */
int emu_fn_resolve(struct emu *E, uint64_t fn, const struct emu_kernel **K, struct emu_fattr *attr, uint64_t *global,
		   cua_err *e);

/* emu_graph.c: graphs (backend.h). emu_graphs_fini frees every graph left (the worker is finishing). */
int emu_graph_create(struct wk *w, const struct wk_gnode *nodes, uint32_t n, uint64_t *id, cua_err *e);
int emu_graph_set_args(struct wk *w, uint64_t id, uint32_t node, const struct wk_launch *l, cua_err *e);
int emu_graph_destroy(struct wk *w, uint64_t id, cua_err *e);
int emu_graph_launch(struct wk *w, uint32_t sid, uint64_t id, struct wk_tag tag, cua_err *e);
void emu_graphs_fini(struct emu *E);

/* emu_event.c: the backend's event calls (backend.h). */
int emu_event_create(struct wk *w, uint32_t flags, uint64_t *id, cua_err *e);
int emu_event_destroy(struct wk *w, uint64_t id, cua_err *e);
int emu_event_record(struct wk *w, uint32_t sid, uint64_t id, cua_err *e);
int emu_stream_wait_event(struct wk *w, uint32_t sid, uint64_t id, cua_err *e);
void emu_event_notify(struct wk *w, uint64_t id, struct wk_tag tag, wk_done_fn done);
int emu_event_elapsed(struct wk *w, uint64_t start, uint64_t end, float *ms, cua_err *e);
int emu_event_query(struct wk *w, uint64_t id, int *ready, cua_err *e);
/* Every event freed at the end (emu_fini, after every stream drained). */
void emu_events_fini(struct emu *E);

#endif
