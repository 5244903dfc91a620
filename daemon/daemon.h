/*
 * daemon.h — the core of the cuasyncd front-end: its configuration and the state every part shares.
 *
 * The front-end never calls CUDA (GPU work happens in worker processes, see worker/) and its core never
 * touches NNG or msgpack: edge.c is the only file that does, and it hands the core decoded bytes and a reply
 * function (struct edge_ops). (metrics.c serves the core's counters over HTTP on NNG streams; it only reads them,
 * through stats.h.) A request's life is request.c; the parts it uses are below it:
 *
 *   edge.c ──▶ request.c ──▶ scheduler.c   (sequence order, fairness)
 *                  │   └────▶ cmd-*.c   (one file per family of operations: validate, plan, complete, reply)
 *                  │             └────▶ plan.c, session.c (tables)
 *                  └────────▶ devlink.c (workers: spawn, rings, completions — reported back through a callback)
 *
 * Locking: one mutex, fe->lock, guards sessions, handle tables, request queues, device state and the
 * staging allocators. Functions named do_* expect the caller to hold it; the others take it themselves.
 * The compiler checks this under ./configure CC=clang --enable-thread-safety (common/cua_tsa.h): each field that
 * fe->lock guards says CUA_GUARDED_BY(cuad_fe_lock), each do_* function CUA_REQUIRES(cuad_fe_lock), each that
 * takes it CUA_EXCLUDES(cuad_fe_lock); fe_lock and fe_unlock below take and give it. cuad_fe_lock is the name
 * the analysis knows fe->lock by (cuad-lock.h says why it cannot name fe->lock itself).
 */
#ifndef CUAD_DAEMON_H
#define CUAD_DAEMON_H

#include "cua_clock.h"
#include "cua_error.h"
#include "cua_proto.h"
#include "cuad-limits.h"
#include "cuad-lock.h"
#include "stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#define CUAD_MAX_LISTEN 16

struct config {
	struct tenant_table *tenants; /* tenant.h: from the configuration file; never NULL once parsed */
	const char *listen[CUAD_MAX_LISTEN];
	int nlisten;
	const char *backend; /* auto, emu, cuda */
	int emu_sm;
	int emu_devices;
	uint64_t emu_mem;
	const char *devices; /* comma-separated subset of device indices, or NULL for all */
	unsigned pool_streams;
	unsigned contexts;
	size_t max_message;
	uint64_t staging_bytes;
	uint64_t isolation_staging_bytes; /* ISO_SESSION: the staging area of each session's own worker */
	uint64_t ring_bytes;
	uint64_t session_mem;          /* device memory per session and device, bytes (0: session_mem_pct decides) */
	unsigned session_mem_pct;      /* … else this share of each device's memory (0: no limit) */
	unsigned session_streams;      /* streams per session, its pool streams included */
	unsigned session_events;       /* events per session */
	unsigned session_modules;      /* modules per session */
	uint64_t session_module_bytes; /* bytes of module images per session */
	uint64_t session_host_bytes;   /* bytes of registered host memory per session (page-locked on a GPU) */
	unsigned session_handles;
	unsigned session_graphs;      /* graphs per session (--session-graphs) */
	unsigned session_graph_nodes; /* nodes of a session's graphs together */
	/* bytes of a session's graphs, their nodes' arguments included (reserve.h) */
	uint64_t session_graph_bytes;
	/* --isolation session: workers of one session each, all sessions together; of one tenant's sessions,
	 * unless its section sets `workers` (0: no limit) */
	unsigned session_workers, tenant_session_workers;
	unsigned session_inflight;
	unsigned session_window;
	unsigned session_pending;
	/* flow control (issue 10): see request.c's do_admit and edge.c's contexts */
	uint64_t session_reply_bytes;   /* bytes of replies queued for one connection before it gets QUOTA */
	uint64_t session_request_bytes; /* bytes of one session's admitted requests not yet finished */
	uint64_t request_bytes;         /* the same, all sessions together */
	unsigned send_timeout_ms;       /* a reply not taken by its connection within it closes the connection */
	unsigned contexts_max;          /* receive contexts grow on demand from `contexts` up to it */
	unsigned seq_gap_timeout_ms;    /* how long ordered requests wait for a missing sequence number */
	const char *tls_cert, *tls_key;
	int ready_fd;
	int ipc_mode;             /* -1: umask */
	const char *operator_url; /* ipc:// listener whose sessions see every session (NULL: none) */
	enum isolation { ISO_SHARED, ISO_SESSION } isolation; /* one worker per device, or per session */
	unsigned isolation_pool;                              /* ISO_SESSION: idle workers kept ready per device */
	int operator_mode;                                    /* the operator socket's permissions */
	bool scrub; /* clear device memory on free (--scrub, default on); the workers get it as --scrub */
	/* --watchdog-timeout: a worker with work in flight whose heartbeat stands this long is killed and
	 * restarted (devlink.c); 0: off */
	unsigned watchdog_s;
	unsigned emu_threads;       /* --emu-threads: the emulated device's stream threads, at most (0: derived) */
	unsigned submit_threads;    /* --submit-threads: a worker's threads issuing stream work (0: derived) */
	bool spare_worker;          /* --spare-worker: a shared device keeps a spare worker ready (devlink.c) */
	unsigned drain_timeout;     /* s: how long SIGTERM waits for the work in the workers (--drain-timeout) */
	unsigned hello_timeout;     /* s: a connection that has not said HELLO by then is closed (0: never) */
	unsigned handshake_timeout; /* s: a remote connection still in its TLS/SP handshake by then is closed */
	unsigned handshake_max;     /* remote connections in their handshakes at most; past it the oldest go */
	unsigned fd_reserve;        /* descriptors kept free for local clients (edge-listen.c) */
	/* authentication (auth.c) */
	bool allow_insecure_tcp;    /* plain tcp:// listeners allowed (--allow-insecure-tcp) */
	const char *tls_ca;         /* tls+tcp:// peers must present a certificate signed by it (--tls-ca) */
	const char *token_file;     /* name:token lines (--token-file) */
	const char *operator_group; /* its members are operators too (--operator-group) */
	const char *socket_group;   /* group of the ipc:// socket files (--socket-group) */

	/* monitoring (issue 14: metrics.c) */
	const char *metrics_listen; /* --metrics-listen: http:// address of the Prometheus endpoint (NULL: off) */
	bool metrics_sessions;      /* --metrics-sessions: per-session series on it too */
	const char *config_path;    /* --config (NULL: the default file, when it exists) */
	const char *self_exe;

	/* --metrics-token-file: the bearer token of operators' scrapes (NULL: none; metrics.c) */
	const char *metrics_token_file;
};

/* The defaults of every option: the options' rows (options-table.c), which --help states too. */
void config_defaults(struct config *c);
/* Derives what depends on other options: session_pending follows contexts unless it was given. */
void config_settle(struct config *c, bool pending_given);

/* The parsers of option values, the command line's and the configuration file's alike. 0, or -1 when s is
 * malformed or out of range. Pure. */
int cfg_parse_size(const char *s, uint64_t *out);                           /* "4096", "64M", "1G", "2T" */
int cfg_parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out); /* within lo..hi */
int cfg_parse_share(const char *s, uint64_t *bytes, unsigned *pct);         /* "25%" (pct), "4G" or "0" (bytes) */

struct request;
struct session;
struct device;
struct reply;
struct identity;
struct auth;

/* What the NNG edge gives the core. All but encode are called with fe->lock held and must not block or call
 * back. */
struct edge_ops {
	/* Sends rep as the answer to the request that came with ctx (the edge's receive context); ctx is the
	 * edge's again afterwards. rep and what it points to are only valid during the call. Returns the bytes
	 * queued for the connection; when rep->counted and it is not 0, the edge later calls
	 * request_reply_sent(fe, pipe, bytes) exactly once, when the connection took the reply or the send
	 * failed (its context receives again then). 0: nothing was queued and no such call follows. */
	size_t (*reply)(void *ctx, const struct reply *rep);
	/* reply in two steps, for a reply whose bulk bytes are copied without fe->lock: encode builds the message
	 * of rep for ctx (any thread, no lock needed; rep valid during the call) and says its length in *bytes (NULL:
	 * out of memory); send then sends it (or, NULL, gives ctx back) exactly as reply would, fe->lock held. */
	void *(*encode)(void *ctx, const struct reply *rep, size_t *bytes);
	size_t (*send)(void *ctx, void *msg, bool counted);
	/* Gives ctx back without answering: the request is dropped, its client never gets a reply. */
	void (*drop)(void *ctx);
	/* At teardown, after the edge stopped: frees what ctx of a request that was never answered still holds (a
	 * shared-memory channel's reply context; the edge's own contexts went with it). NULL: nothing to free. */
	void (*forget)(void *ctx);
	/* Frees the received message that a request's decoded fields point into. */
	void (*msg_free)(void *msg);
	/* The pid of the peer of connection pipe when the kernel vouches for it (ipc://), else -1. */
	int64_t (*peer_pid)(uint32_t pipe);
	/* Fills in what the transport of connection pipe says about its peer (struct identity in session.h:
	 * transport, kernel credentials, certificate verified); leaves the rest alone. NULL: nothing known. */
	void (*peer)(uint32_t pipe, struct identity *id);
};

TAILQ_HEAD(session_list, session);

/* Each field says what guards it: CUA_GUARDED_BY(cuad_fe_lock) is fe->lock, checked by clang; "startup" fields are
 * set before any thread starts and only read afterwards. */
struct fe {
	/* startup, except the reloadable limits: a reload (options.c) writes them under fe->lock and they are read
	 * under it (not annotated: most of cfg is read anywhere) */
	struct config cfg;
	cua_mutex lock;              /* the big lock ("Locking" above); the analysis calls it cuad_fe_lock */
	pthread_cond_t cond;         /* the dispatcher: work may be ready (waited on with fe->lock) */
	const struct edge_ops *edge; /* startup */

	struct device *devs; /* startup (the array); each device's fields say what guards them (devlink.h) */
	int ndevs;           /* startup */
	const char *backend; /* startup: the chosen backend: "cuda" or "emu" */

	/* sessions (session.c) */
	struct session_list sessions CUA_GUARDED_BY(cuad_fe_lock);
	struct session *by_pipe CUA_GUARDED_BY(cuad_fe_lock); /* uthash on pipe id */
	struct pipe_tomb *tombs CUA_GUARDED_BY(cuad_fe_lock); /* uthash on pipe id: pipes that left (the newest
								 * CUAD_TOMBS) */
	STAILQ_HEAD(tomb_fifo, pipe_tomb) tomb_fifo CUA_GUARDED_BY(cuad_fe_lock); /* oldest first */
	uint32_t ntombs CUA_GUARDED_BY(cuad_fe_lock);
	uint32_t nsessions CUA_GUARDED_BY(cuad_fe_lock);
	uint64_t next_session CUA_GUARDED_BY(cuad_fe_lock);

	/* scheduler (scheduler.c) */
	struct session_list ready CUA_GUARDED_BY(cuad_fe_lock); /* sessions with queued requests, served round-robin */
	uint32_t pending_closes CUA_GUARDED_BY(cuad_fe_lock);   /* sessions whose pipe left, not yet closed */
	bool dispatching CUA_GUARDED_BY(cuad_fe_lock); /* the dispatcher walks the ready list: sessions are freed
							* after its pass */
	struct session_list zombies CUA_GUARDED_BY(cuad_fe_lock);
	bool wake_deferred CUA_GUARDED_BY(cuad_fe_lock); /* a receiving thread admits a request (do_sched_defer) */
	bool wake_owed CUA_GUARDED_BY(cuad_fe_lock);     /* … and the dispatcher was to be woken meanwhile */
	struct session_list gaps CUA_GUARDED_BY(cuad_fe_lock); /* sessions with ordered requests waiting for a
								 * missing seq (scheduler.c) */
	pthread_t dispatcher;                                  /* main thread (sched_start, sched_stop) */
	bool dispatcher_started;                               /* main thread */

	uint64_t next_req CUA_GUARDED_BY(cuad_fe_lock);
	uint64_t request_bytes CUA_GUARDED_BY(cuad_fe_lock); /* bytes of admitted requests not yet freed (request.c) */
	uint64_t requests CUA_GUARDED_BY(cuad_fe_lock), errors CUA_GUARDED_BY(cuad_fe_lock);
	uint64_t start_ms;                              /* startup */
	uint64_t listener_restarts;                     /* unused here: the edge counts its own (struct edge) */
	atomic_int stopping;                            /* atomic: read anywhere without the lock */
	bool tearing_down CUA_GUARDED_BY(cuad_fe_lock); /* request_stop runs: completions no longer free sessions (it
							 * frees them at the end) */
	bool draining CUA_GUARDED_BY(cuad_fe_lock);     /* SIGTERM: every new request is answered SHUTTING_DOWN
						     * (request_drain_begin) */
	uint32_t client_in_flight CUA_GUARDED_BY(cuad_fe_lock); /* client requests (not cleanups) inside the workers */
	struct auth *auth; /* startup: tokens and operators (auth.c); NULL: auth_start not called, nothing required */
	uint32_t insecure_listeners;                       /* startup (auth_start counts them), for STATUS */
	struct stats stats CUA_GUARDED_BY(cuad_fe_lock);   /* monitoring counters (stats.h), bumped where requests
							  * finish */
	cuad_devmask drained CUA_GUARDED_BY(cuad_fe_lock); /* bit i: the operator drained device i (DRAIN): it takes
							    * no new objects */
};

/* fe->lock: take and give it (the analysis sees cuad_fe_lock taken and given). */
static inline void
fe_lock(struct fe *fe) CUA_ACQUIRE(cuad_fe_lock) CUA_NO_TSA
{
	pthread_mutex_lock(&fe->lock);
}

static inline void
fe_unlock(struct fe *fe) CUA_RELEASE(cuad_fe_lock) CUA_NO_TSA
{
	pthread_mutex_unlock(&fe->lock);
}

/* Waits on cv with fe->lock held before and after (released meanwhile). until: NULL waits without a limit. */
static inline int
fe_cond_wait(struct fe *fe, pthread_cond_t *cv, const struct timespec *until) CUA_REQUIRES(cuad_fe_lock) CUA_NO_TSA
{
	return until != NULL ? pthread_cond_timedwait(cv, &fe->lock, until) : pthread_cond_wait(cv, &fe->lock);
}

/* Zeroes fe, sets the defaults and initialises its lock and lists. */
void fe_init(struct fe *fe);

#endif
