/*
 * cuac_flight.h — the flight layer of libcuasync: what happens to work between its submission and its reply.
 *   flight.c   the send queue: pipelined launches coalesced into BATCH messages, the messages in flight, the
 *              deferred error of fire-and-forget items, and the waits on them (cua_future_wait among them)
 *   future.c   futures (the results of launches and batches) and the completion eventfd (cua_client_fd)
 *   pending.c  the records waiting to be sent: pending items and the launch records they own
 * flight.c calls future.c and pending.c, never the reverse; the layer calls down into the transport and errors
 * layers only (cuac_transport.h, cuac_error.h). See internal.h for the layer order.
 */
#ifndef CUAC_FLIGHT_H
#define CUAC_FLIGHT_H

#include "internal.h"

/* ------------------------------------------------------------------ pending.c */

/* Frees p and its launch (not its future). NULL is fine. */
void cuac_pending_free(struct cuac_pending *p);
/* Frees every item of q; q is empty afterwards. */
void cuac_pendq_free(struct cuac_pendq *q);

/* The wire form of l's arguments into args (room for l->nargs); args point into l's arena, so l must outlive
 * their encoding. */
void cuac_launch_args(const cua_launch *l, cua_wire_arg *args);

/* ------------------------------------------------------------------ future.c */

/* A future of n items, not done; NULL when out of memory. Any thread; no lock. */
cua_future *cuac_future_new(cua_client *c, size_t n);

/* Records item i's result (msg of msglen bytes, copied). When it was the last item the future is done, and
 * freed if abandoned (f must not be used afterwards by the caller), else the client's completion eventfd is
 * written (cua_client_fd). Caller holds c->lock. */
void cuac_future_item_done(cua_future *f, size_t i, int status, const char *msg, size_t msglen);

/* ------------------------------------------------------------------ flight.c */

/* Keeps the first failure (status != CUA_OK, message msg of len bytes) of a fire-and-forget item as c's
 * deferred error, reported by cua_synchronize. Caller holds c->lock. */
void cuac_defer_locked(cua_client *c, int status, const char *msg, size_t len);

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

#endif
