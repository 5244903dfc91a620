/*
 * pending.c — the records that wait to be sent: a pending item (struct cuac_pending) and the launch record it
 * owns. Freeing them, and the wire form of a launch's arguments, are here, below flight.c (which frees items
 * once answered and encodes launches into BATCH messages) and the builders that make them (launch.c, batch.c,
 * graph.c).
 */
#include "config.h"

#include "cuac_flight.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

void
cua_launch_free(cua_launch *l)
{
	if (l == NULL)
		return;
	cua_arena_fini(&l->vals);
	if (l->sizes != l->sizes_inline)
		free(l->sizes);
	if (l->kinds != l->kinds_inline)
		free(l->kinds);
	free(l);
}

void
cuac_launch_args(const cua_launch *l, cua_wire_arg *args)
{
	for (size_t k = 0; k < l->nargs; k++) {
		const void *v = cua_arena_arg(&l->vals, k);
		args[k].kind = l->kinds[k];
		if (l->kinds[k] == CUA_ARG_DEVPTR)
			memcpy(&args[k].devptr, v, 8);
		else
			args[k].bytes = (cua_bytes){v, l->sizes[k]};
	}
}

void
cuac_pending_free(struct cuac_pending *p)
{
	if (p == NULL)
		return;
	cua_launch_free(p->launch);
	free(p);
}

void
cuac_pendq_free(struct cuac_pendq *q)
{
	struct cuac_pending *p;
	while ((p = TAILQ_FIRST(q)) != NULL) {
		TAILQ_REMOVE(q, p, link);
		cuac_pending_free(p);
	}
}
