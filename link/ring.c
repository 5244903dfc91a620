#include "config.h"

#include "cua_clock.h"
#include "ring.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define REC_HDR 8u
#define REC_PAD 0xffffffffu /* a record header that says "skip to the start of the ring" */
/*
 * A waiter spins up to SPIN_NS before it sleeps on the futex word. A futex wake-up costs the next record 5-10 µs
 * on the H200 host (a VM), and the ring carries every launch both ways: a client waiting for each launch pays it
 * twice per launch (BENCHMARKS.md, "hops"). Callers wait only after they found the ring empty or full, so an idle
 * peer costs SPIN_NS per timeout, nothing more.
 */
#define SPIN_NS 30000u

/* Spin bookkeeping: true while a waiter that started at *start (0: not yet) should still spin. */
static bool
spinning(uint64_t *start, unsigned i)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
	if (i % 32 != 0)
		return true;
	uint64_t now = cua_now_ns();
	if (*start == 0)
		*start = now;
	return now - *start < SPIN_NS;
}

static size_t
align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

size_t
ring_footprint(size_t size)
{
	return sizeof(struct ring) + size;
}

void
ring_init(struct ring *r, size_t size)
{
	memset(r, 0, sizeof(*r));
	r->size = size;
}

size_t
ring_max_record(const struct ring *r)
{
	return r->size / 2 - REC_HDR;
}

static void
futex_wait(_Atomic uint32_t *word, uint32_t val, int timeout_ms)
{
	struct timespec ts = cua_ms_ts((uint64_t)timeout_ms); /* relative: FUTEX_WAIT measures it monotonically */
	/* Shared (not FUTEX_PRIVATE): the word lives in memory mapped by two processes. */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void
futex_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void *
ring_reserve(struct ring *r, size_t len)
{
	size_t need = REC_HDR + align8(len);
	if (len > ring_max_record(r))
		return NULL;
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	size_t pos = head & (r->size - 1);
	size_t to_end = r->size - pos;
	size_t total = need <= to_end ? need : to_end + need; /* padding to the start when it does not fit */
	if (r->size - (head - tail) < total)
		return NULL;
	if (need > to_end) {
		uint32_t pad = REC_PAD;
		memcpy(r->data + pos, &pad, sizeof(pad));
		atomic_store_explicit(&r->head, head + to_end, memory_order_release);
		/* The pad becomes visible together with the record in ring_commit. */
		pos = 0;
	}
	return r->data + pos + REC_HDR;
}

void
ring_commit(struct ring *r, size_t len)
{
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	size_t pos = head & (r->size - 1);
	uint32_t l = (uint32_t)len;
	memcpy(r->data + pos, &l, sizeof(l));
	atomic_store_explicit(&r->head, head + REC_HDR + align8(len), memory_order_release);
	atomic_fetch_add_explicit(&r->head_seq, 1, memory_order_release);
	if (atomic_load_explicit(&r->consumer_sleeping, memory_order_seq_cst))
		futex_wake(&r->head_seq);
}

int
ring_wait_space(struct ring *r, size_t len, int timeout_ms)
{
	size_t need = 2 * (REC_HDR + align8(len)); /* worst case with wrap padding */
	if (need > r->size)
		need = r->size;
	uint64_t start = 0;
	bool spin = true;
	for (unsigned i = 0;; i++) {
		/* read before the room is checked: a release after it makes the futex wait return at once (read
		 * afresh each time, not once before the spin: a consumer freeing room slowly must not keep the
		 * producer from ever sleeping) */
		uint32_t seq = atomic_load_explicit(&r->tail_seq, memory_order_acquire);
		uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
		uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
		if (r->size - (head - tail) >= need)
			return 1;
		if (spin && (spin = spinning(&start, i)))
			continue;
		if (start == UINT64_MAX)
			return 0;
		start = UINT64_MAX; /* slept once */
		atomic_store(&r->producer_sleeping, 1);
		if (r->size - (head - atomic_load(&r->tail)) < need)
			futex_wait(&r->tail_seq, seq, timeout_ms);
		atomic_store(&r->producer_sleeping, 0);
	}
}

const void *
ring_peek(struct ring *r, size_t *len)
{
	for (;;) {
		uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
		if (tail == head)
			return NULL;
		size_t pos = tail & (r->size - 1);
		uint32_t l;
		memcpy(&l, r->data + pos, sizeof(l));
		if (l == REC_PAD) {
			atomic_store_explicit(&r->tail, tail + (r->size - pos), memory_order_release);
			continue;
		}
		*len = l;
		return r->data + pos + REC_HDR;
	}
}

void
ring_release(struct ring *r)
{
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	size_t pos = tail & (r->size - 1);
	uint32_t l;
	memcpy(&l, r->data + pos, sizeof(l));
	atomic_store_explicit(&r->tail, tail + REC_HDR + align8(l), memory_order_release);
	atomic_fetch_add_explicit(&r->tail_seq, 1, memory_order_release);
	if (atomic_load_explicit(&r->producer_sleeping, memory_order_seq_cst))
		futex_wake(&r->tail_seq);
}

bool
ring_has_next(struct ring *r)
{
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t l;
	memcpy(&l, r->data + (tail & (r->size - 1)), sizeof(l));
	return atomic_load_explicit(&r->head, memory_order_acquire) != tail + REC_HDR + align8(l);
}

int
ring_wait_data(struct ring *r, int timeout_ms)
{
	uint64_t start = 0;
	bool spin = true;
	/* read once: a record or a kick during the spin makes the futex wait return at once */
	uint32_t seq = atomic_load_explicit(&r->head_seq, memory_order_acquire);
	for (unsigned i = 0;; i++) {
		if (atomic_load_explicit(&r->head, memory_order_acquire) != atomic_load(&r->tail))
			return 1;
		if (spin && (spin = spinning(&start, i)))
			continue;
		if (start == UINT64_MAX)
			return 0;
		start = UINT64_MAX; /* slept once */
		atomic_store(&r->consumer_sleeping, 1);
		if (atomic_load(&r->head) == atomic_load(&r->tail))
			futex_wait(&r->head_seq, seq, timeout_ms);
		atomic_store(&r->consumer_sleeping, 0);
	}
}

void
ring_kick(struct ring *r)
{
	atomic_fetch_add(&r->head_seq, 1);
	futex_wake(&r->head_seq);
}
