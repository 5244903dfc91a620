/*
 * fdtab.h — the descriptors a session was passed over the fd channel (fdchan.c) and has not claimed yet, each
 * under its ticket. A request that names a ticket (HOST_REGISTER; issue 19's rings next) takes the descriptor
 * out, and it is then the request's to close; whatever is left is closed when the session ends. Tickets are
 * unique in the daemon, so a ticket of one session names nothing in another.
 *
 * Guarded by fe->lock like the session that holds the table (the caller holds it for every function here).
 */
#ifndef CUAD_FDTAB_H
#define CUAD_FDTAB_H

#include <stdint.h>
#include <sys/queue.h>

struct fdtab_ent {
	uint64_t ticket;
	int fd; /* owned */
	TAILQ_ENTRY(fdtab_ent) link;
};
struct fdtab {
	TAILQ_HEAD(fdtab_list, fdtab_ent) list;
	unsigned n;
};

/* Starts the daemon's tickets at a random value past 2^32 (fdchan_start; before it they count from 1). */
void fdtab_seed(void);
/* An empty table (a zeroed one is not: call this before use). */
void fdtab_init(struct fdtab *t);
/* Takes fd (ownership) under a new ticket in *ticket. 0, or -1 when out of memory (fd is closed then). */
int fdtab_put(struct fdtab *t, int fd, uint64_t *ticket);
/* The descriptor of ticket, taken out of the table (the caller's to close), or -1 when t has no such ticket. */
int fdtab_take(struct fdtab *t, uint64_t ticket);
/* Closes every descriptor left and empties t; fine on an initialised empty table. */
void fdtab_clear(struct fdtab *t);

#endif
