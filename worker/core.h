/*
 * core.h — the worker core's private parts, shared by worker.c (the loop, request tracking, completion
 * records) and commands.c (the command table and its handlers). Backends do not include this.
 *
 * A request's life in the worker: its record is decoded on the main thread command by command through
 * wk_cmds (sizes checked before anything is read); sync commands run at once, stream commands are queued on
 * their stream and the stream is noted; then one notice per noted stream is asked of the backend. The
 * request's tracker counts those notices plus one hold by the main thread; whoever drops it to zero writes
 * the completion record (struct wcpl_req + wcpl per command) and frees the tracker.
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
	bool emitted; /* its completion has been written (wk_fatal_many; under cpl_lock) */
	struct titem items[];
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

struct wk_cmd {
	const char *name;
	uint32_t fixed; /* sizeof the command's struct */
	bool stream;    /* queued on a stream; completes when the stream's notice is done */
	wk_cmd_fn run;
};

/* One row per enum wrec_op (commands.c); a row with run == NULL is not a command. */
extern const struct wk_cmd wk_cmds[WR_OP_MAX];

/* Marks stream sid live (it was created). 0, or CUA_ENOMEM when the table cannot grow. Main thread. */
int wk_stream_add(struct wk *w, uint32_t sid);
/* Whether sid names a live stream. Main thread. */
bool wk_stream_live(const struct wk *w, uint32_t sid);
/* Before sid is destroyed: asks now for the notice of what the current request queued on it, and marks it
 * dead. Main thread. */
void wk_stream_retire(struct wk *w, uint32_t sid);

#endif
