/*
 * core.c — the front-end core's state: initialisation, settling what depends on other options, the clock.
 */
#include "config.h"

#include "daemon.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
fe_init(struct fe *fe)
{
	memset(fe, 0, sizeof(*fe));
	config_defaults(&fe->cfg);
	pthread_mutex_init(&fe->lock, NULL);
	pthread_cond_init(&fe->cond, NULL);
	TAILQ_INIT(&fe->sessions);
	TAILQ_INIT(&fe->ready);
	TAILQ_INIT(&fe->zombies);
	TAILQ_INIT(&fe->gaps);
	STAILQ_INIT(&fe->tomb_fifo);
	fe->start_ms = now_ms();
}

void
config_settle(struct config *c, bool pending_given)
{
	if (!pending_given)
		c->session_pending = c->contexts / 8 > 16 ? c->contexts / 8 : 16;
	if (c->contexts_max < c->contexts)
		c->contexts_max = c->contexts;
}
