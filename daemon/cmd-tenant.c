/*
 * cmd-tenant.c — TENANT_ADD, TENANT_SET, TENANT_REMOVE and TENANT_LIST: tenants at run time, on the operator
 * endpoint only (a scheduler's prolog gives a job its share, its epilog takes it back; issue 23).
 *
 * A tenant's rules and limits travel as the configuration file's keys and values and go through the same
 * tenant_table_set as the file's, so the file and the ops accept exactly the same things. The table is never
 * changed in place (sessions and statistics point into it): each op builds a copy, changes it, and swaps it in
 * as a reload does. The pairs a runtime tenant was made and changed with are kept on it (tenant.rkv), so that
 * a SIGHUP, which builds the table from the file again, replays them (tenant_table_replay).
 *
 * Runtime ops manage runtime tenants; the file manages its own (SET and REMOVE of a file's tenant are refused:
 * the next SIGHUP would undo them).
 */
#include "config.h"

#include "auth.h"
#include "cmd.h"
#include "cua_log.h"
#include "tenant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A wire string into a C string: -1 when it holds a NUL or does not fit (the schema bounds it already). */
static int
cstr(const cua_bytes *b, char *out, size_t cap)
{
	if (b->len >= cap || (b->len > 0 && memchr(b->ptr, '\0', b->len) != NULL)) /* "" may come as NULL */
		return -1;
	if (b->len > 0)
		memcpy(out, b->ptr, b->len);
	out[b->len] = '\0';
	return 0;
}

/* The request's tenant name, checked. 0 or BAD_ARGUMENT. */
static int
req_name(const struct request *r, char *name, size_t cap, cua_err *e)
{
	char why[256];
	if (cstr(&r->w.body.tenant.name, name, cap) != 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "the tenant's name holds a NUL byte or is too long");
	if (tenant_name_check(name, why, sizeof(why)) != 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "%s", why);
	return 0;
}

/* The tenant named name, exactly (not default's fallback), or NULL. */
static struct tenant *
find(const struct tenant_table *T, const char *name)
{
	for (size_t i = 0; i < T->n; i++)
		if (strcmp(T->v[i].name, name) == 0)
			return &T->v[i];
	return NULL;
}

/* A runtime tenant named name that SET and REMOVE may change: 0, NOT_FOUND or BAD_ARGUMENT. */
static int
find_runtime(struct fe *fe, const char *name, struct tenant **out, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	(void)tenant_table_reap(fe); /* a tenant removed earlier whose sessions have ended is gone now */
	struct tenant *t = find(fe->cfg.tenants, name);
	if (t == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no tenant '%s' (see TENANT_LIST: cuasyncctl tenant list)", name);
	if (!t->runtime)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "tenant '%s' comes from the configuration file: change [tenant %s] there and send "
				   "SIGHUP (runtime ops change only tenants made at run time)",
				   name, name);
	*out = t;
	return 0;
}

/* Appends key and value to t's replayed pairs, or replaces the value of a limit given before. 0 or -1: out of
 * memory. */
static int
rkv_push(struct tenant *t, const char *key, const char *value)
{
	/* a limit set again replaces its earlier value (rules add up): TENANT_SET in a loop does not grow it */
	for (size_t i = 0; !tenant_key_is_rule(key) && i + 1 < t->nrkv; i += 2)
		if (strcmp(t->rkv[i], key) == 0) {
			char *v = strdup(value);
			if (v == NULL)
				return -1;
			free(t->rkv[i + 1]);
			t->rkv[i + 1] = v;
			return 0;
		}
	char **v = realloc(t->rkv, (t->nrkv + 2) * sizeof(*v));
	if (v == NULL)
		return -1;
	t->rkv = v;
	if ((v[t->nrkv] = strdup(key)) == NULL)
		return -1;
	t->nrkv++;
	if ((v[t->nrkv] = strdup(value)) == NULL)
		return -1;
	t->nrkv++;
	return 0;
}

/* One pair into C's tenant name (and its replayed pairs): 0, or BAD_ARGUMENT / NO_MEMORY. */
static int
apply(struct tenant_table *C, const char *name, const char *key, const char *value, cua_err *e)
{
	char why[512];
	if (tenant_table_set(C, name, key, value, why, sizeof(why)) != 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "%s", why);
	struct tenant *t = find(C, name);
	if (t == NULL || rkv_push(t, key, value) != 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory for tenant '%s'", name);
	return 0;
}

/* The request's pairs into C's tenant name. rules: whether match rules are allowed (ADD) — counted into
 * *nrules. 0, or an error with the pair's index. */
static int
apply_pairs(const struct request *r, struct tenant_table *C, const char *name, bool rules, unsigned *nrules, cua_err *e)
{
	const struct cua_req_tenant *q = &r->w.body.tenant;
	for (uint32_t i = 0; i < q->nkv; i++) {
		char key[CUA_MAX_TENANT_KEY + 1], value[CUA_MAX_TENANT_VALUE + 1];
		if (cstr(&q->kv[i].key, key, sizeof(key)) != 0 || cstr(&q->kv[i].value, value, sizeof(value)) != 0)
			return cua_err_set(e, CUA_EBAD_ARGUMENT, "pair %u: a key or value holds a NUL byte", i);
		if (strcmp(key, "refuse") == 0)
			return cua_err_set(e, CUA_EBAD_ARGUMENT, "pair %u: refuse is [tenant default]'s, in the file",
					   i);
		if (tenant_key_is_rule(key) && !rules)
			return cua_err_set(e, CUA_EBAD_ARGUMENT,
					   "pair %u: %s says who belongs to the tenant, fixed when it was added; "
					   "TENANT_SET changes limits (remove the tenant and add it again)",
					   i, key);
		*nrules += tenant_key_is_rule(key);
		int rc = apply(C, name, key, value, e);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Whether the pool of one-session workers may be missing for C (a tenant asks for isolation = session that
 * no tenant of the table in effect, nor --isolation, asked for: only a start or a SIGHUP starts that pool). */
static bool
needs_pool(const struct fe *fe, const struct tenant_table *C) CUA_REQUIRES(cuad_fe_lock)
{
	return tenant_table_wants_session(C) && !tenant_table_wants_session(fe->cfg.tenants) &&
	       fe->cfg.isolation != ISO_SESSION;
}

/* TENANT_ADD: a new tenant from its pairs (and a one-off token when asked), swapped in at once. */
static int
v_tenant_add(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_tenant *q = &r->w.body.tenant;
	char name[CUA_MAX_TENANT_NAME + 1], rule[CUA_MAX_TENANT_TEXT];
	unsigned nrules = 0;
	int rc = req_name(r, name, sizeof(name), e);
	if (rc != 0)
		return rc;
	(void)tenant_table_reap(fe);
	const struct tenant *had = find(fe->cfg.tenants, name);
	if (had != NULL)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "tenant '%s' exists (%s%s): change its limits with TENANT_SET, or remove it first",
				   name, had->runtime ? "made at run time" : "from the configuration file",
				   had->removing ? ", being removed" : "");
	if (fe->cfg.tenants->n >= CUAD_MAX_TENANTS)
		return cua_err_set(e, CUA_EQUOTA, "the daemon has %u tenants, its most (default included): remove one",
				   (unsigned)CUAD_MAX_TENANTS);
	struct tenant_table *C = tenant_table_clone(fe->cfg.tenants);
	if (C == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of memory for the tenant table");
	if ((rc = apply_pairs(r, C, name, true, &nrules, e)) == 0 && (q->flags & CUA_TENANT_ONE_OFF_TOKEN))
		rc = apply(C, name, "token", name, e), nrules++;
	if (rc == 0 && nrules == 0)
		rc = cua_err_set(e, CUA_EBAD_ARGUMENT,
				 "tenant '%s' has no rule saying who belongs to it: give uid, user, group, subject or "
				 "token, or ask for a one-off token",
				 name);
	if (rc == 0 && needs_pool(fe, C))
		rc = cua_err_set(e, CUA_EUNSUPPORTED,
				 "isolation = session needs the pool of one-session workers, which starts only at "
				 "start "
				 "or SIGHUP: name a tenant with isolation = session in the file first");
	struct tenant *t = rc == 0 ? find(C, name) : NULL;
	if (rc == 0 && t == NULL) /* a rule was applied, so it was made */
		rc = cua_err_set(e, CUA_EINTERNAL, "tenant '%s' was not made", name);
	char tok[2 * 32 + 1] = "";
	if (rc == 0 && (q->flags & CUA_TENANT_ONE_OFF_TOKEN))
		rc = auth_token_add(fe, name, tok, sizeof(tok), e);
	if (rc == 0 && (r->token = cua_pool_strdup(r->pool, tok)) == NULL) {
		auth_token_remove(fe, name);
		rc = cua_err_set(e, CUA_ENOMEM, "out of memory for the token");
	}
	explicit_bzero(tok, sizeof(tok));
	if (rc != 0 || t == NULL) {
		tenant_table_free(C);
		return rc;
	}
	t->runtime = true;
	log_info("tenant %s: added at run time by operator session %llu (%s)", name, (unsigned long long)r->s->id,
		 tenant_rule_text(t, rule, sizeof(rule)));
	tenant_table_swap(fe, C);
	return 0;
}

static int
r_tenant_add(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	(void)scratch;
	const char *tok = r->token ? r->token : "";
	b->tenant_add.token = (cua_bytes){tok, (uint32_t)strlen(tok)};
	return 0;
}

/* TENANT_SET: new limits for a runtime tenant. Its sessions get them at once: what they ask for next is checked
 * against them; what they hold past a lowered limit stays (nothing is revoked), and nothing new is granted
 * until they are back under it. */
static int
v_tenant_set(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	char name[CUA_MAX_TENANT_NAME + 1];
	struct tenant *t;
	unsigned nrules = 0;
	int rc = req_name(r, name, sizeof(name), e);
	if (rc != 0 || (rc = find_runtime(fe, name, &t, e)) != 0)
		return rc;
	if (t->removing)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "tenant '%s' is being removed", name);
	if (r->w.body.tenant.nkv == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "TENANT_SET without a key: nothing to change");
	struct tenant_table *C = tenant_table_clone(fe->cfg.tenants);
	if (C == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of memory for the tenant table");
	if ((rc = apply_pairs(r, C, name, false, &nrules, e)) == 0 && needs_pool(fe, C))
		rc = cua_err_set(e, CUA_EUNSUPPORTED,
				 "isolation = session needs the pool of one-session workers, which starts only at "
				 "start "
				 "or SIGHUP: name a tenant with isolation = session in the file first");
	if (rc != 0) {
		tenant_table_free(C);
		return rc;
	}
	log_info("tenant %s: limits changed at run time by operator session %llu", name, (unsigned long long)r->s->id);
	tenant_table_swap(fe, C);
	return 0;
}

/* TENANT_REMOVE: the tenant claims no new session (tenant_match) and its sessions get no new object; without drain its sessions
 * are disconnected (as DISCONNECT: closed within a second, then cleaned up as when a client crashes). It goes
 * from the table when its last session has ended; until then TENANT_LIST shows it as removing. */
static int
v_tenant_remove(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	char name[CUA_MAX_TENANT_NAME + 1];
	struct tenant *t;
	bool drain = (r->w.body.tenant.flags & CUA_TENANT_DRAIN) != 0;
	int rc = req_name(r, name, sizeof(name), e);
	if (rc != 0 || (rc = find_runtime(fe, name, &t, e)) != 0)
		return rc;
	if (!t->removing) {
		struct tenant_table *C = tenant_table_clone(fe->cfg.tenants);
		if (C == NULL)
			return cua_err_set(e, CUA_ENOMEM, "out of memory for the tenant table");
		struct tenant *c = find(C, name);
		if (c == NULL) { /* a copy has every tenant */
			tenant_table_free(C);
			return cua_err_set(e, CUA_EINTERNAL, "tenant '%s' missing from the copy", name);
		}
		c->removing = true;
		tenant_table_swap(fe, C);
		if ((t = find(fe->cfg.tenants, name)) == NULL)
			return cua_err_set(e, CUA_EINTERNAL, "tenant '%s' missing after the swap", name);
	}
	auth_token_remove(fe, name);
	unsigned kicked = 0;
	struct session *s;
	TAILQ_FOREACH(s, &fe->sessions, link)
	if (!drain && s->tenant == t && !s->closing && !s->pipe_gone && !s->kicked) {
		s->kicked = true; /* the edge closes it within a second (request_hello_overdue) */
		kicked++;
	}
	log_info("tenant %s: removed by operator session %llu (%s; %u sessions disconnected)", name,
		 (unsigned long long)r->s->id, drain ? "drain: its sessions finish their work" : "disconnect", kicked);
	(void)tenant_table_reap(fe);
	return 0;
}

/* ---- TENANT_LIST */

enum lim_kind { LK_U32, LK_BYTES, LK_MEM, LK_WEIGHT, LK_ISOLATION };
/* A tenant's limits as the file's keys, in the file's order (cuasyncd.conf(5)); only those set are listed. */
static const struct lim_row {
	const char *key;
	size_t off;
	enum lim_kind kind;
} lim_rows[] = {
	{"mem", offsetof(struct tenant, mem), LK_MEM},
	{"modules", offsetof(struct tenant, modules), LK_U32},
	{"module-bytes", offsetof(struct tenant, module_bytes), LK_BYTES},
	{"streams", offsetof(struct tenant, streams), LK_U32},
	{"host-bytes", offsetof(struct tenant, host_bytes), LK_BYTES},
	{"graph-bytes", offsetof(struct tenant, graph_bytes), LK_BYTES},
	{"sessions", offsetof(struct tenant, sessions), LK_U32},
	{"workers", offsetof(struct tenant, workers), LK_U32},
	{"in-flight", offsetof(struct tenant, in_flight), LK_U32},
	{"weight", offsetof(struct tenant, weight), LK_WEIGHT},
	{"isolation", offsetof(struct tenant, isolation), LK_ISOLATION},
};
#define NLIM (sizeof(lim_rows) / sizeof(lim_rows[0]))
#define LIM_VALUE 32 /* room for one value's text */

/* The value of row for t into buf; false when it is not set (no limit, the default weight or isolation). */
static bool
lim_value(const struct lim_row *row, const struct tenant *t, char *buf, size_t len)
{
	const char *p = (const char *)t + row->off;
	uint32_t u32;
	uint64_t u64;
	int iso;
	switch (row->kind) { /* five kinds of field: a switch reads plainer than a table of printers */
	case LK_U32:
	case LK_WEIGHT:
		memcpy(&u32, p, sizeof(u32));
		if (u32 == 0 || (row->kind == LK_WEIGHT && u32 == 1))
			return false;
		snprintf(buf, len, "%u", u32);
		return true;
	case LK_BYTES:
		memcpy(&u64, p, sizeof(u64));
		snprintf(buf, len, "%llu", (unsigned long long)u64);
		return u64 != 0;
	case LK_MEM:
		if (t->mem != 0)
			snprintf(buf, len, "%llu", (unsigned long long)t->mem);
		else
			snprintf(buf, len, "%u%%", t->mem_pct);
		return t->mem != 0 || t->mem_pct != 0;
	case LK_ISOLATION:
		memcpy(&iso, p, sizeof(iso));
		snprintf(buf, len, "%s", iso == ISO_SESSION ? "session" : "shared");
		return iso >= 0;
	}
	return false;
}

static cua_bytes
str_bytes(const char *s)
{
	return (cua_bytes){s, (uint32_t)strlen(s)};
}

/* The scratch of one reply: its rows, their pairs and texts, in one allocation (freed after the reply). */
struct list_scratch {
	cua_wire_tenant rows[CUAD_MAX_TENANTS];
	cua_wire_kv kv[CUAD_MAX_TENANTS][NLIM];
	char values[CUAD_MAX_TENANTS][NLIM][LIM_VALUE];
	char rule[CUAD_MAX_TENANTS][CUA_MAX_TENANT_TEXT];
};

/* One tenant's row: its name, where it comes from, its rules and limits, and what its sessions use now. */
static void
list_row(struct fe *fe, const struct tenant *t, struct list_scratch *S, size_t i) CUA_REQUIRES(cuad_fe_lock)
{
	cua_wire_tenant *w = &S->rows[i];
	const struct session *s;
	*w = (cua_wire_tenant){.name = str_bytes(t->name),
			       .source = str_bytes(t->runtime ? "runtime" : "file"),
			       .rule = str_bytes(tenant_rule_text(t, S->rule[i], sizeof(S->rule[i]))),
			       .limits = S->kv[i],
			       .removing = t->removing};
	for (size_t k = 0; k < NLIM; k++)
		if (lim_value(&lim_rows[k], t, S->values[i][w->nlimits], LIM_VALUE)) {
			S->kv[i][w->nlimits] =
				(cua_wire_kv){str_bytes(lim_rows[k].key), str_bytes(S->values[i][w->nlimits])};
			w->nlimits++;
		}
	TAILQ_FOREACH(s, &fe->sessions, link)
	{
		if (s->tenant != t)
			continue;
		w->sessions += s->hello && !s->closing && !s->pipe_gone;
		for (int d = 0; d < fe->ndevs && d < (int)CUA_MAX_DEVICES; d++)
			w->mem_bytes += s->dev_bytes[d];
		w->streams += s->counts.streams;
	}
}

/* TENANT_LIST: every tenant, in the table's order (the file's, then those made at run time). */
static int
r_tenant_list(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch) CUA_REQUIRES(cuad_fe_lock)
{
	(void)r;
	(void)tenant_table_reap(fe);
	const struct tenant_table *T = fe->cfg.tenants;
	struct list_scratch *S = calloc(1, sizeof(*S));
	if (S == NULL)
		return CUA_ENOMEM;
	for (size_t i = 0; i < T->n && i < CUAD_MAX_TENANTS; i++)
		list_row(fe, &T->v[i], S, i);
	*scratch = S;
	b->tenant_list = (struct cua_rep_tenant_list){S->rows, (uint32_t)T->n};
	return 0;
}

static int
v_list(struct fe *fe, struct request *r, cua_err *e)
{
	(void)fe;
	(void)r;
	(void)e;
	return 0;
}

const struct cmd_entry cmd_tenant_add_entry = {.op = CUA_OP_TENANT_ADD,
					       .flags = CMD_HELLO | CMD_OPERATOR,
					       .family = SF_OPERATOR,
					       .wrec = WR_NONE,
					       .validate = v_tenant_add,
					       .reply = r_tenant_add};
const struct cmd_entry cmd_tenant_set_entry = {.op = CUA_OP_TENANT_SET,
					       .flags = CMD_HELLO | CMD_OPERATOR,
					       .family = SF_OPERATOR,
					       .wrec = WR_NONE,
					       .validate = v_tenant_set};
const struct cmd_entry cmd_tenant_remove_entry = {.op = CUA_OP_TENANT_REMOVE,
						  .flags = CMD_HELLO | CMD_OPERATOR,
						  .family = SF_OPERATOR,
						  .wrec = WR_NONE,
						  .validate = v_tenant_remove};
const struct cmd_entry cmd_tenant_list_entry = {.op = CUA_OP_TENANT_LIST,
						.flags = CMD_HELLO | CMD_OPERATOR,
						.family = SF_OPERATOR,
						.wrec = WR_NONE,
						.validate = v_list,
						.reply = r_tenant_list};
