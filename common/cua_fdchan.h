/*
 * cua_fdchan.h — the fd channel's records (proto/PROTOCOL.md §9): a same-host AF_UNIX SOCK_SEQPACKET socket
 * beside each ipc:// listener (its path with ".fd" appended) over which a session passes file descriptors
 * into itself with SCM_RIGHTS. NNG's ipc transport carries no ancillary data, so descriptors cannot travel
 * with the requests; each descriptor passed gets a ticket that requests (HOST_REGISTER) name instead.
 *
 * One record per packet, little-endian, fixed sizes: a record of another size, or with descriptors where
 * none belong, is a violation and the daemon closes the connection after one REPLY saying why.
 *
 *   client -> daemon  AUTH   struct cua_fdchan_auth   no descriptors; the first record, exactly once
 *   client -> daemon  PASS   struct cua_fdchan_pass   1..CUA_FDCHAN_MAX_FDS descriptors (SCM_RIGHTS)
 *   client -> daemon  SHM    struct cua_fdchan_pass   exactly 2 descriptors: the shared-memory channel's memfd
 *                                                     and its eventfd (cua_shm.h, PROTOCOL.md §10); no ticket
 *   daemon -> client  REPLY  struct cua_fdchan_reply  followed by a message of up to CUA_FDCHAN_MAX_TEXT
 *                                                     bytes (UTF-8, no NUL), one per AUTH and PASS
 */
#ifndef CUA_FDCHAN_H
#define CUA_FDCHAN_H

#include <stdint.h>

#define CUA_FDCHAN_VERSION 1u
#define CUA_FDCHAN_SUFFIX ".fd"         /* the channel's path: the ipc:// listener's path and this */
#define CUA_FDCHAN_SECRET 32u           /* bytes of a session's channel secret (HELLO's reply, fd_secret) */
#define CUA_FDCHAN_MAX_FDS 4u           /* descriptors in one PASS */
#define CUA_FDCHAN_MAX_TEXT 256u        /* bytes of a REPLY's message */
#define CUA_FDCHAN_MAX_PENDING 16u      /* descriptors a session holds unclaimed (tickets not yet used) */
#define CUA_FDCHAN_CONNS_PER_SESSION 2u /* authenticated connections of one session */
#define CUA_FDCHAN_AUTH_MS 2000u        /* from accept to AUTH, at most */

enum { CUA_FDCHAN_AUTH = 1, CUA_FDCHAN_PASS = 2, CUA_FDCHAN_SHM = 3 };

struct cua_fdchan_auth {
	uint32_t kind;                     /* CUA_FDCHAN_AUTH */
	uint32_t version;                  /* CUA_FDCHAN_VERSION */
	uint64_t session;                  /* HELLO's reply: session */
	uint8_t secret[CUA_FDCHAN_SECRET]; /* HELLO's reply: fd_secret */
};
struct cua_fdchan_pass {
	uint32_t kind; /* CUA_FDCHAN_PASS (or CUA_FDCHAN_SHM) */
	uint32_t nfds; /* the descriptors attached (SCM_RIGHTS), 1..CUA_FDCHAN_MAX_FDS (SHM: 2) */
};
struct cua_fdchan_reply {
	uint32_t kind;                        /* the record answered (AUTH or PASS; 0: none, a violation) */
	uint32_t status;                      /* a status code of PROTOCOL.md §5 (0 = OK) */
	uint64_t tickets[CUA_FDCHAN_MAX_FDS]; /* PASS with OK: one per descriptor, in order; else 0 */
};                                            /* followed by the message */

_Static_assert(sizeof(struct cua_fdchan_auth) == 48, "AUTH is 48 bytes on the wire");
_Static_assert(sizeof(struct cua_fdchan_pass) == 8, "PASS is 8 bytes on the wire");
_Static_assert(sizeof(struct cua_fdchan_reply) == 40, "REPLY's header is 40 bytes on the wire");

#endif
