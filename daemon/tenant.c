/*
 * tenant.c — tenants (see tenant.h).
 */
#include "config.h"

#include "cua_log.h"
#include "devlink.h"
#include "session.h"
#include "tenant.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
tenant_fini(struct tenant *t)
{
	free(t->name);
	free(t->uids);
	free(t->gids);
	free(t->member_uids);
	for (size_t i = 0; i < t->nsubjects; i++)
		free(t->subjects[i]);
	for (size_t i = 0; i < t->ntokens; i++)
		free(t->tokens[i]);
	free(t->subjects);
	free(t->tokens);
	for (size_t i = 0; i < t->nrkv; i++)
		free(t->rkv[i]);
	free(t->rkv);
}

/* The tenant called name, appended when new (kept before an implicit default). NULL: out of memory. */
static struct tenant *
tenant_get(struct tenant_table *T, const char *name)
{
	for (size_t i = 0; i < T->n; i++)
		if (strcmp(T->v[i].name, name) == 0)
			return &T->v[i];
	if (T->n == CUAD_MAX_TENANTS)
		return NULL;
	struct tenant *v = realloc(T->v, (T->n + 1) * sizeof(*v));
	if (v == NULL)
		return NULL;
	T->v = v;
	struct tenant t = {.name = strdup(name), .isolation = -1, .weight = 1};
	if (t.name == NULL)
		return NULL;
	v[T->n++] = t;
	for (size_t i = 0; i < T->n; i++)
		if (strcmp(v[i].name, "default") == 0)
			T->def = &v[i];
	return &v[T->n - 1];
}

struct tenant_table *
tenant_table_new(void)
{
	struct tenant_table *T = calloc(1, sizeof(*T));
	if (T != NULL && tenant_get(T, "default") == NULL) {
		tenant_table_free(T);
		return NULL;
	}
	return T;
}

void
tenant_table_free(struct tenant_table *T)
{
	if (T == NULL)
		return;
	for (size_t i = 0; i < T->n; i++)
		tenant_fini(&T->v[i]);
	free(T->v);
	free(T);
}

static int
push_u32(uint32_t **v, size_t *n, uint32_t x)
{
	uint32_t *p = realloc(*v, (*n + 1) * sizeof(*p));
	if (p == NULL)
		return -1;
	p[(*n)++] = x;
	*v = p;
	return 0;
}

static int
push_str(char ***v, size_t *n, const char *s)
{
	char **p = realloc(*v, (*n + 1) * sizeof(*p));
	if (p == NULL)
		return -1;
	*v = p;
	if ((p[*n] = strdup(s)) == NULL)
		return -1;
	(*n)++;
	return 0;
}

/* A count of a tenant's rule: 0..UINT32_MAX. */
static int
parse_u32(const char *s, uint32_t *out)
{
	unsigned v;
	if (cfg_parse_uint(s, 0, UINT32_MAX, &v) != 0)
		return -1;
	*out = v;
	return 0;
}

/* `user = NAME` or `uid = N`. */
static int
add_user(struct tenant *t, const char *v, bool by_name, char *why, size_t whylen)
{
	uint32_t uid;
	if (!by_name && parse_u32(v, &uid) != 0) {
		snprintf(why, whylen, "uid: '%s' is not a number", v);
		return -1;
	}
	if (by_name) {
		struct passwd *pw = getpwnam(v);
		if (pw == NULL) {
			snprintf(why, whylen, "user: no user '%s' in the user database", v);
			return -1;
		}
		uid = (uint32_t)pw->pw_uid;
	}
	return push_u32(&t->uids, &t->nuids, uid);
}

/* `group = NAME|GID`: the group's id, and the uids of its listed members (resolved now, not under a lock). */
static int
add_group(struct tenant *t, const char *v, char *why, size_t whylen)
{
	uint32_t gid;
	struct group *gr = parse_u32(v, &gid) == 0 ? getgrgid((gid_t)gid) : getgrnam(v);
	if (gr == NULL) {
		snprintf(why, whylen, "group: no group '%s' in the group database", v);
		return -1;
	}
	if (push_u32(&t->gids, &t->ngids, (uint32_t)gr->gr_gid) != 0)
		return -1;
	for (char **m = gr->gr_mem; m && *m; m++) {
		struct passwd *pw = getpwnam(*m);
		if (pw != NULL && push_u32(&t->member_uids, &t->nmember_uids, (uint32_t)pw->pw_uid) != 0)
			return -1;
	}
	return 0;
}

int
tenant_table_set(struct tenant_table *T, const char *name, const char *key, const char *v, char *why, size_t whylen)
{
	struct tenant *t = strlen(name) <= CUA_MAX_TENANT_NAME ? tenant_get(T, name) : NULL;
	int rc = -1;
	if (t == NULL) {
		snprintf(why, whylen, "more than %d tenants, a name over %u bytes, or out of memory", CUAD_MAX_TENANTS,
			 CUA_MAX_TENANT_NAME);
		return -1;
	}
	bool is_default = strcmp(name, "default") == 0;
	if (strcmp(key, "uid") == 0 || strcmp(key, "user") == 0)
		return is_default ? (snprintf(why, whylen, "default: holds whoever matches no other tenant"), -1)
				  : add_user(t, v, strcmp(key, "user") == 0, why, whylen);
	if (strcmp(key, "group") == 0)
		return is_default ? (snprintf(why, whylen, "default: holds whoever matches no other tenant"), -1)
				  : add_group(t, v, why, whylen);
	if (strcmp(key, "subject") == 0)
		rc = push_str(&t->subjects, &t->nsubjects, v);
	else if (strcmp(key, "token") == 0)
		rc = push_str(&t->tokens, &t->ntokens, v);
	else if (strcmp(key, "refuse") == 0 && is_default)
		rc = strcmp(v, "yes") == 0 ? (t->refuse = true, 0) : strcmp(v, "no") == 0 ? (t->refuse = false, 0) : -1;
	else if (strcmp(key, "mem") == 0)
		rc = cfg_parse_share(v, &t->mem, &t->mem_pct);
	else if (strcmp(key, "module-bytes") == 0)
		rc = cfg_parse_size(v, &t->module_bytes);
	else if (strcmp(key, "host-bytes") == 0)
		rc = cfg_parse_size(v, &t->host_bytes);
	else if (strcmp(key, "graph-bytes") == 0)
		rc = cfg_parse_size(v, &t->graph_bytes);
	else if (strcmp(key, "workers") == 0)
		rc = parse_u32(v, &t->workers);
	else if (strcmp(key, "modules") == 0)
		rc = parse_u32(v, &t->modules);
	else if (strcmp(key, "streams") == 0)
		rc = parse_u32(v, &t->streams);
	else if (strcmp(key, "sessions") == 0)
		rc = parse_u32(v, &t->sessions);
	else if (strcmp(key, "in-flight") == 0)
		rc = parse_u32(v, &t->in_flight);
	else if (strcmp(key, "weight") == 0)
		rc = parse_u32(v, &t->weight) || t->weight < 1 || t->weight > 1000 ? -1 : 0;
	else if (strcmp(key, "isolation") == 0)
		rc = strcmp(v, "session") == 0  ? (t->isolation = ISO_SESSION, 0)
		     : strcmp(v, "shared") == 0 ? (t->isolation = ISO_SHARED, 0)
						: -1;
	else {
		snprintf(why, whylen,
			 "unknown key '%s' in [tenant %s] (who: uid, user, group, subject, token; limits: mem, "
			 "modules, module-bytes, streams, host-bytes, graph-bytes, sessions, workers, in-flight; "
			 "weight, isolation%s)",
			 key, name, is_default ? "; refuse" : "");
		return -1;
	}
	if (rc != 0)
		snprintf(why, whylen, "invalid value '%s' for %s in [tenant %s]", v, key, name);
	return rc;
}

static bool
has_u32(const uint32_t *v, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static bool
has_str(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; s != NULL && i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

static bool
matches(const struct tenant *t, const struct peer_identity *id)
{
	if (id->has_uid && (has_u32(t->uids, t->nuids, id->uid) || has_u32(t->gids, t->ngids, id->gid) ||
			    has_u32(t->member_uids, t->nmember_uids, id->uid)))
		return true;
	return has_str(t->subjects, t->nsubjects, id->subject) || has_str(t->tokens, t->ntokens, id->token);
}

bool
tenant_table_wants_session(const struct tenant_table *T)
{
	for (size_t i = 0; T != NULL && i < T->n; i++)
		if (T->v[i].isolation == ISO_SESSION)
			return true;
	return false;
}

struct tenant *
tenant_match(const struct tenant_table *T, const struct peer_identity *id)
{
	for (size_t i = 0; i < T->n; i++) /* a tenant being removed claims no new session (a job's next tenant may) */
		if (&T->v[i] != T->def && !T->v[i].removing && matches(&T->v[i], id))
			return &T->v[i];
	return T->def->refuse ? NULL : T->def;
}

struct tenant *
tenant_by_name(const struct tenant_table *T, const char *name)
{
	for (size_t i = 0; i < T->n; i++)
		if (strcmp(T->v[i].name, name) == 0)
			return &T->v[i];
	return T->def;
}

/* A memory limit as configured: "N%" of each device, or bytes. */
static const char *
mem_text(uint64_t bytes, unsigned pct, char *buf, size_t len)
{
	if (bytes != 0)
		snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
	else if (pct != 0)
		snprintf(buf, len, "%u%% of the device's memory", pct);
	else
		snprintf(buf, len, "no limit");
	return buf;
}

void
tenant_table_log_mem(const struct tenant_table *T, const struct config *c)
{
	char tmem[64], smem[64];
	for (size_t i = 0; T != NULL && i < T->n; i++) {
		const struct tenant *t = &T->v[i];
		if (t->mem == 0 && t->mem_pct == 0)
			continue;
		/* Both hold: a tenant's mem is its sessions' total, never one session's allowance. When they are of
		 * one kind the log says whether one session alone can reach the tenant's limit. */
		bool capped = (c->session_mem != 0 && t->mem != 0 && c->session_mem < t->mem) ||
			      (c->session_mem == 0 && c->session_mem_pct != 0 && t->mem_pct != 0 &&
			       c->session_mem_pct < t->mem_pct);
		log_info("tenant %s: its sessions together may hold %s on each device (mem); each session at most %s "
			 "(--session-mem)%s",
			 t->name, mem_text(t->mem, t->mem_pct, tmem, sizeof(tmem)),
			 mem_text(c->session_mem, c->session_mem_pct, smem, sizeof(smem)),
			 capped ? ": one session alone cannot reach the tenant's limit (raise session-mem for that)"
				: "");
	}
}

/* t's live sessions (said HELLO, not closing). */
static uint64_t
sessions_of(struct fe *fe, const struct tenant *t) CUA_REQUIRES(cuad_fe_lock)
{
	const struct session *s;
	uint64_t n = 0;
	TAILQ_FOREACH(s, &fe->sessions, link)
	n += s->tenant == t && s->hello && !s->closing && !s->pipe_gone;
	return n;
}

int
tenant_check_inflight(struct fe *fe, const struct session *s, cua_err *e)
{
	const struct tenant *t = s->tenant;
	if (t == NULL || t->in_flight == 0) /* the walk below is paid only by tenants with this limit */
		return 0;
	uint64_t n = 0;
	const struct session *o;
	TAILQ_FOREACH(o, &fe->sessions, link)
	if (o->tenant == t && !o->closing && !o->pipe_gone)
		n += o->queued + o->in_flight;
	if (n < t->in_flight)
		return 0;
	return cua_err_set(e, CUA_EQUOTA,
			   "tenant '%s''s sessions have %llu requests queued or running, its limit; wait for some to "
			   "complete, or raise `in-flight` in [tenant %s]",
			   t->name, (unsigned long long)n, t->name);
}

int
tenant_check_session(struct fe *fe, const struct tenant *t, cua_err *e)
{
	if (t->removing)
		return cua_err_set(e, CUA_EPERMISSION_DENIED,
				   "tenant '%s' is being removed (TENANT_REMOVE): it takes no new session; ask the "
				   "operator (cuasyncctl tenant list)",
				   t->name);
	if (t->sessions == 0)
		return 0;
	uint64_t n = sessions_of(fe, t);
	if (n < t->sessions)
		return 0;
	return cua_err_set(e, CUA_EQUOTA,
			   "tenant '%s' has %llu sessions, its limit; close one, or raise `sessions` in [tenant %s]",
			   t->name, (unsigned long long)n, t->name);
}

void
tenant_account(struct fe *fe, struct session *s, uint64_t busy_ns)
{
	struct tenant *t = s->tenant;
	(void)fe;
	s->busy_ns += busy_ns;
	if (t == NULL || busy_ns == 0)
		return;
	t->busy_ns += busy_ns;
	t->vt += busy_ns / t->weight;
}

void
tenant_pass_begin(struct fe *fe)
{
	struct tenant_table *T = fe->cfg.tenants;
	const struct session *s;
	if (T == NULL || T->n < 2) { /* the default tenant alone: nothing to weigh (and no walk of the sessions) */
		if (T != NULL)
			T->contended = false;
		return;
	}
	bool was[CUAD_MAX_TENANTS];
	for (size_t i = 0; i < T->n; i++) {
		was[i] = T->v[i].backlogged;
		T->v[i].backlogged = false;
	}
	TAILQ_FOREACH(s, &fe->sessions, link)
	if (s->tenant != NULL && (s->queued > 0 || s->in_flight > 0))
		s->tenant->backlogged = true;
	/* the least virtual time of those busy already; tenants back from idle start there */
	uint64_t vmin = UINT64_MAX, all = UINT64_MAX;
	unsigned busy = 0;
	for (size_t i = 0; i < T->n; i++) {
		const struct tenant *t = &T->v[i];
		if (!t->backlogged)
			continue;
		busy++;
		all = t->vt < all ? t->vt : all;
		if (was[i])
			vmin = t->vt < vmin ? t->vt : vmin;
	}
	if (vmin == UINT64_MAX)
		vmin = all;
	for (size_t i = 0; i < T->n; i++) {
		struct tenant *t = &T->v[i];
		if (t->backlogged && !was[i] && t->vt < vmin)
			t->vt = vmin;
	}
	T->vmin = vmin;
	T->contended = busy >= 2;
}

bool
tenant_may_dispatch(const struct fe *fe, const struct session *s)
{
	const struct tenant_table *T = fe->cfg.tenants;
	const struct tenant *t = s->tenant;
	return T == NULL || !T->contended || t == NULL || t->vt <= T->vmin + TENANT_SLACK_NS;
}

void
tenant_table_carry(struct tenant_table *T, const struct tenant_table *old)
{
	for (size_t i = 0; old != NULL && i < T->n; i++)
		for (size_t k = 0; k < old->n; k++)
			if (strcmp(T->v[i].name, old->v[k].name) == 0) {
				T->v[i].busy_ns = old->v[k].busy_ns;
				T->v[i].vt = old->v[k].vt;
				T->v[i].backlogged = old->v[k].backlogged;
			}
}

/* ------------------------------------------------------------------ tenants at run time */

static int
dup_u32(uint32_t **dst, const uint32_t *src, size_t n)
{
	*dst = NULL;
	if (n == 0)
		return 0;
	if ((*dst = malloc(n * sizeof(**dst))) == NULL)
		return -1;
	memcpy(*dst, src, n * sizeof(**dst));
	return 0;
}

static int
dup_strs(char ***dst, char *const *src, size_t n)
{
	*dst = NULL;
	if (n == 0)
		return 0;
	if ((*dst = calloc(n, sizeof(**dst))) == NULL)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (((*dst)[i] = strdup(src[i])) == NULL)
			return -1;
	return 0;
}

/* A deep copy of src into dst (dst's pointers all NULL or owned on failure, for tenant_fini). */
static int
tenant_copy(struct tenant *dst, const struct tenant *src)
{
	*dst = *src;
	dst->uids = dst->gids = dst->member_uids = NULL;
	dst->subjects = dst->tokens = dst->rkv = NULL;
	size_t nsub = dst->nsubjects, ntok = dst->ntokens, nrkv = dst->nrkv;
	dst->nsubjects = dst->ntokens = dst->nrkv = 0;
	int rc = (dst->name = strdup(src->name)) == NULL;
	rc |= dup_u32(&dst->uids, src->uids, src->nuids) | dup_u32(&dst->gids, src->gids, src->ngids) |
	      dup_u32(&dst->member_uids, src->member_uids, src->nmember_uids);
	/* the counts follow the arrays, so that tenant_fini frees what was made when a copy failed half-way */
	rc |= dup_strs(&dst->subjects, src->subjects, nsub);
	dst->nsubjects = dst->subjects ? nsub : 0;
	rc |= dup_strs(&dst->tokens, src->tokens, ntok);
	dst->ntokens = dst->tokens ? ntok : 0;
	rc |= dup_strs(&dst->rkv, src->rkv, nrkv);
	dst->nrkv = dst->rkv ? nrkv : 0;
	return rc ? -1 : 0;
}

struct tenant_table *
tenant_table_clone(const struct tenant_table *T)
{
	struct tenant_table *C = calloc(1, sizeof(*C));
	if (C == NULL || (C->v = calloc(T->n, sizeof(*C->v))) == NULL) {
		free(C);
		return NULL;
	}
	for (size_t i = 0; i < T->n; i++) {
		int rc = tenant_copy(&C->v[i], &T->v[i]);
		C->n = i + 1;
		if (rc != 0) {
			tenant_table_free(C);
			return NULL;
		}
		if (&T->v[i] == T->def)
			C->def = &C->v[i];
	}
	C->vmin = T->vmin;
	C->contended = T->contended;
	return C;
}

int
tenant_table_remove(struct tenant_table *T, const char *name)
{
	for (size_t i = 0; i < T->n; i++) {
		if (strcmp(T->v[i].name, name) != 0 || &T->v[i] == T->def)
			continue;
		tenant_fini(&T->v[i]);
		memmove(&T->v[i], &T->v[i + 1], (T->n - i - 1) * sizeof(T->v[0]));
		T->n--;
		for (size_t k = 0; k < T->n; k++) /* default moved down by one when it came after */
			if (strcmp(T->v[k].name, "default") == 0)
				T->def = &T->v[k];
		return 0;
	}
	return -1;
}

int
tenant_name_check(const char *name, char *why, size_t whylen)
{
	size_t n = strlen(name);
	if (n == 0 || n > CUA_MAX_TENANT_NAME ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789._-/:@") != n) {
		snprintf(why, whylen,
			 "a tenant's name has 1..%u letters, digits, '.', '_', '-', '/', ':' or '@' (e.g. job-1234, "
			 "namespace/pod)",
			 CUA_MAX_TENANT_NAME);
		return -1;
	}
	if (strcmp(name, "default") == 0) {
		snprintf(why, whylen, "'default' is the tenant of whoever matches no other: set it in the file");
		return -1;
	}
	return 0;
}

bool
tenant_key_is_rule(const char *key)
{
	static const char *const rules[] = {"uid", "user", "group", "subject", "token"};
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		if (strcmp(key, rules[i]) == 0)
			return true;
	return false;
}

/* old's runtime tenant r onto next, replacing a file section of its name. 0 or -1 (logged). */
static int
replay_one(struct tenant_table *next, const struct tenant *r)
{
	char why[512];
	if (tenant_table_remove(next, r->name) == 0)
		log_warn("tenant %s: named in the configuration file and made at run time (cuasyncctl tenant add): "
			 "the run-time tenant is kept and the file's [tenant %s] is ignored until it is removed",
			 r->name, r->name);
	for (size_t i = 0; i + 1 < r->nrkv; i += 2)
		if (tenant_table_set(next, r->name, r->rkv[i], r->rkv[i + 1], why, sizeof(why)) != 0) {
			log_error("tenant %s (made at run time): %s; it is dropped at this reload", r->name, why);
			tenant_table_remove(next, r->name);
			return -1;
		}
	struct tenant *t = tenant_by_name(next, r->name);
	if (t == next->def) { /* no key at all: tenant_table_set made none (TENANT_ADD refuses that) */
		log_error("tenant %s (made at run time): no rule or limit to replay; dropped", r->name);
		return -1;
	}
	t->runtime = true;
	t->removing = r->removing;
	if (dup_strs(&t->rkv, r->rkv, r->nrkv) != 0) {
		log_error("tenant %s (made at run time): out of memory; dropped at this reload", r->name);
		tenant_table_remove(next, r->name);
		return -1;
	}
	t->nrkv = r->nrkv;
	return 0;
}

void
tenant_table_replay(struct tenant_table *next, const struct tenant_table *old)
{
	for (size_t i = 0; old != NULL && i < old->n; i++)
		if (old->v[i].runtime)
			(void)replay_one(next, &old->v[i]);
}

void
tenant_table_swap(struct fe *fe, struct tenant_table *T)
{
	struct tenant_table *old = fe->cfg.tenants;
	struct session *s;
	tenant_table_carry(T, old);
	fe->cfg.tenants = T;
	TAILQ_FOREACH(s, &fe->sessions, link)
	if (s->tenant != NULL)
		s->tenant = tenant_by_name(T, s->tenant->name);
	tenant_table_free(old);
}

/* Whether a session (closing ones included: they still hold what they hold) belongs to t. */
static bool
has_sessions(struct fe *fe, const struct tenant *t) CUA_REQUIRES(cuad_fe_lock)
{
	const struct session *s;
	TAILQ_FOREACH(s, &fe->sessions, link)
	if (s->tenant == t)
		return true;
	return false;
}

int
tenant_table_reap(struct fe *fe)
{
	struct tenant_table *T = fe->cfg.tenants, *C = NULL;
	for (size_t i = 0; T != NULL && i < T->n; i++) {
		const struct tenant *t = &T->v[i];
		if (!t->removing || has_sessions(fe, t))
			continue;
		if (C == NULL && (C = tenant_table_clone(T)) == NULL)
			return -1;
		log_info("tenant %s: removed (its last session has ended)", t->name);
		tenant_table_remove(C, t->name);
	}
	if (C != NULL)
		tenant_table_swap(fe, C);
	return 0;
}

/* Appends "what v" to buf for each of n numbers. */
static void
rule_nums(char *buf, size_t len, const char *what, const uint32_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s %u", used ? ", " : "", what, v[i]);
	}
}

static void
rule_strs(char *buf, size_t len, const char *what, char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s%s %s", used ? ", " : "", what, v[i]);
	}
}

const char *
tenant_rule_text(const struct tenant *t, char *buf, size_t len)
{
	buf[0] = '\0';
	rule_nums(buf, len, "uid", t->uids, t->nuids);
	rule_nums(buf, len, "group", t->gids, t->ngids);
	rule_strs(buf, len, "subject", t->subjects, t->nsubjects);
	rule_strs(buf, len, "token", t->tokens, t->ntokens);
	return buf;
}
