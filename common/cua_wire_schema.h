/*
 * cua_wire_schema.h — the wire codec's private tables (common/cua_wire_schema.c), read by its decoder and
 * encoder (common/cua_wire.c): one schema per message body, one row per op. Nothing outside the codec includes
 * this.
 */
#ifndef CUA_WIRE_SCHEMA_H
#define CUA_WIRE_SCHEMA_H

#include "cua_proto.h"

#include <stddef.h>
#include <stdint.h>

enum ftype { F_U32, F_U64, F_I32, F_BOOL, F_STR, F_BIN, F_DIM3, F_ARRAY, F_UNION, F_STRUCT };

struct schema;
struct ucase {
	uint32_t kind;
	const struct schema *s;
};
struct field {
	const char *name;
	enum ftype type;
	size_t off;       /* the field (pointer for arrays, kind for unions) */
	size_t off2;      /* arrays: uint32_t count; unions: the union storage */
	uint64_t max;     /* ints: largest value; str/bin: length; arrays: count */
	const void *sub;  /* arrays/structs: schema; unions: ucase table */
	size_t elem_size; /* arrays: element size; unions: number of cases */
};
struct schema {
	const char *name;
	size_t nfields;
	const struct field *fields;
	/* A schema with an optional tail (LAUNCH): the fields up to nrequired must be there, the rest may be left
	 * off from the end; count_off is the uint32_t that receives how many came (decode) or says how many to
	 * send (encode). 0: every field is required. */
	size_t nrequired, count_off;
};

/* An op's request and reply body schemas. */
struct op_schema {
	const struct schema *req, *rep;
};
/* Indexed by op; an op without a row has req NULL. */
extern const struct op_schema cua_wire_op_schemas[CUA_OP_MAX];
/* The body of no fields (an error reply, a request without arguments). */
extern const struct schema cua_wire_empty_schema;
/* 1 when op has a row. */
int cua_wire_op_known(uint32_t op);

#endif
