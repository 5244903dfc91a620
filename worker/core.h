/*
 * core.h — the worker core's private parts, shared by its files (backends do not include this).
 *
 * Layers: a file calls only files of the rows below its own (tools/check-cycles.py checks that no files call
 * each other in a circle); a lower row reaches a higher one only through a callback it was given.
 *
 *   worker.c                      the loop: records decoded, commands run or handed to the submit threads, hello,
 *                                 heartbeat, setup; names the backends and gives them their struct wk_host
 *   commands.c commands_event.c   the command table (wk_cmds) and its handlers, which call the backend through
 *   commands_graph.c launch_attr.c  w->be, and the launch checks
 *   streams.c                     the core's stream table, the streams a request touched, notices, busy time
 *   tracker.c  submit.c           outcomes, completion records, fault exits | the submit threads, which call
 *                                 back through the struct wksub_ops worker.c gave them (issue, notice)
 *   idtab.c                       tables of objects by id (on common/cua_idmap.c), for every file above and
 *                                 the backends
 *
 * The backends sit below worker.c and beside the rest: the core calls them through struct wk_backend, they
 * report through their struct wk_host (tracker.c's wk_report and wk_fatal_many) and each notice's wk_done_fn
 * (streams.c's wk_notice_done, tracker.c's wk_hold_done). Their own files are layered as emu_impl.h and
 * cuda_impl.h draw.
 *
 * A request's life in the worker: its record is decoded on the main thread command by command through
 * wk_cmds (sizes checked before anything is read); sync commands run at once, stream commands are prepared
 * (stream checked, host pointers resolved) and issued on their stream, and the stream is noted; then one
 * notice per noted stream is asked of the backend. The request's tracker counts those notices plus one hold by
 * the main thread; whoever drops it to zero writes the completion record (struct wcpl_req + wcpl per command)
 * and frees the tracker.
 *
 * With --submit-threads N > 1 (submit.c) stream work is issued by N submit threads instead: stream sid belongs
 * to thread sid % N, and the main thread appends each prepared command to its owner's batch. At the end of the
 * record (and before a barrier command, below) it appends to each owner's batch one notice per stream of that
 * owner the request touched, counting it in the tracker first, and hands the batches over. A thread issues a
 * batch in order, so a stream's notice is asked after the request's work on that stream was issued, and a
 * stream's order is the record order (one stream, one thread, FIFO batches). A barrier command (free, unload,
 * destroy, unregister) first waits until the threads concerned have issued everything handed to them.
 */
#ifndef CUAW_CORE_H
#define CUAW_CORE_H

#include "backend.h"
#include "idtab.h"

#include <stdatomic.h>
#include <stdbool.h>

/* One command's outcome. Written by the main thread while the command runs, or by the one backend thread
 * that runs its stream work (wk_report); read when the completion is written, after all of those. */
struct titem {
	uint32_t status;
	uint64_t value;
	char *detail; /* malloc'd or NULL */
	void *data;   /* malloc'd or NULL */
	uint32_t data_len;
};

struct tracker {
	uint64_t req;
	uint32_t ncmds;
	atomic_int pending;
	_Atomic uint64_t busy_ns;  /* the time its work kept streams busy (wk_notice, notice_done) */
	uint64_t t_read;           /* CLOCK_MONOTONIC ns: its record was taken up (struct wcpl_req) */
	_Atomic uint64_t t_issued; /* the latest of its stream work's issue (wk_notice) */
	bool emitted;              /* its completion has been written (wk_fatal_many; under cpl_lock) */
	struct titem items[];
};

/* A stream command ready to issue: prepared on the main thread, issued by the stream's owner. */
struct wk_op {
	struct wk_tag tag;
	uint32_t sid;
	void *host;               /* copies: the resolved host side (valid until the work is done) */
	const struct wrec_hdr *c; /* the command (with submit threads, a copy of its bytes) */
};

/* What one command's handler reads and fills. Main thread. */
struct wk_run {
	struct wk_tag tag; /* the command: its tracker and index */
	uint64_t value;    /* out: the result value */
	void *data;        /* out: malloc'd result data; transferred to the command's outcome */
	uint32_t data_len;
	bool queued; /* out (stream commands): work was queued on stream sid, or sid must be watched */
	uint32_t sid;
};

/* A handler: c has been checked to lie inside the record with c->size >= the row's fixed size; anything after
 * the fixed part is the handler's to check. Returns 0 or a CUA_E* code with the reason in e. Main thread. */
typedef int (*wk_cmd_fn)(struct wk *w, const struct wrec_hdr *c, struct wk_run *x, cua_err *e);
/* A stream command's preparer: checks c (as wk_cmd_fn does) and fills op->sid (a live stream) and op->host.
 * 0 or a CUA_E* code with the reason in e; nothing is queued. Main thread. */
typedef int (*wk_prep_fn)(struct wk *w, const struct wrec_hdr *c, struct wk_op *op, cua_err *e);
/* A stream command's issuer: queues op on op->sid (the backend's stream work call). 0: queued; else nothing
 * was queued and the command fails with e. Reads only op and op->c. On the stream's owner thread. */
typedef int (*wk_issue_fn)(struct wk *w, const struct wk_op *op, cua_err *e);

/* What a sync command needs of the submit threads before it runs. */
enum wk_barrier {
	WK_BARRIER_NONE,   /* nothing: it touches no object that queued work may use */
	WK_BARRIER_ALL,    /* every thread has issued what it was handed (the object may be used on any stream) */
	WK_BARRIER_STREAM, /* the owner of the command's stream (struct wrec_stream) has */
};

struct wk_cmd {
	const char *name;
	uint32_t fixed;          /* sizeof the command's struct */
	bool stream;             /* queued on a stream; completes when the stream's notice is done */
	enum wk_barrier barrier; /* sync commands */
	wk_cmd_fn run;           /* sync commands */
	wk_prep_fn prep;         /* stream commands */
	wk_issue_fn issue;       /* stream commands; NULL: nothing to queue (STREAM_SYNC: the notice is all) */
	/* Stream commands that complete when issued, or through a callback of their own, not through a notice
	 * on their stream (events): the core counts one hold on the request for the issuer before handing the
	 * command over and watches no stream for it; the issuer always returns 0 (a failure goes through
	 * wk_report) and ends the hold with wk_hold_done, itself or through a backend callback. */
	bool held;
};

/* commands_graph.c: the graph commands' handlers (rows in commands.c). */
int wk_c_graph_create(struct wk *w, const struct wrec_hdr *c, struct wk_run *x, cua_err *e);
int wk_c_graph_set_args(struct wk *w, const struct wrec_hdr *c, struct wk_run *x, cua_err *e);
int wk_c_graph_destroy(struct wk *w, const struct wrec_hdr *c, struct wk_run *x, cua_err *e);
int wk_p_graph_launch(struct wk *w, const struct wrec_hdr *c, struct wk_op *op, cua_err *e);
int wk_i_graph_launch(struct wk *w, const struct wk_op *op, cua_err *e);

/* One row per enum wrec_op (commands.c); a row with run == NULL is not a command. */
extern const struct wk_cmd wk_cmds[WR_OP_MAX];
/* The worker is finishing: the core's tables of host buffers (commands.c) and events (commands_event.c) go. */
void wk_hostbufs_fini(struct wk *w);
void wk_events_fini(struct wk *w);

/* commands_event.c: the event commands' handlers (rows in commands.c). */
int wk_c_event_create(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e);
int wk_c_event_destroy(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e);
int wk_c_event_elapsed(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e);
int wk_c_event_query(struct wk *w, const struct wrec_hdr *h, struct wk_run *x, cua_err *e);
int wk_p_event_record(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e);
int wk_i_event_record(struct wk *w, const struct wk_op *op, cua_err *e);
int wk_p_stream_wait_event(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e);
int wk_i_stream_wait_event(struct wk *w, const struct wk_op *op, cua_err *e);
int wk_p_event_sync(struct wk *w, const struct wrec_hdr *h, struct wk_op *op, cua_err *e);
int wk_i_event_sync(struct wk *w, const struct wk_op *op, cua_err *e);

/* launch_attr.c: what the worker checks of a launch's attributes before issuing it, as CUDA would refuse it but
 * with the numbers: a cluster over 8 blocks without the function's NON_PORTABLE_CLUSTER_SIZE_ALLOWED, a cluster
 * other than its REQUIRED_CLUSTER_* dimensions, a cooperative grid that cannot be co-resident (occupancy ×
 * multiprocessors). 0 or BAD_ARGUMENT with e. The issuing thread (a stream's owner). */
int wk_launch_attr_check(struct wk *w, const struct wk_launch *l, cua_err *e);

/* ------------------------------------------------------------------ streams and notices (streams.c) */

/* Marks stream sid live (it was created). 0, or CUA_ENOMEM when the table cannot grow. Main thread. */
int wk_stream_add(struct wk *w, uint32_t sid);
/* Whether sid names a live stream. Main thread. */
bool wk_stream_live(const struct wk *w, uint32_t sid);
/* Frees the stream table, the touched list and the busy clocks (the worker is finishing). Main thread. */
void wk_streams_fini(struct wk *w);
/* Before sid is destroyed: asks now for the notice of what the current request queued on it, and marks it
 * dead. Main thread. (With submit threads the barrier before STREAM_DESTROY has already asked for it.) */
void wk_stream_retire(struct wk *w, uint32_t sid);

/* Whether the request being issued has already noted live stream sid (since the last flush). Main thread. */
bool wk_stream_touched(const struct wk *w, uint32_t sid);
/* Notes that the request being issued queued work on stream sid (idx is blamed if it faults). 0, or CUA_ENOMEM
 * (or CUA_ENOT_FOUND: sid is not live): then the caller takes the stream's notice at once instead (wk_notify).
 * Main thread. */
int wk_touch(struct wk *w, uint32_t sid, uint32_t idx);
/* Counts one more notice in t and asks the backend for it on sid now (blame_idx is blamed if it faults). The
 * thread that issues on sid. */
void wk_notify(struct wk *w, struct tracker *t, uint32_t sid, uint32_t blame_idx);
/* Without submit threads, at the end of a record: a notice for each stream the request touched. Main thread. */
void wk_notify_touched(struct wk *w);
/* With submit threads: appends the notices of the streams touched since the last flush to their owners'
 * batches (after the request's work there, counted in the tracker first: it cannot complete before them) and
 * hands every batch to its thread; the next touch of any stream is noted afresh. Main thread. */
void wk_flush(struct wk *w);
/* Before work for stream next that must follow what the owner of stream sid was handed (an event's record):
 * when another thread owns next, hands the batches over and waits until sid's owner issued everything. No-op
 * without submit threads. Main thread. */
void wk_after_owner(struct wk *w, uint32_t sid, uint32_t next);

/* Asks the backend for a notice on sid after the work queued there so far, stamping tag with the stream and
 * the time (the request's busy time on sid is measured from it). The owner of sid calls it. */
void wk_notice(struct wk *w, uint32_t sid, struct wk_tag tag, wk_done_fn done);
/* The wk_done_fn of the core's notices: adds the request's busy time on the stream and drops the notice's hold
 * on its tracker. Any thread (a backend's). */
void wk_notice_done(struct wk *w, struct wk_tag tag);

/* ------------------------------------------------------------------ outcomes and completions (tracker.c) */

/* A tracker for request req of ncmds commands, holding the main thread's one hold; NULL without memory. */
struct tracker *wk_tracker_new(uint64_t req, uint32_t ncmds);
/* Drops one hold on t; the last writes its completion record and frees it. Any thread. */
void wk_tracker_put(struct wk *w, struct tracker *t);
/* Ends the hold a held command's issuer was given (the request may complete now); also a wk_done_fn for
 * backends' event callbacks. Any thread. */
void wk_hold_done(struct wk *w, struct wk_tag tag);
/* Sets command idx's outcome; detail (copied) may be NULL. Under w->cpl_lock: a sticky fault, which holds it
 * until the worker exits, has the last word (its record is written under it), and a queued command's failure
 * that its stream's thread reports races nothing. Without memory for the detail the status stands and the
 * completion says cua_strerror(status). */
void wk_item_set(struct wk *w, struct tracker *t, uint32_t idx, uint32_t status, uint64_t value, const char *detail);
/* The value and data (taken, may be NULL) of command idx, which was issued: its status is left to whoever
 * reports its work's failure, or the sticky fault (an OK set after the issue would overwrite them). */
void wk_item_result(struct wk *w, struct tracker *t, uint32_t idx, uint64_t value, void *data, uint32_t data_len);
/* Reports a failure of queued work: tag's command gets status and detail (copied; may be NULL). Any thread;
 * distinct commands may be reported concurrently. Never blocks on the device. The backends' wk_host.report. */
void wk_report(struct wk *w, struct wk_tag tag, uint32_t status, const char *detail);
/* A completion of ncmds commands that all share one outcome, written without allocating (the hello record,
 * a request the worker has no memory to track). ncmds is cut to what the ring can carry. Any thread. */
void wk_emit_uniform(struct wk *w, uint64_t req, uint32_t ncmds, uint32_t status, const char *detail, const void *data,
		     uint32_t data_len);
/* A sticky device fault while running tag's command: writes its request's completion (the command gets
 * CUA_EDEVICE with detail, later unfinished commands CONTEXT_LOST) flagged fatal, and exits the process so the
 * front-end starts a fresh worker. Any thread. Never returns. */
_Noreturn void wk_fatal(struct wk *w, struct wk_tag tag, const char *detail);
/* The same when the device cannot say which work faulted (a sticky CUDA error surfaces in whatever is
 * queried next): every one of the n tags gets CUA_EDEVICE with detail; a request may repeat. n may be 0 (then
 * the worker just exits and the front-end fails what was in flight). Never returns. The backends'
 * wk_host.fatal_many. */
_Noreturn void wk_fatal_many(struct wk *w, const struct wk_tag *tags, size_t n, const char *detail);

/* ------------------------------------------------------------------ submit threads (submit.c) */

/* N submit threads (opaque). Every wksub_* call but wksub_start's threads is main-thread only. */
struct wksub;

/* What the submit threads call, given by worker.c (submit.c calls nothing of the core by name). On a submit
 * thread. */
struct wksub_ops {
	/* Issues prepared command op (its row's issuer); a failure goes to op's command's outcome. */
	void (*issue)(struct wk *w, const struct wk_op *op);
	/* Asks for the notice of the request of tag on stream sid (wk_notice with the core's callback). */
	void (*notice)(struct wk *w, uint32_t sid, struct wk_tag tag);
};

/* Starts n >= 2 submit threads over w's backend (each calls be->thread_init first) that issue through ops
 * (kept: it must outlive the threads). Returns the threads, or NULL (logged) when fewer than 2 could start: then
 * the main thread issues. */
struct wksub *wksub_start(struct wk *w, unsigned n, const struct wksub_ops *ops);
/* Issues everything handed over, stops and joins the threads, frees S. NULL is fine. */
void wksub_stop(struct wksub *S);
/* The thread that owns stream sid (a fixed mapping: sid % n). */
unsigned wksub_owner(const struct wksub *S, uint32_t sid);
/* Appends op (its command c copied) to the batch of its stream's owner, keeping room there for `notices` more
 * notices than already reserved (0 or 1; c may be NULL to reserve only). 0, or CUA_ENOMEM: nothing appended. */
int wksub_op(struct wksub *S, const struct wk_op *op, unsigned notices);
/* Appends a notice for sid under tag to its owner's batch, in room reserved by wksub_op; the caller has counted
 * it in tag's tracker. Cannot fail. */
void wksub_notice(struct wksub *S, uint32_t sid, struct wk_tag tag);
/* Hands every non-empty batch to its thread. Allocates nothing. With `here`, a lone small batch whose thread
 * has issued everything before it is issued on the calling thread instead (the hand-off to an idle thread costs
 * a waiting client more than the issue: BENCHMARKS.md, "hops"). */
void wksub_push(struct wksub *S, bool here);
/* Waits until thread k (or every thread, k < 0) has issued everything pushed to it. Push first. */
void wksub_drain(struct wksub *S, int k);

#endif
