/*
 * core.c — the front-end core's state: initialisation, settling what depends on other options.
 */
#include "config.h"

#include "cua_clock.h"
#include "daemon.h"

#include <stdlib.h>
#include <string.h>

void
fe_init(struct fe *fe)
{
	memset(fe, 0, sizeof(*fe));
	config_defaults(&fe->cfg);
	pthread_mutex_init(&fe->lock, NULL);
	cua_cond_init(&fe->cond);
	TAILQ_INIT(&fe->sessions);
	TAILQ_INIT(&fe->ready);
	TAILQ_INIT(&fe->zombies);
	TAILQ_INIT(&fe->gaps);
	STAILQ_INIT(&fe->tomb_fifo);
	fe->start_ms = cua_now_ms();
}

void
config_settle(struct config *c, bool pending_given)
{
	if (!pending_given)
		c->session_pending = c->contexts / 8 > 16 ? c->contexts / 8 : 16;
	if (c->contexts_max < c->contexts)
		c->contexts_max = c->contexts;
}
