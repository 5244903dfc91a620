/*
 * cua_wire.c — the wire codec: decodes and encodes messages by walking the schema tables of
 * common/cua_wire_schema.c (structure checked before msgpack-c allocates anything; every byte from a socket is
 * hostile), and a growable output buffer.
 */
#include "config.h"

#include "cua_wire.h"
#include "cua_wire_schema.h"

#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ decode */

static const char *
type_name(const msgpack_object *o)
{
	switch (o->type) {
	case MSGPACK_OBJECT_NIL: return "nil";
	case MSGPACK_OBJECT_BOOLEAN: return "bool";
	case MSGPACK_OBJECT_POSITIVE_INTEGER: return "uint";
	case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative int";
	case MSGPACK_OBJECT_FLOAT32:
	case MSGPACK_OBJECT_FLOAT64: return "float";
	case MSGPACK_OBJECT_STR: return "str";
	case MSGPACK_OBJECT_ARRAY: return "array";
	case MSGPACK_OBJECT_MAP: return "map";
	case MSGPACK_OBJECT_BIN: return "bin";
	default: return "ext";
	}
}

static int dec_struct(const struct schema *s, const msgpack_object *o, char *base, msgpack_zone *z, cua_err *err);

static int
dec_u64(const msgpack_object *o, uint64_t max, uint64_t *v)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
		return -1;
	*v = o->via.u64;
	return 0;
}

/* F_U32 and F_U64: a uint no larger than the field's max. */
static int
dec_uint(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	uint64_t v;
	if (dec_u64(o, f->max, &v) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected uint <= %llu, got %s", s->name, f->name,
				   (unsigned long long)f->max, type_name(o));
	if (f->type == F_U32)
		*(uint32_t *)(base + f->off) = (uint32_t)v;
	else
		*(uint64_t *)(base + f->off) = v;
	return 0;
}

/* F_I32: a uint or negative int that fits an int32_t. */
static int
dec_int32(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	int64_t iv;
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT32_MAX)
		iv = (int64_t)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 >= INT32_MIN)
		iv = o->via.i64;
	else
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected int32, got %s", s->name, f->name, type_name(o));
	*(int32_t *)(base + f->off) = (int32_t)iv;
	return 0;
}

static int
dec_bool(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected bool, got %s", s->name, f->name, type_name(o));
	*(bool *)(base + f->off) = o->via.boolean;
	return 0;
}

/* F_STR and F_BIN: a cua_bytes pointing into the message (no copy), at most f->max bytes. */
static int
dec_bytes(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	int want = f->type == F_STR ? MSGPACK_OBJECT_STR : MSGPACK_OBJECT_BIN;
	if ((int)o->type != want)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected %s, got %s", s->name, f->name,
				   f->type == F_STR ? "str" : "bin", type_name(o));
	/* str and bin share the layout of msgpack_object_bin: size then ptr. */
	uint32_t n = f->type == F_STR ? o->via.str.size : o->via.bin.size;
	if (n > f->max)
		return cua_err_set(err, CUA_ETOO_LARGE, "%s.%s: %u bytes exceed the limit of %llu", s->name, f->name, n,
				   (unsigned long long)f->max);
	cua_bytes *b = (cua_bytes *)(base + f->off);
	b->ptr = f->type == F_STR ? (const void *)o->via.str.ptr : (const void *)o->via.bin.ptr;
	b->len = n;
	return 0;
}

/* F_DIM3: [x, y, z] of uint32 into uint32_t[3]. */
static int
dec_dim3(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, cua_err *err)
{
	uint64_t v;
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 3)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected [x, y, z], got %s", s->name, f->name,
				   type_name(o));
	uint32_t *d = (uint32_t *)(base + f->off);
	for (int i = 0; i < 3; i++) {
		if (dec_u64(&o->via.array.ptr[i], UINT32_MAX, &v) != 0)
			return cua_err_set(err, CUA_EPROTOCOL, "%s.%s[%d]: expected uint32, got %s", s->name, f->name,
					   i, type_name(&o->via.array.ptr[i]));
		d[i] = (uint32_t)v;
	}
	return 0;
}

/* Element i of an ARGS array: bin (passed by value) or uint (a device pointer). */
static int
dec_launch_arg(const struct schema *s, const struct field *f, uint32_t i, const msgpack_object *e, cua_wire_arg *a,
	       cua_err *err)
{
	if (e->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		a->kind = CUA_ARG_DEVPTR;
		a->devptr = e->via.u64;
	} else if (e->type == MSGPACK_OBJECT_BIN && e->via.bin.size >= 1 && e->via.bin.size <= CUA_MAX_ARG_BYTES) {
		a->kind = CUA_ARG_BYTES;
		a->bytes.ptr = e->via.bin.ptr;
		a->bytes.len = e->via.bin.size;
	} else {
		return cua_err_set(err, CUA_EPROTOCOL,
				   "%s.%s[%u]: expected bin of 1..%u bytes or uint device pointer, got %s", s->name,
				   f->name, i, CUA_MAX_ARG_BYTES, type_name(e));
	}
	return 0;
}

/* F_ARRAY: up to f->max elements, zeroed and allocated in z; each a nested struct (f->sub) or, when f->sub is
 * NULL, a launch argument. The pointer and count are stored only once every element decoded. */
static int
dec_array(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, msgpack_zone *z,
	  cua_err *err)
{
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.%s: expected array, got %s", s->name, f->name, type_name(o));
	uint32_t n = o->via.array.size;
	if (n > f->max)
		return cua_err_set(err, CUA_ETOO_LARGE, "%s.%s: %u elements exceed the limit of %llu", s->name, f->name,
				   n, (unsigned long long)f->max);
	char *items = NULL;
	if (n > 0) {
		items = msgpack_zone_malloc(z, (size_t)n * f->elem_size);
		if (items == NULL)
			return cua_err_set(err, CUA_ENOMEM, "%s.%s: out of memory", s->name, f->name);
		memset(items, 0, (size_t)n * f->elem_size);
	}
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *e = &o->via.array.ptr[i];
		char *ebase = items + (size_t)i * f->elem_size;
		int r;
		if (f->sub == NULL)
			r = dec_launch_arg(s, f, i, e, (cua_wire_arg *)ebase, err);
		else
			r = dec_struct(f->sub, e, ebase, z, err);
		if (r != 0)
			return r;
	}
	*(void **)(base + f->off) = items;
	*(uint32_t *)(base + f->off2) = n;
	return 0;
}

/* F_UNION: [kind, body], the body decoded by the schema that f's ucase table gives for kind. */
static int
dec_union(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, msgpack_zone *z,
	  cua_err *err)
{
	if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size != 2)
		return cua_err_set(err, CUA_EPROTOCOL, "%s: expected [kind, body], got %s", s->name, type_name(o));
	if (o->via.array.ptr[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return cua_err_set(err, CUA_EPROTOCOL, "%s.kind: expected uint, got %s", s->name,
				   type_name(&o->via.array.ptr[0]));
	uint64_t kind = o->via.array.ptr[0].via.u64;
	const struct ucase *cases = f->sub;
	for (size_t i = 0; i < f->elem_size; i++) {
		if (cases[i].kind == kind) {
			*(uint32_t *)(base + f->off) = (uint32_t)kind;
			return dec_struct(cases[i].s, &o->via.array.ptr[1], base + f->off2, z, err);
		}
	}
	return cua_err_set(err, CUA_EPROTOCOL, "%s.kind: %llu is not an item kind", s->name, (unsigned long long)kind);
}

/* Decodes o as field f of schema s into the struct at base; arrays are allocated in z. */
static int
dec_field(const struct schema *s, const struct field *f, const msgpack_object *o, char *base, msgpack_zone *z,
	  cua_err *err)
{
	switch (f->type) {
	case F_U32:
	case F_U64: return dec_uint(s, f, o, base, err);
	case F_I32: return dec_int32(s, f, o, base, err);
	case F_BOOL: return dec_bool(s, f, o, base, err);
	case F_STR:
	case F_BIN: return dec_bytes(s, f, o, base, err);
	case F_DIM3: return dec_dim3(s, f, o, base, err);
	case F_ARRAY: return dec_array(s, f, o, base, z, err);
	case F_STRUCT: return dec_struct(f->sub, o, base + f->off, z, err);
	case F_UNION: return dec_union(s, f, o, base, z, err);
	}
	return cua_err_set(err, CUA_EINTERNAL, "%s.%s: bad schema", s->name, f->name);
}

static int
dec_struct(const struct schema *s, const msgpack_object *o, char *base, msgpack_zone *z, cua_err *err)
{
	if (s->nfields == 1 && s->fields[0].type == F_UNION)
		return dec_field(s, &s->fields[0], o, base, z, err);
	if (o->type != MSGPACK_OBJECT_ARRAY)
		return cua_err_set(err, CUA_EPROTOCOL, "%s: expected array of %zu fields, got %s", s->name, s->nfields,
				   type_name(o));
	size_t n = o->via.array.size;
	if (s->nrequired == 0 && n != s->nfields)
		return cua_err_set(err, CUA_EPROTOCOL, "%s: expected %zu fields, got %u", s->name, s->nfields,
				   o->via.array.size);
	if (s->nrequired != 0 && (n < s->nrequired || n > s->nfields))
		return cua_err_set(err, CUA_EPROTOCOL, "%s: expected %zu..%zu fields, got %u", s->name, s->nrequired,
				   s->nfields, o->via.array.size);
	for (size_t i = 0; i < n; i++) {
		int r = dec_field(s, &s->fields[i], &o->via.array.ptr[i], base, z, err);
		if (r != 0)
			return r;
	}
	if (s->nrequired != 0)
		*(uint32_t *)(base + s->count_off) = (uint32_t)n;
	return 0;
}

/* Frees what unpack_new made (NULL is fine). */
static void
owner_free(void *owner)
{
	msgpack_unpacked *unp = owner;
	if (unp == NULL)
		return;
	msgpack_unpacked_destroy(unp);
	free(unp);
}

/* Checks the structure, then lets msgpack-c build the object tree (bounded by the checks) in a new
 * msgpack_unpacked. *unp is set whatever the result (NULL only when out of memory); the caller owns it. */
static int
unpack_new(const void *buf, size_t len, msgpack_unpacked **unp, cua_err *err)
{
	*unp = malloc(sizeof(**unp));
	if (*unp == NULL)
		return cua_err_set(err, CUA_ENOMEM, "out of memory for the decoder");
	msgpack_unpacked_init(*unp);
	int r = cua_wire_check(buf, len, err);
	if (r != 0)
		return r;
	size_t off = 0;
	msgpack_unpack_return ur = msgpack_unpack_next(*unp, buf, len, &off);
	if (ur != MSGPACK_UNPACK_SUCCESS || off != len)
		return cua_err_set(err, CUA_EPROTOCOL, "msgpack-c rejected the message (%d)", (int)ur);
	return 0;
}

static int
dec_header(const msgpack_object *root, uint32_t nfields, uint32_t *version, uint32_t *op, cua_err *err)
{
	if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size != nfields)
		return cua_err_set(err, CUA_EPROTOCOL, "message: expected an array of %u elements", nfields);
	const msgpack_object *f = root->via.array.ptr;
	uint64_t v;
	if (dec_u64(&f[0], UINT32_MAX, &v) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "message.version: expected uint32, got %s", type_name(&f[0]));
	*version = (uint32_t)v;
	if (dec_u64(&f[1], UINT32_MAX, &v) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "message.op: expected uint32, got %s", type_name(&f[1]));
	*op = (uint32_t)v;
	if (*version < CUA_PROTO_VERSION_MIN || *version > CUA_PROTO_VERSION)
		return cua_err_set(err, CUA_EVERSION, "protocol version %u is not supported; this side speaks %u..%u",
				   *version, CUA_PROTO_VERSION_MIN, CUA_PROTO_VERSION);
	if (!cua_wire_op_known(*op))
		return cua_err_set(err, CUA_EUNKNOWN_OP, "unknown op %u", *op);
	return 0;
}

int
cua_wire_decode_request(const void *buf, size_t len, cua_wire_request *out, cua_err *err)
{
	msgpack_unpacked *unp;
	memset(out, 0, sizeof(*out));
	cua_wire_peek_header(buf, len, out);
	int r = unpack_new(buf, len, &unp, err);
	out->owner = unp;
	if (r != 0)
		return r;
	const msgpack_object *root = &unp->data;
	if ((r = dec_header(root, 4, &out->version, &out->op, err)) != 0)
		return r;
	uint64_t seq;
	if (dec_u64(&root->via.array.ptr[2], UINT64_MAX, &seq) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "message.seq: expected uint64, got %s",
				   type_name(&root->via.array.ptr[2]));
	out->seq = seq;
	return dec_struct(cua_wire_op_schemas[out->op].req, &root->via.array.ptr[3], (char *)&out->body, unp->zone,
			  err);
}

void
cua_wire_request_free(cua_wire_request *r)
{
	owner_free(r->owner);
	r->owner = NULL;
}

int
cua_wire_decode_reply(const void *buf, size_t len, cua_wire_reply *out, cua_err *err)
{
	msgpack_unpacked *unp;
	int r = unpack_new(buf, len, &unp, err);
	memset(out, 0, sizeof(*out));
	out->owner = unp;
	if (r != 0)
		return r;
	const msgpack_object *root = &unp->data;
	/* An error reply may echo an op this side does not know (or 0): its body is [] anyway. */
	int hr = dec_header(root, 6, &out->version, &out->op, err);
	if (hr != 0 && hr != CUA_EUNKNOWN_OP)
		return hr;
	const msgpack_object *f = root->via.array.ptr;
	uint64_t v;
	if (dec_u64(&f[2], UINT32_MAX, &v) != 0)
		return cua_err_set(err, CUA_EPROTOCOL, "reply.status: expected uint32, got %s", type_name(&f[2]));
	out->status = (uint32_t)v;
	if (hr != 0 && out->status == CUA_OK)
		return hr;
	if (f[3].type != MSGPACK_OBJECT_STR || f[3].via.str.size > CUA_MAX_IDENT)
		return cua_err_set(err, CUA_EPROTOCOL, "reply.name: expected str of <= %u bytes", CUA_MAX_IDENT);
	if (f[4].type != MSGPACK_OBJECT_STR || f[4].via.str.size > CUA_MAX_MESSAGE_TEXT)
		return cua_err_set(err, CUA_EPROTOCOL, "reply.message: expected str of <= %u bytes",
				   CUA_MAX_MESSAGE_TEXT);
	out->name.ptr = f[3].via.str.ptr;
	out->name.len = f[3].via.str.size;
	out->message.ptr = f[4].via.str.ptr;
	out->message.len = f[4].via.str.size;
	const struct schema *s = out->status == CUA_OK ? cua_wire_op_schemas[out->op].rep : &cua_wire_empty_schema;
	return dec_struct(s, &f[5], (char *)&out->body, unp->zone, err);
}

void
cua_wire_reply_free(cua_wire_reply *r)
{
	owner_free(r->owner);
	r->owner = NULL;
}

/* ------------------------------------------------------------------ encode */

static int enc_struct(msgpack_packer *pk, const struct schema *s, const char *base);

static int
enc_bytes(msgpack_packer *pk, int is_str, const cua_bytes *b)
{
	int r = is_str ? msgpack_pack_str(pk, b->len) : msgpack_pack_bin(pk, b->len);
	if (r == 0 && b->len > 0)
		r = is_str ? msgpack_pack_str_body(pk, b->ptr, b->len) : msgpack_pack_bin_body(pk, b->ptr, b->len);
	return r;
}

static int
enc_field(msgpack_packer *pk, const struct field *f, const char *base)
{
	int r = 0;
	switch (f->type) {
	case F_U32: return msgpack_pack_uint32(pk, *(const uint32_t *)(base + f->off));
	case F_U64: return msgpack_pack_uint64(pk, *(const uint64_t *)(base + f->off));
	case F_I32: return msgpack_pack_int32(pk, *(const int32_t *)(base + f->off));
	case F_BOOL: return *(const bool *)(base + f->off) ? msgpack_pack_true(pk) : msgpack_pack_false(pk);
	case F_STR:
	case F_BIN: return enc_bytes(pk, f->type == F_STR, (const cua_bytes *)(base + f->off));
	case F_DIM3: {
		const uint32_t *d = (const uint32_t *)(base + f->off);
		r = msgpack_pack_array(pk, 3);
		for (int i = 0; r == 0 && i < 3; i++)
			r = msgpack_pack_uint32(pk, d[i]);
		return r;
	}
	case F_ARRAY: {
		const char *items = *(char *const *)(base + f->off);
		uint32_t n = *(const uint32_t *)(base + f->off2);
		r = msgpack_pack_array(pk, n);
		for (uint32_t i = 0; r == 0 && i < n; i++) {
			const char *e = items + (size_t)i * f->elem_size;
			if (f->sub == NULL) {
				const cua_wire_arg *a = (const cua_wire_arg *)e;
				r = a->kind == CUA_ARG_DEVPTR ? msgpack_pack_uint64(pk, a->devptr)
							      : enc_bytes(pk, 0, &a->bytes);
			} else {
				r = enc_struct(pk, f->sub, e);
			}
		}
		return r;
	}
	case F_STRUCT: return enc_struct(pk, f->sub, base + f->off);
	case F_UNION: {
		uint32_t kind = *(const uint32_t *)(base + f->off);
		const struct ucase *cases = f->sub;
		for (size_t i = 0; i < f->elem_size; i++) {
			if (cases[i].kind == kind) {
				r = msgpack_pack_array(pk, 2);
				if (r == 0)
					r = msgpack_pack_uint32(pk, kind);
				return r == 0 ? enc_struct(pk, cases[i].s, base + f->off2) : r;
			}
		}
		return CUA_EBAD_ARGUMENT;
	}
	}
	return CUA_EINTERNAL;
}

static int
enc_struct(msgpack_packer *pk, const struct schema *s, const char *base)
{
	if (s->nfields == 1 && s->fields[0].type == F_UNION)
		return enc_field(pk, &s->fields[0], base);
	size_t n = s->nfields;
	if (s->nrequired != 0) { /* the fields the struct asks for, within the schema's range */
		n = *(const uint32_t *)(base + s->count_off);
		n = n < s->nrequired ? s->nrequired : n > s->nfields ? s->nfields : n;
	}
	int r = msgpack_pack_array(pk, (uint32_t)n);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = enc_field(pk, &s->fields[i], base);
	return r;
}

static int
packer_result(int r)
{
	return r == 0 ? 0 : r > 0 ? r : CUA_ENOMEM;
}

int
cua_wire_pack_request(cua_wire_out out, uint32_t op, uint64_t seq, const void *body)
{
	if (!cua_wire_op_known(op))
		return CUA_EUNKNOWN_OP;
	const struct schema *s = cua_wire_op_schemas[op].req;
	if (s->nfields > 0 && body == NULL)
		return CUA_EBAD_ARGUMENT;
	msgpack_packer packer, *pk = &packer;
	msgpack_packer_init(pk, out.data, out.write);
	int r = msgpack_pack_array(pk, 4);
	if (r == 0)
		r = msgpack_pack_uint32(pk, CUA_PROTO_VERSION);
	if (r == 0)
		r = msgpack_pack_uint32(pk, op);
	if (r == 0) /* always 9 bytes, so that cua_wire_patch_seq can set it after packing */
		r = msgpack_pack_fix_uint64(pk, seq);
	if (r == 0)
		r = s->nfields > 0 ? enc_struct(pk, s, body) : msgpack_pack_array(pk, 0);
	return packer_result(r);
}

int
cua_wire_pack_reply(cua_wire_out out, uint32_t op, uint32_t status, const char *message, const void *body)
{
	const struct schema *s = &cua_wire_empty_schema;
	if (status == CUA_OK && cua_wire_op_known(op))
		s = cua_wire_op_schemas[op].rep;
	if (s->nfields > 0 && body == NULL)
		return CUA_EBAD_ARGUMENT;
	if (message == NULL)
		message = cua_strerror((int)status);
	size_t mlen = strlen(message);
	if (mlen > CUA_MAX_MESSAGE_TEXT)
		mlen = CUA_MAX_MESSAGE_TEXT;
	const char *name = cua_strerror_name((int)status);
	cua_bytes nb = {name, (uint32_t)strlen(name)}, mb = {message, (uint32_t)mlen};
	msgpack_packer packer, *pk = &packer;
	msgpack_packer_init(pk, out.data, out.write);
	int r = msgpack_pack_array(pk, 6);
	if (r == 0)
		r = msgpack_pack_uint32(pk, CUA_PROTO_VERSION);
	if (r == 0)
		r = msgpack_pack_uint32(pk, op);
	if (r == 0)
		r = msgpack_pack_uint32(pk, status);
	if (r == 0)
		r = enc_bytes(pk, 1, &nb);
	if (r == 0)
		r = enc_bytes(pk, 1, &mb);
	if (r == 0)
		r = s->nfields > 0 ? enc_struct(pk, s, body) : msgpack_pack_array(pk, 0);
	return packer_result(r);
}

int
cua_wire_patch_seq(void *msg, size_t len, uint64_t seq)
{
	unsigned char *p = msg;
	if (len < CUA_WIRE_SEQ_OFFSET + 8 || p[0] != 0x94 || p[CUA_WIRE_SEQ_OFFSET - 1] != 0xcf)
		return CUA_EBAD_ARGUMENT;
	for (int i = 7; i >= 0; i--, seq >>= 8)
		p[CUA_WIRE_SEQ_OFFSET + i] = (unsigned char)seq;
	return 0;
}

/* ------------------------------------------------------------------ growable buffer */

int
cua_wbuf_write(void *data, const char *buf, size_t len)
{
	cua_wbuf *b = data;
	if (len > SIZE_MAX - b->len)
		return -1;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + len)
			cap *= 2;
		char *p = realloc(b->data, cap);
		if (p == NULL)
			return -1;
		b->data = p;
		b->cap = cap;
	}
	memcpy(b->data + b->len, buf, len);
	b->len += len;
	return 0;
}

cua_wire_out
cua_wbuf_out(cua_wbuf *b)
{
	return (cua_wire_out){cua_wbuf_write, b};
}

void
cua_wbuf_free(cua_wbuf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
