/*
 * workerpool.c — the pool of one-session workers (see workerpool.h). One thread does the slow parts (spawning
 * and stopping worker processes) without fe->lock; the dispatcher only moves pointers under it.
 */
#include "config.h"

#include "cua_clock.h"
#include "cua_log.h"
#include "workerpool.h"

#include <stdlib.h>

TAILQ_HEAD(device_list, device);

static struct pool {
	pthread_t thread;
	bool started, stop;
	pthread_cond_t cond; /* the pool thread: a worker was taken or given back */
	struct device_list idle[CUA_MAX_DEVICES];
	unsigned nidle[CUA_MAX_DEVICES];
	unsigned starting[CUA_MAX_DEVICES]; /* being spawned now */
	struct device_list retired;
	dev_done_fn done;
} P;

struct device *
do_pool_take(struct fe *fe, int dev, struct session *s)
{
	struct device *d = TAILQ_FIRST(&P.idle[dev]);
	if (d != NULL) {
		TAILQ_REMOVE(&P.idle[dev], d, pool_link);
		P.nidle[dev]--;
		d->owner = s;
		log_debug("session %llu: worker %d of device %d", (unsigned long long)s->id, (int)d->pid, dev);
	}
	pthread_cond_signal(&P.cond); /* refill */
	(void)fe;
	return d;
}

void
do_pool_retire(struct fe *fe, struct device *d)
{
	(void)fe;
	d->owner = NULL;
	TAILQ_INSERT_TAIL(&P.retired, d, pool_link);
	pthread_cond_signal(&P.cond);
}

/* One round of the pool thread's work, entered and left with fe->lock held (dropped while it blocks).
 * Returns true when it did something. */
static bool
pool_round(struct fe *fe) CUA_REQUIRES(cuad_fe_lock)
{
	struct device *d = TAILQ_FIRST(&P.retired);
	if (d != NULL) {
		TAILQ_REMOVE(&P.retired, d, pool_link);
		fe_unlock(fe);
		dev_destroy(d);
		fe_lock(fe);
		return true;
	}
	for (int i = 0; i < fe->ndevs; i++) {
		if (fe->devs[i].state == DEV_FAILED || P.nidle[i] + P.starting[i] >= fe->cfg.isolation_pool)
			continue;
		P.starting[i]++;
		fe_unlock(fe);
		int rc = dev_spawn(fe, &fe->devs[i], P.done, &d);
		fe_lock(fe);
		P.starting[i]--;
		if (rc != 0) {
			log_error("device %d: cannot start a session's worker: %s", i, cua_strerror(rc));
			return false;
		}
		TAILQ_INSERT_TAIL(&P.idle[i], d, pool_link);
		P.nidle[i]++;
		pthread_cond_signal(&fe->cond); /* the dispatcher: a session waiting for a worker can go */
		return true;
	}
	return false;
}

static void *
pool_main(void *arg)
{
	struct fe *fe = arg;
	pthread_setname_np(pthread_self(), "cuad-workers");
	fe_lock(fe);
	while (!P.stop) {
		if (!pool_round(fe) && !P.stop)
			fe_cond_wait(fe, &P.cond, NULL);
	}
	fe_unlock(fe);
	return NULL;
}

int
pool_start(struct fe *fe, dev_done_fn done)
{
	P.done = done;
	cua_cond_init(&P.cond);
	TAILQ_INIT(&P.retired);
	for (unsigned i = 0; i < CUA_MAX_DEVICES; i++)
		TAILQ_INIT(&P.idle[i]);
	/* the first workers before the daemon serves: a session's first request finds one ready */
	for (int i = 0; i < fe->ndevs; i++)
		for (unsigned k = 0; k < fe->cfg.isolation_pool; k++) {
			struct device *d;
			fe_lock(fe); /* the shared devices' completion threads run: a restart writes state */
			bool failed = fe->devs[i].state == DEV_FAILED;
			fe_unlock(fe);
			if (failed || dev_spawn(fe, &fe->devs[i], done, &d) != 0)
				break;
			TAILQ_INSERT_TAIL(&P.idle[i], d, pool_link);
			P.nidle[i]++;
		}
	if (pthread_create(&P.thread, NULL, pool_main, fe) != 0)
		return -1;
	P.started = true;
	return 0;
}

bool
pool_running(void)
{
	return P.started;
}

void
pool_stop(struct fe *fe)
{
	struct device *d;
	if (!P.started)
		return;
	fe_lock(fe);
	P.stop = true;
	pthread_cond_signal(&P.cond);
	fe_unlock(fe);
	pthread_join(P.thread, NULL);
	P.started = false;
	for (unsigned i = 0; i < CUA_MAX_DEVICES; i++)
		while ((d = TAILQ_FIRST(&P.idle[i])) != NULL) {
			TAILQ_REMOVE(&P.idle[i], d, pool_link);
			dev_destroy(d);
		}
	while ((d = TAILQ_FIRST(&P.retired)) != NULL) {
		TAILQ_REMOVE(&P.retired, d, pool_link);
		dev_destroy(d);
	}
}
