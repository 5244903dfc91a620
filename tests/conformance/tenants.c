/*
 * tenants.c — conformance cases of tenants at run time (PROTOCOL.md "Tenants at run time"): TENANT_ADD,
 * TENANT_SET, TENANT_REMOVE and TENANT_LIST on the operator endpoint, and hostile input against them while a
 * well-behaved client beside is served.
 *
 *   [R:tenant-operator] [R:tenant-add] [R:tenant-hostile] [R:tenant-set-remove]
 */
#include "config.h"

#include "rules.h"

#include <stdio.h>
#include <string.h>

#define D conf_dmn

/* The row of tenant name in a TENANT_LIST reply r, or NULL. */
static const struct mpv *
list_row(const struct reply *r, const char *name)
{
	const struct mpv *rows = &r->body->a[0];
	for (uint32_t i = 0; i < rows->len; i++) {
		const struct mpv *n = &rows->a[i].a[0];
		if (n->len == strlen(name) && memcmp(n->p, name, n->len) == 0)
			return &rows->a[i];
	}
	return NULL;
}

static bool
str_is(const struct mpv *v, const char *s)
{
	return v->len == strlen(s) && memcmp(v->p, s, v->len) == 0;
}

/* Every tenant op is the operator endpoint's alone: a client gets PERMISSION_DENIED, as for DISCONNECT. */
START_TEST(r_tenant_operator)
{
	struct conn a, op;
	struct reply r;
	sess(&a, &D);
	sess_operator(&op, &D);
	expect(&a, OP_TENANT_ADD, 0, ST_PERMISSION_DENIED, NULL, "[s[[ss]]u]", "mine", "uid", "0", U(0));
	expect(&a, OP_TENANT_SET, 0, ST_PERMISSION_DENIED, NULL, "[s[[ss]]]", "default", "mem", "1M");
	expect(&a, OP_TENANT_REMOVE, 0, ST_PERMISSION_DENIED, NULL, "[su]", "default", U(0));
	expect(&a, OP_TENANT_LIST, 0, ST_PERMISSION_DENIED, NULL, "[]");
	expect(&op, OP_TENANT_LIST, 0, ST_OK, &r, "[]");
	ck_assert_uint_eq(r.body->a[0].len, 1); /* default alone: the client's ADD changed nothing */
	ck_assert_ptr_nonnull(list_row(&r, "default"));
	reply_free(&r);
	conn_close(&a);
	conn_close(&op);
}
END_TEST

/* TENANT_ADD: a tenant from the file's keys; with flags 1 a one-off token of 64 hex digits, once. */
START_TEST(r_tenant_add)
{
	struct conn op;
	struct reply r;
	sess_operator(&op, &D);
	expect(&op, OP_TENANT_ADD, 0, ST_OK, &r, "[s[[ss][ss][ss]]u]", "job-1", "uid", "4242424", "mem", "1M", "weight",
	       "3", U(0));
	ck_assert_uint_eq(r.body->len, 1);
	ck_assert_uint_eq(r.body->a[0].len, 0); /* no token asked for */
	reply_free(&r);
	expect(&op, OP_TENANT_ADD, 0, ST_OK, &r, "[s[[ss]]u]", "ns/pod-2", "streams", "2", U(1));
	ck_assert_uint_eq(r.body->a[0].len, 64);
	char tok[65];
	memcpy(tok, r.body->a[0].p, 64);
	tok[64] = '\0';
	ck_assert_uint_eq(strspn(tok, "0123456789abcdef"), 64);
	reply_free(&r);
	expect(&op, OP_TENANT_LIST, 0, ST_OK, &r, "[]");
	const struct mpv *row = list_row(&r, "job-1");
	ck_assert_ptr_nonnull(row);
	ck_assert_uint_eq(row->len, 8); /* name, source, rule, limits, removing, sessions, mem_bytes, streams */
	ck_assert(str_is(&row->a[1], "runtime"));
	ck_assert(str_is(&row->a[2], "uid 4242424"));
	ck_assert_uint_eq(row->a[3].len, 2); /* mem, weight */
	ck_assert(str_is(&row->a[3].a[0].a[0], "mem") && str_is(&row->a[3].a[0].a[1], "1048576"));
	ck_assert(str_is(&row->a[3].a[1].a[0], "weight") && str_is(&row->a[3].a[1].a[1], "3"));
	row = list_row(&r, "ns/pod-2");
	ck_assert_ptr_nonnull(row);
	ck_assert(str_is(&row->a[2], "token ns/pod-2")); /* the one-off token's name is the tenant's */
	reply_free(&r);
	conn_close(&op);
}
END_TEST

/* Hostile input: each refused with a stable name and a message, nothing half-made, the client beside served. */
START_TEST(r_tenant_hostile)
{
	struct conn a, op;
	struct reply r;
	char name[80];
	sess(&a, &D);
	sess_operator(&op, &D);
	static const char *const bad_names[] = {"", "default", "a b", "x;rm -rf", "\x1b[31m", "a\"b"};
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
		expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, NULL, "[s[[ss]]u]", bad_names[i], "uid", "1", U(0));
	memset(name, 'a', 65); /* past the schema's str≤64: TOO_LARGE, as any value over a limit */
	name[65] = '\0';
	expect(&op, OP_TENANT_ADD, 0, ST_TOO_LARGE, NULL, "[s[[ss]]u]", name, "uid", "1", U(0));
	expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, &r, "[s[[ss]]u]", "t", "memory", "1M", U(0));
	ck_assert_msg(strstr(r.msg, "unknown key 'memory'") != NULL, "%s", r.msg);
	reply_free(&r);
	expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, &r, "[s[[ss][ss]]u]", "t", "uid", "1", "mem", "lots", U(0));
	ck_assert_msg(strstr(r.msg, "invalid value 'lots' for mem") != NULL, "%s", r.msg);
	reply_free(&r);
	expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, NULL, "[s[[ss][ss]]u]", "t", "uid", "1", "weight", "0", U(0));
	expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, NULL, "[s[[ss][ss]]u]", "t", "uid", "1", "isolation", "x", U(0));
	expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, NULL, "[s[[ss]]u]", "t", "refuse", "yes", U(0));
	expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, &r, "[s[[ss]]u]", "t", "mem", "1M", U(0));
	ck_assert_msg(strstr(r.msg, "no rule") != NULL, "a tenant nobody belongs to: %s", r.msg);
	reply_free(&r);
	expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, NULL, "[s[[ss]]u]", "t", "user", "no-such-user-here", U(0));
	expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, NULL, "[s[[sr]]u]", "t", "uid",
	       "\xa2"
	       "1\0",
	       (size_t)3, U(0)); /* a str of 2 bytes, "1" and a NUL */
	expect(&op, OP_TENANT_ADD, 0, ST_PROTOCOL, NULL, "[s[[ss]]u]", "t", "uid", "1", U(2)); /* flags: 1 at most */
	expect(&op, OP_TENANT_ADD, 0, ST_PROTOCOL, NULL, "[s[[s]]u]", "t", "uid", U(0));       /* a pair of one */
	expect(&a, OP_PING, 0, ST_OK, NULL, "[u]", U(7));
	/* nothing of the above was made */
	expect(&op, OP_TENANT_LIST, 0, ST_OK, &r, "[]");
	ck_assert_uint_eq(r.body->a[0].len, 1);
	reply_free(&r);
	/* CUAD_MAX_TENANTS (256, default included): the 256th added is QUOTA */
	for (unsigned i = 0; i < 255; i++) {
		snprintf(name, sizeof(name), "t%u", i);
		expect(&op, OP_TENANT_ADD, 0, ST_OK, NULL, "[s[[ss]]u]", name, "uid", "4242424", U(0));
	}
	expect(&op, OP_TENANT_ADD, 0, ST_QUOTA, NULL, "[s[[ss]]u]", "one-too-many", "uid", "4242424", U(0));
	expect(&op, OP_TENANT_ADD, 0, ST_BAD_ARGUMENT, NULL, "[s[[ss]]u]", "t7", "uid", "1", U(0)); /* in use */
	expect(&a, OP_PING, 0, ST_OK, NULL, "[u]", U(8));
	conn_close(&a);
	conn_close(&op);
}
END_TEST

/* TENANT_SET changes limits (not rules) of a runtime tenant; TENANT_REMOVE takes it away; NOT_FOUND else. */
START_TEST(r_tenant_set_remove)
{
	struct conn op;
	struct reply r;
	sess_operator(&op, &D);
	expect(&op, OP_TENANT_SET, 0, ST_NOT_FOUND, NULL, "[s[[ss]]]", "job-1", "mem", "2M");
	expect(&op, OP_TENANT_REMOVE, 0, ST_NOT_FOUND, NULL, "[su]", "job-1", U(0));
	expect(&op, OP_TENANT_SET, 0, ST_BAD_ARGUMENT, NULL, "[s[[ss]]]", "default", "mem", "2M"); /* not made here */
	expect(&op, OP_TENANT_ADD, 0, ST_OK, NULL, "[s[[ss]]u]", "job-1", "uid", "4242424", U(0));
	expect(&op, OP_TENANT_SET, 0, ST_OK, NULL, "[s[[ss][ss]]]", "job-1", "mem", "2M", "streams", "5");
	expect(&op, OP_TENANT_SET, 0, ST_BAD_ARGUMENT, NULL, "[s[[ss]]]", "job-1", "uid", "0"); /* who: fixed */
	expect(&op, OP_TENANT_SET, 0, ST_BAD_ARGUMENT, NULL, "[s[[ss]]]", "job-1", "streams", "-1");
	expect(&op, OP_TENANT_SET, 0, ST_BAD_ARGUMENT, NULL, "[s[]]", "job-1");
	expect(&op, OP_TENANT_LIST, 0, ST_OK, &r, "[]");
	const struct mpv *row = list_row(&r, "job-1");
	ck_assert_ptr_nonnull(row);
	ck_assert_uint_eq(row->a[3].len, 2);
	ck_assert(str_is(&row->a[3].a[0].a[1], "2097152") && str_is(&row->a[3].a[1].a[1], "5"));
	reply_free(&r);
	expect(&op, OP_TENANT_REMOVE, 0, ST_PROTOCOL, NULL, "[su]", "job-1", U(2)); /* flags: 1 at most */
	expect(&op, OP_TENANT_REMOVE, 0, ST_OK, NULL, "[su]", "job-1", U(0));
	expect(&op, OP_TENANT_LIST, 0, ST_OK, &r, "[]");
	ck_assert_ptr_null(list_row(&r, "job-1")); /* no session: gone at once */
	reply_free(&r);
	expect(&op, OP_TENANT_REMOVE, 0, ST_NOT_FOUND, NULL, "[su]", "job-1", U(0));
	conn_close(&op);
}
END_TEST

size_t
tenant_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"tenant-operator", r_tenant_operator},
		{"tenant-add", r_tenant_add},
		{"tenant-hostile", r_tenant_hostile},
		{"tenant-set-remove", r_tenant_set_remove},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
