/*
 * core.h — the worker core's private parts, shared by worker.c (the loop, request tracking, completion
 * records) and commands.c (the command table and its handlers). Backends do not include this.
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
	_Atomic uint64_t busy_ns; /* the time its work kept streams busy (wk_notice, notice_done) */
	bool emitted;             /* its completion has been written (wk_fatal_many; under cpl_lock) */
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

/* Marks stream sid live (it was created). 0, or CUA_ENOMEM when the table cannot grow. Main thread. */
int wk_stream_add(struct wk *w, uint32_t sid);
/* Whether sid names a live stream. Main thread. */
bool wk_stream_live(const struct wk *w, uint32_t sid);
/* Before sid is destroyed: asks now for the notice of what the current request queued on it, and marks it
 * dead. Main thread. (With submit threads the barrier before STREAM_DESTROY has already asked for it.) */
void wk_stream_retire(struct wk *w, uint32_t sid);

/* Ends the hold a held command's issuer was given (the request may complete now); also a wk_done_fn for
 * backends' event callbacks. Any thread. */
void wk_hold_done(struct wk *w, struct wk_tag tag);
/* Before work for stream next that must follow what the owner of stream sid was handed (an event's record):
 * when another thread owns next, hands the batches over and waits until sid's owner issued everything. No-op
 * without submit threads. Main thread. */
void wk_after_owner(struct wk *w, uint32_t sid, uint32_t next);

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

/* ------------------------------------------------------------------ submit threads (submit.c) */

/* N submit threads (opaque). Every wksub_* call but wksub_start's threads is main-thread only. */
struct wksub;

/* Starts n >= 2 submit threads over w's backend (each calls be->thread_init first). done is called for each
 * notice and report for each command whose issue failed (the core's callbacks: submit.c never calls up).
 * Returns the threads, or NULL (logged) when fewer than 2 could start: then the main thread issues. */
struct wksub *wksub_start(struct wk *w, unsigned n, wk_done_fn done,
			  void (*report)(struct wk *w, struct wk_tag tag, uint32_t status, const char *detail));
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
/* Hands every non-empty batch to its thread. Allocates nothing. */
void wksub_push(struct wksub *S);
/* Waits until thread k (or every thread, k < 0) has issued everything pushed to it. Push first. */
void wksub_drain(struct wksub *S, int k);

#endif
