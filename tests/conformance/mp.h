/*
 * mp.h — a small msgpack encoder and decoder written from the msgpack specification
 * (https://github.com/msgpack/msgpack/blob/master/spec.md), independent of common/cua_wire.*: the conformance
 * suite speaks to the daemon as a third-party client would.
 */
#ifndef CONF_MP_H
#define CONF_MP_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* A growing output buffer. Allocation failure aborts the test (a bug in the test machine, not the daemon). */
struct mpb {
	uint8_t *p;
	size_t n, cap;
};

void mpb_free(struct mpb *b);
void mpb_raw(struct mpb *b, const void *p, size_t n);
void mpb_arr(struct mpb *b, uint32_t n);
/* The shortest unsigned form (positive fixint, uint 8/16/32/64). */
void mpb_uint(struct mpb *b, uint64_t v);
/* A forced form: width 0 = positive fixint, 1, 2, 4 or 8 = uint 8/16/32/64. */
void mpb_uint_w(struct mpb *b, uint64_t v, int width);
/* The shortest signed form (fixints, int 8/16/32/64); width != 0 forces int 8/16/32/64. */
void mpb_int_w(struct mpb *b, int64_t v, int width);
void mpb_str(struct mpb *b, const char *s, size_t n);
void mpb_bin(struct mpb *b, const void *p, size_t n);

/*
 * Appends values described by fmt: 'u' uint64_t, 'i' int64_t, 's' const char * (str), 'b' const void *,
 * size_t (bin), 'r' const void *, size_t (raw bytes: one pre-encoded value), '[' ... ']' an array whose count
 * is the number of values written inside it. Spaces are ignored.
 */
void mpb_fmt(struct mpb *b, const char *fmt, ...);
void mpb_vfmt(struct mpb *b, const char *fmt, va_list *ap);

enum mpt { MP_UINT, MP_INT, MP_STR, MP_BIN, MP_ARR, MP_OTHER };

/* A decoded value; str/bin point into the decoded buffer, arrays own their elements. */
struct mpv {
	enum mpt t;
	uint64_t u; /* MP_UINT */
	int64_t i;  /* MP_INT (negative values only) */
	const uint8_t *p;
	uint32_t len; /* bytes of str/bin, elements of an array */
	struct mpv *a;
};

/* Decodes exactly one value filling buf. Returns 0, or -1 (truncated, trailing bytes, a type outside enum mpt
 * is decoded as MP_OTHER with no payload, never an error). */
int mp_decode(const uint8_t *buf, size_t n, struct mpv *out);
void mpv_free(struct mpv *v);

#endif
