/*
 * cua_wire.h — msgpack encoding and strict decoding of every protocol message (PROTOCOL.md).
 *
 * Framing: one msgpack value per NNG message.
 *   request: [version, op, seq, body]                         seq: 0 = unordered, else 1, 2, … per session
 *   reply:   [version, op, status, name, message, body]      body is [] unless status == OK
 *
 * Decoding treats the bytes as hostile. Before msgpack-c allocates anything, cua_wire_check walks the bytes
 * and enforces: total size <= CUA_WIRE_MAX_MESSAGE, nesting <= CUA_WIRE_MAX_DEPTH, every array count <= the
 * bytes left and <= CUA_WIRE_MAX_ARRAY, at most CUA_WIRE_MAX_OBJECTS values, no maps, floats, nil or ext
 * (protocol v1 uses none), exactly one value with no trailing bytes. Then the schema of the op checks exact
 * types, field counts and limits for every field. str and bin payloads point into the caller's buffer, which
 * must outlive the decoded message; arrays live in the decoder's zone (the message's owner).
 *
 * msgpack-c stays inside cua_wire.c: this header names no msgpack type. Encoding writes through a plain
 * writer (cua_wire_out); cua_wbuf_out and cua_nngmsg_out (cua_nngmsg.h) make one for a growable buffer and
 * for an NNG message body.
 */
#ifndef CUA_WIRE_H
#define CUA_WIRE_H

#include "cua_error.h"
#include "cua_proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CUA_WIRE_MAX_ARRAY 4096u
#define CUA_WIRE_MAX_OBJECTS (1u << 20)

typedef struct cua_wire_request {
	/* version, op and seq are set as soon as they could be read, even when decoding fails later: the message
	 * is an array of 4 whose first three elements are uints (of at most 32, 32 and 64 bits) */
	uint32_t version, op;
	uint64_t seq;
	bool has_header; /* version, op and seq were read (then the daemon answers the failure in seq's turn) */
	cua_req_body body;
	void *owner; /* the decoder's zone (objects and arrays); NULL or owned, freed by cua_wire_request_free */
} cua_wire_request;

typedef struct cua_wire_reply {
	uint32_t version, op, status;
	cua_bytes name, message;
	cua_rep_body body;
	void *owner; /* the decoder's zone; NULL or owned, freed by cua_wire_reply_free */
} cua_wire_reply;

/* Where an encoder writes: write(data, buf, len) appends len bytes and returns 0, or nonzero when it could
 * not (out of memory). Called only during cua_wire_pack_*, on the caller's thread. */
typedef struct cua_wire_out {
	int (*write)(void *data, const char *buf, size_t len);
	void *data;
} cua_wire_out;

/* Structural walk only (see above). Returns 0, CUA_EPROTOCOL or CUA_ETOO_LARGE with a detail in err. */
int cua_wire_check(const void *buf, size_t len, cua_err *err);

/* Reads a request's header straight from the bytes, before anything else is checked: when the message is an
 * array of 4 (any array encoding) whose first elements are uints that fit version (32 bits), op (32 bits) and seq
 * (64 bits), they are stored in out as far as they go; out->has_header says all three were. Reads no further
 * and allocates nothing (cua_wire_check.c; the first step of cua_wire_decode_request). */
void cua_wire_peek_header(const void *buf, size_t len, cua_wire_request *out);

/* Decode a request. Returns 0 or CUA_EPROTOCOL / CUA_ETOO_LARGE / CUA_EVERSION / CUA_EUNKNOWN_OP / CUA_ENOMEM
 * with a detail in err. The header [version, op, seq] is read first, before the structural walk, so that it
 * is known (out->has_header) even for a message whose body is malformed. *out is overwritten (not freed first); cua_wire_request_free must be called afterwards
 * whatever the result, and may be called again (it leaves owner NULL). A zeroed request needs no decode to be
 * freed. Any thread; no shared state. */
int cua_wire_decode_request(const void *buf, size_t len, cua_wire_request *out, cua_err *err);
void cua_wire_request_free(cua_wire_request *r);

/* Decode a reply (as a client does). Same contract as cua_wire_decode_request. */
int cua_wire_decode_reply(const void *buf, size_t len, cua_wire_reply *out, cua_err *err);
void cua_wire_reply_free(cua_wire_reply *r);

/* Pack a request for op with its body (the cua_req_body member for op; NULL for ops without one) through out.
 * seq is packed as a 9-byte uint64 so that cua_wire_patch_seq can change it in place (op < 128).
 * Returns 0, CUA_EUNKNOWN_OP, CUA_EBAD_ARGUMENT, or CUA_ENOMEM when out's writer failed (what it already
 * wrote stays written). */
int cua_wire_pack_request(cua_wire_out out, uint32_t op, uint64_t seq, const void *body);

/* Sets the sequence number of a request packed by cua_wire_pack_request. 0 or CUA_EBAD_ARGUMENT. */
#define CUA_WIRE_SEQ_OFFSET 4
int cua_wire_patch_seq(void *msg, size_t len, uint64_t seq);

/* Pack a reply. body is the cua_rep_body member for op and is used only when status == CUA_OK (NULL for ops
 * without a reply body). message may be NULL (the table's message for status is used). */
int cua_wire_pack_reply(cua_wire_out out, uint32_t op, uint32_t status, const char *message, const void *body);

/* One field of a message body, as the codec's schema tables have it (for tests that hold PROTOCOL.md
 * against the codec). Strings are static. */
typedef struct cua_wire_field_info {
	const char *name; /* the name PROTOCOL.md gives the field ("nonce") */
	const char *type; /* "u32", "u64" (also handles), "i32", "bool", "str", "bin", "dim3", "array",
			   * "struct" (a nested fixed array such as STATUS's counts) or "union" */
	uint64_t max;     /* u32/u64: the largest value accepted; str/bin: bytes; array: elements */
} cua_wire_field_info;

/* The fields of op's request body (reply = 0) or reply body (reply = 1), in wire order: fills out[0 ..
 * min(n, max) - 1] and returns n, the number of fields (0 for an empty body), or -1 when op is unknown.
 * Any thread; reads constant tables only. */
int cua_wire_schema_fields(uint32_t op, int reply, cua_wire_field_info *out, size_t max);

/* A growable plain buffer to encode into (for tests and the fuzzer). Start from {0}; free with cua_wbuf_free. */
typedef struct cua_wbuf {
	char *data;
	size_t len, cap;
} cua_wbuf;
/* cua_wire_out writer: data is a cua_wbuf *. Returns 0 or -1 (out of memory; the buffer is unchanged). */
int cua_wbuf_write(void *data, const char *buf, size_t len);
/* A writer that appends to b (b must outlive its use). */
cua_wire_out cua_wbuf_out(cua_wbuf *b);
void cua_wbuf_free(cua_wbuf *b);

#endif
