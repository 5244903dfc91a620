/*
 * ring.h — single-producer/single-consumer byte ring in shared memory, between the front-end and a worker.
 *
 * Records are variable-sized (8-byte aligned, at most size/2). The producer publishes with a release store of
 * `head` and bumps the `head_seq` futex word; the consumer spins up to 30 µs, then sleeps on that word. The
 * reverse holds for space. Waits time out so that a dead peer is noticed by the caller's own checks.
 * One thread produces and one consumes at a time (callers serialise with their own lock where needed).
 */
#ifndef CUAD_RING_H
#define CUAD_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ring {
	_Alignas(64) _Atomic uint64_t head; /* bytes ever published */
	_Atomic uint32_t head_seq;
	_Atomic uint32_t consumer_sleeping;
	_Alignas(64) _Atomic uint64_t tail; /* bytes ever consumed */
	_Atomic uint32_t tail_seq;
	_Atomic uint32_t producer_sleeping;
	_Alignas(64) uint64_t size; /* power of two */
	_Alignas(64) unsigned char data[];
};

/* Bytes a ring of `size` data bytes needs (header included). */
size_t ring_footprint(size_t size);
void ring_init(struct ring *r, size_t size);
/* Largest record payload the ring accepts. */
size_t ring_max_record(const struct ring *r);

/* Producer: a pointer to len bytes of space, or NULL when the ring lacks room now (or len is too big). */
void *ring_reserve(struct ring *r, size_t len);
/* Producer: publish the record reserved last (with its final length <= the reserved one). */
void ring_commit(struct ring *r, size_t len);
/* Producer: wait up to timeout_ms for room for len bytes. Returns 1 when there is room. */
int ring_wait_space(struct ring *r, size_t len, int timeout_ms);

/* Consumer: the next record, or NULL when empty. */
const void *ring_peek(struct ring *r, size_t *len);
/* Consumer: drop the record returned by ring_peek. */
void ring_release(struct ring *r);
/* Consumer: whether another record follows the one ring_peek returned (one must have been returned). */
bool ring_has_next(struct ring *r);
/* Consumer: wait up to timeout_ms (spinning first) for a record. Returns 1 when one is there. */
int ring_wait_data(struct ring *r, int timeout_ms);
/* Wakes a consumer sleeping in ring_wait_data (used to deliver a shutdown or death notice). */
void ring_kick(struct ring *r);

#endif
