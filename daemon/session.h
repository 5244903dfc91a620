/*
 * session.h — sessions (one per client connection) and their tables: handles (modules, functions, streams,
 * host buffers) and device allocations. Tables only: what a request does with them is request.c's and the
 * cmd-*.c files' business. Every function here expects fe->lock held and never blocks.
 */
#ifndef CUAD_SESSION_H
#define CUAD_SESSION_H

#include "cua_fdchan.h"
#include "cua_wire.h"
#include "daemon.h"
#include "fdtab.h"

#include <sys/queue.h>
#include <uthash.h>

/*
 * Release in sequence order. A request that frees an object (MEM_FREE, MODULE_UNLOAD, STREAM_DESTROY,
 * HOST_UNREGISTER) marks it released when it is validated, so every later request of the session that names
 * it is refused (NOT_FOUND, saying which request freed it), although the freeing command runs later. The
 * record leaves the table only when that command completed: the worker returns the address, stream or buffer
 * id to its allocator then, after every earlier command of the session (the freeing request is a barrier).
 * So no address, host buffer or handle is ever usable by two sessions, or by one session after it freed it.
 * A release that did not happen — its command failed, or the request failed as a whole after validation (each
 * row's complete and abandon) — gives the object back: the mark is cleared and the session may use or release it
 * again (a graph is the exception: validation already forgot it, so its handle goes either way).
 */
struct release {
	uint64_t req; /* the releasing request's id (0: not released) */
	uint64_t seq; /* its sequence number (0: unordered) */
};

/* What the front-end knows of an event (hslot.evflags), in the session's order: created with timing, and a
 * record of it was accepted. */
enum { EVF_TIMING = 1u << 0, EVF_RECORDED = 1u << 1 };

/* One object of a session's handle table. */
struct hslot {
	uint8_t kind; /* CUA_HK_*, 0 = free */
	uint8_t dev;
	uint16_t tag;
	uint32_t gen;
	bool stale;
	uint64_t wid;           /* the worker's id: module id, function id, stream id, host buffer id */
	uint32_t module_slot;   /* functions: their module */
	cua_param_info *params; /* functions: owned */
	uint32_t nparams;
	uint64_t size;          /* host buffers */
	uint8_t evflags;        /* events: EVF_* below (cmd-event.c) */
	uint32_t next_free;     /* free slots: the next free slot + 1, 0: none */
	struct release release; /* being released by a request not yet completed (see above) */
};

struct alloc_rec {
	uint64_t addr, len;
	uint32_t gen;
	uint8_t dev;
	bool stale;
	struct release release;
};

/* A module global the session looked up (MODULE_GET_GLOBAL): device memory that belongs to its module, usable
 * as an allocation of the session (copies, memset, launch pointers) while the module is; it is never freed on
 * its own (MEM_FREE refuses it) and leaves the table when its module does. */
struct global_rec {
	uint64_t addr, len;
	uint32_t module_slot; /* its module's handle slot: gen, release and staleness are the module's */
};

TAILQ_HEAD(request_queue, request);

/*
 * The limited resources of a session (daemon/reserve.h: one row each, with its limits). Admission reserves,
 * completion confirms: a request that makes one of them reserves it when it is validated (struct request.resv,
 * summed in struct session.resv), every limit is checked against what the session holds plus what it has reserved,
 * and the reservation is given back when the request is settled — its row's complete has counted the object by
 * then when it was made. RES_MEM is per device (session.dev_resv, the request's device).
 */
enum res_kind {
	RES_MEM,          /* device memory, bytes, on one device */
	RES_MODULES,      /* modules */
	RES_MODULE_BYTES, /* bytes of module images */
	RES_STREAMS,      /* streams (its pool streams count as held) */
	RES_EVENTS,       /* events */
	RES_HOST_BYTES,   /* registered host memory, bytes */
	RES_HANDLES,      /* handles of every kind */
	RES_GRAPH_BYTES,  /* bytes of graph nodes and their arguments, which the worker keeps while the graph lives */
	RES_COUNT
};

/*
 * Who is on the other end of a session's connection (auth.c decides what it may do). The edge fills in what
 * the transport vouches for (edge_ops.peer) when the session is made: the kernel's credentials of an ipc://
 * peer (SO_PEERCRED, read once when the connection came), whether a tls+tcp:// peer's certificate was verified
 * against --tls-ca. HELLO adds the name of the token it carried. Nothing here is ever a secret.
 */
enum id_transport { ID_UNKNOWN, ID_IPC, ID_TCP, ID_TLS };
struct identity {
	enum id_transport transport;
	bool has_cred;      /* ipc://: uid, gid and pid come from the kernel */
	uint32_t uid, gid;  /* the peer process's effective ids when it connected */
	int64_t pid;        /* -1: unknown */
	bool cert_verified; /* tls+tcp:// with --tls-ca: the peer's certificate chains to that CA */
	/* The certificate's subject: NNG 1.5.2 does not expose the peer certificate (no NNG_OPT_TLS_PEER_CN),
	 * so this stays empty until a newer NNG does. */
	char subject[128];
	char addr[CUA_MAX_PEER_ADDR]; /* tcp:// and tls+tcp://: the peer's "IP:port" as the socket reports it */
	char token_name[64];          /* the --token-file entry its HELLO's token matched ("": none) */
	bool need_token;              /* HELLO must carry a valid token before anything else is served (auth.c) */
	bool authenticated;           /* the transport or a token vouches for the peer (kernel, certificate, token) */
	bool operator_allowed;        /* auth_is_operator: may use the operator endpoint */
	uint32_t refused;             /* HELLOs refused (only the first is logged: a peer must not flood the log) */
};

/* Guarded by fe->lock (cuad_fe_lock, daemon.h), every field, the tables its pointers lead to and the list links,
 * except id, pipe and born_ms: set when the session is made, never changed. */
struct session {
	uint64_t id;   /* never changes */
	uint32_t pipe; /* never changes */
	bool hello CUA_GUARDED_BY(cuad_fe_lock);
	bool operator CUA_GUARDED_BY(
		cuad_fe_lock); /* through the operator endpoint with an operator identity: STATUS shows every session */
	bool denied CUA_GUARDED_BY(
		cuad_fe_lock); /* through the operator endpoint without one: every request answers PERMISSION_DENIED */
	struct identity ident CUA_GUARDED_BY(cuad_fe_lock);
	bool pipe_gone
		CUA_GUARDED_BY(cuad_fe_lock); /* the edge saw the connection leave; the dispatcher closes the session */
	bool closing CUA_GUARDED_BY(cuad_fe_lock);
	bool zombie CUA_GUARDED_BY(cuad_fe_lock); /* to be freed once the dispatcher's pass ends */
	bool hello_overdue CUA_GUARDED_BY(
		cuad_fe_lock); /* no HELLO within --hello-timeout, or kicked: the edge was told to close its connection */
	uint64_t born_ms;      /* when the connection came (cua_now_ms); never changes */
	struct tenant *tenant CUA_GUARDED_BY(cuad_fe_lock); /* tenant.h: set at HELLO; NULL before */
	uint64_t busy_ns CUA_GUARDED_BY(cuad_fe_lock);      /* device time its work took (tenant_account) */
	enum isolation isolation CUA_GUARDED_BY(
		cuad_fe_lock); /* its workers: the shared ones, or its own (--isolation, else its tenant's) */
	uint16_t tag_salt CUA_GUARDED_BY(cuad_fe_lock);

	/* who it is, as its HELLO said (SESSIONS) */
	char client[CUA_MAX_IDENT + 1] CUA_GUARDED_BY(cuad_fe_lock);
	uint32_t client_pid CUA_GUARDED_BY(cuad_fe_lock);
	bool kicked CUA_GUARDED_BY(
		cuad_fe_lock); /* DISCONNECT: the edge is to close its connection (told once, as for hello_overdue) */

	struct hslot *slots CUA_GUARDED_BY(cuad_fe_lock) CUA_PT_GUARDED_BY(cuad_fe_lock);
	uint32_t CUA_GUARDED_BY(cuad_fe_lock) nslots, slots_cap;
	uint32_t free_slot CUA_GUARDED_BY(cuad_fe_lock); /* first free slot + 1, 0: none */
	uint32_t nhandles CUA_GUARDED_BY(cuad_fe_lock);
	struct alloc_rec *allocs CUA_GUARDED_BY(cuad_fe_lock) CUA_PT_GUARDED_BY(
		cuad_fe_lock); /* sorted by addr; live and stale records of a lost context may overlap */
	uint32_t CUA_GUARDED_BY(cuad_fe_lock) nallocs, allocs_cap;
	uint64_t alloc_max_len
		CUA_GUARDED_BY(cuad_fe_lock); /* the longest record ever added: how far back a lookup must look */
	struct global_rec *globals CUA_GUARDED_BY(cuad_fe_lock)
		CUA_PT_GUARDED_BY(cuad_fe_lock); /* unsorted: a session looks up few */
	uint32_t CUA_GUARDED_BY(cuad_fe_lock) nglobals, globals_cap;
	LIST_HEAD(fgraph_list, fgraph)
	graphs CUA_GUARDED_BY(cuad_fe_lock); /* graphtab.h: its graphs and what they pin */
	uint32_t CUA_GUARDED_BY(cuad_fe_lock) ngraphs,
		graph_nodes; /* graphs it holds and their nodes (--session-graphs) */
	/* what its graphs made hold in the worker (RES_GRAPH_BYTES) */
	uint64_t graph_bytes CUA_GUARDED_BY(cuad_fe_lock);
	/* reserved by its requests admitted and not yet settled (reserve.h); RES_MEM per device in dev_resv */
	uint64_t resv[RES_COUNT] CUA_GUARDED_BY(cuad_fe_lock);
	uint64_t *dev_resv CUA_GUARDED_BY(cuad_fe_lock) CUA_PT_GUARDED_BY(cuad_fe_lock);
	/* --isolation session: the devices on which it holds a worker of its own or has one reserved (from the
	 * validation of its first request there until it is freed: --session-workers, a tenant's `workers`) */
	cuad_devmask workers CUA_GUARDED_BY(cuad_fe_lock);
	cua_wire_counts counts CUA_GUARDED_BY(cuad_fe_lock);
	uint64_t host_buffers CUA_GUARDED_BY(cuad_fe_lock); /* live host buffers */
	struct fdtab fds CUA_GUARDED_BY(cuad_fe_lock);      /* passed over the fd channel, unclaimed (fdtab.h) */
	uint8_t fd_secret[CUA_FDCHAN_SECRET] CUA_GUARDED_BY(cuad_fe_lock); /* AUTH on the fd channel (fdchan.c) */
	bool has_fd_secret CUA_GUARDED_BY(cuad_fe_lock);        /* set at HELLO for ipc:// sessions with credentials */
	uint64_t events CUA_GUARDED_BY(cuad_fe_lock);           /* live events (--session-events) */
	uint64_t CUA_GUARDED_BY(cuad_fe_lock) requests, errors; /* its own, for its STATUS */
	/* per device, fe->ndevs entries each (allocated with the session) */
	uint64_t *dev_bytes CUA_GUARDED_BY(cuad_fe_lock)
		CUA_PT_GUARDED_BY(cuad_fe_lock); /* device memory it holds on each device (limits) */
	uint64_t CUA_GUARDED_BY(cuad_fe_lock) module_bytes,
		host_bytes; /* module images and registered host memory it holds (limits) */
	uint32_t *dev_in_flight CUA_GUARDED_BY(cuad_fe_lock)
		CUA_PT_GUARDED_BY(cuad_fe_lock); /* its requests in each device */
	struct device **worker CUA_GUARDED_BY(cuad_fe_lock)
		CUA_PT_GUARDED_BY(cuad_fe_lock); /* --isolation session: its own workers (NULL until first use) */
	uint32_t next_pool CUA_GUARDED_BY(cuad_fe_lock); /* round-robin over the pool streams */
	struct spool {                                   /* streampool.c: its own pool streams on each device */
		uint32_t *wid;                           /* the worker's stream ids (n of them, malloc'd) */
		uint32_t n;                              /* created (0: none yet) */
		uint32_t gen;                            /* of the worker they were created in */
		bool creating;
		uint32_t failed; /* the last creation's status (0: none failed) */
	} * spool CUA_GUARDED_BY(cuad_fe_lock) CUA_PT_GUARDED_BY(cuad_fe_lock);

	/* scheduler (sched.c) */
	struct request_queue queue CUA_GUARDED_BY(cuad_fe_lock); /* validated, waiting for the worker */
	uint32_t queued CUA_GUARDED_BY(cuad_fe_lock);
	uint32_t in_flight CUA_GUARDED_BY(cuad_fe_lock);
	uint32_t cleanup_pending CUA_GUARDED_BY(cuad_fe_lock);
	bool in_ready CUA_GUARDED_BY(cuad_fe_lock);
	TAILQ_ENTRY(session) ready_link;
	TAILQ_ENTRY(session) zombie_link;
	/* Ordered requests (seq != 0) are handled in seq order: NNG hands messages of one connection to several
	 * contexts at once, so a later request can arrive first; it waits in `parked` (sorted by seq). */
	uint64_t next_seq CUA_GUARDED_BY(cuad_fe_lock);
	struct request_queue parked CUA_GUARDED_BY(cuad_fe_lock);
	uint32_t nparked CUA_GUARDED_BY(cuad_fe_lock);
	uint64_t gap_since CUA_GUARDED_BY(
		cuad_fe_lock); /* cua_now_ms() when the current missing seq began to hold parked requests back */
	bool in_gaps CUA_GUARDED_BY(cuad_fe_lock); /* on fe->gaps (nparked > 0) */
	TAILQ_ENTRY(session) gap_link;
	/* Flow control: a request holds one of the edge's receive contexts from its arrival until its reply was
	 * taken by the connection (request_reply_sent), not merely queued: a peer that does not read its replies
	 * runs into its own limits (see request.c's do_admit). */
	uint32_t held
		CUA_GUARDED_BY(cuad_fe_lock); /* requests received and not yet answered, or answered and not yet sent */
	uint64_t reply_bytes CUA_GUARDED_BY(cuad_fe_lock);   /* bytes of its replies queued and not yet sent */
	uint64_t request_bytes CUA_GUARDED_BY(cuad_fe_lock); /* bytes of its admitted requests' messages, held until
							       * each is finished (request.c's do_admit) */
	uint64_t dropped CUA_GUARDED_BY(cuad_fe_lock);       /* requests dropped unanswered at the hard limit */

	/* fire-and-forget errors, reported at the next SYNCHRONIZE */
	uint32_t deferred_status CUA_GUARDED_BY(cuad_fe_lock);
	char deferred_msg[CUA_ERR_DETAIL_MAX] CUA_GUARDED_BY(cuad_fe_lock);

	TAILQ_ENTRY(session) link; /* fe->sessions */
	UT_hash_handle hh;         /* fe->by_pipe */
};

/*
 * One row per kind of handle (CUA_HK_*): what the generic code needs to name, count and release one. Live
 * counts and held bytes are uint64_t fields of struct session at the offsets given (0: not kept here).
 */
struct hkind_entry {
	const char *name;      /* in messages: "module" */
	uint32_t release_wrec; /* the worker command that releases one when its session is gone (a struct
				* wrec_release); WR_NONE: it goes with another object (a function with its module) */
	uint8_t release_pass;  /* the order of those releases: graphs first (they use the rest), then streams (they
				* drain), then modules, host buffers and events; memory after all of them */
	size_t count_off;      /* offsetof(struct session, its live count), 0: none */
	size_t bytes_off;      /* offsetof(struct session, the bytes its objects hold: hslot.size), 0: none */
};
#define HK_RELEASE_PASSES 3
/* The row of kind, or NULL when kind is not a handle kind. */
const struct hkind_entry *hkind(unsigned kind);

/* Names s (and its tenant) and request req in the calling thread's log records (cua_log_ctx_set). */
void do_log_ctx(const struct session *s, uint64_t req) CUA_REQUIRES(cuad_fe_lock);

/* A session's start line (its HELLO accepted: v_hello) and end line (do_session_log_end) go at this level: info,
 * debug for sessions of the operator endpoint (cuasyncctl's: one short session per command, whose lines would
 * drown the clients'). */
int do_session_log_level(const struct session *s) CUA_REQUIRES(cuad_fe_lock);
/* " from IP:port" for a tcp:// or tls+tcp:// peer, else "", in buf (CUA_MAX_PEER_ADDR + 8 bytes). */
const char *do_session_from(const struct session *s, char *buf, size_t len) CUA_REQUIRES(cuad_fe_lock);
/* Logs the end of s, closing now (cua_now_ms): how long it lived, its requests and errors, who it was. */
void do_session_log_end(const struct session *s, uint64_t now_ms) CUA_REQUIRES(cuad_fe_lock);

/* A new session for pipe, or NULL (out of memory). */
struct session *do_session_new(struct fe *fe, uint32_t pipe) CUA_REQUIRES(cuad_fe_lock);
/* The live session of pipe (not closing, pipe not gone), or NULL. */
struct session *do_session_by_pipe(struct fe *fe, uint32_t pipe) CUA_REQUIRES(cuad_fe_lock);
/* The live session (HELLO said, not closing) of that id, or NULL. Walks the sessions. */
struct session *do_session_by_id(struct fe *fe, uint64_t id) CUA_REQUIRES(cuad_fe_lock);
/* Frees s's tables and s itself (the caller made sure nothing refers to it any more, and freed its graphs:
 * do_graphs_free, graphtab.h). */
void do_session_free(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock);
/* Live sessions that said HELLO (what STATUS reports). */
uint32_t do_sessions_live(struct fe *fe) CUA_REQUIRES(cuad_fe_lock);

/* Remembers that pipe left (its late messages must not create a session); bounded, oldest forgotten. */
void do_pipe_tomb_add(struct fe *fe, uint32_t pipe) CUA_REQUIRES(cuad_fe_lock);
bool do_pipe_gone(struct fe *fe, uint32_t pipe) CUA_REQUIRES(cuad_fe_lock);
void do_pipe_tombs_free(struct fe *fe) CUA_REQUIRES(cuad_fe_lock);

/* Handle table. do_handle_new: 0 and *h, or CUA_EQUOTA / CUA_ENOMEM. */
int do_handle_new(struct session *s, unsigned kind, int dev, uint32_t gen, uint64_t wid, uint64_t *h)
	CUA_REQUIRES(cuad_fe_lock);
/* Looks h up: 0 and *slot, or NOT_FOUND (also for a released object, saying by which request) / CONTEXT_LOST
 * with a message in e. */
int do_handle_get(struct fe *fe, struct session *s, uint64_t h, unsigned kind, struct hslot **slot, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
/* The slot of h when it is a handle of kind in s (whatever its state), or NULL. */
struct hslot *do_handle_slot(struct session *s, uint64_t h, unsigned kind) CUA_REQUIRES(cuad_fe_lock);
/* Frees the slot (and the parameter layout it owns); its tag is kept so the next use gets a new one. */
void do_handle_free(struct session *s, struct hslot *slot) CUA_REQUIRES(cuad_fe_lock);

/* Allocation table: 0 when [p, p+len) is inside one live allocation of s (its device in *dev, its record
 * in *rec when rec is not NULL) or inside a global of one of its live modules (*rec then NULL); else NOT_FOUND
 * (p is in an allocation released by an earlier request, or a global of a module being unloaded),
 * CONTEXT_LOST or BAD_ARGUMENT with a message in e. */
int do_alloc_find(struct fe *fe, struct session *s, uint64_t p, uint64_t len, int *dev, struct alloc_rec **rec,
		  cua_err *e) CUA_REQUIRES(cuad_fe_lock);
/* 0 or CUA_ENOMEM. */
int do_alloc_add(struct session *s, int dev, uint32_t gen, uint64_t addr, uint64_t len) CUA_REQUIRES(cuad_fe_lock);
void do_alloc_remove(struct session *s, struct alloc_rec *rec) CUA_REQUIRES(cuad_fe_lock);
/* The record at addr released by request req, or NULL. */
struct alloc_rec *do_alloc_released(struct session *s, uint64_t addr, uint64_t req) CUA_REQUIRES(cuad_fe_lock);
/* Records the global [addr, addr+len) of the module in handle slot module_slot (once: a second lookup of the
 * same global adds nothing). 0 or CUA_ENOMEM. */
int do_global_add(struct session *s, uint32_t module_slot, uint64_t addr, uint64_t len) CUA_REQUIRES(cuad_fe_lock);
/* Drops the globals of the module in handle slot module_slot (it is being forgotten). */
void do_globals_forget(struct session *s, uint32_t module_slot) CUA_REQUIRES(cuad_fe_lock);
/* Formats "request N" / "an unordered request" for messages about a release. */
const char *release_name(const struct release *rel, char *buf, size_t len);
/* After worker d restarted: marks everything of its generation old_gen stale in the sessions it serves (those
 * in shared isolation for a shared worker, its owner for a session's own; nobody for a retired one) and takes it
 * off the device's counters. */
void do_sessions_mark_stale(struct fe *fe, const struct device *d, uint32_t old_gen) CUA_REQUIRES(cuad_fe_lock);

/* The worker that serves s on device dev: the shared one, or in session isolation s's own (NULL until its first
 * request to the device was dispatched). */
struct device *do_session_worker(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock);
/* The generation s's objects on dev have while they are usable: its worker's (0 when it has none yet). */
uint32_t do_session_gen(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock);

#endif
