/*
 * cua_shm.h — the shared-memory channel of a same-host session (proto/PROTOCOL.md §10): a sealed memfd the
 * client creates, holding a header, a request ring and a reply ring, passed to the daemon over the fd channel
 * (cua_fdchan.h, record SHM) with an eventfd, the daemon's doorbell. The rings carry the same msgpack requests
 * and replies as NNG, one per record.
 *
 * Layout (little-endian, host byte order is the only one the same host has):
 *
 *   [0, CUA_SHM_HDR_BYTES)                                  struct cua_shm_hdr
 *   [CUA_SHM_HDR_BYTES, +ring)                              the request ring (client -> daemon)
 *   [CUA_SHM_HDR_BYTES + ring, +ring)                       the reply ring (daemon -> client)
 *
 * ring is hdr.ring_bytes: a power of two, CUA_SHM_RING_MIN..CUA_SHM_RING_MAX; the memfd is exactly
 * CUA_SHM_HDR_BYTES + 2 * ring bytes and sealed with F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL.
 *
 * A ring's head and tail are free-running 32-bit byte counters (position = counter & (ring - 1)); the producer
 * alone writes tail, the consumer alone writes head; tail - head (mod 2^32) is the bytes in use, a multiple of
 * CUA_SHM_ALIGN and at most ring. A record starts at a multiple of CUA_SHM_ALIGN: struct cua_shm_rec, then len
 * bytes of message (wrapping at the ring's end), then padding up to the next multiple of CUA_SHM_ALIGN.
 */
#ifndef CUA_SHM_H
#define CUA_SHM_H

#include <stdint.h>

#define CUA_SHM_MAGIC 0x4d485343u /* "CSHM" */
#define CUA_SHM_VERSION 1u
#define CUA_SHM_HDR_BYTES 4096u
#define CUA_SHM_RING_MIN (64u * 1024u)
#define CUA_SHM_RING_MAX (16u * 1024u * 1024u)
#define CUA_SHM_RING_DEFAULT (1024u * 1024u)
#define CUA_SHM_ALIGN 16u
#define CUA_SHM_SPIN_NS 20000u         /* the shortest poll of either side after its last record before it sleeps */
#define CUA_SHM_SPIN_MAX_NS 200000u    /* the longest */
#define CUA_SHM_SAMPLE_MAX_NS 1000000u /* a wait counts at most this much in the average (an idle spell) */

/* The adaptive spin: each side keeps a moving average of the waits its poll could save (the client: from a
 * request to its reply; the daemon: between records) and polls twice that long before it sleeps, between
 * CUA_SHM_SPIN_NS and CUA_SHM_SPIN_MAX_NS. Waits that usually last longer are slept through after the shortest
 * poll: a futex wake-up costs little beside them. Nothing is polled while no record is expected (idle). */
static inline uint64_t
cua_shm_avg(uint64_t avg, uint64_t wait_ns)
{
	uint64_t w = wait_ns < CUA_SHM_SAMPLE_MAX_NS ? wait_ns : CUA_SHM_SAMPLE_MAX_NS;
	return avg - avg / 8 + w / 8;
}

static inline uint64_t
cua_shm_spin_ns(uint64_t avg)
{
	if (avg * 2 > CUA_SHM_SPIN_MAX_NS)
		return CUA_SHM_SPIN_NS;
	return avg * 2 > CUA_SHM_SPIN_NS ? avg * 2 : CUA_SHM_SPIN_NS;
}

/* cua_shm_rec.flags */
#define CUA_SHM_MORE 1u /* reply ring only: the message goes on in the next record (same tag) */

struct cua_shm_rec {
	uint32_t len;   /* bytes of message in this record, >= 1 */
	uint32_t flags; /* CUA_SHM_MORE or 0 */
	uint64_t tag;   /* the client's: a reply's records carry its request's tag */
};

/* Every field but the first four is a 32-bit atomic word alone in its 64-byte line (futexes and counters). */
struct cua_shm_hdr {
	uint32_t magic;      /* CUA_SHM_MAGIC */
	uint32_t version;    /* CUA_SHM_VERSION */
	uint32_t ring_bytes; /* each ring's size */
	uint32_t reserved;   /* 0 */
	uint32_t pad0[12];
	uint32_t req_tail; /* 64: written by the client */
	uint32_t pad1[15];
	uint32_t req_head; /* 128: written by the daemon */
	uint32_t pad2[15];
	uint32_t daemon_sleeping; /* 192: the daemon sets it to 1 before it waits on its eventfd, 0 when awake */
	uint32_t pad3[15];
	uint32_t rep_tail; /* 256: written by the daemon */
	uint32_t pad4[15];
	uint32_t rep_head; /* 320: written by the client */
	uint32_t pad5[15];
	uint32_t rep_futex; /* 384: the daemon adds 1 after each reply it publishes (the client's futex word) */
	uint32_t pad6[15];
	uint32_t client_waiting; /* 448: the client sets it to 1 before FUTEX_WAIT on rep_futex */
	uint32_t pad7[15];
	uint32_t closed; /* 512: the daemon writes a status code (PROTOCOL.md §5) when it closes the channel */
};

_Static_assert(sizeof(struct cua_shm_rec) == 16, "a record header is 16 bytes");
_Static_assert(sizeof(struct cua_shm_hdr) <= CUA_SHM_HDR_BYTES, "the header fits its page");

#endif
