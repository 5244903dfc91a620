/*
 * core_fixture.h — what the unit tests of the daemon's core (libcuadcore) share: tests/unit/test_core_*.c,
 * one program per family, each link core_fixture.c. In it: the stub edge, the front-end and a session's state,
 * the setups, request bodies and checks several families use, and the table-driven request case.
 *
 * Each case of a family's `cases` is a request (an op and its body, packed with the wire codec, or raw bytes), a
 * session state (its setup function), and what must come of it: the status and message, and whether the request was
 * answered, queued for the worker (with how many worker commands), or parked waiting for its turn. The
 * request goes through request_receive exactly as the NNG edge hands it over; the edge is a stub that records
 * every reply. There is no dispatcher thread and no worker: requests that pass validation stay queued in
 * their session, where the case inspects them. Single-threaded: setup functions call the do_* functions
 * without fe->lock (nothing else runs).
 */
#ifndef CORE_FIXTURE_H
#define CORE_FIXTURE_H

#include "cmd.h"
#include "cua_wire.h"
#include "devlink.h"
#include "graphtab.h"
#include "request.h"
#include "scheduler.h"
#include "session.h"

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ the stub edge */

#define MAX_REPLIES 16
#define MAX_ITEMS 4

struct rec {
	uint32_t op, status;
	bool has_message;
	char message[CUA_ERR_DETAIL_MAX + 64];
	uint64_t value;  /* PING: the nonce; HELLO: the session id */
	uint32_t nitems; /* BATCH: its results */
	uint32_t item_status[MAX_ITEMS];
	char item_msg[MAX_ITEMS][CUA_ERR_DETAIL_MAX + 64];
};

extern struct rec replies[MAX_REPLIES];
extern unsigned nreplies, msgs_freed;

/* ------------------------------------------------------------------ the front-end and a session's state */

#define PIPE 1u
#define PIPE_OTHER 2u
#define ADDR_A 0x7f0000100000ull /* dev 0, 4096 bytes */
#define ADDR_B 0x7f0000200000ull /* dev 1, 4096 bytes */
#define ADDR_S 0x7f0000300000ull /* dev 0, 4096 bytes, of a generation that was lost (setup_restarted) */
#define ADDR_X 0x7f0000900000ull /* another session's allocation */
#define ALLOC_LEN 4096u

struct env {
	struct fe fe;
	struct session *s;
	uint64_t mod0, fn0, fn1, st0, st1, fn_stale, st_stale, hb0, gr0; /* handles of s */
	uint64_t ev_new, ev_rec, ev_nt, ev_stale;                        /* events of s (setup_events) */
	cua_wire_arg args[4];
	cua_batch_item items[4];
	unsigned ctx_next;
};

extern struct env E;
void env_init(struct env *e);

/* Frees every session with what it still has queued or parked, then the front-end. */
void env_fini(struct env *e);

/* Hands a message to the core as the edge does: msg is a malloc'd buffer that msg_free frees. */
void send_bytes(struct env *e, uint32_t pipe, const void *bytes, size_t len);
void send_req(struct env *e, uint32_t pipe, uint32_t op, uint64_t seq, const void *body);
uint64_t add_alloc(struct session *s, int dev, uint32_t gen, uint64_t addr, uint64_t len);
uint64_t add_handle(struct session *s, unsigned kind, int dev, uint32_t gen, uint64_t wid);

/* A function of module `mod` taking (T *p, int n). */
uint64_t add_function(struct session *s, uint64_t mod, int dev, uint32_t gen, uint64_t wid);

/* ---- setups: the session state of a case ---- */

/* The connection is known (the edge saw the pipe) but nothing was said on it yet. */
void setup_pipe(struct env *e);
void setup_hello(struct env *e);

/* HELLO said; memory on both devices; a module with one function on each device; a stream on each. */
void setup_std(struct env *e);

/* setup_std, then device 0's worker restarted (generation 2): what s held there is stale (gen mismatch);
 * ADDR_S, a stream and a function are of the lost generation, and A is allocated again in the new one. */
void setup_restarted(struct env *e);

/* An event of device 0 in s: generation gen, worker id wid, flags (EVF_*). */
uint64_t add_event(struct session *s, uint32_t gen, uint64_t wid, uint8_t flags);

/* Another session (pipe 2) holds ADDR_X. */
void setup_other_session(struct env *e);

/* ---- bodies (some name the handles a setup made) ---- */

/* A request body: name(e, b) fills b, may use e (its handles, its args and items). BODY_FN: the
 * same, not static (the bodies core_fixture.c shares). */
#define BODY_FN(name, ...)                                                                                             \
	void name(struct env *e, cua_req_body *b)                                                                      \
	{                                                                                                              \
		(void)e;                                                                                               \
		__VA_ARGS__;                                                                                           \
	}
#define BODY(name, ...) static BODY_FN(name, __VA_ARGS__)
#define DEVPTR(p) ((cua_wire_arg){CUA_ARG_DEVPTR, (p), {NULL, 0}})

extern const int32_t n32;
extern const int64_t n64;

#define INT32 ((cua_wire_arg){CUA_ARG_BYTES, 0, {&n32, 4}})
#define INT64 ((cua_wire_arg){CUA_ARG_BYTES, 0, {&n64, 8}})
#define LAUNCH(fn, gx, flags, nargs)                                                                                   \
	((struct cua_req_launch){(fn), {(gx), 1, 1}, {32, 1, 1}, 0, 0, (flags), e->args, (nargs)})
/* A launch with the optional tail: cluster cx x cy x cz, priority p, nf fields on the wire. */
#define LAUNCHX(fn, gx, gy, gz, flags, nargs, cx, cy, cz, p, nf)                                                       \
	((struct cua_req_launch){(fn),                                                                                 \
				 {(gx), (gy), (gz)},                                                                   \
				 {32, 1, 1},                                                                           \
				 0,                                                                                    \
				 0,                                                                                    \
				 (flags),                                                                              \
				 e->args,                                                                              \
				 (nargs),                                                                              \
				 {(cx), (cy), (cz)},                                                                   \
				 (p),                                                                                  \
				 (nf)})
#define ARGS2 e->args[0] = DEVPTR(ADDR_A), e->args[1] = INT32
#define ARGS2B e->args[0] = DEVPTR(ADDR_B), e->args[1] = INT32

extern const char bytes16[16];
void b_ping1(struct env *e, cua_req_body *b);
void b_alloc(struct env *e, cua_req_body *b);
void b_free_a(struct env *e, cua_req_body *b);
void b_htod_a(struct env *e, cua_req_body *b);
void b_launch_ok(struct env *e, cua_req_body *b);

/* ---- the table ---- */

enum { ANSWERED = 1, QUEUED = 2, PARKED = 4 };

struct item_expect {
	uint32_t status;
	const char *msg; /* substring, or NULL */
};

struct ccase {
	const char *name;
	void (*setup)(struct env *);
	uint32_t op;
	uint64_t seq;
	void (*body)(struct env *, cua_req_body *); /* NULL: no body */
	const char *raw;                            /* instead of op and body: these bytes */
	size_t rawlen;
	uint32_t status;  /* of the reply; of the request (request_status) when only queued */
	const char *msg;  /* substring of its message, or NULL (then the reply must carry none) */
	bool exact;       /* msg is the whole message */
	unsigned outcome; /* ANSWERED | QUEUED | PARKED */
	int ncmds;        /* QUEUED: worker commands planned */
	uint32_t nitems;  /* BATCH: per-item results */
	struct item_expect items[MAX_ITEMS];
	void (*check)(struct env *); /* anything else, after the common checks */
};

#define RAW(s) .raw = (s), .rawlen = sizeof(s) - 1

/* Checks of a case (its check, after the common ones): nothing queued or held; the last request queued is a
 * barrier. */
void chk_no_queue(struct env *e);
void chk_barrier(struct env *e);

/* The message got contains want (nothing to check when want is NULL); the message got is exactly want. */
void check_msg(const char *what, const char *got, const char *want);
void check_exact(const char *what, const char *got, const char *want);

/* Runs case c of a family's table (each family's request_case, a loop test over it): sends its request
 * to a fresh front-end in the state c->setup made, checks the outcome, the status and message, the worker
 * commands and the BATCH items as c says, then c->check. */
void run_ccase(const struct ccase *c);

/* Runs suite s (each case forked unless CK_FORK=no); EXIT_SUCCESS when every case passed. */
int core_run(Suite *s);
/* A suite of its name with one test case "requests" that runs run_ccase on each of the n cases (a loop test);
 * *tc, when not NULL, gets that test case for more tests. One such suite per program. */
Suite *core_cases_suite(const char *name, const struct ccase *cases, int n, TCase **tc);

#endif
