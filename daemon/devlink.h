/*
 * devlink.h — the front-end's side of a GPU worker: the shared-memory region (link/), spawning the worker
 * (fork+exec, so the child starts clean before any CUDA initialisation), writing requests' command records
 * into its ring, the completion thread, and restarting a worker that died or reported a sticky fault.
 *
 * devlink knows requests only as far as their commands and staging go (struct request, request.h); what a
 * completion means is the caller's: devlink reports it through the callback given to dev_start.
 */
#ifndef CUAD_DEVLINK_H
#define CUAD_DEVLINK_H

#include "daemon.h"
#include "extent.h"
#include "ring.h"
#include "session.h"
#include "wrec.h"

#include <sys/types.h>
#include <uthash.h>

enum dev_state { DEV_STARTING, DEV_READY, DEV_RESTARTING, DEV_FAILED };

struct retired_worker; /* devlink.c: a faulted worker swapped out, still to be reaped */

/* Called by a device's completion thread without fe->lock (the callee takes it: no lock is held across a
 * completion, as NNG's aio contract has it), once per request that left the worker: the items of r carry the
 * worker's results (or CONTEXT_LOST when the worker died, DEVICE_HUNG when the watchdog killed it). The callee
 * owns r. */
typedef void (*dev_done_fn)(struct fe *fe, struct request *r);

/* What guards each field: CUA_GUARDED_BY(cuad_fe_lock) is fe->lock (daemon.h); "fixed" fields are set before the
 * device serves and never change; the completion thread's own are touched by it alone, or while it does not run. */
struct device {
	struct fe *fe; /* fixed */
	int index;     /* fixed: daemon-visible index */
	int ordinal;   /* fixed: backend device ordinal */
	char uuid[48]; /* fixed: its UUID as nvidia-smi -L writes it, GPU-… ("": not known); set at start (main.c) */
	enum dev_state state CUA_GUARDED_BY(cuad_fe_lock);
	uint32_t gen CUA_GUARDED_BY(cuad_fe_lock); /* worker generation, 1.. */
	uint32_t restarts CUA_GUARDED_BY(cuad_fe_lock);
	/* fe->devs[i] only: restarts of the device's session workers (--isolation session), each of which counts its
	 * own gen and restarts; the operator's STATUS and the metrics add them to the shared worker's */
	uint32_t session_restarts CUA_GUARDED_BY(cuad_fe_lock);
	/* The worker's process and what it reported: written by the completion thread while it (re)starts the worker
	 * (state not DEV_READY: nothing is dispatched to it, fe->lock not needed for that), read by it alone otherwise
	 * and by others only once the state they read under fe->lock is DEV_READY or DEV_FAILED. */
	pid_t pid;
	struct wdev_info info;
	char why[CUA_ERR_DETAIL_MAX];                       /* why the device is unusable (DEV_FAILED) */
	dev_done_fn done;                                   /* fixed */
	struct session *owner CUA_GUARDED_BY(cuad_fe_lock); /* --isolation session: the session this worker serves
							      * alone (NULL: shared) */
	TAILQ_ENTRY(device) pool_link;                      /* workerpool.c: idle or retired (fe->lock) */
	/* the shared-memory link: made and unmade with the worker, as pid above */
	int shm_fd;
	unsigned char *shm;
	size_t shm_len;
	struct ring *cmd, *cpl;
	unsigned char *staging;
	uint64_t staging_size; /* fixed: its staging area's bytes (--staging, or --isolation-staging) */
	struct extent_alloc staging_alloc CUA_GUARDED_BY(cuad_fe_lock);
	pthread_t cpl_thread;    /* the thread that starts and stops the device (main, or the pool thread) */
	bool cpl_thread_started; /* as cpl_thread */
	atomic_int stop;         /* atomic */
	uint32_t next_pool CUA_GUARDED_BY(cuad_fe_lock);
	uint32_t in_flight CUA_GUARDED_BY(cuad_fe_lock);
	struct request *inflight CUA_GUARDED_BY(cuad_fe_lock); /* uthash on request id */
	uint64_t CUA_GUARDED_BY(cuad_fe_lock) allocations, alloc_bytes;
	/* the watchdog (devlink.c), the completion thread's alone */
	uint64_t wd_beat;    /* the worker's heartbeat as last seen */
	uint64_t wd_seen_ms; /* when it last moved (or the watch began afresh) */
	uint64_t wd_poll_ms; /* the completion thread's previous look */
	uint32_t hung_s;     /* non-zero: the watchdog killed this generation after that many seconds */
	bool dying;          /* the completion thread's: the worker reported a sticky fault and exits next */
	/* Recovery after a fault (the completion thread's phase log, devlink.c "Recovery"): when it began on the
	 * front-end's clock (0: none under way), and which of its last phases were logged. */
	uint64_t recover_ms CUA_GUARDED_BY(cuad_fe_lock);
	bool recover_dispatched CUA_GUARDED_BY(cuad_fe_lock);
	/* --spare-worker (a shared device only): a worker of the next generation, spawned and initialised (its
	 * context made) by the spare thread in the background, swapped in at once when the worker faults or dies.
	 * spare is the one being started (spare_ready false: the spare thread alone touches it, others only its
	 * stop) or ready; the retired are faulted workers, killed and swapped out, that the spare thread reaps. */
	struct device *spare CUA_GUARDED_BY(cuad_fe_lock);
	bool spare_ready CUA_GUARDED_BY(cuad_fe_lock);
	bool spare_failed CUA_GUARDED_BY(cuad_fe_lock);    /* the last one could not start: no retry before a restart */
	bool spare_quit CUA_GUARDED_BY(cuad_fe_lock);      /* dev_stop: the spare thread ends (after the worker did) */
	uint32_t spare_swaps CUA_GUARDED_BY(cuad_fe_lock); /* restarts that a ready spare served */
	TAILQ_HEAD(, retired_worker) retired CUA_GUARDED_BY(cuad_fe_lock);
	pthread_cond_t spare_cond; /* with fe->lock: the spare thread has work, or a spare became ready or failed */
	pthread_t spare_thread;    /* lives as long as d: it is the parent (PR_SET_PDEATHSIG) of the workers it made */
	bool spare_thread_started; /* as cpl_thread */
};

/* Starts d's worker and waits for it to report its device (up to a minute). 0, or an error code with
 * d->why said and d->state DEV_FAILED. A shared device (d is fe->devs[d->index]) under --spare-worker yes and
 * --isolation shared also gets its spare thread, which keeps a spare worker ready. Called from main before the
 * edge starts, without fe->lock. */
int dev_start(struct fe *fe, struct device *d, dev_done_fn done) CUA_EXCLUDES(cuad_fe_lock);
/* Stops the worker and its completion thread; the requests still in flight on d are moved to *left
 * (initialised here), unanswered, for the caller to free. Without fe->lock. */
void dev_stop(struct device *d, struct request_queue *left) CUA_EXCLUDES(cuad_fe_lock);

/* A new worker for the same device as tmpl (index, ordinal, info), started and ready, in *out (malloc'd).
 * Blocks until it reported (up to a minute); without fe->lock. 0 or an error code (logged). */
int dev_spawn(struct fe *fe, const struct device *tmpl, dev_done_fn done, struct device **out)
	CUA_EXCLUDES(cuad_fe_lock);
/* Stops a worker made by dev_spawn and frees it; nothing may be in flight on it. Without fe->lock. */
void dev_destroy(struct device *d) CUA_EXCLUDES(cuad_fe_lock);

/* Places r's staging and writes its commands into d's ring. 0: in flight (r now belongs to d until the done
 * callback); -1: no room now (staging or ring full), retry later; CUA_ETOO_LARGE: can never fit (r->status
 * set). Caller holds fe->lock. */
int do_dev_dispatch(struct fe *fe, struct device *d, struct request *r) CUA_REQUIRES(cuad_fe_lock);
/* Gives back r's staging extents (after its reply was built). Caller holds fe->lock. */
void do_dev_release_staging(struct device *d, struct request *r) CUA_REQUIRES(cuad_fe_lock);
/* The staging bytes of stage i of r, placed by do_dev_dispatch. */
const void *dev_stage_bytes(const struct device *d, const struct request *r, uint32_t i);

#endif
