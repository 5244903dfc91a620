/*
 * worker.h — the GPU worker process: one per device, spawned by the front-end with fork+exec before anything
 * touches CUDA. It reads command records from the shared-memory ring, runs them through its backend, and
 * writes one completion record per request once all of the request's work has finished.
 */
#ifndef CUAD_WORKER_H
#define CUAD_WORKER_H

#include "cua_arena.h"
#include "cua_error.h"
#include "cua_proto.h"
#include "wproto.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct worker_opts {
	int shm_fd;
	int device;
	uint32_t generation;
	const char *backend; /* "emu" or "cuda" */
	int emu_sm;          /* e.g. 90 */
	uint64_t emu_mem;
	unsigned pool_streams;
};

/* Per-request completion tracker: pending counts the outstanding asynchronous parts plus one hold by the
 * thread that issues the request. The one that drops it to zero writes the completion record. */
struct titem {
	uint32_t status;
	uint64_t value;
	char *detail; /* malloc'd or NULL */
	void *data;   /* malloc'd or NULL */
	uint32_t data_len;
};
struct tracker {
	uint64_t req;
	uint32_t ncmds;
	atomic_int pending;
	struct titem items[];
};

struct wk;

/* A stream operation handed to the backend: a private copy of its command. */
struct wop {
	struct wcmd *cmd; /* malloc'd copy, payload included */
	struct tracker *t;
	uint32_t idx;
	struct wop *next;
};

struct backend {
	const char *name;
	int (*init)(struct wk *w, struct wdev_info *info, cua_err *e);
	int (*module_load)(struct wk *w, const void *img, size_t len, uint32_t fmt, uint64_t *id, cua_err *e);
	int (*module_unload)(struct wk *w, uint64_t id, cua_err *e);
	/* *params is malloc'd and owned by the caller. */
	int (*function_get)(struct wk *w, uint64_t mod, const char *name, uint64_t *fn, cua_param_info **params,
			    uint32_t *nparams, cua_err *e);
	int (*mem_alloc)(struct wk *w, uint64_t bytes, uint64_t *addr, cua_err *e);
	int (*mem_free)(struct wk *w, uint64_t addr, cua_err *e);
	int (*stream_create)(struct wk *w, int priority, uint32_t *sid, cua_err *e);
	int (*stream_destroy)(struct wk *w, uint32_t sid, cua_err *e);
	/* Stream work (HTOD, DTOH, DTOD, MEMSET, LAUNCH, STREAM_SYNC). The backend owns op from here and
	 * reports through tracker_set/tracker_put (taking tracker_hold for work that completes later). */
	void (*submit)(struct wk *w, struct wop *op);
	/* After all commands of a request were submitted: arrange completion notices for the streams it used. */
	void (*flush)(struct wk *w, struct tracker *t);
	void (*fini)(struct wk *w);
	/* Optional: page-lock a client's shared buffer for fast copies (and undo it). */
	int (*host_register)(struct wk *w, void *p, size_t len, cua_err *e);
	void (*host_unregister)(struct wk *w, void *p);
};

/* A client's memfd mapped into the worker (HOST_REGISTER). */
struct hostbuf {
	unsigned char *p;
	size_t len;
};

struct wk {
	struct worker_opts opts;
	const struct backend *be;
	void *be_state;
	unsigned char *shm;
	struct shm_hdr *hdr;
	struct ring *cmd, *cpl;
	unsigned char *staging;
	uint64_t staging_size;
	pthread_mutex_t cpl_lock; /* serialises producers of the completion ring */
	struct hostbuf *hostbufs;  /* id = index + 1; changed by the main thread only, between requests */
	size_t nhostbufs;
	struct wdev_info info;
};

void tracker_hold(struct tracker *t);
/* Records item idx's outcome; detail may be NULL. Thread-safe for distinct idx. */
void tracker_set(struct tracker *t, uint32_t idx, uint32_t status, uint64_t value, const char *detail);
void tracker_put(struct wk *w, struct tracker *t);

/* A sticky device fault while running item idx of t: writes t's completion (idx gets CUA_EDEVICE with detail,
 * unfinished items CONTEXT_LOST) flagged fatal, and exits the process. Never returns. */
_Noreturn void wk_fatal(struct wk *w, struct tracker *t, uint32_t idx, const char *detail);
/* The same when the device cannot say which work faulted (a sticky CUDA error surfaces in whatever is
 * queried next): every one of the n (tracker, item) pairs gets CUA_EDEVICE with detail; a tracker may repeat. */
_Noreturn void wk_fatal_many(struct wk *w, struct tracker **t, const uint32_t *idx, size_t n, const char *detail);

/* Parses a LAUNCH command's payload: its dimensions, and its arguments pushed into arena (initialised by
 * the caller) — the argument buffer rebuilt as cuLaunchKernel reads it. 0, or an error code. */
int wk_launch_args(const struct wcmd *c, const struct wlaunch_dims **dims, cua_arena *arena);

/* Bounds-checked view of the staging area; NULL when [off, off+len) is outside it. */
void *wk_staging(struct wk *w, uint64_t off, uint64_t len);
/* The host side of an HTOD/DTOH command: the staging area (format 0) or a registered host buffer. */
void *wk_copy_host(struct wk *w, const struct wcmd *c);

extern const struct backend backend_emu;
#ifdef HAVE_CUDA_H
extern const struct backend backend_cuda;
/* Loads the driver and counts devices: 0 and *count >= 1, or an error saying why no GPU is usable.
 * Initialises CUDA in the calling process: the front-end runs it in a child (`cuasyncd --cuda-probe`). */
int cuda_probe(int *count, cua_err *e);
#endif

int worker_main(const struct worker_opts *o);

#endif
