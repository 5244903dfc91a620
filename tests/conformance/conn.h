/*
 * conn.h — the conformance suite's client side, written from proto/PROTOCOL.md: start cuasyncd on a private
 * ipc socket (emulated device), open REQ sockets with resends off, send raw requests on REQ contexts and
 * decode replies with the suite's own msgpack code (mp.h). Nothing here uses libcuasync or common/.
 * Every wait is bounded; a failure fails the calling Check test.
 */
#ifndef CONF_CONN_H
#define CONF_CONN_H

#include "mp.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>
#include <stdbool.h>
#include <sys/types.h>

#define PV 1 /* the protocol version this suite speaks */

/* Op numbers, from the table of PROTOCOL.md §4. */
enum {
	OP_HELLO = 1,
	OP_PING,
	OP_DEVICES,
	OP_MODULE_LOAD,
	OP_MODULE_UNLOAD,
	OP_FUNCTION_GET,
	OP_MEM_ALLOC,
	OP_MEM_FREE,
	OP_MEMCPY_HTOD,
	OP_MEMCPY_DTOH,
	OP_MEMCPY_DTOD,
	OP_MEMSET,
	OP_STREAM_CREATE,
	OP_STREAM_DESTROY,
	OP_STREAM_SYNC,
	OP_LAUNCH,
	OP_BATCH,
	OP_SYNCHRONIZE,
	OP_STATUS,
	OP_HOST_REGISTER,
	OP_HOST_UNREGISTER,
	OP_MEMCPY_HTOD_HOST,
	OP_MEMCPY_DTOH_HOST,
	OP_SESSIONS,
	OP_DISCONNECT,
	OP_DRAIN,
	OP_MODULE_GET_GLOBAL,
	OP_FUNC_GET_ATTRIBUTE,
	OP_FUNC_SET_ATTRIBUTE,
	OP_OCCUPANCY,
	OP_EVENT_CREATE,
	OP_EVENT_DESTROY,
	OP_EVENT_RECORD,
	OP_STREAM_WAIT_EVENT,
	OP_EVENT_SYNC,
	OP_EVENT_ELAPSED,
	OP_EVENT_QUERY,
	OP_GRAPH_CREATE = 40,
	OP_GRAPH_LAUNCH,
	OP_GRAPH_DESTROY,
	OP_GRAPH_SET_ARGS,
	OP_TENANT_ADD,
	OP_TENANT_SET,
	OP_TENANT_REMOVE,
	OP_TENANT_LIST
};

/* Status codes, from the table of PROTOCOL.md §5. */
enum {
	ST_OK,
	ST_INTERNAL,
	ST_PROTOCOL,
	ST_VERSION,
	ST_UNKNOWN_OP,
	ST_BAD_ARGUMENT,
	ST_NOT_FOUND,
	ST_CONTEXT_LOST,
	ST_QUOTA,
	ST_PDL_UNSUPPORTED,
	ST_NO_MEMORY,
	ST_DEVICE,
	ST_TOO_LARGE,
	ST_TIMEOUT,
	ST_TRANSPORT,
	ST_CLOSED,
	ST_NO_SESSION,
	ST_BUSY,
	ST_NO_DEVICE,
	ST_UNSUPPORTED,
	ST_MODULE,
	ST_DEVICE_HUNG,
	ST_SHUTTING_DOWN,
	ST_UNAUTHENTICATED,
	ST_PERMISSION_DENIED
};
/* The stable name of status code st ("?" past the table). */
const char *st_name(uint64_t st);

struct dmn {
	pid_t pid;
	char dir[64];
	char url[128];
	char op_url[128]; /* the operator endpoint (--operator-url) */
	char log[128];
};

/* Starts cuasyncd --backend emu with extra arguments (NULL-terminated, may be NULL); returns once it serves. */
void dmn_start(struct dmn *d, const char *const *extra);
/* SIGTERM, wait for a clean exit, remove the private directory. */
void dmn_stop(struct dmn *d);

/* A decoded reply: [version, op, status, name, message, body]. Shape and reply-body rules are asserted by
 * the functions that fill it. */
struct reply {
	struct mpv root;
	uint8_t *raw; /* the reply's bytes, which root points into */
	uint64_t version, op, status;
	char name[160];
	char msg[1024]; /* the message, cut */
	const struct mpv *body;
};
void reply_free(struct reply *r);

struct conn {
	nng_socket s;
	nng_dialer d;
};
/* Opens a REQ socket to url with resends off. */
void conn_open(struct conn *c, const char *url);
/* Closes the dialer first, then the socket. NNG 1.5.2 re-dials at once after the daemon dropped a connection
 * (its back-off can come out negative); once (CI, 2026-12-02), malformed-survives hung past its timeout after
 * its last check, with the daemon never signalled: in closing the connection the daemon had dropped, while its
 * dialer re-dialed. Stopping the dialer first leaves no re-dial racing the socket's close. */
void conn_close(struct conn *c);
/* Sends the raw message and waits for its reply (bounded), on a context of its own. */
void conn_raw(struct conn *c, const void *msg, size_t n, struct reply *out);
/* Sends [version, op, seq, body] where body is encoded from fmt (mpb_fmt) and waits for the reply. */
void conn_req(struct conn *c, uint64_t version, uint64_t op, uint64_t seq, struct reply *out, const char *fmt, ...);
/* HELLO [1, 1, "conformance", pid, ""] on seq 0, asserting OK; returns max_message when want is not NULL. */
void conn_hello(struct conn *c, uint64_t *max_message);
/* The same, returning the session id and HELLO's fd_secret (§2, §9: 32 bytes over ipc://, else *len 0). */
void conn_hello_secret(struct conn *c, uint64_t *session, uint8_t *secret, size_t *len);
/* One request at version 1, asserting the status; out may be NULL (freed). */
void expect(struct conn *c, uint64_t op, uint64_t seq, uint64_t status, struct reply *out, const char *fmt, ...);

/* A request in flight on its own REQ context, for pipelining. */
struct flight {
	nng_ctx ctx;
	nng_aio *aio;
	nng_mtx *mtx;
	nng_cv *cv;
	bool done;
	int err;
};
/* Sends msg on a new context of c and starts receiving its reply. */
void flight_send(struct conn *c, struct flight *f, const void *msg, size_t n);
/* Waits up to ms for f's reply; returns false when none came (f still in flight). */
bool flight_wait(struct flight *f, int ms);
/* The reply of a completed flight, decoded and shape-checked; then frees the flight. */
void flight_reply(struct flight *f, struct reply *out);
/* Abandons a flight (cancels the receive). */
void flight_drop(struct flight *f);

/* Encodes [version, op, seq, body-from-fmt] into b (cleared first). */
void msg_build(struct mpb *b, uint64_t version, uint64_t op, uint64_t seq, const char *fmt, ...);

/* Test kernels: the same module image the integration tests load (the fatbin when built, else the emulated
 * device's kernel list), as bytes to send in MODULE_LOAD with format 0. Caller frees. */
void *kernels_image(size_t *len);

#endif
