/*
 * workerpool.h — workers of one session each (--isolation session). Every session gets a GPU worker process
 * (its own CUDA context) per device it uses, so its kernels cannot address another session's memory and its
 * fault ends only its own worker. Starting a worker takes a while (a process, a context), so a pool thread
 * keeps --isolation-pool idle workers ready per device and stops the ones sessions gave back.
 */
#ifndef CUAD_WORKERPOOL_H
#define CUAD_WORKERPOOL_H

#include "devlink.h"

/* Starts the pool thread (main thread, without fe->lock). 0 or -1. */
int pool_start(struct fe *fe, dev_done_fn done) CUA_EXCLUDES(cuad_fe_lock);
/* Stops it, with every idle and given-back worker (without fe->lock; nothing may be in flight on them). */
void pool_stop(struct fe *fe) CUA_EXCLUDES(cuad_fe_lock);
/* Whether pool_start ran (and pool_stop did not since). Main thread. */
bool pool_running(void);
/* An idle worker of device dev for session s (its owner from now on), or NULL when none is ready yet: the pool
 * thread starts one and wakes the dispatcher. Caller holds fe->lock. */
struct device *do_pool_take(struct fe *fe, int dev, struct session *s) CUA_REQUIRES(cuad_fe_lock);
/* Gives a session's worker back (its session is gone, nothing in flight): the pool thread stops it. Caller
 * holds fe->lock. */
void do_pool_retire(struct fe *fe, struct device *d) CUA_REQUIRES(cuad_fe_lock);

#endif
