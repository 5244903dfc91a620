/*
 * request.h — the life of a request: new → validate → plan → dispatch → complete → reply.
 *
 *   request_receive   (edge thread)   decode; then, under fe->lock: find the session, keep sequence order
 *                                     (scheduler.c), validate and plan through the op's row (cmd-*.c), and either
 *                                     answer at once or queue it for the dispatcher
 *   dispatcher        (scheduler.c)       hands queued requests to their device fairly (devlink.c)
 *   request_done      (device thread) the worker's results are in: the op's row completes it (tables
 *                                     updated), the reply goes out through the edge's reply function
 *
 * A request is owned by exactly one place at a time: the edge until request_receive, then its session's
 * parked or queued list, then its device's in-flight table, then request_finish, which frees it.
 *
 * Each request has its own memory pool (common/cua_pool.h), made by request_new: the struct request lives in
 * it, and so do its items, its worker commands and its stages; request_free destroys the pool with everything
 * in it. Only an item's msg and data, and status_msg, are malloc'd on their own still (devlink.c frees and
 * replaces them with free/strdup/malloc).
 */
#ifndef CUAD_REQUEST_H
#define CUAD_REQUEST_H

#include "cua_pool.h"
#include "cua_wire.h"
#include "daemon.h"
#include "session.h"

#include <sys/queue.h>
#include <uthash.h>

/* What one item of a request (the request itself, or one batch item) came to. */
struct ritem {
	int32_t cmd;     /* index of its worker command, or -1 */
	uint32_t status; /* set by validation or completion */
	char *msg;       /* malloc'd message or NULL (the status table's) */
	uint64_t value;  /* worker result */
	void *data;      /* worker result data (malloc'd: a row may take it, cmd-module.c) */
	uint32_t data_len;
	int32_t stage; /* staging index or -1 */
};

/* Bytes a command moves through the device's staging area (placed at dispatch). */
struct stage {
	size_t cmd_off; /* byte offset of its command in request.cmds (patched with the offset at dispatch) */
	uint64_t len;
	uint64_t off;
	const void *src; /* HTOD / MODULE_LOAD: bytes to copy in; NULL: DTOH (read out for the reply) */
	bool placed;
};

enum req_kind {
	REQ_CLIENT,  /* came from a client */
	REQ_CLEANUP, /* releases what a closed session still held on one device; nobody is answered */
	REQ_POOL,    /* creates a session's pool streams on one worker (streampool.c); nobody is answered */
};

struct request {
	cua_pool *pool; /* everything below is allocated in it, r included (request_new) */
	uint64_t id;
	uint64_t recv_ns; /* monotonic ns at receipt (the latency histogram, stats.h) */
	uint64_t busy_ns; /* how long its work kept the device's streams busy (the worker's measure, wrec.h) */
	/* its way through a worker (stats.h's hops), ns after recv_ns: its command record written, the worker's
	 * three stamps (struct wcpl_req), its completion record read; 0: not that far, or over 4 s */
	uint32_t hop_ns[5];
	struct fe *fe;
	struct session *s;
	enum req_kind kind;
	void *reply_ctx;  /* the edge's context to answer on; NULL once answered (fire-and-forget) or cleanup */
	void *msg;        /* the received message the decoded fields point into (edge_ops.msg_free) */
	size_t msg_len;   /* its bytes */
	bool msg_counted; /* msg_len is counted in s->request_bytes and fe->request_bytes (until request_free) */
	uint32_t pipe;    /* the connection it came on */
	int host_fd;      /* HOST_REGISTER: the client's memfd, opened here (-1: none) */
	cua_wire_request w;
	bool decoded;
	uint32_t op;
	uint64_t seq;
	int dev;             /* -1: no device work */
	struct device *wdev; /* the worker it was dispatched to (NULL before) */
	uint32_t dep_gen;    /* generation the request's handles belong to, 0: none */
	bool barrier;        /* runs once the session has nothing in flight */
	bool no_wait;        /* fire-and-forget: answered when accepted */
	bool held;           /* counted in s->held until answered (then until sent: request_reply_sent) */
	bool refused;        /* answered QUOTA already: only its turn (its sequence number) is left to pass */
	bool undecodable;    /* failed to decode (status says why): answered in its turn, nothing validated */
	bool before_seq;     /* undecodable at a check PROTOCOL.md §5 makes before seq's (the message's structure,
			      * version, op): that status wins over a used or refused seq and over --session-pending */
	bool planned;        /* REQ_CLEANUP: its commands were planned (at dispatch) */
	bool uses_pool;      /* names its session's pool streams (streampool.h) */
	uint32_t status;     /* whole-request status when not OK */
	char *status_msg;
	char *token; /* TENANT_ADD: the one-off token made (in r->pool) for its reply; else NULL */
	/* what it reserved at admission (reserve.h), given back when it is settled */
	uint64_t resv[RES_COUNT];
	/* the worker commands (link/wrec.h records), in r->pool: cmds_cap is the size of that allocation */
	unsigned char *cmds;
	size_t cmds_len, cmds_cap, last_cmd_off;
	uint32_t ncmds;
	struct ritem *items; /* in r->pool */
	uint32_t nitems;
	struct stage *stages; /* in r->pool, room for stages_cap */
	uint32_t nstages, stages_cap;
	TAILQ_ENTRY(request) qlink; /* session queue or parked list */
	UT_hash_handle hh;          /* device in-flight table */
};

/* One received message, as the edge hands it over. */
struct incoming {
	void *msg;        /* owned by the request from here (edge_ops.msg_free) */
	const void *body; /* the bytes, inside msg */
	size_t len;
	void *reply_ctx;  /* where the answer goes */
	uint32_t pipe;    /* the connection */
	bool operator;    /* it came through the operator endpoint */
	uint64_t session; /* not 0: it came through that session's shared-memory channel and belongs to it alone */
};

/* The edge thread that received a message. Decodes it, then takes fe->lock and carries the request as far
 * as it goes without waiting (answered, parked or queued). Never blocks on a device. Takes msg.
 * A message that does not decode but whose header (version, op, seq) could be read, with seq != 0, on a
 * connection that has a session, goes through admission like any other and is answered with its decode error
 * in its turn, using up its sequence number; any other undecodable message is answered at once. */
void request_receive(struct fe *fe, const struct incoming *in) CUA_EXCLUDES(cuad_fe_lock);

/* The edge: a counted reply (struct reply.counted) of connection pipe, bytes long, was taken by the
 * connection or its send failed; its receive context is the edge's again. Any thread, takes fe->lock. */
void request_reply_sent(struct fe *fe, uint32_t pipe, size_t bytes) CUA_EXCLUDES(cuad_fe_lock);

/* Session events from the edge (any thread, takes fe->lock). operator: the connection came through the
 * operator endpoint (auth.c decides whether its peer may use it). */
void request_pipe_added(struct fe *fe, uint32_t pipe, bool operator) CUA_EXCLUDES(cuad_fe_lock);
/* The connection left: the dispatcher closes its session (answers what waits, releases what it held). */
void request_pipe_removed(struct fe *fe, uint32_t pipe) CUA_EXCLUDES(cuad_fe_lock);
/* Dispatcher thread, fe->lock held: closes s (see request_pipe_removed). */
void do_request_close_session(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock);

/* Graceful shutdown (main thread, without fe->lock). request_drain_begin: from now on every new request is
 * answered SHUTTING_DOWN at once, and so is every request that waits for its turn (parked) or for a worker
 * (queued); the requests already inside the workers run on and are answered with their real completion.
 * Returns how many of those there are. request_in_flight: how many are left (0: drained). */
uint32_t request_drain_begin(struct fe *fe) CUA_EXCLUDES(cuad_fe_lock);
uint32_t request_in_flight(struct fe *fe) CUA_EXCLUDES(cuad_fe_lock);

/* The connections that have not said HELLO within --hello-timeout, or whose session an operator's DISCONNECT
 * named, marked so that each is reported once: up to max pipe ids into pipes, for the edge to close. Returns how
 * many. Any thread, without fe->lock. */
unsigned request_hello_overdue(struct fe *fe, uint32_t *pipes, unsigned max) CUA_EXCLUDES(cuad_fe_lock);

/* A request's last step: its reply goes out (or is recorded for fire-and-forget), staging is released,
 * and r is freed. Caller holds fe->lock. Takes r. */
void do_request_finish(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock);
/* r came back from its device (its items hold the worker's results): it is finished. Caller holds fe->lock. */
void do_request_done(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock);
/* The device callback (dev_done_fn): do_request_done without fe->lock held (it takes it), the bulk bytes of a
 * CMD_REPLY_UNLOCKED row's reply copied without it. */
void request_done(struct fe *fe, struct request *r) CUA_EXCLUDES(cuad_fe_lock);
/* Starts the dispatcher (0 or -1); stops it, stops the devices and frees every request and session
 * without answering (after the edge stopped receiving). Main thread, without fe->lock. */
int request_start(struct fe *fe) CUA_EXCLUDES(cuad_fe_lock);
/* Starts the pool of one-session workers unless it runs (a reload gave a tenant `isolation = session`): 0 or
 * -1. Main thread, without fe->lock (it starts workers and waits for them). */
int request_pool_ensure(struct fe *fe) CUA_EXCLUDES(cuad_fe_lock);
void request_stop(struct fe *fe) CUA_EXCLUDES(cuad_fe_lock);

/* ---- reqobj.c: the request as an object (no lock taken, nothing moved) ---- */

/* A new request of fe's, zeroed but for fe, dev = -1 and host_fd = -1, in a new pool of its own (r->pool).
 * NULL when out of memory. Any thread, no lock needed. Free it with request_free. */
struct request *request_new(struct fe *fe);

/* Frees r without answering (shutdown), and with it r->pool: every pointer into it dies here. */
void request_free(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock);

/* n bytes (uninitialised, 16-byte aligned) and at most n bytes of s as a NUL-terminated string, from r's pool:
 * they live until request_free, never free() them. NULL when out of memory. For what a request holds until it
 * goes (messages, result data once devlink.c takes it from the pool). */
void *request_alloc(struct request *r, size_t n);
char *request_strndup(struct request *r, const char *s, size_t n);

/* Sets the whole-request status with a formatted message. Returns status. */
int request_fail(struct request *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The first status that is not OK (the request's, else its items'), or CUA_OK. */
uint32_t request_status(const struct request *r);

/* Sets an item's status and message. Returns status. */
int item_fail(struct ritem *it, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int item_fail_err(struct ritem *it, const cua_err *e);
/* Replaces r's items by n fresh ones (no command, no stage). 0 or CUA_ENOMEM. */
int items_init(struct request *r, uint32_t n);

/* Appends a worker command: rec is a link/wrec.h record of `fixed` bytes (its header's op set by the caller,
 * its size set here), followed by `extra` bytes of payload. Returns its index, or -1 (out of memory). */
int plan_cmd(struct request *r, void *rec, size_t fixed, const void *extra, uint32_t elen);
/* Puts `len` bytes of the command planned last through the staging area (src: bytes to copy in, NULL: out).
 * Returns the stage index or -1 (out of memory). */
int plan_stage(struct request *r, uint64_t len, const void *src);

#endif
