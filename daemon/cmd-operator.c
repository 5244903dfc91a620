/*
 * cmd-operator.c — SESSIONS, DISCONNECT and DRAIN: the operator's requests about sessions and devices,
 * answered by the front-end itself. On the operator endpoint (--operator-url) they see and act on every session;
 * a client sees only its own session and may neither disconnect anyone nor drain a device.
 */
#include "config.h"

#include "cmd.h"
#include "cua_log.h"
#include "tenant.h"

#include <stdlib.h>
#include <string.h>

/* The transport's name in SESSIONS (as in URLs, without "://"). */
static const char *const transport_names[] = {"", "ipc", "tcp", "tls+tcp"}; /* by enum id_transport */
_Static_assert(sizeof(transport_names) / sizeof(transport_names[0]) == ID_TLS + 1, "a name per transport");

static cua_bytes
str_bytes(const char *s)
{
	return (cua_bytes){s, (uint32_t)strlen(s)};
}

/* One session's row of a SESSIONS reply: what it said in HELLO (its word), and who it is as the transport
 * vouches for it. The strings point into the session, which outlives the reply's encoding (fe->lock held). */
static cua_wire_session
session_row(struct fe *fe, const struct session *s, uint64_t now) CUA_REQUIRES(cuad_fe_lock)
{
	int64_t peer = fe->edge->peer_pid(s->pipe);
	const struct identity *id = &s->ident;
	uint64_t bytes = 0;
	for (int i = 0; i < fe->ndevs && i < (int)CUA_MAX_DEVICES; i++)
		bytes += s->dev_bytes[i];
	return (cua_wire_session){.session = s->id,
				  .client = {s->client, (uint32_t)strnlen(s->client, sizeof(s->client))},
				  .pid = s->client_pid,
				  .peer_pid = peer > 0 && peer <= UINT32_MAX ? (uint32_t)peer : 0,
				  .age_ms = now - s->born_ms,
				  .requests = s->requests,
				  .errors = s->errors,
				  .in_flight = (uint64_t)s->queued + s->nparked + s->in_flight,
				  .alloc_bytes = bytes,
				  .streams = s->counts.streams,
				  .modules = s->counts.modules,
				  .operator=(uint32_t) s->operator,
				  .tenant = str_bytes(s->tenant ? s->tenant->name : ""),
				  .busy_ns = s->busy_ns,
				  .transport = str_bytes(transport_names[id->transport]),
				  .uid = id->has_cred ? id->uid : CUA_WIRE_NO_UID,
				  .gid = id->has_cred ? id->gid : CUA_WIRE_NO_UID,
				  .peer = str_bytes(id->addr),
				  .token = str_bytes(id->token_name),
				  .nfields = CUA_SESSION_FIELDS};
}

static bool
listed(const struct session *s) CUA_REQUIRES(cuad_fe_lock)
{
	return s->hello && !s->closing && !s->pipe_gone;
}

static int
v_none(struct fe *fe, struct request *r, cua_err *e)
{
	(void)fe;
	(void)r;
	(void)e;
	return 0;
}

/* SESSIONS: on the operator endpoint every live session that said HELLO, oldest first (at most
 * CUA_MAX_SESSIONS_LIST); elsewhere the asking session alone (a tenant's usage is not another's business). */
static int
r_sessions(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch) CUA_REQUIRES(cuad_fe_lock)
{
	const struct session *s;
	uint32_t n = 0, cap = r->s->operator? CUA_MAX_SESSIONS_LIST : 1;
	uint64_t now = cua_now_ms();
	cua_wire_session *rows = calloc(cap, sizeof(*rows));
	if (rows == NULL)
		return CUA_ENOMEM;
	if (!r->s->operator)
		rows[n++] = session_row(fe, r->s, now);
	else
		TAILQ_FOREACH_REVERSE(s, &fe->sessions, session_list, link)
		{
			if (n == cap)
				break;
			if (listed(s))
				rows[n++] = session_row(fe, s, now);
		}
	*scratch = rows;
	b->sessions = (struct cua_rep_sessions){rows, n};
	return 0;
}

/* DISCONNECT: the edge closes the session's connection within a second (its watchdog asks
 * request_hello_overdue), and the session is then closed as if its client had gone. */
static int
v_disconnect(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	uint64_t id = r->w.body.disconnect.session;
	struct session *s;
	if (id == r->s->id)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "session %llu is this one: close the connection instead",
				   (unsigned long long)id);
	TAILQ_FOREACH(s, &fe->sessions, link)
	if (s->id == id && listed(s))
		break;
	if (s == NULL)
		return cua_err_set(e, CUA_ENOT_FOUND, "no session %llu (see SESSIONS)", (unsigned long long)id);
	if (!s->kicked)
		log_info("session %llu: disconnected by operator session %llu", (unsigned long long)id,
			 (unsigned long long)r->s->id);
	s->kicked = true;
	return 0;
}

static int
v_drain(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_drain *q = &r->w.body.drain;
	if (q->device >= (uint32_t)fe->ndevs)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "device %u does not exist (%d devices)", q->device, fe->ndevs);
	uint64_t bit = (uint64_t)1 << q->device;
	if (((fe->drained & bit) != 0) != (q->drain != 0))
		log_info("device %u: %s by operator session %llu", q->device,
			 q->drain ? "drained (no new objects)" : "takes new objects again",
			 (unsigned long long)r->s->id);
	fe->drained = q->drain ? fe->drained | bit : fe->drained & ~bit;
	return 0;
}

/* Whether s holds anything on device dev: memory, handles (pool streams included) or work. */
static bool
holds(const struct session *s, int dev) CUA_REQUIRES(cuad_fe_lock)
{
	if (s->dev_bytes[dev] != 0 || s->spool[dev].n != 0 || s->dev_in_flight[dev] != 0)
		return true;
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->slots[i].kind != 0 && s->slots[i].dev == dev)
			return true;
	return false;
}

/* DRAIN's reply: what still keeps the device busy (the operator polls until both are 0, or DISCONNECTs). */
static int
r_drain(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch) CUA_REQUIRES(cuad_fe_lock)
{
	(void)scratch;
	int dev = (int)r->w.body.drain.device;
	const struct session *s;
	b->drain = (struct cua_rep_drain){0, 0};
	TAILQ_FOREACH(s, &fe->sessions, link)
	{
		b->drain.holding += holds(s, dev);
		b->drain.in_flight += s->dev_in_flight[dev];
	}
	return 0;
}

const struct cmd_entry cmd_sessions_entry = {.op = CUA_OP_SESSIONS,
					     .flags = CMD_HELLO,
					     .family = SF_OPERATOR,
					     .wrec = WR_NONE,
					     .validate = v_none,
					     .reply = r_sessions};
const struct cmd_entry cmd_disconnect_entry = {.op = CUA_OP_DISCONNECT,
					       .flags = CMD_HELLO | CMD_OPERATOR,
					       .family = SF_OPERATOR,
					       .wrec = WR_NONE,
					       .validate = v_disconnect};
const struct cmd_entry cmd_drain_entry = {.op = CUA_OP_DRAIN,
					  .flags = CMD_HELLO | CMD_OPERATOR,
					  .family = SF_OPERATOR,
					  .wrec = WR_NONE,
					  .validate = v_drain,
					  .reply = r_drain};
