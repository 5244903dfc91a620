/*
 * scheduler.h — the scheduler: a session's requests in sequence order, its queue of validated requests, and
 * the dispatcher thread that moves queued requests to their devices round-robin across sessions (one
 * request per session per round), so that a flooding client cannot starve the others.
 *
 * The scheduler decides *when*; what dispatching or closing means is the caller's (request.c), given as
 * struct sched_ops. All do_* functions expect fe->lock held and never block.
 */
#ifndef CUAD_SCHED_H
#define CUAD_SCHED_H

#include "request.h"

enum sched_verdict {
	SCHED_SENT,     /* r is in its device now */
	SCHED_ANSWERED, /* r was answered without running (and freed) */
	SCHED_WAIT,     /* r's device is (re)starting: try again when woken */
	SCHED_FULL,     /* no room in the device now: try again shortly */
};

struct sched_ops {
	/* Dispatcher thread (or a receiving thread: do_sched_defer_end), fe->lock held; r has been taken off its
	 * session's queue (it is put back at the head on WAIT/FULL). */
	enum sched_verdict (*dispatch)(struct fe *fe, struct request *r);
	/* Dispatcher thread, fe->lock held: the connection of s left. */
	void (*close_session)(struct fe *fe, struct session *s);
	/* fe->lock held: s is about to be freed (closed, nothing of it queued or in flight). */
	void (*session_gone)(struct fe *fe, struct session *s);
	/* Dispatcher thread, fe->lock held: s's parked requests waited --seq-gap-timeout for a missing seq; it
	 * must take them (do_sched_take_parked). */
	void (*gap_expired)(struct fe *fe, struct session *s);
};

/* Starts / stops the dispatcher thread (without fe->lock). 0 or -1. */
int sched_start(struct fe *fe, const struct sched_ops *ops) CUA_EXCLUDES(cuad_fe_lock);
void sched_stop(struct fe *fe) CUA_EXCLUDES(cuad_fe_lock);
/* Wakes the dispatcher: work may be ready, or a session must be closed. */
void do_sched_wake(struct fe *fe) CUA_REQUIRES(cuad_fe_lock);
/* Around the admission of one received request (request_receive): wake-ups of the dispatcher are held back,
 * and at the end, when one session alone has queued work (usually the one that asked) and the dispatcher runs,
 * the receiving thread runs the dispatcher's pass itself; otherwise it wakes the dispatcher. A lone launch then
 * goes to its worker without the dispatcher's wake-up (5-10 µs on the H200 host: BENCHMARKS.md, "hops").
 * Fairness is unchanged: with one session ready, the dispatcher's pass would do the same. The caller holds
 * nothing of the request or its session across the end (the pass may answer and free them). */
void do_sched_defer_begin(struct fe *fe) CUA_REQUIRES(cuad_fe_lock);
void do_sched_defer_end(struct fe *fe) CUA_REQUIRES(cuad_fe_lock);

/* Appends a validated request to its session's queue. Takes r. */
void do_sched_enqueue(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock);
/* Takes every queued request of s off its queue except cleanup requests, into *out (in order). */
void do_sched_take_queued(struct session *s, struct request_queue *out) CUA_REQUIRES(cuad_fe_lock);
/* Ordered requests that arrived early wait here, sorted by seq. Takes r. The first one parked starts the
 * session's gap clock (sched_ops->gap_expired when it runs out). */
void do_sched_park(struct fe *fe, struct session *s, struct request *r) CUA_REQUIRES(cuad_fe_lock);
/* The parked request whose turn has come (seq == s->next_seq), taken off the list, or NULL. Taking one
 * restarts the gap clock of those still parked. */
struct request *do_sched_unpark(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock);
/* Takes every parked request of s, into *out (sorted by seq); stops its gap clock. */
void do_sched_take_parked(struct fe *fe, struct session *s, struct request_queue *out) CUA_REQUIRES(cuad_fe_lock);

/* Frees s once it is closing and nothing of it is queued or in flight (after the dispatcher's pass if it
 * is walking the sessions). Safe to call at any time. */
void do_sched_session_release(struct fe *fe, struct session *s) CUA_REQUIRES(cuad_fe_lock);

/* The dispatch step of a request's life (request.c), which request-ctl.c hands to sched_start as
 * sched_ops.dispatch: r's turn to go to its device has come. fe->lock held. */
enum sched_verdict do_request_dispatch(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock);

#endif
