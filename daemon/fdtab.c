/*
 * fdtab.c — a session's unclaimed passed descriptors by ticket (see fdtab.h).
 */
#include "config.h"

#include "fdtab.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* Daemon-wide, never reused: a ticket names one descriptor of one session, ever. fdtab_seed starts it at a random
 * value past 2^32, so that no descriptor number, pid or small count a client sends by mistake is a ticket. */
static atomic_uint_fast64_t next_ticket = 1;

void
fdtab_seed(void)
{
	uint64_t r = 0;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint64_t)time(NULL) * 2654435761u;
	atomic_store(&next_ticket, (r >> 2) | (1ull << 32)); /* room to count up without wrapping */
}

void
fdtab_init(struct fdtab *t)
{
	TAILQ_INIT(&t->list);
	t->n = 0;
}

int
fdtab_put(struct fdtab *t, int fd, uint64_t *ticket)
{
	struct fdtab_ent *e = malloc(sizeof(*e));
	if (e == NULL) {
		close(fd);
		return -1;
	}
	e->fd = fd;
	e->ticket = atomic_fetch_add(&next_ticket, 1);
	TAILQ_INSERT_TAIL(&t->list, e, link);
	t->n++;
	*ticket = e->ticket;
	return 0;
}

int
fdtab_take(struct fdtab *t, uint64_t ticket)
{
	struct fdtab_ent *e;
	TAILQ_FOREACH(e, &t->list, link)
	if (e->ticket == ticket) {
		int fd = e->fd;
		TAILQ_REMOVE(&t->list, e, link);
		t->n--;
		free(e);
		return fd;
	}
	return -1;
}

void
fdtab_clear(struct fdtab *t)
{
	struct fdtab_ent *e;
	while ((e = TAILQ_FIRST(&t->list)) != NULL) {
		TAILQ_REMOVE(&t->list, e, link);
		close(e->fd);
		free(e);
	}
	t->n = 0;
}
