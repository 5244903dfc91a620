/*
 * cmd-info.c — HELLO, PING, DEVICES and STATUS: requests the front-end answers itself.
 */
#include "config.h"

#include "auth.h"
#include "cmd.h"
#include "cua_log.h"
#include "tenant.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* The tenant of r's session (tenant.h), from what the transport vouches for. 0, PERMISSION_DENIED when no
 * tenant takes this identity, or QUOTA when its tenant has all the sessions it may have. Sessions of the operator
 * endpoint belong to no tenant: no tenant's limit applies to them, and they count for none. */
static int
assign_tenant(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct identity *in = &r->s->ident;
	struct peer_identity id = {in->has_cred, in->uid, in->gid, in->subject[0] ? in->subject : NULL,
				   in->token_name[0] ? in->token_name : NULL};
	char who[256];
	if (fe->cfg.tenants == NULL || r->s->operator) /* no configuration read (unit tests); the operator */
		return 0;
	auth_describe(r->s, who, sizeof(who));
	struct tenant *t = tenant_match(fe->cfg.tenants, &id);
	if (t == NULL)
		return cua_err_set(e, CUA_EPERMISSION_DENIED,
				   "%s belongs to no tenant, and [tenant default] refuses unknown identities; ask the "
				   "operator to add it to a tenant of the configuration file",
				   who);
	int rc = tenant_check_session(fe, t, e);
	if (rc == 0) {
		r->s->tenant = t;
		if (t->isolation >= 0) /* its pool of workers runs: options_reload starts it before such a tenant */
			r->s->isolation = (enum isolation)t->isolation;
	}
	return rc;
}

/* HELLO: the version, then the credentials (auth.c). The log line says who the peer is as the transport and
 * the token vouch for it (never the token itself); the name and pid the client states are only its word (the
 * name is logged escaped: any bytes are accepted in it). */
static int
v_hello(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_hello *q = &r->w.body.hello;
	char who[256];
	int rc;
	if (q->min_version > CUA_PROTO_VERSION || q->max_version < CUA_PROTO_VERSION_MIN ||
	    q->min_version > q->max_version)
		return cua_err_set(e, CUA_EVERSION, "client speaks versions %u..%u, this daemon %u..%u", q->min_version,
				   q->max_version, CUA_PROTO_VERSION_MIN, CUA_PROTO_VERSION);
	if ((rc = do_auth_hello(fe, r->s, &q->token, e)) != 0) {
		if (r->s->ident.refused++ == 0)
			log_warn("session %llu: HELLO refused (%s) from %s", (unsigned long long)r->s->id,
				 cua_strerror_name(rc), auth_describe(r->s, who, sizeof(who)));
		return rc;
	}
	if (r->s->hello)
		return 0;
	if ((rc = assign_tenant(fe, r, e)) != 0) {
		if (r->s->ident.refused++ == 0)
			log_warn("session %llu: HELLO refused (%s) from %s: %s", (unsigned long long)r->s->id,
				 cua_strerror_name(rc), auth_describe(r->s, who, sizeof(who)), e->detail);
		return rc;
	}
	do_log_ctx(r->s, r->id);                     /* its tenant is known now */
	char name[200], from[CUA_MAX_PEER_ADDR + 8]; /* the client's word, escaped: it may hold anything */
	cua_log_(do_session_log_level(r->s), "session %llu: hello from '%s' (says pid %u) over %s%s, tenant %s",
		 (unsigned long long)r->s->id, cua_log_escape(name, sizeof(name), q->client.ptr, q->client.len), q->pid,
		 auth_describe(r->s, who, sizeof(who)), do_session_from(r->s, from, sizeof(from)),
		 r->s->tenant ? r->s->tenant->name : "- (operator)");
	r->s->hello = true;
	/* kept as sent (SESSIONS returns it: it is data); whoever prints it escapes it */
	snprintf(r->s->client, sizeof(r->s->client), "%.*s", (int)q->client.len, (const char *)q->client.ptr);
	r->s->client_pid = q->pid;
	/* A same-host peer the kernel vouches for may pass descriptors into this session over the fd channel
	 * (fdchan.c); only this session's pipe sees the secret, in the reply. */
	if (r->s->ident.transport == ID_IPC && r->s->ident.has_cred) {
		if (getrandom(r->s->fd_secret, sizeof(r->s->fd_secret), 0) == (ssize_t)sizeof(r->s->fd_secret))
			r->s->has_fd_secret = true;
		else
			log_error("session %llu: getrandom: %s; it cannot use the fd channel (host buffers)",
				  (unsigned long long)r->s->id, strerror(errno));
	}
	return 0;
}

static int
v_none(struct fe *fe, struct request *r, cua_err *e)
{
	(void)fe;
	(void)r;
	(void)e;
	return 0;
}

static int
r_hello(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch) CUA_REQUIRES(cuad_fe_lock)
{
	(void)scratch;
	static const char server[] = PACKAGE_NAME " " PACKAGE_VERSION;
	b->hello = (struct cua_rep_hello){CUA_PROTO_VERSION,
					  r->s->id,
					  {server, sizeof(server) - 1},
					  fe->cfg.max_message,
					  CUA_MAX_BATCH,
					  CUA_MAX_ARGS,
					  (uint32_t)fe->ndevs,
					  {r->s->has_fd_secret ? r->s->fd_secret : NULL,
					   r->s->has_fd_secret ? CUA_FDCHAN_SECRET : 0}};
	return 0;
}

static int
r_ping(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	(void)fe;
	(void)scratch;
	b->ping.nonce = r->w.body.ping.nonce;
	return 0;
}

static cua_bytes
text(const char *s, size_t max)
{
	return (cua_bytes){s, (uint32_t)strnlen(s, max)};
}

/* The worker generation and restarts of device i as session s sees them. Under --isolation session: its own
 * worker's (its first starts at generation 1; before it has one, 1 and 0), which is the generation its handles
 * carry (§3). Otherwise the shared worker's. */
static void
session_gen(struct fe *fe, const struct session *s, int i, uint32_t *gen, uint32_t *restarts) CUA_REQUIRES(cuad_fe_lock)
{
	const struct device *d = s->isolation == ISO_SESSION ? s->worker[i] : &fe->devs[i];
	*gen = d != NULL ? d->gen : 1;
	*restarts = d != NULL ? d->restarts : 0;
}

static int
r_devices(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch) CUA_REQUIRES(cuad_fe_lock)
{
	cua_wire_device *infos = calloc(CUA_MAX_DEVICES, sizeof(*infos));
	uint32_t n = 0;
	if (infos == NULL)
		return CUA_ENOMEM;
	for (int i = 0; i < fe->ndevs && n < CUA_MAX_DEVICES; i++) {
		const struct device *d = &fe->devs[i];
		uint32_t gen, restarts;
		if (d->state == DEV_FAILED)
			continue;
		session_gen(fe, r->s, i, &gen, &restarts);
		infos[n++] = (cua_wire_device){(uint32_t)i,
					       text(d->info.name, sizeof(d->info.name)),
					       d->info.sm_major,
					       d->info.sm_minor,
					       d->info.total_mem,
					       d->info.multiprocessors,
					       d->info.prio_least,
					       d->info.prio_greatest,
					       text(d->info.backend, sizeof(d->info.backend)),
					       gen,
					       d->info.max_param_bytes,
					       d->info.max_shared_optin,
					       d->info.cluster_launch,
					       d->info.cooperative_launch,
					       CUA_DEVICE_FIELDS,
					       d->info.attrs,
					       d->info.nattrs < CUA_MAX_DEV_ATTRS ? d->info.nattrs : CUA_MAX_DEV_ATTRS};
	}
	*scratch = infos;
	b->devices = (struct cua_rep_devices){infos, n};
	return 0;
}

/* The daemon-wide view, for sessions of the operator endpoint: every device's and every session's usage. */
static void
status_all(struct fe *fe, struct cua_rep_status *b, cua_wire_dev_status *ds) CUA_REQUIRES(cuad_fe_lock)
{
	const struct session *s;
	for (int i = 0; i < fe->ndevs && i < (int)CUA_MAX_DEVICES; i++) {
		const struct device *d = &fe->devs[i];
		/* every worker of the device: the shared one's generations and restarts, and the sessions' own */
		ds[i] = (cua_wire_dev_status){(uint32_t)i,
					      d->gen + d->session_restarts,
					      d->restarts + d->session_restarts,
					      0,
					      d->allocations,
					      d->alloc_bytes};
	}
	TAILQ_FOREACH(s, &fe->sessions, link)
	{
		for (int i = 0; i < fe->ndevs && i < (int)CUA_MAX_DEVICES; i++)
			ds[i].in_flight += s->dev_in_flight[i];
		/* a closing session too, while it drains: what it holds stays held (and in the devices' counts) until
		 * it is freed, so total agrees with dev_status; only `sessions` leaves it out */
		b->total.allocations += s->counts.allocations;
		b->total.alloc_bytes += s->counts.alloc_bytes;
		b->total.modules += s->counts.modules;
		b->total.functions += s->counts.functions;
		b->total.streams += s->counts.streams;
		b->total.in_flight += s->in_flight + s->queued;
	}
	b->sessions = do_sessions_live(fe);
	b->requests = fe->requests;
	b->errors = fe->errors;
}

/* A client's view: its own session only (its requests, its memory and work on each device); the devices'
 * generation and restarts of the worker that serves it (session_gen: under --isolation session its own). */
static void
status_own(struct fe *fe, const struct session *s, struct cua_rep_status *b, cua_wire_dev_status *ds)
	CUA_REQUIRES(cuad_fe_lock)
{
	for (int i = 0; i < fe->ndevs && i < (int)CUA_MAX_DEVICES; i++) {
		uint32_t gen, restarts;
		session_gen(fe, s, i, &gen, &restarts);
		ds[i] = (cua_wire_dev_status){(uint32_t)i, gen, restarts, s->dev_in_flight[i], 0, 0};
	}
	for (uint32_t i = 0; i < s->nallocs; i++) {
		const struct alloc_rec *a = &s->allocs[i];
		if (a->stale || a->gen != do_session_gen(fe, s, a->dev))
			continue;
		ds[a->dev].allocations++;
		ds[a->dev].alloc_bytes += a->len;
	}
	b->total = b->session;
	b->sessions = 1;
	b->requests = s->requests;
	b->errors = s->errors;
}

static int
r_status(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch) CUA_REQUIRES(cuad_fe_lock)
{
	uint32_t n = fe->ndevs < (int)CUA_MAX_DEVICES ? (uint32_t)fe->ndevs : CUA_MAX_DEVICES;
	cua_wire_dev_status *ds = calloc(n ? n : 1, sizeof(*ds));
	if (ds == NULL)
		return CUA_ENOMEM;
	*scratch = ds;
	b->status = (struct cua_rep_status){.uptime_ms = cua_now_ms() - fe->start_ms, .devices = ds, .ndevices = n};
	b->status.session = r->s->counts;
	b->status.insecure_listeners = fe->insecure_listeners;
	b->status.session.in_flight = r->s->in_flight + r->s->queued;
	if (r->s->operator)
		status_all(fe, &b->status, ds);
	else
		status_own(fe, r->s, &b->status, ds);
	for (uint32_t i = 0; i < n; i++) { /* a drained device is no secret: its MEM_ALLOC answers NO_DEVICE */
		ds[i].drained = (uint32_t)(fe->drained >> i & 1);
		ds[i].nfields = CUA_DEV_STATUS_FIELDS;
	}
	return 0;
}

const struct cmd_entry cmd_hello_entry = {.op = CUA_OP_HELLO,
					  .flags = CMD_AUTHENTICATES,
					  .family = SF_INFO,
					  .wrec = WR_NONE,
					  .validate = v_hello,
					  .reply = r_hello};
const struct cmd_entry cmd_ping_entry =
	{.op = CUA_OP_PING, .flags = 0, .family = SF_INFO, .wrec = WR_NONE, .validate = v_none, .reply = r_ping};
const struct cmd_entry cmd_devices_entry = {.op = CUA_OP_DEVICES,
					    .flags = CMD_HELLO,
					    .family = SF_INFO,
					    .wrec = WR_NONE,
					    .validate = v_none,
					    .reply = r_devices};
const struct cmd_entry cmd_status_entry = {.op = CUA_OP_STATUS,
					   .flags = CMD_HELLO | CMD_QUOTA_EXEMPT,
					   .family = SF_INFO,
					   .wrec = WR_NONE,
					   .validate = v_none,
					   .reply = r_status};
