/*
 * streampool.h — a session's own pool streams (shared isolation). Work that names no stream (stream handle 0)
 * goes round-robin to a few streams that belong to its session alone — the seed's pool semantics, per
 * session — so one session's long kernels never sit in front of another session's work on a stream. The
 * streams are created the first time the session needs them on a worker (and again after the worker
 * restarted), counted in its stream limit, and destroyed with the session.
 *
 * Planning cannot know their worker ids yet: a command names pool slot k as SPOOL_STREAM | k, and dispatch
 * patches the real id in once the pool exists. With --isolation session the worker's own pool is the
 * session's already, and none of this applies.
 *
 * Every function here runs with fe->lock held and never blocks.
 */
#ifndef CUAD_STREAMPOOL_H
#define CUAD_STREAMPOOL_H

#include "request.h"

#define SPOOL_STREAM 0x80000000u /* in a command's stream field: slot (value & ~SPOOL_STREAM) of the pool */

/* The stream field for work of r on device dev that named stream 0: a pool slot of r's session (shared
 * isolation), or a stream of the worker's own pool (session isolation). Marks r as needing its pool. */
uint32_t do_spool_slot(struct fe *fe, struct request *r, int dev) CUA_REQUIRES(cuad_fe_lock);
/* The worker stream of the session's ordered stream on device dev (CUA_STREAM_ORDERED_ID): its first pool
 * stream, always (the pool's round-robin may put unordered work there too, which only orders it more). */
uint32_t do_spool_ordered(struct fe *fe, struct request *r, int dev) CUA_REQUIRES(cuad_fe_lock);

enum spool_verdict { SPOOL_READY, SPOOL_WAIT, SPOOL_CREATE, SPOOL_FAILED };
/* Before r goes to worker d: SPOOL_READY when r needs no pool or its session's pool exists there (r's
 * commands are patched with the pool's ids); SPOOL_WAIT when the pool is being created (the dispatcher is
 * woken when it completes); SPOOL_CREATE when the caller is to create it now: a REQ_POOL request planned by
 * do_spool_plan, sent to d, then do_spool_creating; SPOOL_FAILED when it cannot be created (r's status says
 * why). */
enum spool_verdict do_spool_prepare(struct fe *fe, struct request *r, struct device *d) CUA_REQUIRES(cuad_fe_lock);
/* Plans the pool's creation into pr (REQ_POOL, its session and device set): one command per stream. 0 or -1
 * (out of memory). */
int do_spool_plan(struct fe *fe, struct request *pr) CUA_REQUIRES(cuad_fe_lock);
/* The creation of s's pool on device dev was sent: later requests wait for it (SPOOL_WAIT). */
void do_spool_creating(struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock);
/* A pool creation (REQ_POOL) completed: records the streams, or why they could not be made. */
void do_spool_created(struct fe *fe, struct request *pr) CUA_REQUIRES(cuad_fe_lock);
/* Pool streams s holds on live workers (they count against its stream limit). */
uint32_t do_spool_live(struct fe *fe, const struct session *s) CUA_REQUIRES(cuad_fe_lock);
/* Plans the destruction of s's pool streams on worker d into the cleanup request r. */
void do_spool_cleanup(struct fe *fe, struct request *r, const struct device *d) CUA_REQUIRES(cuad_fe_lock);

#endif
