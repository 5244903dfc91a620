/*
 * rules.h — helpers shared by the conformance cases: sessions and the requests most cases need, each built
 * from PROTOCOL.md §4 and asserting the status it expects.
 */
#ifndef CONF_RULES_H
#define CONF_RULES_H

#include "conn.h"

#include <check.h>

#define U(x) ((uint64_t)(x))

/* The daemon each case runs against (test_conformance.c starts and stops it around every case). */
extern struct dmn conf_dmn;

/* A case: the tag of PROTOCOL.md it checks and its test. */
struct rule {
	const char *tag;
	const TTest *test;
};
/* The cases of module globals, kernel parameters and function attributes (kfeat.c): fills out, returns the
 * count (at most 8). */
size_t kfeat_rules(struct rule *out);
/* The cases of launch attributes (lattr.c), the same way (at most 8). */
size_t lattr_rules(struct rule *out);
/* The cases of graphs (graphs.c): fills out, returns the count (at most 8). */
size_t graph_rules(struct rule *out);
/* The cases of events (event.c): the same, at most 8. */
size_t event_rules(struct rule *out);
/* The cases of framing, types and replies (framing.c), of sequence numbers (seq.c), of versions and sessions
 * (session.c), of handles and pointers (handles.c), of the requests of §4 (requests.c), of shared host memory
 * (hostbuf.c), of BATCH and SYNCHRONIZE (batch.c), of status codes, limits, faults and the emulated device (limits.c):
 * each fills out, returns the count (at most 8). */
size_t framing_rules(struct rule *out);
size_t seq_rules(struct rule *out);
size_t session_rules(struct rule *out);
size_t handle_rules(struct rule *out);
size_t request_rules(struct rule *out);
size_t hostbuf_rules(struct rule *out);
size_t batch_rules(struct rule *out);
size_t limit_rules(struct rule *out);
/* The cases where the daemon and the document once disagreed (contract.c), at most 8. */
size_t contract_rules(struct rule *out);
/* The cases of tenants at run time (tenants.c), the same way (at most 8). */
size_t tenant_rules(struct rule *out);
/* The cases of the fd channel and HOST_REGISTER's tickets (fdchan.c), the same way (at most 8). */
size_t fdchan_rules(struct rule *out);

/* The fd channel (§9, fdchan.c): a session on d with its id and HELLO's 32-byte fd_secret; a channel connection
 * of it, AUTH answered OK; a PASS of n descriptors answered OK, their tickets in t. Each asserts. */
void chan_sess(const struct dmn *d, struct conn *c, uint64_t *session, uint8_t *secret);
int chan_auth(const struct dmn *d, uint64_t session, const uint8_t *secret);
void pass_ok(int s, const int *fds, unsigned n, uint64_t *t);

/* A connection that said HELLO. */
void sess(struct conn *c, const struct dmn *d);
/* The same on the daemon's operator endpoint. */
void sess_operator(struct conn *c, const struct dmn *d);
/* MEM_ALLOC on device 0 (unordered), asserting OK. */
uint64_t alloc(struct conn *c, uint64_t bytes);
/* STREAM_CREATE on device 0, asserting OK. */
uint64_t stream_new(struct conn *c);
/* MODULE_LOAD of the test kernels (format 0), asserting OK. */
uint64_t module_load(struct conn *c);
/* FUNCTION_GET of name in m, asserting OK. */
uint64_t function_get(struct conn *c, uint64_t m, const char *name);
/* MEMCPY_HTOD / MEMCPY_DTOH on stream, asserting OK; dtoh fills out with exactly n bytes. */
void htod(struct conn *c, uint64_t dst, uint64_t stream, const void *p, size_t n);
void dtoh(struct conn *c, uint64_t src, uint64_t stream, void *out, size_t n);
/* Encodes a LAUNCH body of f, 1-D grid x block, with args pre-encoded (count elements in a). */
void launch_body(struct mpb *b, uint64_t f, uint64_t grid, uint64_t block, uint64_t stream, uint64_t flags,
		 const struct mpb *args, uint32_t count);
/* LAUNCH of fill_u32(ptr, value, n) as [uint, bin4, bin8]; returns the reply's status (reply in out if set). */
uint64_t launch_fill(struct conn *c, uint64_t seq, uint64_t f, uint64_t ptr, uint32_t value, uint64_t n,
		     uint64_t stream, uint64_t flags, struct reply *out);
/* LAUNCH of a one-pointer kernel (bad_write, pdl_count) or spin(ns): args [uint] or [bin8]. */
uint64_t launch_one(struct conn *c, uint64_t f, bool as_uint, uint64_t v, uint64_t stream, uint64_t flags,
		    struct reply *out);
/* The message encoding of LAUNCH fill_u32, for pipelining. */
void msg_fill(struct mpb *m, uint64_t seq, uint64_t f, uint64_t ptr, uint32_t value, uint64_t n, uint64_t stream);
/* Sends a raw message and asserts status and echoed op. */
void raw_expect(struct conn *c, const void *msg, size_t n, uint64_t status, uint64_t op);
/* A PING on seq 0 answers OK with its nonce: the session still works. */
void ping_ok(struct conn *c, uint64_t nonce);
/* Sends a PING [nonce] with seq on a flight of its own. */
void ping_flight(struct conn *c, struct flight *f, uint64_t seq);
/* Receives the reply of flight f, asserting its status and echoed op. */
void flight_expect(struct flight *f, uint64_t status, uint64_t op);
/* bad_write on a's pool stream: a sticky fault of device 0. Asserts DEVICE with the CUDA error name. */
void make_fault(struct conn *a);

#endif
