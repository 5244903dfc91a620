/*
 * shmchan.h — the shared-memory channels of same-host sessions (issue 19; layout in common/cua_shm.h, spec in
 * PROTOCOL.md §10). A channel is a second way into the edge beside NNG: requests read from its request ring
 * enter the core through request_receive exactly as NNG messages do (same pipe, same limits, same sequence
 * order), and their replies leave through its reply ring instead of an NNG context. NNG stays the control
 * channel and the fallback.
 *
 * One service thread serves every channel: it copies each record out of the ring before anything reads it, so
 * that the client, which may scribble over the mapping at any moment, can never change what is decoded; every
 * index it reads from the mapping is bounded first, and a channel whose ring breaks a rule is closed with its
 * connection (records it published may be lost, and their sequence numbers with them: the session could not go
 * on). The thread polls the rings for CUA_SHM_SPIN_NS after its last record, then sleeps in epoll_wait on the
 * channels' eventfds (each client's doorbell, written only when the channel says the daemon sleeps), so an idle
 * daemon burns no CPU however many channels are attached.
 *
 * Replies never block a thread on a client: a reply that does not fit the reply ring waits in the channel's
 * queue (written in pieces, CUA_SHM_MORE, as the client frees room), counted as unsent (request_reply_sent when
 * written), so a client that stops reading is flow-controlled as on NNG (QUOTA past --session-pending); the
 * thread stops reading a channel's requests while SHMCHAN_QUEUE_MAX replies wait, and closes a channel whose
 * queued reply has not moved for --send-timeout.
 */
#ifndef CUAD_SHMCHAN_H
#define CUAD_SHMCHAN_H

#include "daemon.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHMCHAN_MAX 1024u          /* channels attached at once */
#define SHMCHAN_QUEUE_MAX 256u     /* replies queued on one channel before its requests are no longer read */
#define SHMCHAN_BURST 64u          /* records read from one channel before the next channel's turn */
#define SHMCHAN_CTX_KIND 0x53484dU /* the first word of a channel's reply context (edge.c tells them apart) */

struct shmsvc;

/* Starts the service thread (main thread, after edge_start). NULL when it cannot (logged): no channels then. */
struct shmsvc *shmchan_start(struct fe *fe);
/* Stops the thread and closes every channel; later replies of ring requests are dropped (main thread, after
 * edge_flush, without fe->lock). NULL is fine. */
void shmchan_stop(struct shmsvc *svc);

/* Attaches the channel of session `session` from memfd and efd (both taken: closed here whatever happens):
 * checks the seals, the size and the header, maps it, and starts serving it. Returns 0, or a status of
 * PROTOCOL.md §5 with why (a sentence for the client) filled in. The fd channel's thread, without fe->lock. */
int shmchan_attach(struct shmsvc *svc, uint64_t session, int memfd, int efd, char *why, size_t why_len)
	CUA_EXCLUDES(cuad_fe_lock);

/* The edge's send and drop for a reply context whose first word is SHMCHAN_CTX_KIND (edge_ops in daemon.h):
 * msg (an nng_msg, taken) goes into the channel's reply ring or queue. Any thread, fe->lock held or not. */
size_t shmchan_send(void *ctx, void *msg, bool counted);
void shmchan_drop(void *ctx);

#endif
