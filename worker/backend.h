/*
 * backend.h — what a device backend implements (struct wk_backend) and the few services the worker core
 * offers it. Backends get typed calls and never see a record of link/wrec.h: the core decodes commands,
 * checks them, resolves host pointers and builds launch arguments.
 *
 * Threads: init, fini and the synchronous commands are called on the worker's main thread. Stream work
 * (htod, dtoh, dtod, memset, launch) and notify for stream sid are called on sid's owner: the main thread with
 * --submit-threads 1, else one submit thread per stream (submit.c), so calls for one stream never overlap and
 * come in record order, while calls for different streams, and a synchronous command, may run concurrently.
 * The core never runs stream_destroy(sid) while sid's owner may still issue on it, nor mem_free,
 * module_unload or host_unregister while any submit thread has unissued work. Stream work is queued and
 * finishes later on threads of the backend's own (emu: a bounded pool serving the streams in turn; cuda: the
 * GPU and the reactor); a backend reports its outcome only through the struct wk_host it was given at init and
 * the wk_done_fn of each notice: it never calls the core by name (core.h, "Layers").
 *
 * Completion: the core never waits for stream work. After issuing a request it asks for one notice per stream
 * the request touched (wk_backend.notify); the request's completion is written when the last notice is done.
 */
#ifndef CUAW_BACKEND_H
#define CUAW_BACKEND_H

#include "cua_error.h"
#include "cua_idmap.h"
#include "cua_proto.h"
#include "worker.h"
#include "wrec.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

struct wk;
struct wksub;
struct tracker; /* the core's per-request state; opaque to backends */

/* The command a piece of stream work belongs to: where its asynchronous outcome goes. A plain value; valid
 * until the notice that follows the work on its stream is done (the core guarantees that notice exists). */
struct wk_tag {
	struct tracker *t;
	uint32_t idx; /* command index in its request */
	uint32_t sid; /* notices: the stream (set by the core) */
	uint64_t t0;  /* notices: when the core asked for it, monotonic ns (the request's work there was issued) */
};

/* A launch, as the core hands it over. params and sizes are valid during the launch call only. */
struct wk_launch {
	uint64_t fn; /* a function id from function_get */
	uint32_t grid[3], block[3];
	uint32_t shared_mem;
	uint32_t flags;        /* WREC_LAUNCH_* */
	uint32_t cluster[3];   /* blocks per cluster as the launch asked, checked (launch_attr.c); {0,0,0}: none */
	int32_t priority;      /* with WREC_LAUNCH_PRIORITY, within the device's range */
	void **params;         /* params[i] points at argument i, 16-byte aligned, as cuLaunchKernel reads it */
	const uint32_t *sizes; /* bytes of argument i */
	size_t nparams;
};

/* One node of a graph, as the core hands it to graph_create: a launch (launch.params valid during the call
 * only), a memset (dst, value, width, count) or a device-to-device copy (dst, src, bytes). */
struct wk_gnode {
	uint32_t kind; /* WR_LAUNCH, WR_MEMSET or WR_DTOD */
	struct wk_launch launch;
	uint64_t dst, src, bytes, count;
	uint32_t value, width;
};

/* Called by a backend, from any thread, exactly once per notify. */
typedef void (*wk_done_fn)(struct wk *w, struct wk_tag tag);

/* What the core offers a backend, given to init (static: it outlives the backend). Any thread. */
struct wk_host {
	/* A failure of queued work: tag's command gets status and detail (copied; may be NULL). Distinct commands
	 * may be reported concurrently. Never blocks on the device. */
	void (*report)(struct wk *w, struct wk_tag tag, uint32_t status, const char *detail);
	/* A sticky device fault: each of the n tags' commands gets CUA_EDEVICE with detail (a request may repeat;
	 * n may be 0 when no work can be named), their requests' completions are written flagged fatal, and the
	 * process exits so the front-end starts a fresh worker. Never returns (wk_host_fatal_many says so). */
	void (*fatal_many)(struct wk *w, const struct wk_tag *tags, size_t n, const char *detail);
};

/* h->fatal_many, declared not to return. */
_Noreturn static inline void
wk_host_fatal_many(const struct wk_host *h, struct wk *w, const struct wk_tag *tags, size_t n, const char *detail)
{
	h->fatal_many(w, tags, n, detail);
	abort(); /* a bug: fatal_many exits the process */
}

/* The sticky fault of tag's command (h->fatal_many of one tag). Never returns. */
_Noreturn static inline void
wk_host_fatal(const struct wk_host *h, struct wk *w, struct wk_tag tag, const char *detail)
{
	wk_host_fatal_many(h, w, &tag, 1, detail);
}

/*
 * The backend. Every int-returning call returns 0 or a CUA_E* code with the reason in e. All are called on
 * the main thread. Ids (module, function, stream) are the backend's own, small and non-zero except stream
 * ids, where 0 .. info.pool_streams-1 are the pool streams created by init.
 */
struct wk_backend {
	const char *name;
	/* Opens the device and fills *info (pool_streams included; those streams exist on return). The backend
	 * keeps host (it reports through it from then on). On failure the worker reports e and exits; fini is not
	 * called. */
	int (*init)(struct wk *w, const struct wk_host *host, struct wdev_info *info, cua_err *e);
	/* Drains every stream and releases the device. */
	void (*fini)(struct wk *w);
	/* Optional: called once on each submit thread before its first call (cuda: makes the context current). */
	void (*thread_init)(struct wk *w);

	/* Synchronous commands. img is only borrowed; *params (function_get) is malloc'd and becomes the
	 * caller's. */
	int (*module_load)(struct wk *w, const void *img, size_t len, uint32_t fmt, uint64_t *id, cua_err *e);
	int (*module_unload)(struct wk *w, uint64_t id, cua_err *e);
	int (*function_get)(struct wk *w, uint64_t mod, const char *name, uint64_t *fn, cua_param_info **params,
			    uint32_t *nparams, cua_err *e);
	int (*mem_alloc)(struct wk *w, uint64_t bytes, uint64_t *addr, cua_err *e);
	/*
	 * Frees the allocation at addr. With w->opts.scrub (--scrub on, the default) its bytes are cleared first,
	 * so that whoever is handed the same memory next reads zeros, never the last owner's data. Ordering: the
	 * core calls this only when every earlier command that could use the memory has completed on every stream
	 * (the front-end makes MEM_FREE a barrier of its session, and no other session can name the address), so
	 * the clear is issued after all work on it without waiting for other sessions' streams. A backend never
	 * touches bytes outside the allocation. When the clear fails without a sticky fault, the memory stays
	 * allocated (leaked, with a log line) rather than freed uncleared, and the call still returns 0. A sticky
	 * fault ends the worker through the host's fatal_many under tag.
	 */
	int (*mem_free)(struct wk *w, uint64_t addr, struct wk_tag tag, cua_err *e);
	int (*stream_create)(struct wk *w, int priority, uint32_t *sid, cua_err *e);
	/* The core has already asked for a notice covering what the current request queued on sid. */
	int (*stream_destroy)(struct wk *w, uint32_t sid, cua_err *e);
	/*
	 * Optional (NULL: UNSUPPORTED). module_get_global: the address and size of the module's global (a
	 * __device__ or __constant__ variable) named name; it lives as long as the module. func_get_attr /
	 * func_set_attr: a CUA_FATTR_* attribute of function fn (set: MAX_DYNAMIC_SHARED and PREFERRED_CARVEOUT
	 * only, the value range-checked by the front-end against the device); set is called only after every
	 * earlier launch was issued, and later launches of fn see the value. occupancy: active blocks of fn per
	 * multiprocessor for block_size threads and shared_mem bytes of dynamic shared memory.
	 * func_get_attr and occupancy are also called by a stream's owner, before it issues a cluster or a
	 * cooperative launch of fn (launch_attr.c), so they must be safe on any thread.
	 */
	int (*module_get_global)(struct wk *w, uint64_t mod, const char *name, uint64_t *addr, uint64_t *bytes,
				 cua_err *e);
	int (*func_get_attr)(struct wk *w, uint64_t fn, uint32_t attr, int32_t *value, cua_err *e);
	int (*func_set_attr)(struct wk *w, uint64_t fn, uint32_t attr, int32_t value, cua_err *e);
	int (*occupancy)(struct wk *w, uint64_t fn, uint32_t block_size, uint32_t shared_mem, uint32_t *blocks,
			 cua_err *e);
	/*
	 * Optional (NULL: UNSUPPORTED): graphs. graph_create builds the n nodes into one graph (each depends on the
	 * one before), ready to launch, and returns its id; nothing runs. graph_set_args gives kernel node `node`
	 * new arguments (l's params, sizes and nparams; the rest of l is unused): launches issued before it are not
	 * affected, later ones are. graph_launch is stream work (on sid's owner, as launch): it queues the whole
	 * graph on sid, its failure reported under tag. The core calls set_args and destroy only after every earlier
	 * launch was issued (WK_BARRIER_ALL), and the front-end destroys a graph only once its launches completed;
	 * launches of one graph may be issued on several submit threads at once.
	 */
	int (*graph_create)(struct wk *w, const struct wk_gnode *nodes, uint32_t n, uint64_t *id, cua_err *e);
	int (*graph_set_args)(struct wk *w, uint64_t id, uint32_t node, const struct wk_launch *l, cua_err *e);
	int (*graph_destroy)(struct wk *w, uint64_t id, cua_err *e);
	int (*graph_launch)(struct wk *w, uint32_t sid, uint64_t id, struct wk_tag tag, cua_err *e);
	/* Optional: page-lock a client's shared buffer for fast copies (and undo it). */
	int (*host_register)(struct wk *w, void *p, size_t len, cua_err *e);
	void (*host_unregister)(struct wk *w, void *p);

	/*
	 * Stream work: queue it on stream sid (which the core knows to exist) and return. 0: queued; its failure,
	 * if any, is reported later with the host's report (or fatal_many for a sticky fault) under tag. Non-zero: nothing
	 * was queued and the command fails with e. Host pointers stay valid until the work is done.
	 */
	int (*htod)(struct wk *w, uint32_t sid, uint64_t dst, const void *src, uint64_t bytes, struct wk_tag tag,
		    cua_err *e);
	int (*dtoh)(struct wk *w, uint32_t sid, void *dst, uint64_t src, uint64_t bytes, struct wk_tag tag, cua_err *e);
	int (*dtod)(struct wk *w, uint32_t sid, uint64_t dst, uint64_t src, uint64_t bytes, struct wk_tag tag,
		    cua_err *e);
	/* width: 1, 2 or 4 bytes (checked by the core); value fits width. */
	int (*memset)(struct wk *w, uint32_t sid, uint64_t dst, uint32_t value, uint32_t width, uint64_t count,
		      struct wk_tag tag, cua_err *e);
	int (*launch)(struct wk *w, uint32_t sid, const struct wk_launch *l, struct wk_tag tag, cua_err *e);

	/*
	 * Completion notice: calls done(w, tag) exactly once, from any thread and possibly before returning, when
	 * everything queued on sid so far has finished. Cannot fail: a backend that cannot watch the stream waits
	 * for it instead. If the device faults first, the backend blames tag.idx with the host's fatal_many (the
	 * worker exits) instead of calling done.
	 */
	void (*notify)(struct wk *w, uint32_t sid, struct wk_tag tag, wk_done_fn done);

	/*
	 * Events (optional as a group: NULL event_create means UNSUPPORTED). Ids are the backend's, small and
	 * non-zero. event_create/destroy/elapsed/query run on the main thread; destroy, elapsed and query only
	 * after every submit thread issued what it was handed. event_destroy releases the id at once; uses still
	 * queued (records, waits, notices) keep the event itself alive until they are done (CUDA: cuEventDestroy
	 * of an event in flight is legal). event_record and stream_wait_event are stream work for sid's owner:
	 * the core orders them after every earlier record of the event was issued; they report failure through
	 * their return value. event_notify, called by the owner of the stream the event was last recorded on
	 * (after that record was issued), calls done(w, tag) exactly once, from any thread, when the last record
	 * issued so far has been reached — at once when the event was never recorded; a fault ends the worker
	 * instead, as for notify. elapsed: milliseconds between the two events' last records (BUSY while either
	 * is not reached, BAD_ARGUMENT without timing or a record). query: *ready 1 when the last record was
	 * reached (or there was none).
	 */
	int (*event_create)(struct wk *w, uint32_t flags, uint64_t *id, cua_err *e);
	int (*event_destroy)(struct wk *w, uint64_t id, cua_err *e);
	int (*event_record)(struct wk *w, uint32_t sid, uint64_t id, cua_err *e);
	int (*stream_wait_event)(struct wk *w, uint32_t sid, uint64_t id, cua_err *e);
	void (*event_notify)(struct wk *w, uint64_t id, struct wk_tag tag, wk_done_fn done);
	int (*event_elapsed)(struct wk *w, uint64_t start, uint64_t end, float *ms, cua_err *e);
	int (*event_query)(struct wk *w, uint64_t id, int *ready, cua_err *e);
};

/* A client's memfd mapped into the worker (WR_HOST_REGISTER). Main thread only. */
struct hostbuf {
	unsigned char *p;
	size_t len;
};

/* The core's view of one live backend stream id. Main thread only. */
struct wk_stream {
	uint64_t mark; /* serial of the last request that queued work on it (and has no notice for it yet) */
};

/* The core's view of one live backend event id. Main thread only. */
struct wk_event {
	uint8_t recorded; /* a record was handed over (or issued) */
	uint32_t sid;     /* the stream of its last record */
};

/* The stream ids a backend hands out: 0 .. pool_streams-1 for the pool (init), the rest from pool_streams up to
 * this (a stream_create past it fails with CUA_EQUOTA), every one of them timed (done_at). */
#define WK_STREAM_ID_MAX 4095u

/* A stream the request being issued queued work on, and the command blamed if it faults. */
struct wk_touch {
	uint32_t sid, blame;
};

/* The worker. Fields marked (core) are the core's alone. */
#define WK_DONE_CHUNK 1024
#define WK_DONE_CHUNKS 64 /* streams past 65536 are not timed (their work counts from its notice) */

struct wk {
	struct worker_opts opts;
	const struct wk_backend *be;
	void *be_state;         /* the backend's own, set by init */
	struct wdev_info info;  /* filled by init */
	unsigned char *staging; /* the staging area of the shared region (backends may page-lock it) */
	uint64_t staging_size;
	unsigned char *shm;       /* (core) */
	struct ring *cmd, *cpl;   /* (core) */
	pthread_mutex_t cpl_lock; /* (core) serialises producers of the completion ring */
	cua_idmap hostbufs;       /* (core) host buffer id (1 ..) -> struct hostbuf * (commands.c) */
	cua_idmap streams;        /* (core) live stream id -> struct wk_stream * (streams.c) */
	struct wk_touch *touched; /* (core) streams of the request being issued */
	size_t ntouched, touched_cap;
	uint64_t serial;         /* (core) of the request being issued */
	struct tracker *issuing; /* (core) the request being issued */
	struct wksub *sub;       /* (core) the submit threads; NULL: the main thread issues (--submit-threads 1) */
	bool alone;              /* (core) no record waits behind the one being run: a small batch for one
				  * idle submit thread is issued on the main thread (submit.c, wksub_push) */
	/* (core) per stream, when its last notice was done (monotonic ns): chunks of WK_DONE_CHUNK streams, made by
	 * the main thread as streams are added and never moved, read by whichever thread completes a notice */
	_Atomic(_Atomic uint64_t *) done_at[WK_DONE_CHUNKS];
	cua_idmap events; /* (core) live event id -> struct wk_event *; main thread only (commands_event.c) */
};
_Static_assert(WK_STREAM_ID_MAX < WK_DONE_CHUNK * WK_DONE_CHUNKS, "every stream's busy time is measured");

extern const struct wk_backend backend_emu;
#ifdef HAVE_CUDA_H
extern const struct wk_backend backend_cuda;
#endif

#endif
