/*
 * internal.h — libcuasync's private base header: the constants and structures the client files share. Nothing
 * here is exported (client/cuasync.sym lists the public cua_ names). The cuac_ functions the files call in each
 * other are declared in one header per layer, below.
 *
 * Layers, top to bottom. A file calls only files of the layers below its own and, inside its layer, the files
 * it is drawn above (a > b: a may call b; files with no > between them call neither). It includes only the
 * headers of the layers it calls, so that the include graph says who may call whom too, and
 * tools/check-cycles.py finds a circle in neither:
 *
 *   handle     client.c                             connect (socket, HELLO, devices), disconnect
 *   builder    graph.c > batch.c > launch.c         the public calls that make requests (cuac_builder.h)
 *              event.c
 *              calls.c > hostbuf.c
 *   flight     flight.c > future.c, pending.c       send queue and flights, futures, pending records
 *                                                   (cuac_flight.h)
 *   transport  rpc.c > transport.c                  the NNG edge and the synchronous helpers over it
 *              fdchan.c > transport.c               the fd channel beside an ipc:// socket (SCM_RIGHTS)
 *                                                   (cuac_transport.h)
 *   errors     error.c                              the calling thread's last error (cuac_error.h)
 *
 * Data flows one way: builders hand requests down to flight.c and transport.c; transport.c reports an
 * asynchronous reply through the callback it was given (cuac_done_fn), and flight.c fills in futures, so no
 * lower file calls a higher one. A layer header includes at most this one; this one includes no other client
 * header.
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
#include "cua_fdchan.h"
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
/* The bytes of arguments and copy data one coalesced BATCH carries at most (its first item whatever its size):
 * 4096 launches of 32 KB arguments would be a 131 MB message, past the daemon's --max-message and its
 * worker's ring, and a message this size still fits the shared-memory channel's ring (half of 1 MiB). */
#define CUAC_FLIGHT_BYTES (256u * 1024u)
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
	bool graph; /* cua_graph_begin's: its copies carry their bytes (a graph node cannot name a host buffer) */
};

struct cuac_transport;  /* transport.c: the NNG socket and its sequence numbers */
struct cuac_dev_attrs { /* calls.c: a device's CU_DEVICE_ATTRIBUTE values, in increasing id order */
	uint32_t n;
	cua_wire_dev_attr a[CUA_MAX_DEV_ATTRS];
};
struct cuac_layout;  /* calls.c: a function's parameter layout */
struct cuac_hostbuf; /* hostbuf.c: one memfd buffer */
LIST_HEAD(cuac_layouts, cuac_layout);
LIST_HEAD(cuac_hostbufs, cuac_hostbuf);

struct cua_client {
	struct cuac_transport *t; /* owned; NULL until connected */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t session;
	cua_device_info devs[CUA_MAX_DEVICES];
	struct cuac_dev_attrs *attrs[CUA_MAX_DEVICES]; /* owned; devs[i]'s attributes, NULL: none reported */
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
	/* the fd channel (fdchan.c): HELLO's secret (set once by cuac_hello), and the connection, guarded by
	 * fdc_lock alone (held across its blocking exchanges, never with c->lock) */
	uint8_t fd_secret[CUA_FDCHAN_SECRET];
	bool has_fd_secret;
	pthread_mutex_t fdc_lock;
	int fdc_fd; /* -1: not connected */
	/* hostbuf.c: the staging buffer of synchronous copies from and to other host memory (a host buffer, made at
	 * the first such copy), held by one copy at a time under stage_lock; stage_failed: none can be made (a
	 * remote daemon, no fd channel, a quota), such copies carry their bytes */
	pthread_mutex_t stage_lock;
	void *stage;
	bool stage_failed;
};

/* The stream field the wire carries for s: CUA_STREAM_DEFAULT is c's default (cua_set_default_stream),
 * CUA_STREAM_POOL the pool (0), anything else itself. Any thread. */
static inline uint64_t
cuac_stream(cua_client *c, cua_stream s)
{
	uint64_t id = s.id == 0 ? atomic_load_explicit(&c->default_stream, memory_order_relaxed) : s.id;
	return id == CUAC_STREAM_POOL_ID ? 0 : id;
}

#endif
