/*
 * cua_wire_check.c — the decoder's first steps, before msgpack-c sees a byte (cua_wire.h): the structural walk
 * that bounds every count by the bytes left, and the peek at a request's header [version, op, seq]. Plain byte
 * reading: no msgpack-c here.
 */
#include "config.h"

#include "cua_wire.h"

#include <string.h>

/* ------------------------------------------------------------------ structural walk */

struct walk {
	const uint8_t *p;
	size_t len, off;
	size_t objects;
	cua_err *err;
};

static int
need(struct walk *w, size_t n, const char *what)
{
	if (w->len - w->off < n)
		return cua_err_set(w->err, CUA_EPROTOCOL, "truncated %s at byte %zu", what, w->off);
	return 0;
}

static uint64_t
be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

static int
walk_value(struct walk *w, unsigned depth)
{
	int r;
	if ((r = need(w, 1, "value")) != 0)
		return r;
	if (++w->objects > CUA_WIRE_MAX_OBJECTS)
		return cua_err_set(w->err, CUA_ETOO_LARGE, "more than %u values in one message", CUA_WIRE_MAX_OBJECTS);
	uint8_t t = w->p[w->off++];
	uint64_t count = 0, blob = 0;
	unsigned lenbytes = 0;

	if (t <= 0x7f || t >= 0xe0 || t == 0xc2 || t == 0xc3)
		return 0; /* fixint, negative fixint, bool */
	if (t >= 0xa0 && t <= 0xbf) {
		blob = t & 0x1f;
		goto skip_blob;
	}
	if (t >= 0x90 && t <= 0x9f) {
		count = t & 0x0f;
		goto array;
	}
	switch (t) {
	/* the msgpack type bytes, two per row: */
	/* clang-format off */
	case 0xcc: case 0xd0: lenbytes = 1; goto scalar;
	case 0xcd: case 0xd1: lenbytes = 2; goto scalar;
	case 0xce: case 0xd2: lenbytes = 4; goto scalar;
	case 0xcf: case 0xd3: lenbytes = 8; goto scalar;
	case 0xc4: case 0xd9: lenbytes = 1; goto sized_blob;
	case 0xc5: case 0xda: lenbytes = 2; goto sized_blob;
	case 0xc6: case 0xdb: lenbytes = 4; goto sized_blob;
	/* clang-format on */
	case 0xdc: lenbytes = 2; goto sized_array;
	case 0xdd: lenbytes = 4; goto sized_array;
	default: break;
	}
	if ((t >= 0x80 && t <= 0x8f) || t == 0xde || t == 0xdf)
		return cua_err_set(w->err, CUA_EPROTOCOL, "map at byte %zu: protocol v1 uses arrays only", w->off - 1);
	if (t == 0xc0)
		return cua_err_set(w->err, CUA_EPROTOCOL, "nil at byte %zu: protocol v1 has no optional fields",
				   w->off - 1);
	if (t == 0xca || t == 0xcb)
		return cua_err_set(w->err, CUA_EPROTOCOL, "float at byte %zu: protocol v1 sends floats as bin",
				   w->off - 1);
	return cua_err_set(w->err, CUA_EPROTOCOL, "type byte 0x%02x at byte %zu is not used by protocol v1", t,
			   w->off - 1);

scalar:
	if ((r = need(w, lenbytes, "integer")) != 0)
		return r;
	w->off += lenbytes;
	return 0;
sized_blob:
	if ((r = need(w, lenbytes, "length")) != 0)
		return r;
	blob = be(w->p + w->off, lenbytes);
	w->off += lenbytes;
skip_blob:
	if (blob > w->len - w->off)
		return cua_err_set(w->err, CUA_EPROTOCOL,
				   "str/bin of %llu bytes at byte %zu exceeds the %zu bytes left",
				   (unsigned long long)blob, w->off, w->len - w->off);
	w->off += (size_t)blob;
	return 0;
sized_array:
	if ((r = need(w, lenbytes, "array count")) != 0)
		return r;
	count = be(w->p + w->off, lenbytes);
	w->off += lenbytes;
array:
	if (depth + 1 > CUA_WIRE_MAX_DEPTH)
		return cua_err_set(w->err, CUA_EPROTOCOL, "nesting deeper than %u", CUA_WIRE_MAX_DEPTH);
	if (count > w->len - w->off)
		return cua_err_set(w->err, CUA_EPROTOCOL,
				   "array of %llu elements at byte %zu exceeds the %zu bytes left",
				   (unsigned long long)count, w->off, w->len - w->off);
	if (count > CUA_WIRE_MAX_ARRAY)
		return cua_err_set(w->err, CUA_ETOO_LARGE, "array of %llu elements exceeds the limit of %u",
				   (unsigned long long)count, CUA_WIRE_MAX_ARRAY);
	for (uint64_t i = 0; i < count; i++)
		if ((r = walk_value(w, depth + 1)) != 0)
			return r;
	return 0;
}

int
cua_wire_check(const void *buf, size_t len, cua_err *err)
{
	if (len == 0)
		return cua_err_set(err, CUA_EPROTOCOL, "empty message");
	if (len > CUA_WIRE_MAX_MESSAGE)
		return cua_err_set(err, CUA_ETOO_LARGE, "message of %zu bytes exceeds the limit of %zu", len,
				   CUA_WIRE_MAX_MESSAGE);
	struct walk w = {.p = buf, .len = len, .off = 0, .objects = 0, .err = err};
	int r = walk_value(&w, 0);
	if (r != 0)
		return r;
	if (w.off != len)
		return cua_err_set(err, CUA_EPROTOCOL, "%zu trailing bytes after the message", len - w.off);
	return 0;
}

/* Reads the msgpack uint at w->off (positive fixint or uint 8/16/32/64) into *v. 0, or -1 when there is none. */
static int
peek_uint(struct walk *w, uint64_t *v)
{
	if (w->off >= w->len)
		return -1;
	uint8_t t = w->p[w->off];
	if (t <= 0x7f) {
		*v = t;
		w->off++;
		return 0;
	}
	if (t < 0xcc || t > 0xcf)
		return -1;
	unsigned n = 1u << (t - 0xcc);
	if (w->len - w->off - 1 < n)
		return -1;
	*v = be(w->p + w->off + 1, n);
	w->off += 1 + n;
	return 0;
}

/* Reads a request's header straight from the bytes, before anything else is checked: when the message is an
 * array of 4 (any array encoding), its first elements are uints that fit version (32 bits), op (32 bits) and
 * seq (64 bits) are stored in out as far as they go; has_header says all three were. Reads no further. */
void
cua_wire_peek_header(const void *buf, size_t len, cua_wire_request *out)
{
	struct walk w = {.p = buf, .len = len, .off = 1};
	uint64_t count = 0, version, op, seq;
	unsigned lenbytes = 0;
	if (len == 0)
		return;
	uint8_t t = w.p[0];
	if (t >= 0x90 && t <= 0x9f)
		count = t & 0x0f;
	else if (t == 0xdc || t == 0xdd)
		lenbytes = t == 0xdc ? 2 : 4;
	else
		return;
	if (lenbytes > 0) {
		if (len - 1 < lenbytes)
			return;
		count = be(w.p + 1, lenbytes);
		w.off += lenbytes;
	}
	if (count != 4 || peek_uint(&w, &version) != 0 || version > UINT32_MAX)
		return;
	out->version = (uint32_t)version;
	if (peek_uint(&w, &op) != 0 || op > UINT32_MAX)
		return;
	out->op = (uint32_t)op;
	if (peek_uint(&w, &seq) != 0)
		return;
	out->seq = seq;
	out->has_header = true;
}
