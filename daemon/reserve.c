/*
 * reserve.c — limited resources and their reservations (see reserve.h). fe->lock held throughout.
 */
#include "config.h"

#include "devlink.h"
#include "reserve.h"
#include "streampool.h"
#include "tenant.h"

#include <stdio.h>

#define NO_LIMIT UINT64_MAX

/* One row per limited resource: what it is called, how much a session holds, and its limits. */
struct res_entry {
	const char *noun;   /* after the amount: "streams", "bytes of device memory" */
	const char *option; /* the session's limit, without "--" */
	const char *key;    /* the tenant's limit in [tenant NAME] (NULL: none) */
	const char *advice; /* how to get below the limit */
	uint64_t (*held)(struct fe *fe, const struct session *s, int dev);
	uint64_t (*limit)(const struct fe *fe, int dev);                                /* NO_LIMIT: none */
	uint64_t (*tenant_limit)(const struct fe *fe, const struct tenant *t, int dev); /* NO_LIMIT: none */
};

/* 0 in a tenant's row means no limit. */
static uint64_t
or_none(uint64_t v)
{
	return v != 0 ? v : NO_LIMIT;
}

static uint64_t
held_mem(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	return s->dev_bytes[dev];
}
static uint64_t
held_modules(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe, (void)dev;
	return s->counts.modules;
}
static uint64_t
held_module_bytes(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe, (void)dev;
	return s->module_bytes;
}
static uint64_t
held_streams(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	(void)dev;
	return s->counts.streams + do_spool_live(fe, s);
}
static uint64_t
held_events(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe, (void)dev;
	return s->events;
}
static uint64_t
held_host_bytes(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe, (void)dev;
	return s->host_bytes;
}
static uint64_t
held_handles(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe, (void)dev;
	return s->nhandles;
}
static uint64_t
held_graph_bytes(struct fe *fe, const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe, (void)dev;
	return s->graph_bytes;
}

static uint64_t
lim_mem(const struct fe *fe, int dev)
{
	if (fe->cfg.session_mem != 0)
		return fe->cfg.session_mem;
	return or_none(fe->devs[dev].info.total_mem / 100 * fe->cfg.session_mem_pct); /* 0%: none */
}
static uint64_t
lim_modules(const struct fe *fe, int dev)
{
	(void)dev;
	return fe->cfg.session_modules;
}
static uint64_t
lim_module_bytes(const struct fe *fe, int dev)
{
	(void)dev;
	return fe->cfg.session_module_bytes;
}
static uint64_t
lim_streams(const struct fe *fe, int dev)
{
	(void)dev;
	return fe->cfg.session_streams;
}
static uint64_t
lim_events(const struct fe *fe, int dev)
{
	(void)dev;
	return fe->cfg.session_events;
}
static uint64_t
lim_host_bytes(const struct fe *fe, int dev)
{
	(void)dev;
	return fe->cfg.session_host_bytes; /* 0 is a limit: no host memory at all */
}
static uint64_t
lim_handles(const struct fe *fe, int dev)
{
	(void)dev;
	return fe->cfg.session_handles;
}
static uint64_t
lim_graph_bytes(const struct fe *fe, int dev)
{
	(void)dev;
	return fe->cfg.session_graph_bytes;
}

static uint64_t
tlim_mem(const struct fe *fe, const struct tenant *t, int dev)
{
	if (t->mem != 0)
		return t->mem;
	return t->mem_pct ? fe->devs[dev].info.total_mem / 100 * t->mem_pct : NO_LIMIT;
}
static uint64_t
tlim_modules(const struct fe *fe, const struct tenant *t, int dev)
{
	(void)fe, (void)dev;
	return or_none(t->modules);
}
static uint64_t
tlim_module_bytes(const struct fe *fe, const struct tenant *t, int dev)
{
	(void)fe, (void)dev;
	return or_none(t->module_bytes);
}
static uint64_t
tlim_streams(const struct fe *fe, const struct tenant *t, int dev)
{
	(void)fe, (void)dev;
	return or_none(t->streams);
}
static uint64_t
tlim_host_bytes(const struct fe *fe, const struct tenant *t, int dev)
{
	(void)fe, (void)dev;
	return or_none(t->host_bytes);
}
static uint64_t
tlim_graph_bytes(const struct fe *fe, const struct tenant *t, int dev)
{
	(void)fe, (void)dev;
	return or_none(t->graph_bytes);
}

static const struct res_entry res_table[RES_COUNT] = {
	{"bytes of device memory", "session-mem", "mem", "free some", held_mem, lim_mem, tlim_mem},
	{"modules", "session-modules", "modules", "unload some", held_modules, lim_modules, tlim_modules},
	{"bytes of module images", "session-module-bytes", "module-bytes", "unload some", held_module_bytes,
	 lim_module_bytes, tlim_module_bytes},
	{"streams (pool streams included)", "session-streams", "streams", "destroy some", held_streams, lim_streams,
	 tlim_streams},
	{"events", "session-events", NULL, "destroy some", held_events, lim_events, NULL},
	{"bytes of registered host memory", "session-host-bytes", "host-bytes", "unregister some", held_host_bytes,
	 lim_host_bytes, tlim_host_bytes},
	{"handles", "session-handles", NULL, "release some", held_handles, lim_handles, NULL},
	{"bytes of graphs (nodes and their arguments, kept by the worker)", "session-graph-bytes", "graph-bytes",
	 "destroy graphs", held_graph_bytes, lim_graph_bytes, tlim_graph_bytes},
};

/* The reservation counter of kind k in s (RES_MEM: on device dev). */
static uint64_t *
resv_of(struct session *s, unsigned k, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	return k == RES_MEM ? &s->dev_resv[dev] : &s->resv[k];
}

/* want more on top of used passes limit. */
static bool
passes(uint64_t used, uint64_t want, uint64_t limit)
{
	return limit != NO_LIMIT && (want > limit || used > limit - want);
}

/* " on device N" for per-device kinds. */
static const char *
where(unsigned k, int dev, char *buf, size_t len)
{
	if (k == RES_MEM)
		snprintf(buf, len, " on device %d", dev);
	else
		buf[0] = '\0';
	return buf;
}

/* The session's limit of kind k for want more: 0 or QUOTA. */
static int
check_session(struct fe *fe, struct session *s, unsigned k, int dev, uint64_t want, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock)
{
	const struct res_entry *row = &res_table[k];
	uint64_t held = row->held(fe, s, dev), resv = *resv_of(s, k, dev), limit = row->limit(fe, dev);
	char at[32];
	if (!passes(held + resv, want, limit))
		return 0;
	/* A tenant's limit of the kind (`mem = 50%`) is its sessions' total, not a session's allowance: say so, so
	 * that the session's own quota does not look like the tenant's limit silently cut down. */
	const struct tenant *t = s->tenant;
	bool tenant_too = t != NULL && row->tenant_limit != NULL && row->tenant_limit(fe, t, dev) != NO_LIMIT;
	return cua_err_set(e, CUA_EQUOTA,
			   "%llu more would take the session to %llu %s%s, past its quota of %llu (%llu held, %llu "
			   "reserved by its requests not yet completed); %s, or raise it with --%s%s%s%s%s%s%s%s",
			   (unsigned long long)want, (unsigned long long)(held + resv + want), row->noun,
			   where(k, dev, at, sizeof(at)), (unsigned long long)limit, (unsigned long long)held,
			   (unsigned long long)resv, row->advice, row->option, tenant_too ? " (tenant '" : "",
			   tenant_too ? t->name : "", tenant_too ? "''s `" : "", tenant_too ? row->key : "",
			   tenant_too ? "` bounds its sessions together; each session also stays within --" : "",
			   tenant_too ? row->option : "", tenant_too ? ")" : "");
}

/* The tenant's limit of kind k for want more, over all its sessions (closing ones included: what they hold is
 * not freed yet): 0 or QUOTA. */
static int
check_tenant(struct fe *fe, struct session *s, unsigned k, int dev, uint64_t want, cua_err *e)
	CUA_REQUIRES(cuad_fe_lock)
{
	const struct res_entry *row = &res_table[k];
	const struct tenant *t = s->tenant;
	if (t != NULL && t->removing) /* TENANT_REMOVE --drain: what it holds runs on, nothing new is made */
		return cua_err_set(e, CUA_EQUOTA,
				   "tenant '%s' is being removed (drain): its sessions may finish their work but make "
				   "nothing new; ask the operator",
				   t->name);
	if (t == NULL || row->tenant_limit == NULL)
		return 0;
	uint64_t limit = row->tenant_limit(fe, t, dev), used = 0, closing = 0;
	if (limit == NO_LIMIT)
		return 0;
	struct session *o;
	TAILQ_FOREACH(o, &fe->sessions, link)
	{
		if (o->tenant != t)
			continue;
		uint64_t u = row->held(fe, o, dev) + *resv_of(o, k, dev);
		used += u;
		if (o->closing || o->pipe_gone)
			closing += u;
	}
	char at[32];
	if (!passes(used, want, limit))
		return 0;
	return cua_err_set(e, CUA_EQUOTA,
			   "%llu more would take tenant '%s''s sessions to %llu %s%s, past its limit of %llu (%llu of "
			   "them held by its closing sessions until their work drained and they are freed); %s in one "
			   "of them, or raise `%s` in [tenant %s]",
			   (unsigned long long)want, t->name, (unsigned long long)(used + want), row->noun,
			   where(k, dev, at, sizeof(at)), (unsigned long long)limit, (unsigned long long)closing,
			   row->advice, row->key, t->name);
}

int
do_reserve_check(struct fe *fe, const struct request *r, const struct resv *want, cua_err *e)
{
	struct session *s = r->s;
	int rc;
	for (unsigned k = 0; k < RES_COUNT; k++) {
		if (want->n[k] == 0)
			continue;
		if (k == RES_MEM && (r->dev < 0 || r->dev >= fe->ndevs))
			return cua_err_set(e, CUA_EINTERNAL, "device memory reserved without a device");
		if ((rc = check_session(fe, s, k, r->dev, want->n[k], e)) != 0 ||
		    (rc = check_tenant(fe, s, k, r->dev, want->n[k], e)) != 0)
			return rc;
	}
	return 0;
}

int
do_reserve(struct fe *fe, struct request *r, const struct resv *want, cua_err *e)
{
	struct session *s = r->s;
	int rc = do_reserve_check(fe, r, want, e);
	if (rc != 0)
		return rc;
	for (unsigned k = 0; k < RES_COUNT; k++) {
		*resv_of(s, k, r->dev) += want->n[k];
		r->resv[k] += want->n[k];
	}
	return 0;
}

void
do_unreserve(struct fe *fe, struct request *r)
{
	(void)fe;
	for (unsigned k = 0; k < RES_COUNT; k++) {
		if (r->resv[k] == 0)
			continue;
		*resv_of(r->s, k, r->dev) -= r->resv[k];
		r->resv[k] = 0;
	}
}

int
do_reserve_worker(struct fe *fe, struct request *r, cua_err *e)
{
	struct session *s = r->s, *o;
	if (r->dev < 0 || s->isolation != ISO_SESSION || (s->workers >> r->dev & 1u))
		return 0;
	unsigned total = 0, mine = 0;
	TAILQ_FOREACH(o, &fe->sessions, link)
	{
		unsigned n = (unsigned)__builtin_popcountll(o->workers);
		total += n;
		if (o->tenant == s->tenant)
			mine += n;
	}
	const struct tenant *t = s->tenant;
	unsigned tlimit = t != NULL && t->workers != 0 ? t->workers : fe->cfg.tenant_session_workers;
	if (total >= fe->cfg.session_workers)
		return cua_err_set(e, CUA_EBUSY,
				   "the daemon runs %u workers of one session each (--isolation session: one per "
				   "session "
				   "and device, a closing session's until its work drained), its limit; retry once a "
				   "session ended, or the operator raises --session-workers",
				   total);
	if (tlimit != 0 && mine >= tlimit)
		return cua_err_set(e, CUA_EQUOTA,
				   "tenant '%s''s sessions hold %u workers of their own (--isolation session: one per "
				   "session and device, a closing session's until its work drained), its limit; close "
				   "a "
				   "session, or raise `workers` in [tenant %s] or --tenant-session-workers",
				   t != NULL ? t->name : "(none)", mine, t != NULL ? t->name : "NAME");
	s->workers |= (cuad_devmask)1 << r->dev;
	return 0;
}
