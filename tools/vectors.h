/*
 * vectors.h — the golden vectors of proto/vectors/ as one table: one row per file, encoded by the codec.
 *
 * tools/gen-vectors writes the files from this table (`make vectors`); tests/unit/test_vectors checks that
 * the files in the source tree are exactly what the table encodes to, and that PROTOCOL.md agrees with the
 * codec. Change a vector here, run `make vectors`, and review the diff of proto/vectors/ like code.
 */
#ifndef VECTORS_H
#define VECTORS_H

#include "cua_wire.h"

#include <stddef.h>
#include <stdint.h>

/* One golden message. */
struct vec_row {
	const char *file;    /* proto/vectors/<file>.hex */
	int is_reply;        /* 0: a request, 1: a reply */
	uint32_t op;         /* the op packed (a reply may echo 0 or an op this side does not know) */
	uint64_t seq;        /* requests: the sequence number; replies: the seq of the request answered */
	uint32_t status;     /* replies: the status; requests: 0 */
	const char *message; /* replies: the message, NULL for the status's standard sentence */
	const void *body;    /* the cua_req_body / cua_rep_body member for op, NULL for an empty body */
	const char *comment; /* one line for the reader: what the example shows */
};

extern const struct vec_row vec_rows[];
extern const size_t vec_nrows;

/* Encodes row r through the codec into b (appended). Returns 0 or the codec's error. */
int vec_pack(const struct vec_row *r, cua_wbuf *b);

/* The .hex file's whole text for row r: "# request HELLO, protocol v1, seq 0", "# <comment>", then the
 * bytes in lowercase hex, 32 to a line. Returns a malloc'd string (the caller frees it), or NULL when
 * encoding failed or memory ran out. */
char *vec_text(const struct vec_row *r);

#endif
