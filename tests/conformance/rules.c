#include "config.h"

#include "rules.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

void
sess(struct conn *c, const struct dmn *d)
{
	conn_open(c, d->url);
	conn_hello(c, NULL);
}

void
sess_operator(struct conn *c, const struct dmn *d)
{
	conn_open(c, d->op_url);
	conn_hello(c, NULL);
}

static uint64_t
one_u64(struct conn *c, uint64_t op, const char *what, struct mpb *body)
{
	struct mpb m = {0};
	struct reply r;
	msg_build(&m, PV, op, 0, "r", body->p, body->n);
	conn_raw(c, m.p, m.n, &r);
	mpb_free(&m);
	ck_assert_msg(r.status == ST_OK, "%s: %s: %s", what, r.name, r.msg);
	ck_assert_msg(r.body->len >= 1 && r.body->a[0].t == MP_UINT, "%s: reply body", what);
	uint64_t v = r.body->a[0].u;
	reply_free(&r);
	return v;
}

uint64_t
alloc(struct conn *c, uint64_t bytes)
{
	struct mpb b = {0};
	mpb_fmt(&b, "[uu]", U(0), bytes);
	uint64_t v = one_u64(c, OP_MEM_ALLOC, "MEM_ALLOC", &b);
	mpb_free(&b);
	return v;
}

uint64_t
stream_new(struct conn *c)
{
	struct mpb b = {0};
	mpb_fmt(&b, "[uiu]", U(0), (int64_t)0, U(0));
	uint64_t v = one_u64(c, OP_STREAM_CREATE, "STREAM_CREATE", &b);
	mpb_free(&b);
	return v;
}

uint64_t
module_load(struct conn *c)
{
	size_t len;
	void *img = kernels_image(&len);
	struct mpb b = {0};
	mpb_fmt(&b, "[uub]", U(0), U(0), img, len);
	free(img);
	uint64_t v = one_u64(c, OP_MODULE_LOAD, "MODULE_LOAD", &b);
	mpb_free(&b);
	return v;
}

uint64_t
function_get(struct conn *c, uint64_t m, const char *name)
{
	struct mpb b = {0};
	mpb_fmt(&b, "[us]", m, name);
	uint64_t v = one_u64(c, OP_FUNCTION_GET, "FUNCTION_GET", &b);
	mpb_free(&b);
	return v;
}

void
htod(struct conn *c, uint64_t dst, uint64_t stream, const void *p, size_t n)
{
	expect(c, OP_MEMCPY_HTOD, 0, ST_OK, NULL, "[uub]", dst, stream, p, n);
}

void
dtoh(struct conn *c, uint64_t src, uint64_t stream, void *out, size_t n)
{
	struct reply r;
	expect(c, OP_MEMCPY_DTOH, 0, ST_OK, &r, "[uuu]", src, U(n), stream);
	ck_assert_uint_eq(r.body->len, 1);
	ck_assert_int_eq(r.body->a[0].t, MP_BIN);
	ck_assert_uint_eq(r.body->a[0].len, n);
	memcpy(out, r.body->a[0].p, n);
	reply_free(&r);
}

void
launch_body(struct mpb *b, uint64_t f, uint64_t grid, uint64_t block, uint64_t stream, uint64_t flags,
	    const struct mpb *args, uint32_t count)
{
	mpb_arr(b, 7); /* [function, grid, block, shared_mem, stream, flags, args] */
	mpb_fmt(b, "u[uuu][uuu]uuu", f, grid, U(1), U(1), block, U(1), U(1), U(0), stream, flags);
	mpb_arr(b, count);
	mpb_raw(b, args->p, args->n);
}

void
msg_fill(struct mpb *m, uint64_t seq, uint64_t f, uint64_t ptr, uint32_t value, uint64_t n, uint64_t stream)
{
	struct mpb a = {0}, body = {0};
	mpb_fmt(&a, "ubb", ptr, &value, sizeof(value), &n, sizeof(n)); /* little-endian host */
	launch_body(&body, f, 1, 32, stream, 0, &a, 3);
	msg_build(m, PV, OP_LAUNCH, seq, "r", body.p, body.n);
	mpb_free(&a);
	mpb_free(&body);
}

uint64_t
launch_fill(struct conn *c, uint64_t seq, uint64_t f, uint64_t ptr, uint32_t value, uint64_t n, uint64_t stream,
	    uint64_t flags, struct reply *out)
{
	struct mpb a = {0}, body = {0}, m = {0};
	struct reply r;
	mpb_fmt(&a, "ubb", ptr, &value, sizeof(value), &n, sizeof(n));
	launch_body(&body, f, 1, 32, stream, flags, &a, 3);
	msg_build(&m, PV, OP_LAUNCH, seq, "r", body.p, body.n);
	conn_raw(c, m.p, m.n, &r);
	mpb_free(&a);
	mpb_free(&body);
	mpb_free(&m);
	ck_assert_uint_eq(r.op, OP_LAUNCH);
	uint64_t st = r.status;
	if (out)
		*out = r;
	else
		reply_free(&r);
	return st;
}

uint64_t
launch_one(struct conn *c, uint64_t f, bool as_uint, uint64_t v, uint64_t stream, uint64_t flags, struct reply *out)
{
	struct mpb a = {0}, body = {0}, m = {0};
	struct reply r;
	if (as_uint)
		mpb_uint(&a, v);
	else
		mpb_bin(&a, &v, sizeof(v));
	launch_body(&body, f, 1, 1, stream, flags, &a, 1);
	msg_build(&m, PV, OP_LAUNCH, 0, "r", body.p, body.n);
	conn_raw(c, m.p, m.n, &r);
	mpb_free(&a);
	mpb_free(&body);
	mpb_free(&m);
	uint64_t st = r.status;
	if (out)
		*out = r;
	else
		reply_free(&r);
	return st;
}

void
raw_expect(struct conn *c, const void *msg, size_t n, uint64_t status, uint64_t op)
{
	struct reply r;
	conn_raw(c, msg, n, &r);
	ck_assert_msg(r.status == status, "got %s (%s), expected %s", r.name, r.msg, st_name(status));
	ck_assert_uint_eq(r.op, op);
	reply_free(&r);
}

void
ping_ok(struct conn *c, uint64_t nonce)
{
	struct reply r;
	expect(c, OP_PING, 0, ST_OK, &r, "[u]", nonce);
	ck_assert_uint_eq(r.body->len, 1);
	ck_assert_uint_eq(r.body->a[0].u, nonce);
	reply_free(&r);
}

void
ping_flight(struct conn *c, struct flight *f, uint64_t seq)
{
	struct mpb m = {0};
	msg_build(&m, PV, OP_PING, seq, "[u]", seq);
	flight_send(c, f, m.p, m.n);
	mpb_free(&m);
}

void
flight_expect(struct flight *f, uint64_t status, uint64_t op)
{
	struct reply r;
	flight_reply(f, &r);
	ck_assert_msg(r.status == status, "op %llu: %s (%s), expected %s", (unsigned long long)op, r.name, r.msg,
		      st_name(status));
	ck_assert_uint_eq(r.op, op);
	reply_free(&r);
}

void
make_fault(struct conn *a)
{
	uint64_t bad = function_get(a, module_load(a), "bad_write"), p = alloc(a, 64);
	struct reply r;
	uint64_t st = launch_one(a, bad, true, p, 0, 0, &r);
	ck_assert_msg(st == ST_DEVICE, "bad_write: %s %s", r.name, r.msg);
	ck_assert_msg(strncmp(r.msg, "CUDA_ERROR_", 11) == 0, "the message starts with the CUDA error: %s", r.msg);
	reply_free(&r);
}
