/*
 * cmd.h — the operations table (tmux-style: one file per family of operations, each exporting its rows,
 * collected in cmd.c) and the building blocks those files plan worker commands with (plan.c).
 *
 * Every function here runs on the thread that handles the request, with fe->lock held, and never blocks.
 */
#ifndef CUAD_CMD_H
#define CUAD_CMD_H

#include "devlink.h"
#include "request.h"
#include "reserve.h"

/* An answer, as request.c hands it to the edge (which encodes it). */
struct reply {
	uint32_t op, status;
	const char *message; /* NULL: the status table's */
	const void *body;    /* the cua_rep_body member of op when status is OK; NULL: none */
	bool counted;        /* counted in its session's held and reply_bytes until sent (request_reply_sent) */
};

/* What the generic code (request.c) enforces for an op: struct cmd_entry.flags. */
enum {
	CMD_HELLO = 1u << 0,          /* needs a session that said HELLO (NO_SESSION before) */
	CMD_AUTHENTICATES = 1u << 1,  /* may be sent before a required token was given (HELLO carries it) */
	CMD_OPERATOR = 1u << 2,       /* the operator endpoint's alone: PERMISSION_DENIED elsewhere */
	CMD_QUOTA_EXEMPT = 1u << 3,   /* served past the session's in-flight and reply-bytes limits, so that an
				     * overloaded client can still look at itself (STATUS) */
	CMD_BATCHED = 1u << 4,        /* may be an item of a BATCH: .item plans it there as for the request alone */
	CMD_RELEASES = 1u << 5,       /* releases an object of the session: marked released when validated, given
				     * back by .abandon or .complete when the release did not happen */
	CMD_STREAM = 1u << 6,         /* stream work: its worker command (.wrec) runs in its stream's order */
	CMD_REPLY_UNLOCKED = 1u << 7, /* its reply (bulk bytes from the staging area) refers only to the request and
				       * its staging, so it is encoded without fe->lock (request_done); no .complete */
};

/*
 * One row per operation: every fact about it that the generic code needs (tmux's cmd_entry, Redis's command
 * table). A new op is its row here, its handlers, its worker command (link/wrec.h, worker/commands.c) and its
 * wire schema (common/cua_wire.c); tests/unit walks every row and fails when one lacks a field.
 */
struct cmd_entry {
	uint32_t op;
	uint32_t flags;           /* CMD_* above */
	enum stats_family family; /* its metrics family (cuasyncd_request_duration_seconds{family}) */
	uint32_t wrec;            /* the worker command it plans (WR_*; WR_NONE: the front-end answers it alone,
				   * or its items' rows say) */
	/* Validates the decoded request against the session and plans its worker commands (plan_* below).
	 * 0, or a status with a message in e (the request is then answered with it, nothing runs).
	 * NULL: .item plans the request as its one item. */
	int (*validate)(struct fe *fe, struct request *r, cua_err *e);
	/* For a request whose body holds requests of other kinds (BATCH): as validate, each item planned by the
	 * .item of the row that find gives for its kind (request.c passes cmd_find: the rows' files are below the
	 * table). */
	int (*validate_items)(struct fe *fe, struct request *r, const struct cmd_entry *(*find)(uint32_t op),
			      cua_err *e);
	/* CMD_BATCHED: validates one item of this kind (q: its body, the cua_req_body member of op) and plans its
	 * command into it->cmd. 0 or a status with a message in e. */
	int (*item)(struct fe *fe, struct request *r, const void *q, struct ritem *it, cua_err *e);
	/* Counts what one item of this kind that succeeded did (launches, bytes copied; stats.h). NULL: nothing. */
	void (*count)(struct stats *st, const void *q);
	/* After the worker's results are in (or at once when nothing runs): updates the session's tables.
	 * May fail an item (item_fail). NULL: nothing to do. */
	void (*complete)(struct fe *fe, struct request *r);
	/* The reply body on success, built in the member of *body for the op; whatever it allocates goes in
	 * *scratch (freed after the reply was sent). 0, or a status (the client then gets INTERNAL).
	 * NULL function: the reply has no body. */
	int (*reply)(struct fe *fe, struct request *r, cua_rep_body *body, void **scratch);
	/* The limited resources it makes (reserve.h), from the request as its validation planned it: the generic
	 * code reserves them once validation passed (QUOTA past a limit of the session or its tenant) and gives them
	 * back when the request is settled, however it ended — complete counts what was made. NULL: none. */
	void (*reserve)(const struct fe *fe, const struct request *r, struct resv *want);
	/* Instead of complete when the request failed as a whole (validation, or refused at dispatch after it was
	 * validated: TOO_LARGE for the worker ring, CONTEXT_LOST, NO_DEVICE, CLOSED): undoes what validation
	 * took that complete would have settled. Must also be harmless after a failed validation. NULL: none. */
	void (*abandon)(struct fe *fe, struct request *r);
};

/* The row of op, or NULL when op is unknown. */
const struct cmd_entry *cmd_find(uint32_t op);

/* Stream work, shared by the single requests and BATCH items (cmd-copy.c, cmd-launch.c). Each validates one
 * item and plans its command into it->cmd. 0 or a status with a message in e. */
int plan_htod(struct fe *fe, struct request *r, const struct cua_req_memcpy_htod *q, struct ritem *it, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
int plan_dtoh(struct fe *fe, struct request *r, const struct cua_req_memcpy_dtoh *q, struct ritem *it, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
int plan_dtod(struct fe *fe, struct request *r, const struct cua_req_memcpy_dtod *q, struct ritem *it, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
int plan_memset(struct fe *fe, struct request *r, const struct cua_req_memset *q, struct ritem *it, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
int plan_host_copy(struct fe *fe, struct request *r, uint32_t op, const struct cua_req_memcpy_host *q, struct ritem *it,
		   cua_err *e) CUA_REQUIRES(cuad_fe_lock);
int plan_launch(struct fe *fe, struct request *r, const struct cua_req_launch *q, struct ritem *it, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
/* launch-attr.c: LAUNCH's cluster, cooperative flag and priority against device d (what the front-end can know;
 * the worker checks what depends on the function's attributes and occupancy), and the record's flags. */
int check_launch_attrs(const struct device *d, const struct cua_req_launch *q, cua_err *e);
uint32_t launch_wrec_flags(const struct cua_req_launch *q);

/* ---- plan.c: building blocks ---- */

/* For requests that create objects on device dev (memory, modules, streams, host buffers): 0 when it exists, is
 * usable and is not drained by the operator (DRAIN), else BAD_ARGUMENT / NO_DEVICE with a message in e. */
int plan_need_device(struct fe *fe, uint32_t dev, cua_err *e) CUA_REQUIRES(cuad_fe_lock);
/* The request's device: the first one named fixes it (and the generation its objects belong to); later
 * items must agree. 0 or BAD_ARGUMENT. */
int plan_bind_device(struct fe *fe, struct request *r, int dev, uint32_t gen, cua_err *e) CUA_REQUIRES(cuad_fe_lock);
/* [p, p+len) must lie in one live allocation of the session; binds the request to its device. */
int plan_range(struct fe *fe, struct request *r, uint64_t p, uint64_t len, int *dev, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
/* Resolves a stream handle (0: the next pool stream of dev) to the worker's stream id. */
int plan_stream(struct fe *fe, struct request *r, uint64_t h, int dev, uint32_t *wsid, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock);
/* A reply row for ops whose body is the one u64 the worker produced (a handle or a device pointer). */
int reply_value(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch) CUA_REQUIRES(cuad_fe_lock);
/* Room kept in every reply for its envelope ([version, op, status, name, message, body] with the message's
 * text and the body's headers) beside the bytes of data it carries. */
#define CUA_REPLY_ENVELOPE 4096u
/* The data one reply may carry: the largest message (--max-message) less CUA_REPLY_ENVELOPE. */
uint64_t plan_max_reply_data(struct fe *fe);
/* The largest copy one request may move through the staging area and back in a reply: the smaller of
 * plan_max_reply_data and the staging area. */
uint64_t plan_max_copy(struct fe *fe);
/* Sets TOO_LARGE in e for a copy of `bytes` over plan_max_copy, naming the limit and why. Returns it. */
int plan_copy_too_large(struct fe *fe, uint64_t bytes, cua_err *e);

#endif
