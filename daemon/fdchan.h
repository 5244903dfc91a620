/*
 * fdchan.h — the fd channel (proto/PROTOCOL.md §9, records in common/cua_fdchan.h): beside each client ipc://
 * listener an AF_UNIX SOCK_SEQPACKET socket, "<path>.fd", with the ipc socket's owner, group and mode, over which
 * a same-host session passes descriptors into itself with SCM_RIGHTS. NNG's ipc transport carries no ancillary
 * data, and a pid (/proc/PID/fd) proves nothing once the process that connected is gone (pids are reused): a
 * descriptor received with SCM_RIGHTS is one the peer held when it sent it.
 *
 * A connection proves its session with the session's id and the secret HELLO's reply gave only that session
 * (compared in constant time), and its SO_PEERCRED uid must be the session's. Each descriptor it then passes is
 * put in the session's table under a ticket (fdtab.h) that requests name (HOST_REGISTER; the shared-memory rings
 * of issue 19 can pass their memfd and eventfds the same way).
 *
 * Everything is bounded: connections not yet authenticated (FDCHAN_MAX_UNAUTH, FDCHAN_MAX_UNAUTH_UID of one uid,
 * CUA_FDCHAN_AUTH_MS each),
 * connections in all (FDCHAN_MAX_CONNS) and per session (CUA_FDCHAN_CONNS_PER_SESSION), one fixed-size record
 * at a time, CUA_FDCHAN_MAX_FDS descriptors per record, CUA_FDCHAN_MAX_PENDING unclaimed per session. Any
 * violation gets one REPLY saying why, a log line (peer uid and pid, session, reason) and the connection
 * closed, with every descriptor it brought. One thread serves every channel socket with poll(2); it takes
 * fe->lock only to look a session up and to hand it descriptors.
 */
#ifndef CUAD_FDCHAN_H
#define CUAD_FDCHAN_H

#include "daemon.h"

#include <pthread.h>
#include <stdbool.h>

#define FDCHAN_MAX_UNAUTH 64u    /* connections that have not sent AUTH yet, all channels together */
#define FDCHAN_MAX_UNAUTH_UID 4u /* the same, of one uid: one user cannot crowd out the others' first AUTH */
#define FDCHAN_MAX_CONNS 1024u   /* connections in all */

struct fdchan_conn;

struct fdchan {
	struct fe *fe;
	struct shmsvc *shm;       /* where SHM records attach their channel (shmchan.h); NULL: refused */
	int lfd[CUAD_MAX_LISTEN]; /* the channel sockets, nl of them */
	char path[CUAD_MAX_LISTEN][108];
	int nl;
	struct fdchan_conn *conns; /* FDCHAN_MAX_CONNS slots, nconns used */
	unsigned nconns;
	int wake[2]; /* a pipe: fdchan_stop writes to it */
	pthread_t thread;
	bool started;
};

/* Opens the channel beside each ipc:// listener of fe->cfg.listen (after the edge opened them: the channel takes
 * the ipc socket's mode and group) and starts the thread. A listener whose channel cannot be opened is logged:
 * its sessions cannot pass descriptors (HOST_REGISTER fails), everything else works. 0, or -1 (logged) when the
 * thread cannot start. Main thread. */
int fdchan_start(struct fdchan *fc, struct fe *fe);
/* Removes the channels' socket files: no new connections (graceful shutdown, with edge_quiesce). Main thread. */
void fdchan_quiesce(struct fdchan *fc);
/* Stops the thread and closes every socket and every connection; the sessions' tables keep what they were
 * passed (freed with the sessions). Fine after a failed or no fdchan_start on a zeroed fc. Main thread. */
void fdchan_stop(struct fdchan *fc);

#endif
