/*
 * tenant.h — tenants: who a session belongs to, and the limits its tenant's sessions share.
 *
 * The configuration file names tenants in `[tenant NAME]` sections (cuasyncd.conf(5)): who belongs to it
 * (`uid`, `user`, `group`, `subject`, `token`: any one matching is enough; the first tenant in file order that
 * matches wins) and what all its sessions together may hold (`mem` per device, `modules`, `module-bytes`,
 * `streams`, `host-bytes`, `graph-bytes`, `sessions`, `workers`; reserve.h checks the resources). A session whose identity matches no tenant belongs to `default`,
 * which exists even when the file does not name it (then without limits of its own); `refuse = yes` in
 * `[tenant default]` refuses unknown identities instead. The per-session limits (--session-*) hold as well.
 *
 * Usage is not counted twice: a tenant's usage is the sum over its sessions (reserve.c: closing ones included
 * until they are freed), taken when a request asks for more, so it cannot drift from what the sessions hold. Sessions hold a pointer to their tenant; a reload
 * builds a new table and moves every session to the tenant of the same name (else `default`).
 *
 * Names of users and groups are resolved when the table is built (start, SIGHUP; main thread), never under
 * fe->lock: matching a session is a lookup in numbers only.
 */
#ifndef CUAD_TENANT_H
#define CUAD_TENANT_H

#include "cua_error.h"
#include "daemon.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Who a session is, as far as the daemon knows. */
struct peer_identity {
	bool has_uid;        /* an ipc:// peer: the kernel's credentials of the connecting process */
	uint32_t uid, gid;   /* its effective uid and gid */
	const char *subject; /* tls+tcp:// with a verified client certificate: its subject; else NULL */
	const char *token;   /* the name of the token it presented at HELLO; else NULL */
};

struct tenant {
	char *name;
	uint32_t *uids, *gids; /* uid and user rules; group rules (a member's uid is in uids_of_groups) */
	size_t nuids, ngids;
	uint32_t *member_uids; /* the members of its groups, as the group database said when loaded */
	size_t nmember_uids;
	char **subjects, **tokens;
	size_t nsubjects, ntokens;
	bool refuse;      /* default only: refuse identities that match no tenant */
	int isolation;    /* its sessions' isolation (enum isolation), or -1: the daemon's --isolation */
	uint64_t mem;     /* device memory on each device, all sessions together (0: none) */
	unsigned mem_pct; /* or a share of each device's memory */
	uint64_t module_bytes, host_bytes;
	uint64_t graph_bytes; /* bytes of its sessions' graphs (RES_GRAPH_BYTES, reserve.h; 0: none) */
	uint32_t modules, streams, sessions;
	uint32_t workers;   /* --isolation session: workers of its sessions' own (0: --tenant-session-workers) */
	uint32_t in_flight; /* requests queued or running, all its sessions together (0: no limit) */
	unsigned weight;    /* its share of the device against other busy tenants (default 1) */
	/* usage, under fe->lock (tenant_account); carried over by name across reloads */
	uint64_t busy_ns; /* device time its sessions' work took (the workers' measure, wrec.h) */
	uint64_t vt;      /* virtual time: busy_ns / weight, moved up to the others' when it comes back from idle */
	bool backlogged;  /* at the last dispatcher pass, one of its sessions had work queued or in flight */
	/* Tenants at run time (TENANT_ADD, cmd-tenant.c): the keys and values it was made and changed with, in
	 * order ("key", "value", ...), replayed onto the table a SIGHUP builds from the file. */
	bool runtime;
	bool removing; /* TENANT_REMOVE ran: no new session, no new object; it goes with its last session */
	char **rkv;
	size_t nrkv; /* strings in rkv (twice the pairs) */
};

#define CUAD_MAX_TENANTS 256

struct tenant_table {
	struct tenant *v; /* file order; v[n - 1] is default when the file did not name it */
	size_t n;
	struct tenant *def;
	uint64_t vmin;  /* the least virtual time among backlogged tenants (tenant_pass_begin) */
	bool contended; /* two tenants or more are backlogged: weights apply */
};

/* An empty table (only `default`, no limits). NULL: out of memory. */
struct tenant_table *tenant_table_new(void);
void tenant_table_free(struct tenant_table *t);

/* One key of `[tenant NAME]` into t (creating the tenant at its first key). 0, or -1 with why. Main thread;
 * may read the user and group databases. */
int tenant_table_set(struct tenant_table *t, const char *name, const char *key, const char *value, char *why,
		     size_t whylen);

/* Whether a tenant of t asks for `isolation = session` (the pool of one-session workers must run). */
bool tenant_table_wants_session(const struct tenant_table *t);
/* Logs (info) each tenant's device memory limit beside the per-session one of c (--session-mem): the tenant's
 * `mem` bounds all its sessions together, and every session stays within --session-mem as well. At start and
 * after a reload. */
void tenant_table_log_mem(const struct tenant_table *t, const struct config *c);

/* The tenant of id: the first that matches (tenants being removed match nobody), else default; NULL when
 * default refuses unknown identities. */
struct tenant *tenant_match(const struct tenant_table *t, const struct peer_identity *id);

/* The tenant named name in t, else t's default. */
struct tenant *tenant_by_name(const struct tenant_table *t, const char *name);

/* (The limits of resources — memory, modules, streams, host and graph bytes — are reserve.c's.)
 * Whether s's tenant may have one more request queued or running (every request but STATUS). */
int tenant_check_inflight(struct fe *fe, const struct session *s, cua_err *e) CUA_REQUIRES(cuad_fe_lock);
/* Whether t may have one more session (HELLO); PERMISSION_DENIED when it is being removed. */
int tenant_check_session(struct fe *fe, const struct tenant *t, cua_err *e) CUA_REQUIRES(cuad_fe_lock);

/*
 * Weights. While two tenants or more have work queued or in flight, a tenant whose virtual time (device time
 * over its weight) is more than TENANT_SLACK_NS ahead of the least one's does not dispatch: the others catch
 * up, so busy tenants with weights 3:1 get device time near 3:1. A tenant coming back from idle starts at the
 * least virtual time of the busy ones (no credit saved up while idle). Alone, a tenant is never held back.
 * The dispatcher, under fe->lock: tenant_pass_begin before each pass, tenant_may_dispatch for each session.
 */
#define TENANT_SLACK_NS (5 * 1000 * 1000ull)
void tenant_pass_begin(struct fe *fe) CUA_REQUIRES(cuad_fe_lock);
bool tenant_may_dispatch(const struct fe *fe, const struct session *s) CUA_REQUIRES(cuad_fe_lock);
/* A request of s completed, its work having kept the device busy busy_ns. Caller holds fe->lock. */
void tenant_account(struct fe *fe, struct session *s, uint64_t busy_ns) CUA_REQUIRES(cuad_fe_lock);
/* Carries usage (busy time, virtual time) from old to the tenants of the same name in t. */
void tenant_table_carry(struct tenant_table *t, const struct tenant_table *old);

/*
 * Tenants at run time. The table is never changed in place (sessions and the statistics point into it): an op
 * builds a copy, changes it, and tenant_table_swap puts it in, as a reload does.
 */
/* A deep copy of t (usage included). NULL: out of memory. */
struct tenant_table *tenant_table_clone(const struct tenant_table *t);
/* Takes the tenant named name out of t (not default). 0, or -1 when there is none. */
int tenant_table_remove(struct tenant_table *t, const char *name);
/* Whether name may name a tenant made at run time: 1..CUA_MAX_TENANT_NAME letters, digits, '.', '_', '-', '/',
 * ':', '@' (a scheduler's job id, a namespace/pod), not "default". 0, or -1 with why. */
int tenant_name_check(const char *name, char *why, size_t whylen);
/* Whether key is one of the match rules (uid, user, group, subject, token), which TENANT_SET does not take. */
bool tenant_key_is_rule(const char *key);
/* The runtime tenants of old (and their removal marks) onto next, a table a reload built from the file; a
 * runtime tenant whose name the file now names as well replaces the file's section (logged). Tenants marked
 * removing whose sessions are gone are dropped. Caller holds fe->lock (old is the table in effect). */
void tenant_table_replay(struct tenant_table *next, const struct tenant_table *old);
/* Puts t in effect: usage carried over, every session moved to the tenant of its tenant's name (else default),
 * the old table freed. */
void tenant_table_swap(struct fe *fe, struct tenant_table *t) CUA_REQUIRES(cuad_fe_lock);
/* Drops the tenants marked removing that no session refers to any more (a new table swapped in). 0, or -1:
 * out of memory (they stay, harmlessly). */
int tenant_table_reap(struct fe *fe) CUA_REQUIRES(cuad_fe_lock);
/* A person's summary of t's match rules ("uid 1000, group 27, token t1") into buf. */
const char *tenant_rule_text(const struct tenant *t, char *buf, size_t len);

#endif
