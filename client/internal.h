/*
 * internal.h — libcuasync's private header: the structures the client files share and the cuac_ functions
 * they call in each other. Nothing here is exported (client/cuasync.sym lists the public cua_ names).
 *
 * The files, one job each:
 *   client.c     the client handle: connect, disconnect, the calling thread's last error
 *   transport.c  the NNG edge: socket, dialing, TLS, request contexts, send/receive, sequence numbers
 *   calls.c      the synchronous calls (HELLO, DEVICES, STATUS, PING, modules, memory, copies, streams)
 *   hostbuf.c    memfd host buffers shared with the daemon
 *   launch.c     the launch builder (after cuda-async's AsyncKernelLaunch) and cua_launch_submit
 *   batch.c      explicit batches (cua_batch_*)
 *   flight.c     the send queue: pipelined launches coalesced into BATCH messages, and those in flight
 *   future.c     futures: the results of launches and batches, and the completion eventfd (cua_client_fd)
 *
 * Data flows one way: calls.c, launch.c and batch.c hand requests down to flight.c and transport.c;
 * transport.c reports an asynchronous reply through the callback it was given (cuac_done_fn).
 *
 * Locking: c->lock guards the send queue, the in-flight batch count, the deferred error, the sequence
 * number, the device table, the function layouts, the host buffers, the completion eventfd's state and every
 * future's state. NNG aio callbacks take it; no NNG call that waits is made while holding it. c->cond is
 * broadcast whenever a flight completes (a future may be done, the queue may have moved).
 */
#ifndef CUAC_INTERNAL_H
#define CUAC_INTERNAL_H

#include "cua_arena.h"
#include "cua_error.h"
#include "cua_proto.h"
#include "cua_wire.h"
#include "cuasync.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#define CUAC_DEFAULT_TIMEOUT_MS 120000
#define CUAC_STREAM_POOL_ID 2       /* CUA_STREAM_POOL: client-side only, sent as 0 */
#define CUAC_MAX_INFLIGHT_BATCHES 4 /* BATCH messages in flight per client; more launches wait in the queue */
/* When the caller waits for queued launches to go out (a future of one, a record, a copy, a synchronize), they are
 * sent at once up to this many messages in flight: holding them until a reply comes would make them wait for
 * long kernels of other streams (4 kernels of 200 ms in flight held a launch on a fifth stream for 200 ms). Below
 * the daemon's smallest --session-pending (16). */
#define CUAC_MAX_INFLIGHT_URGENT 12
/* Messages of explicit batches in flight per client; cua_batch_submit waits below it. The daemon answers QUOTA
 * past --session-pending unanswered requests of a connection (16 at least unless set lower) and drops them past
 * twice that, so a client that submits batch after batch without waiting must hold back itself; half of 16, so
 * that the synchronous calls of the client's threads still fit beside them. */
#define CUAC_MAX_INFLIGHT_MESSAGES 8
#define CUAC_ARG_SLOTS CUA_ARENA_INLINE

/* ------------------------------------------------------------------ shared structures */

struct cua_future {
	cua_client *c;
	bool done, abandoned; /* abandoned: cua_future_free came first; the last result frees it */
	int status;           /* the first failing item's status, else CUA_OK */
	char *error;          /* its message (owned), or NULL */
	size_t nitems, remaining;
	int *item_status;
	char **item_msg;  /* per item: owned message of a failed item, or NULL */
	void **dtoh_dst;  /* per item: where DTOH data goes (NULL: not a DTOH item) */
	size_t *dtoh_len; /* per item: the DTOH length asked for */
};

struct cua_launch {
	cua_client *c;
	cua_function f;
	cua_launch_config cfg;
	bool has_cfg;
	cua_stream stream;
	uint32_t flags;
	uint32_t cluster[3]; /* {0, 0, 0}: none */
	int32_t priority;
	bool has_priority;
	cua_arena vals;
	uint32_t sizes_inline[CUAC_ARG_SLOTS];
	uint8_t kinds_inline[CUAC_ARG_SLOTS];
	uint32_t *sizes; /* sizes_inline or owned */
	uint8_t *kinds;  /* kinds_inline or owned: CUA_ARG_BYTES or CUA_ARG_DEVPTR per argument */
	size_t nargs, cap;
	int error; /* first push error, reported at submit */
};

/* One item waiting to be sent (in the client's queue or an explicit batch), then in flight. */
struct cuac_pending {
	cua_batch_item item;
	cua_launch *launch;   /* LAUNCH items: owned; holds the argument storage */
	const void *htod_src; /* HTOD: the caller's bytes, copied when encoded; DTOH in a batch: the target */
	cua_future *fut;      /* NULL: fire-and-forget (a failure becomes the client's deferred error) */
	size_t fut_idx;
	TAILQ_ENTRY(cuac_pending) link;
};
TAILQ_HEAD(cuac_pendq, cuac_pending);

struct cua_batch {
	cua_client *c;
	struct cuac_pendq items; /* owned */
	size_t n;
};

struct cuac_transport; /* transport.c: the NNG socket and its sequence numbers */
struct cuac_layout;    /* calls.c: a function's parameter layout */
struct cuac_hostbuf;   /* hostbuf.c: one memfd buffer */
LIST_HEAD(cuac_layouts, cuac_layout);
LIST_HEAD(cuac_hostbufs, cuac_hostbuf);

struct cua_client {
	struct cuac_transport *t; /* owned; NULL until connected */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t session;
	cua_device_info devs[CUA_MAX_DEVICES];
	int ndevs;
	struct cuac_pendq queue; /* launches not sent yet, in submission order */
	unsigned inflight;       /* BATCH messages sent and not answered */
	int deferred_status;     /* the first failure of a fire-and-forget item, reported by cua_synchronize */
	char deferred_msg[256];
	struct cuac_layouts layouts;     /* parameter layouts of the functions looked up, newest first */
	struct cuac_hostbufs hostbufs;   /* registered host buffers */
	_Atomic uint64_t default_stream; /* the wire's stream for CUA_STREAM_DEFAULT: 0 (pool), 1 (ordered), a handle */
	int efd;                         /* cua_client_fd's eventfd, -1 until it was asked for */
	bool efd_armed;                  /* efd was written since the last cua_client_fd_clear */
};

/* The stream field the wire carries for s: CUA_STREAM_DEFAULT is c's default (cua_set_default_stream),
 * CUA_STREAM_POOL the pool (0), anything else itself. Any thread. */
static inline uint64_t
cuac_stream(cua_client *c, cua_stream s)
{
	uint64_t id = s.id == 0 ? atomic_load_explicit(&c->default_stream, memory_order_relaxed) : s.id;
	return id == CUAC_STREAM_POOL_ID ? 0 : id;
}

/* ------------------------------------------------------------------ client.c */

/* Sets the calling thread's cua_last_error to the formatted text and returns status. Any thread; no lock. */
int cuac_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------ transport.c */

/* Opens c's socket and dials url (NULL: $CUASYNC_URL or the default path), with TLS for tls+ URLs; reads
 * $CUASYNC_TIMEOUT_MS. The connecting thread; blocks while dialing. Sets c->t on success; on failure c->t
 * stays NULL and cua_last_error says why. */
int cuac_transport_open(cua_client *c, const char *url);

/* Closes the socket (NNG fails whatever is in flight) and frees c->t; NULL c->t is fine. Caller holds no
 * lock: NNG may run callbacks that take c->lock while closing. */
void cuac_transport_close(cua_client *c);

/* A synchronous reply: the decoded message and the transport buffer its bytes live in. */
struct cuac_reply {
	cua_wire_reply w;
	void *msg; /* owned: the received message, freed by cuac_reply_done */
};

/* Sends op with body and waits for the reply (up to the timeout each way). ordered: stamped with the next
 * sequence number (every request but HELLO). Returns 0 with *rep holding a CUA_OK reply, or the error
 * (transport, decode, or the daemon's status) with cua_last_error set and *rep empty. Any thread but an NNG
 * callback; blocks; takes c->lock briefly. cuac_reply_done(rep) must be called whatever the result. */
int cuac_rpc(cua_client *c, uint32_t op, const void *body, bool ordered, struct cuac_reply *rep);
void cuac_reply_done(struct cuac_reply *rep);

/* How an asynchronous exchange ends, on an NNG thread with no lock held: status 0 and rep (valid only
 * during the call; its status may be an error) or status != 0 with why (a transport failure, or
 * CUA_EPROTOCOL for an undecodable reply) and rep NULL. Called exactly once per accepted send. */
typedef void (*cuac_done_fn)(void *arg, int status, const char *why, const cua_wire_reply *rep);

/* Encodes op with body and sends it on a new context, stamped with the next sequence number; returns at
 * once. Caller holds c->lock. Returns 0 (done will be called) or an error (done will not be called; nothing
 * was sent; cua_last_error untouched). body need not outlive the call. */
int cuac_send_async(cua_client *c, uint32_t op, const void *body, cuac_done_fn done, void *arg);

/* ------------------------------------------------------------------ calls.c */

/* Synchronous calls whose reply body is not needed / is one u64. As cuac_rpc (ordered). */
int cuac_call(cua_client *c, uint32_t op, const void *body);
int cuac_call_u64(cua_client *c, uint32_t op, const void *body, uint64_t *out);

/* HELLO (unordered, retried on a transport error while a restarting listener takes the pipe); sets
 * c->session. The connecting thread; blocks. */
int cuac_hello(cua_client *c);

/* DEVICES: refreshes c->devs under c->lock. Blocks; caller holds no lock. */
int cuac_load_devices(cua_client *c);

/* Frees every function layout. Only while no other thread uses c (disconnect). */
void cuac_layouts_fini(cua_client *c);

/* ------------------------------------------------------------------ hostbuf.c */

/* The registered buffer holding [p, p+len), if any: returns 1 with its handle and the offset of p, else 0.
 * Takes c->lock; caller holds no lock. */
int cuac_host_lookup(cua_client *c, const void *p, size_t len, uint64_t *handle, uint64_t *off);

/* Unmaps and closes every host buffer (the daemon released them with the session). Only after the
 * transport is closed, while no other thread uses c. */
void cuac_hostbufs_fini(cua_client *c);

/* ------------------------------------------------------------------ launch.c */

/* A new pending LAUNCH item for l, which it then owns; on failure l is freed and cua_last_error set. Any
 * thread that owns l; no lock. */
int cuac_pending_launch(cua_launch *l, struct cuac_pending **out);

/* ------------------------------------------------------------------ flight.c */

/* Frees p and its launch (not its future). NULL is fine. */
void cuac_pending_free(struct cuac_pending *p);
/* Frees every item of q; q is empty afterwards. */
void cuac_pendq_free(struct cuac_pendq *q);

/* Appends p (owned from now on) to c's queue and sends what the in-flight limit allows. Caller holds no
 * lock; does not block on the network. */
void cuac_enqueue(cua_client *c, struct cuac_pending *p);

/* Sends the n items of *items (moved out: *items is empty afterwards) as one BATCH message. A failure to
 * build or send it fails the items (their futures, or the deferred error). Caller holds c->lock. */
void cuac_send_flight_locked(cua_client *c, struct cuac_pendq *items, size_t n);

/* Sends queued launches, up to CUA_MAX_BATCH per message and CUAC_MAX_INFLIGHT_BATCHES in flight. Caller
 * holds c->lock. */
void cuac_flush_locked(cua_client *c);
/* The same up to CUAC_MAX_INFLIGHT_URGENT in flight: for a caller about to wait for them. Caller holds c->lock. */
void cuac_flush_now_locked(cua_client *c);

/* Blocks until every queued launch has been sent (replies may be pending). Caller holds no lock. */
void cuac_wait_sent(cua_client *c);

/* Blocks until nothing is queued or in flight; then returns the deferred status (CUA_OK if none) and,
 * when take is set, copies its message into msg and clears it. Caller holds no lock. */
int cuac_wait_idle(cua_client *c, bool take, char *msg, size_t len);

/* ------------------------------------------------------------------ future.c */

/* A future of n items, not done; NULL when out of memory. Any thread; no lock. */
cua_future *cuac_future_new(cua_client *c, size_t n);

/* Records item i's result (msg of msglen bytes, copied). When it was the last item the future is done, and
 * freed if abandoned (f must not be used afterwards by the caller), else the client's completion eventfd is
 * written (cua_client_fd). Caller holds c->lock. */
void cuac_future_item_done(cua_future *f, size_t i, int status, const char *msg, size_t msglen);

#endif
