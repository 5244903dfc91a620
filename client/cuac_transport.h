/*
 * cuac_transport.h — the transport layer of libcuasync: transport.c (the NNG edge: socket, dialing, TLS,
 * request contexts, sequence numbers, synchronous and asynchronous exchanges) and rpc.c (the synchronous calls
 * whose reply is nothing or one u64), which calls transport.c. Calls only the errors layer (cuac_error.h); it
 * reports an asynchronous reply through the callback it was given (cuac_done_fn), never by calling up. See
 * internal.h for the layer order.
 */
#ifndef CUAC_TRANSPORT_H
#define CUAC_TRANSPORT_H

#include "internal.h"

/* ------------------------------------------------------------------ transport.c */

/* Opens c's socket and dials url (NULL: $CUASYNC_URL or the default path), with TLS for tls+ URLs; reads
 * $CUASYNC_TIMEOUT_MS. The connecting thread; blocks while dialing. Sets c->t on success; on failure c->t
 * stays NULL and cua_last_error says why. */
int cuac_transport_open(cua_client *c, const char *url);

/* Closes the socket (NNG fails whatever is in flight) and frees c->t; NULL c->t is fine. Caller holds no
 * lock: NNG may run callbacks that take c->lock while closing. */
void cuac_transport_close(cua_client *c);

/* The socket path of an ipc:// connection (the fd channel is beside it), or NULL for another transport. Any
 * thread while c is connected. */
const char *cuac_transport_ipc_path(const cua_client *c);
/* The wait of one synchronous exchange in ms (cua_set_timeout; negative: none). Any thread. */
int cuac_transport_timeout_ms(const cua_client *c);

/* A synchronous reply: the decoded message and the transport buffer its bytes live in. */
struct cuac_reply {
	cua_wire_reply w;
	void *msg; /* owned: the received message, freed by cuac_reply_done */
};

/* The last error of a call that fails with CUA_ESESSION_LOST. */
#define CUAC_SESSION_LOST_WHY                                                                                          \
	"the session is gone: cuasyncd restarted or an operator disconnected it (cuasyncctl disconnect), and its "     \
	"objects with it; nothing more is sent on this connection: reconnect (cua_disconnect, then cua_connect)"

/* Binds the session to the connection (NNG pipe) that answered HELLO with rep: from now on no request goes on
 * another one, and when that one goes every call fails with CUA_ESESSION_LOST (see transport.c). The
 * connecting thread, once, right after HELLO. 0, or CUA_ESESSION_LOST with the last error set when that
 * connection went already. */
int cuac_session_bind(cua_client *c, const struct cuac_reply *rep);

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
 * was sent; cua_last_error untouched): CUA_ESESSION_LOST when the session is lost (CUAC_SESSION_LOST_WHY). body need not outlive the call. */
int cuac_send_async(cua_client *c, uint32_t op, const void *body, cuac_done_fn done, void *arg);

struct cuac_shm;
/* Gives c the shared-memory channel s (shmchan.c; started): from now on ordered requests go through it when
 * they fit, over NNG otherwise; closed with the transport. The connecting thread, right after HELLO. */
void cuac_transport_set_shm(cua_client *c, struct cuac_shm *s);
/* ------------------------------------------------------------------ rpc.c */

/* Synchronous calls whose reply body is not needed / is one u64 (copied into *out). As cuac_rpc (ordered). */
int cuac_call(cua_client *c, uint32_t op, const void *body);
int cuac_call_u64(cua_client *c, uint32_t op, const void *body, uint64_t *out);

/* ------------------------------------------------------------------ fdchan.c */

/* Passes the n descriptors of fds (1..CUA_FDCHAN_MAX_FDS; they stay the caller's) into c's session over the fd
 * channel beside its ipc:// socket (PROTOCOL.md §9) and returns their tickets, in order, in tickets. Connects
 * and authenticates the first time (with HELLO's session and fd_secret), then keeps the connection; a
 * connection the daemon closed is made again once. 0, or the status with cua_last_error set: UNSUPPORTED
 * when c is not an ipc:// connection, the daemon's refusal, or TRANSPORT / TIMEOUT. Any thread (c->fdc_lock
 * serialises them); blocks; holds no other lock. */
int cuac_fdchan_pass(cua_client *c, const int *fds, unsigned n, uint64_t *tickets);
/* Closes the channel's connection, if any. At disconnect. */
void cuac_fdchan_close(cua_client *c);
/* Passes a shared-memory channel's memfd and eventfd (they stay the caller's) with an SHM record (shmchan.c).
 * 0, or the status with cua_last_error set, as cuac_fdchan_pass. */
int cuac_fdchan_shm(cua_client *c, int memfd, int efd);

/* ------------------------------------------------------------------ shmchan.c */
/* The shared-memory channel (PROTOCOL.md §10, common/cua_shm.h): rings in a sealed memfd, served by the daemon
 * beside NNG. transport.c decides what goes through it; shmchan.c owns the mapping and a reader thread that
 * hands each reply to the waiter that named its tag. */
struct cuac_shm;
/* How a reply (or its failure) reaches an asynchronous waiter, on the reader thread with no lock held: status 0
 * and the reply's bytes (malloc'd, the callee's to free) or status != 0 with why and buf NULL. */
typedef void (*cuac_shm_fn)(void *arg, int status, const char *why, void *buf, size_t len);
struct cuac_shm_wait {
	uint64_t tag;   /* set by cuac_shm_send */
	cuac_shm_fn fn; /* NULL: a synchronous waiter (cuac_shm_wait_reply) */
	void *arg;
	bool listed; /* in the channel's list (guarded by its lock) */
	bool done;   /* synchronous: the reply (buf, len) or the failure (status, why) is in */
	int status;
	char why[512];
	void *buf;
	size_t len;
	LIST_ENTRY(cuac_shm_wait) link;
};
/* Creates a channel: the sealed memfd mapped, its header written, and the eventfd; their descriptors in *memfd
 * and *efd (s's: pass them with cuac_fdchan_shm, then cuac_shm_start). NULL on any failure. */
struct cuac_shm *cuac_shm_create(int *memfd, int *efd);
/* Once the daemon took the channel: closes the memfd (the mapping stays) and starts the reader. 0, or -1 when
 * it could not (s is freed then). */
int cuac_shm_start(struct cuac_shm *s);
/* Stops the reader (waiters still waiting fail with CUA_ECLOSED) and frees s; NULL is fine. */
void cuac_shm_close(struct cuac_shm *s);
/* The session is gone: every waiter fails with CUA_ESESSION_LOST (on the reader thread) and nothing more is
 * sent. Any thread, never blocks (NNG's pipe callback calls it). */
void cuac_shm_lost(struct cuac_shm *s);
/* Puts the encoded request (body, len; its seq stamped already) into the request ring with w as its waiter.
 * true: sent, w will be answered exactly once; false: nothing was sent (no room, too large, channel closed):
 * send it over NNG. Any thread. */
bool cuac_shm_send(struct cuac_shm *s, const void *body, size_t len, struct cuac_shm_wait *w);
/* Waits for a synchronous waiter's reply, up to timeout_ms (negative: none). true: w->done (its result in w);
 * false: timed out, w withdrawn (a late reply is dropped). */
bool cuac_shm_wait_reply(struct cuac_shm *s, struct cuac_shm_wait *w, int timeout_ms);
/* Requests sent through s (0 for NULL). */
uint64_t cuac_shm_count(const struct cuac_shm *s);

#endif
