#include "mp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
mpb_free(struct mpb *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void
mpb_raw(struct mpb *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n)
			cap *= 2;
		uint8_t *q = realloc(b->p, cap);
		if (q == NULL) {
			fprintf(stderr, "mpb: out of memory\n");
			abort();
		}
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, p, n);
	b->n += n;
}

/* Writes the tag byte then v big-endian in `bytes` bytes. */
static void
put_be(struct mpb *b, uint8_t tag, uint64_t v, int bytes)
{
	uint8_t t[9];
	t[0] = tag;
	for (int k = 0; k < bytes; k++)
		t[1 + k] = (uint8_t)(v >> (8 * (bytes - 1 - k)));
	mpb_raw(b, t, 1 + (size_t)bytes);
}

void
mpb_arr(struct mpb *b, uint32_t n)
{
	if (n < 16)
		put_be(b, (uint8_t)(0x90 | n), 0, 0);
	else if (n <= 0xffff)
		put_be(b, 0xdc, n, 2);
	else
		put_be(b, 0xdd, n, 4);
}

void
mpb_uint_w(struct mpb *b, uint64_t v, int width)
{
	switch (width) {
	case 0: put_be(b, (uint8_t)(v & 0x7f), 0, 0); break;
	case 1: put_be(b, 0xcc, v, 1); break;
	case 2: put_be(b, 0xcd, v, 2); break;
	case 4: put_be(b, 0xce, v, 4); break;
	default: put_be(b, 0xcf, v, 8);
	}
}

void
mpb_uint(struct mpb *b, uint64_t v)
{
	mpb_uint_w(b, v, v < 128 ? 0 : v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffu ? 4 : 8);
}

void
mpb_int_w(struct mpb *b, int64_t v, int width)
{
	if (width == 0) {
		if (v >= 0) {
			mpb_uint(b, (uint64_t)v);
			return;
		}
		width = v >= -32 ? -1 : v >= INT8_MIN ? 1 : v >= INT16_MIN ? 2 : v >= INT32_MIN ? 4 : 8;
	}
	switch (width) {
	case -1:
		put_be(b, (uint8_t)v, 0, 0); /* negative fixint 111xxxxx */
		break;
	case 1: put_be(b, 0xd0, (uint64_t)v, 1); break;
	case 2: put_be(b, 0xd1, (uint64_t)v, 2); break;
	case 4: put_be(b, 0xd2, (uint64_t)v, 4); break;
	default: put_be(b, 0xd3, (uint64_t)v, 8);
	}
}

void
mpb_str(struct mpb *b, const char *s, size_t n)
{
	if (n < 32)
		put_be(b, (uint8_t)(0xa0 | n), 0, 0);
	else if (n <= 0xff)
		put_be(b, 0xd9, n, 1);
	else if (n <= 0xffff)
		put_be(b, 0xda, n, 2);
	else
		put_be(b, 0xdb, n, 4);
	mpb_raw(b, s, n);
}

void
mpb_bin(struct mpb *b, const void *p, size_t n)
{
	if (n <= 0xff)
		put_be(b, 0xc4, n, 1);
	else if (n <= 0xffff)
		put_be(b, 0xc5, n, 2);
	else
		put_be(b, 0xc6, n, 4);
	mpb_raw(b, p, n);
}

/* The number of values at the top level of fmt up to its matching ']' (or the end). */
static uint32_t
fmt_count(const char *f)
{
	uint32_t n = 0;
	int depth = 0;
	for (; *f && depth >= 0; f++) {
		if (*f == ' ')
			continue;
		if (*f == ']') {
			depth--;
			continue;
		}
		if (depth == 0)
			n++;
		if (*f == '[')
			depth++;
	}
	return n;
}

void
mpb_vfmt(struct mpb *b, const char *fmt, va_list *ap)
{
	for (const char *f = fmt; *f; f++) {
		const void *p;
		switch (*f) {
		case 'u': mpb_uint(b, va_arg(*ap, uint64_t)); break;
		case 'i': mpb_int_w(b, va_arg(*ap, int64_t), 0); break;
		case 's':
			p = va_arg(*ap, const char *);
			mpb_str(b, p, strlen(p));
			break;
		case 'b':
			p = va_arg(*ap, const void *);
			mpb_bin(b, p, va_arg(*ap, size_t));
			break;
		case 'r':
			p = va_arg(*ap, const void *);
			mpb_raw(b, p, va_arg(*ap, size_t));
			break;
		case '[': mpb_arr(b, fmt_count(f + 1)); break;
		default: /* ']' and spaces */ break;
		}
	}
}

void
mpb_fmt(struct mpb *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	mpb_vfmt(b, fmt, &ap);
	va_end(ap);
}

struct rd {
	const uint8_t *p, *end;
	int depth;
};

static int
get_be(struct rd *r, int bytes, uint64_t *v)
{
	if (r->end - r->p < bytes)
		return -1;
	*v = 0;
	for (int k = 0; k < bytes; k++)
		*v = (*v << 8) | *r->p++;
	return 0;
}

static int dec(struct rd *r, struct mpv *v);

static int
dec_arr(struct rd *r, struct mpv *v, uint64_t n)
{
	v->t = MP_ARR;
	if (n > (uint64_t)(r->end - r->p) || r->depth > 64)
		return -1; /* every element takes at least a byte */
	v->len = (uint32_t)n;
	v->a = calloc(n ? n : 1, sizeof(*v->a));
	if (v->a == NULL)
		return -1;
	r->depth++;
	for (uint64_t k = 0; k < n; k++)
		if (dec(r, &v->a[k]) != 0)
			return -1;
	r->depth--;
	return 0;
}

static int
dec_bytes(struct rd *r, struct mpv *v, enum mpt t, uint64_t n)
{
	if (n > (uint64_t)(r->end - r->p))
		return -1;
	v->t = t;
	v->p = r->p;
	v->len = (uint32_t)n;
	r->p += n;
	return 0;
}

/* Skips n payload bytes of a type the protocol does not use. */
static int
dec_other(struct rd *r, struct mpv *v, uint64_t n)
{
	v->t = MP_OTHER;
	if (n > (uint64_t)(r->end - r->p))
		return -1;
	r->p += n;
	return 0;
}

static int
dec_int(struct rd *r, struct mpv *v, int bytes)
{
	uint64_t u;
	if (get_be(r, bytes, &u) != 0)
		return -1;
	int64_t s = bytes == 1 ? (int8_t)u : bytes == 2 ? (int16_t)u : bytes == 4 ? (int32_t)u : (int64_t)u;
	v->t = s < 0 ? MP_INT : MP_UINT;
	v->i = s;
	v->u = (uint64_t)s;
	return 0;
}

static int
dec(struct rd *r, struct mpv *v)
{
	uint64_t n;
	if (r->p >= r->end)
		return -1;
	uint8_t c = *r->p++;
	if (c <= 0x7f) {
		v->t = MP_UINT;
		v->u = c;
		return 0;
	}
	if (c >= 0xe0) {
		v->t = MP_INT;
		v->i = (int8_t)c;
		return 0;
	}
	if ((c & 0xf0) == 0x90)
		return dec_arr(r, v, c & 0x0f);
	if ((c & 0xe0) == 0xa0)
		return dec_bytes(r, v, MP_STR, c & 0x1f);
	switch (c) {
	case 0xcc:
	case 0xcd:
	case 0xce:
	case 0xcf: v->t = MP_UINT; return get_be(r, 1 << (c - 0xcc), &v->u);
	case 0xd0:
	case 0xd1:
	case 0xd2:
	case 0xd3: return dec_int(r, v, 1 << (c - 0xd0));
	case 0xd9:
	case 0xda:
	case 0xdb: return get_be(r, 1 << (c - 0xd9), &n) ? -1 : dec_bytes(r, v, MP_STR, n);
	case 0xc4:
	case 0xc5:
	case 0xc6: return get_be(r, 1 << (c - 0xc4), &n) ? -1 : dec_bytes(r, v, MP_BIN, n);
	case 0xdc:
	case 0xdd: return get_be(r, c == 0xdc ? 2 : 4, &n) ? -1 : dec_arr(r, v, n);
	case 0xc0:
	case 0xc2:
	case 0xc3: return dec_other(r, v, 0);
	case 0xca: return dec_other(r, v, 4);
	case 0xcb: return dec_other(r, v, 8);
	default: return -1; /* maps, ext and 0xc1 never appear in a reply */
	}
}

int
mp_decode(const uint8_t *buf, size_t n, struct mpv *out)
{
	struct rd r = {buf, buf + n, 0};
	memset(out, 0, sizeof(*out));
	if (dec(&r, out) != 0 || r.p != r.end) {
		mpv_free(out);
		return -1;
	}
	return 0;
}

void
mpv_free(struct mpv *v)
{
	if (v->t == MP_ARR && v->a) {
		for (uint32_t k = 0; k < v->len; k++)
			mpv_free(&v->a[k]);
		free(v->a);
	}
	memset(v, 0, sizeof(*v));
}
