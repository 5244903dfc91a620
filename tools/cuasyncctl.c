/*
 * cuasyncctl — look at a running cuasyncd.
 *
 *   cuasyncctl [--url URL] [--json] status     sessions, requests, errors, per-device workers and memory
 *   cuasyncctl [--url URL] [--json] devices    the devices and their backends
 *   cuasyncctl [--url URL] [--json] ping       round-trip time
 *   cuasyncctl [--url URL] [--json] sessions   one line per session: id, user, tenant, transport and remote
 *                                              address, pids, client, requests, work in flight, memory, streams
 *   cuasyncctl [--url URL] [--json] disconnect SESSION
 *                                              close a session's connection (operator endpoint only)
 *   cuasyncctl [--url URL] tenant add|set|remove NAME [options], cuasyncctl [--json] tenant list
 *                                              tenants at run time (operator endpoint; cuasyncctl(1))
 *   cuasyncctl [--url URL] [--json] drain|undrain DEVICE
 *                                              the device takes no new objects (or again); says how many
 *                                              sessions still hold it and how much work is in flight there
 *
 * URL defaults to $CUASYNC_OPERATOR_URL, else the operator socket of a system daemon
 * (/run/cuasyncd/operator.sock, when it is there), else $CUASYNC_URL or the default socket. Through the
 * daemon's operator endpoint STATUS and SESSIONS show every session; through a client socket only this
 * connection's own, and cuasyncctl says so on stderr. --json prints one JSON document on stdout and nothing else
 * there (errors and notes go to stderr), written by jansson.
 * Exit status 0 when the daemon answered, 1 when it did not or refused, 2 for a usage error.
 *
 * Every string the daemon returns may be a client's choice (a session's HELLO name) and is printed escaped
 * (cua_log_escape in the tables and messages; with --json the JSON is ASCII, everything else \u-escaped): no
 * byte of it reaches the terminal as a control character, and no row is split.
 */
#include "cua_clock.h"
#include "cua_log.h"
#include "cuasync.h"

#include <getopt.h>
#include <jansson.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OPERATOR_SOCKET "/run/cuasyncd/operator.sock" /* the systemd unit's --operator-url */

/* s escaped for a terminal (cua_log_escape), in buf of cap bytes (cap - 1 columns of ASCII at most). */
static const char *
esc(char *buf, size_t cap, const char *s)
{
	return cua_log_escape(buf, cap, s, strlen(s));
}

static int
die(const char *what, int rc)
{
	char msg[CUA_LOG_ESCAPED(1024)];
	const char *m = cua_last_error()[0] ? cua_last_error() : cua_strerror(rc);
	fprintf(stderr, "cuasyncctl: %s: %s: %s\n", what, cua_strerror_name(rc), esc(msg, sizeof(msg), m));
	return 1;
}

/* JSON goes through jansson. Its strings must be UTF-8: s with every byte that does not start a valid sequence
 * replaced by U+FFFD, as a new JSON string (NULL: out of memory, which json_object_set_new tolerates). */
static json_t *
jstr(const char *s)
{
	size_t left = strlen(s), n, k = 0;
	char *u = malloc(3 * left + 1); /* a bad byte (1) becomes U+FFFD (3) */
	if (u == NULL)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; left > 0; p += n ? n : 1, left -= n ? n : 1) {
		n = cua_utf8_seq(p, left);
		memcpy(u + k, n ? (const char *)p : "\xef\xbf\xbd", n ? n : 3);
		k += n ? n : 3;
	}
	json_t *j = json_stringn(u, k);
	free(u);
	return j;
}

/* json_dump_callback's writer: JSON_ENSURE_ASCII leaves DEL (0x7f) as the only byte a terminal could take for
 * a control character, and it can only stand inside a string there, where \u007f means the same. */
static int
put_json(const char *buf, size_t size, void *data)
{
	(void)data;
	for (size_t i = 0; i < size; i++)
		if (buf[i] == 0x7f ? fputs("\\u007f", stdout) < 0 : putchar(buf[i]) == EOF)
			return -1;
	return 0;
}

/* Prints doc (consumed) as one line of ASCII JSON: control characters, C1, U+2028/U+2029 and everything
 * past ASCII as \uXXXX escapes, so that no client-chosen byte reaches a terminal raw. 0, or 1 when it cannot. */
static int
json_print(json_t *doc)
{
	int rc = doc != NULL ? json_dump_callback(doc, put_json, NULL,
						  JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(10))
			     : -1;
	json_decref(doc);
	if (rc != 0 || putchar('\n') == EOF) {
		fprintf(stderr, "cuasyncctl: cannot write the JSON document (out of memory?)\n");
		return 1;
	}
	return 0;
}

/* x rounded to a tenth, as the tables print it. */
static double
tenth(double x)
{
	return (double)(long long)(x * 10 + (x < 0 ? -0.5 : 0.5)) / 10;
}

static void
print_counts(const char *label, const cua_status_counts *c)
{
	printf("%-9s %llu allocations (%.1f MiB), %llu modules, %llu functions, %llu streams, %llu requests in "
	       "flight\n",
	       label, (unsigned long long)c->allocations, (double)c->alloc_bytes / (1 << 20),
	       (unsigned long long)c->modules, (unsigned long long)c->functions, (unsigned long long)c->streams,
	       (unsigned long long)c->in_flight);
}

static json_t *
json_counts(const cua_status_counts *c)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "allocations", (json_int_t)c->allocations, "alloc_bytes",
			 (json_int_t)c->alloc_bytes, "modules", (json_int_t)c->modules, "functions",
			 (json_int_t)c->functions, "streams", (json_int_t)c->streams, "in_flight",
			 (json_int_t)c->in_flight);
}

/* Whether the daemon serves this connection as the operator's: its SESSIONS lists every session, among them
 * this one marked as the operator endpoint's (a client socket lists its own row alone, unmarked). */
static bool
on_operator_endpoint(const cua_session_info *rows, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (rows[i].operator_endpoint)
			return true;
	return false;
}

/* Says on stderr that a view of every session was asked for but only this connection's own is shown: a
 * client socket was reached, not the operator endpoint (a root that forgot --url saw only itself, silently). */
static void
note_own_session_only(void)
{
	fprintf(stderr, "cuasyncctl: note: this is a client socket, not the daemon's operator endpoint: only this "
			"connection's own session is shown.\n"
			"cuasyncctl: note: to see every session, give --url (or $CUASYNC_OPERATOR_URL) the daemon's "
			"--operator-url (the systemd unit's: ipc://" OPERATOR_SOCKET "), as root, the daemon's "
			"user or a member of its --operator-group.\n");
}

/* STATUS's scope: notes a client socket's on stderr (for status and sessions, whose totals would mislead). */
static void
check_scope(cua_client *c)
{
	cua_session_info *rows = NULL;
	uint32_t n = 0;
	if (cua_sessions(c, &rows, &n) == CUA_OK && !on_operator_endpoint(rows, n))
		note_own_session_only();
	free(rows);
}

static int
cmd_status(cua_client *c, bool json, const char *arg)
{
	(void)arg;
	cua_daemon_status st;
	int rc = cua_status(c, &st);
	if (rc != CUA_OK)
		return die("status", rc);
	check_scope(c);
	if (json) {
		json_t *devs = json_array();
		for (uint32_t d = 0; d < st.ndevices; d++)
			json_array_append_new(devs, json_pack("{s:i,s:i,s:i,s:i,s:I,s:I,s:b}", "index", (int)d,
							      "generation", (int)st.devices[d].generation, "restarts",
							      (int)st.devices[d].restarts, "in_flight",
							      (int)st.devices[d].in_flight, "allocations",
							      (json_int_t)st.devices[d].allocations, "alloc_bytes",
							      (json_int_t)st.devices[d].alloc_bytes, "drained",
							      (int)(st.drained >> d & 1)));
		return json_print(json_pack("{s:I,s:i,s:I,s:I,s:o,s:o,s:o,s:i}", "uptime_ms", (json_int_t)st.uptime_ms,
					    "sessions", (int)st.sessions, "requests", (json_int_t)st.requests, "errors",
					    (json_int_t)st.errors, "devices", devs, "session", json_counts(&st.session),
					    "total", json_counts(&st.total), "insecure_listeners",
					    (int)st.insecure_listeners));
	}
	printf("uptime    %.1f s\nsessions  %u (this one included)\nrequests  %llu (%llu errors)\n",
	       (double)st.uptime_ms / 1000, st.sessions, (unsigned long long)st.requests,
	       (unsigned long long)st.errors);
	for (uint32_t d = 0; d < st.ndevices; d++)
		printf("device %u  %sworker generation %u (%u restarts), %u requests in flight, %llu allocations "
		       "(%.1f MiB)\n",
		       d, st.drained >> d & 1 ? "DRAINED (takes no new objects; cuasyncctl undrain), " : "",
		       st.devices[d].generation, st.devices[d].restarts, st.devices[d].in_flight,
		       (unsigned long long)st.devices[d].allocations, (double)st.devices[d].alloc_bytes / (1 << 20));
	print_counts("total", &st.total);
	if (st.insecure_listeners > 0)
		printf("insecure  %u plain tcp:// listener(s) (--allow-insecure-tcp): unauthenticated, unencrypted\n",
		       st.insecure_listeners);
	return 0;
}

static json_t *
json_device(int d, const cua_device_info *in, bool drained)
{
	char sm[16];
	snprintf(sm, sizeof(sm), "%d%d", in->sm_major, in->sm_minor);
	return json_pack("{s:i,s:o,s:s,s:I,s:i,s:i,s:i,s:o,s:i,s:b}", "index", d, "name", jstr(in->name), "sm", sm,
			 "total_mem", (json_int_t)in->total_mem, "multiprocessors", in->multiprocessors,
			 "priority_least", in->priority_least, "priority_greatest", in->priority_greatest, "backend",
			 jstr(in->backend), "generation", (int)in->generation, "drained", (int)drained);
}

static int
cmd_devices(cua_client *c, bool json, const char *arg)
{
	(void)arg;
	static cua_device_info in[64];
	cua_daemon_status st;
	int n = 0, rc;
	cua_device_count(c, &n);
	n = n < 64 ? n : 64;
	for (int d = 0; d < n; d++) /* all of them first: a failure prints no half document */
		if ((rc = cua_device_get_info(c, d, &in[d])) != CUA_OK)
			return die("devices", rc);
	if ((rc = cua_status(c, &st)) != CUA_OK) /* which are drained */
		return die("devices", rc);
	json_t *devs = json ? json_array() : NULL;
	for (int d = 0; d < n; d++) {
		char name[CUA_LOG_ESCAPED(sizeof(in[d].name))], backend[CUA_LOG_ESCAPED(sizeof(in[d].backend))];
		bool drained = st.drained >> d & 1;
		if (json)
			json_array_append_new(devs, json_device(d, &in[d], drained));
		else
			printf("device %d  %s  sm_%d%d  %.1f GiB  %d SMs  priorities %d..%d  %s backend  generation "
			       "%u%s\n",
			       d, esc(name, sizeof(name), in[d].name), in[d].sm_major, in[d].sm_minor,
			       (double)in[d].total_mem / (1 << 30), in[d].multiprocessors, in[d].priority_least,
			       in[d].priority_greatest, esc(backend, sizeof(backend), in[d].backend), in[d].generation,
			       drained ? "  DRAINED (takes no new objects)" : "");
	}
	return json ? json_print(json_pack("{s:o}", "devices", devs)) : 0;
}

static int
cmd_ping(cua_client *c, bool json, const char *arg)
{
	(void)arg;
	uint64_t a = cua_now_ns();
	int rc = cua_ping(c);
	if (rc != CUA_OK)
		return die("ping", rc);
	double us = (double)(cua_now_ns() - a) / 1e3;
	if (json)
		return json_print(json_pack("{s:f}", "round_trip_us", tenth(us)));
	printf("pong in %.1f us\n", us);
	return 0;
}

/* The user of a session as this machine's user database names its uid (the uid itself when the name is
 * unknown here: the uid is the daemon's host's, see OPERATIONS.md on containers); without one, "token:NAME" for
 * a session known by its token, else "". */
static const char *
user_of(const cua_session_info *s, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char pwbuf[1024];
	if (s->uid == CUA_NO_UID)
		snprintf(buf, len, "%s%s", s->token[0] ? "token:" : "", s->token);
	else if (getpwuid_r((uid_t)s->uid, &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res != NULL)
		snprintf(buf, len, "%s", res->pw_name);
	else
		snprintf(buf, len, "%u", s->uid);
	return buf;
}

static json_t *
json_session(const cua_session_info *s)
{
	char user[80];
	json_t *j =
		json_pack("{s:I,s:o,s:i,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b}", "id", (json_int_t)s->id, "client",
			  jstr(s->client), "pid", (int)s->pid, "peer_pid", (int)s->peer_pid, "age_ms",
			  (json_int_t)s->age_ms, "requests", (json_int_t)s->requests, "errors", (json_int_t)s->errors,
			  "in_flight", (json_int_t)s->in_flight, "alloc_bytes", (json_int_t)s->alloc_bytes, "streams",
			  (json_int_t)s->streams, "modules", (json_int_t)s->modules, "operator", s->operator_endpoint);
	json_object_set_new(j, "tenant", jstr(s->tenant));
	json_object_set_new(j, "transport", jstr(s->transport));
	json_object_set_new(j, "uid", s->uid == CUA_NO_UID ? json_null() : json_integer(s->uid));
	json_object_set_new(j, "gid", s->gid == CUA_NO_UID ? json_null() : json_integer(s->gid));
	json_object_set_new(j, "user", s->uid == CUA_NO_UID ? json_null() : jstr(user_of(s, user, sizeof(user))));
	json_object_set_new(j, "peer", jstr(s->peer));
	json_object_set_new(j, "token", jstr(s->token));
	return j;
}

/* One cell: s escaped, "-" when empty; cap - 1 columns at most (a longer value ends in "..."). */
static const char *
cell(char *buf, size_t cap, const char *s)
{
	return esc(buf, cap, s[0] ? s : "-");
}

static int
cmd_sessions(cua_client *c, bool json, const char *arg)
{
	(void)arg;
	cua_session_info *rows = NULL;
	uint32_t n = 0;
	int rc = cua_sessions(c, &rows, &n);
	if (rc != CUA_OK)
		return die("sessions", rc);
	if (!on_operator_endpoint(rows, n))
		note_own_session_only();
	json_t *list = json ? json_array() : NULL;
	if (!json)
		printf("%-7s %-12s %-12s %-7s %-21s %8s %8s %-16s %8s %8s %6s %9s %10s %7s %7s\n", "SESSION", "USER",
		       "TENANT", "VIA", "ADDRESS", "PID", "PEER", "CLIENT", "AGE_S", "REQUESTS", "ERRORS", "IN_FLIGHT",
		       "MEMORY_MIB", "STREAMS", "MODULES");
	for (uint32_t i = 0; i < n; i++) {
		const cua_session_info *s = &rows[i];
		if (json) {
			json_array_append_new(list, json_session(s));
			continue;
		}
		/* the cells' widths (a longer value ends in "..."); the client's name and the tenant's may hold
		 * anything and are escaped like every string */
		char peer[16] = "-", user[80], u[13], tenant[13], via[8], addr[22], client[17];
		if (s->peer_pid != 0)
			snprintf(peer, sizeof(peer), "%u", s->peer_pid);
		printf("%-7llu %-12s %-12s %-7s %-21s %8u %8s %-16s %8.1f %8llu %6llu %9llu %10.1f %7llu %7llu%s\n",
		       (unsigned long long)s->id, cell(u, sizeof(u), user_of(s, user, sizeof(user))),
		       cell(tenant, sizeof(tenant), s->tenant), cell(via, sizeof(via), s->transport),
		       cell(addr, sizeof(addr), s->peer), s->pid, peer, cell(client, sizeof(client), s->client),
		       (double)s->age_ms / 1000, (unsigned long long)s->requests, (unsigned long long)s->errors,
		       (unsigned long long)s->in_flight, (double)s->alloc_bytes / (1 << 20),
		       (unsigned long long)s->streams, (unsigned long long)s->modules,
		       s->operator_endpoint ? "  (operator)" : "");
	}
	free(rows);
	return json ? json_print(json_pack("{s:o}", "sessions", list)) : 0;
}

static int
cmd_disconnect(cua_client *c, bool json, const char *arg)
{
	char *end;
	unsigned long long id = strtoull(arg, &end, 10);
	if (*arg == '\0' || *end != '\0') {
		char a[CUA_LOG_ESCAPED(64)];
		fprintf(stderr, "cuasyncctl: disconnect: '%s' is not a session id (see cuasyncctl sessions)\n",
			esc(a, sizeof(a), arg));
		return 2;
	}
	int rc = cua_disconnect_session(c, id);
	if (rc != CUA_OK)
		return die("disconnect", rc);
	if (json)
		return json_print(json_pack("{s:I}", "disconnected", (json_int_t)id));
	printf("session %llu disconnected\n", id);
	return 0;
}

/* drain DEVICE / undrain DEVICE. */
static int
drain_cmd(cua_client *c, bool json, const char *arg, int drain)
{
	char *end;
	long dev = strtol(arg, &end, 10);
	uint32_t holding = 0, in_flight = 0;
	if (*arg == '\0' || *end != '\0' || dev < 0 || dev > 63) {
		char a[CUA_LOG_ESCAPED(64)];
		fprintf(stderr, "cuasyncctl: '%s' is not a device index (see cuasyncctl devices)\n",
			esc(a, sizeof(a), arg));
		return 2;
	}
	int rc = cua_drain_device(c, (int)dev, drain, &holding, &in_flight);
	if (rc != CUA_OK)
		return die(drain ? "drain" : "undrain", rc);
	if (json)
		return json_print(json_pack("{s:i,s:b,s:i,s:i}", "device", (int)dev, "drained", drain, "holding",
					    (int)holding, "in_flight", (int)in_flight));
	printf("device %ld %s; %u session(s) hold memory, streams, modules or work there, %u request(s) in "
	       "flight\n",
	       dev, drain ? "drained: it takes no new objects" : "takes new objects again", holding, in_flight);
	return 0;
}

static int
cmd_drain(cua_client *c, bool json, const char *arg)
{
	return drain_cmd(c, json, arg, 1);
}

static int
cmd_undrain(cua_client *c, bool json, const char *arg)
{
	return drain_cmd(c, json, arg, 0);
}

/* ------------------------------------------------------------------ top */

static double top_interval = 1.0; /* --interval */
static long top_count = -1;       /* --count (-1: until interrupted; with --json: 1) */

/* One tenant's row of a top sample. */
struct top_row {
	char tenant[65];
	unsigned sessions;
	uint64_t requests, in_flight, bytes, streams, modules, busy_ns;
};

static struct top_row *
top_row_of(struct top_row *rows, unsigned *n, const char *tenant)
{
	for (unsigned i = 0; i < *n; i++)
		if (strcmp(rows[i].tenant, tenant) == 0)
			return &rows[i];
	struct top_row *r = &rows[(*n)++];
	memset(r, 0, sizeof(*r));
	snprintf(r->tenant, sizeof(r->tenant), "%s", tenant[0] ? tenant : "(operator)");
	return r;
}

/* Per tenant: the sessions' gauges at b, and what their counters moved between a and b (a session new in b
 * counts from 0). rows has room for nb rows. */
static unsigned
top_aggregate(const cua_session_info *a, uint32_t na, const cua_session_info *b, uint32_t nb, struct top_row *rows)
{
	unsigned n = 0;
	for (uint32_t i = 0; i < nb; i++) {
		const cua_session_info *s = &b[i], *old = NULL;
		for (uint32_t k = 0; k < na && old == NULL; k++)
			if (a[k].id == s->id)
				old = &a[k];
		struct top_row *r = top_row_of(rows, &n, s->tenant);
		r->sessions++;
		r->requests += s->requests - (old ? old->requests : 0);
		r->busy_ns += s->busy_ns - (old ? old->busy_ns : 0);
		r->in_flight += s->in_flight;
		r->bytes += s->alloc_bytes;
		r->streams += s->streams;
		r->modules += s->modules;
	}
	return n;
}

static void
top_print(const struct top_row *rows, unsigned n, double secs, bool json, bool tty)
{
	if (json) {
		json_t *list = json_array();
		for (unsigned i = 0; i < n; i++) {
			const struct top_row *r = &rows[i];
			json_t *t =
				json_pack("{s:o,s:i,s:f,s:f,s:I,s:I,s:I,s:I}", "tenant", jstr(r->tenant), "sessions",
					  (int)r->sessions, "requests_per_s", tenth((double)r->requests / secs),
					  "busy_s_per_s",
					  (double)(long long)((double)r->busy_ns / 1e6 / secs + 0.5) / 1000,
					  "in_flight", (json_int_t)r->in_flight, "alloc_bytes", (json_int_t)r->bytes,
					  "streams", (json_int_t)r->streams, "modules", (json_int_t)r->modules);
			json_array_append_new(list, t);
		}
		json_print(json_pack("{s:f,s:o}", "interval_s", (double)(long long)(secs * 1000 + 0.5) / 1000,
				     "tenants", list));
		fflush(stdout);
		return;
	}
	if (tty)
		printf("\033[H\033[2J");
	printf("cuasyncd by tenant, over %.1f s (device busy: seconds of stream time per second)\n", secs);
	printf("%-20s %8s %10s %8s %9s %10s %7s %7s\n", "TENANT", "SESSIONS", "REQ/S", "BUSY", "IN_FLIGHT",
	       "MEMORY_MIB", "STREAMS", "MODULES");
	for (unsigned i = 0; i < n; i++) {
		const struct top_row *r = &rows[i];
		char tenant[21];
		printf("%-20s %8u %10.1f %8.2f %9llu %10.1f %7llu %7llu\n", esc(tenant, sizeof(tenant), r->tenant),
		       r->sessions, (double)r->requests / secs, (double)r->busy_ns / 1e9 / secs,
		       (unsigned long long)r->in_flight, (double)r->bytes / (1 << 20), (unsigned long long)r->streams,
		       (unsigned long long)r->modules);
	}
	fflush(stdout);
}

/* A live view of usage by tenant, from SESSIONS every --interval seconds (the operator endpoint sees every
 * session). With --json: one document per sample, one sample unless --count says more. */
static int
cmd_top(cua_client *c, bool json, const char *arg)
{
	(void)arg;
	cua_session_info *a = NULL, *b = NULL;
	uint32_t na = 0, nb = 0;
	int rc = cua_sessions(c, &a, &na);
	bool tty = isatty(STDOUT_FILENO);
	if (rc == CUA_OK && !on_operator_endpoint(a, na))
		note_own_session_only();
	long left = top_count >= 0 ? top_count : json ? 1 : -1;
	while (rc == CUA_OK && left != 0) {
		uint64_t t0 = cua_now_ns();
		cua_sleep_ms((uint64_t)(top_interval * 1000.0));
		if ((rc = cua_sessions(c, &b, &nb)) != CUA_OK)
			break;
		uint64_t t1 = cua_now_ns();
		struct top_row *rows = calloc(nb ? nb : 1, sizeof(*rows));
		if (rows == NULL) {
			rc = CUA_ENOMEM;
			break;
		}
		double secs = cua_elapsed_s(t0, t1);
		top_print(rows, top_aggregate(a, na, b, nb, rows), secs, json, tty && !json);
		free(rows);
		free(a);
		a = b;
		na = nb;
		b = NULL;
		if (left > 0)
			left--;
	}
	free(a);
	free(b);
	return rc == CUA_OK ? 0 : die("top", rc);
}

/* ---- tenant add|set|remove|list: tenants at run time (operator endpoint) */

/* The options of `tenant add` and `tenant set`, one row each: the configuration file's key of [tenant NAME] it
 * sets (cuasyncd.conf(5)), and whether it is a rule (who belongs: add only). */
static const struct tenant_opt {
	const char *name;
	bool rule;
} tenant_opts[] = {
	{"uid", true},       {"user", true},     {"group", true},         {"token", true},       {"mem", false},
	{"streams", false},  {"modules", false}, {"module-bytes", false}, {"host-bytes", false}, {"graph-bytes", false},
	{"sessions", false}, {"workers", false}, {"in-flight", false},    {"weight", false},     {"isolation", false},
};
#define NTENANT_OPTS (sizeof(tenant_opts) / sizeof(tenant_opts[0]))
enum { OPT_ONE_OFF = 1000, OPT_DRAIN, OPT_JSON, OPT_URL };

static void
tenant_usage(FILE *f)
{
	fprintf(f,
		"usage: cuasyncctl [--url URL] tenant add NAME [--uid UID] [--user NAME] [--group G] [--token TOKEN]\n"
		"                  [--one-off-token] [--mem BYTES|PCT%%] [--streams N] [--modules N]\n"
		"                  [--module-bytes B] [--host-bytes B] [--graph-bytes B] [--sessions N]\n"
		"                  [--workers N] [--in-flight N] [--weight N] [--isolation shared|session]\n"
		"       cuasyncctl [--url URL] tenant set NAME [the limit options of add]\n"
		"       cuasyncctl [--url URL] tenant remove NAME [--drain]\n"
		"       cuasyncctl [--url URL] [--json] tenant list\n");
}

static json_t *
json_tenant(const cua_tenant_info *t)
{
	json_t *lim = json_object();
	for (uint32_t k = 0; k < t->nlimits; k++)
		json_object_set_new(lim, t->limits[k].key, jstr(t->limits[k].value));
	return json_pack("{s:o,s:o,s:o,s:o,s:b,s:I,s:I,s:I}", "name", jstr(t->name), "source", jstr(t->source), "rule",
			 jstr(t->rule), "limits", lim, "removing", t->removing, "sessions", (json_int_t)t->sessions,
			 "mem_bytes", (json_int_t)t->mem_bytes, "streams", (json_int_t)t->streams);
}

static int
tenant_list(cua_client *c, bool json)
{
	cua_tenant_info *rows;
	uint32_t n;
	int rc = cua_tenant_list(c, &rows, &n);
	if (rc != CUA_OK)
		return die("tenant list", rc);
	json_t *list = json ? json_array() : NULL;
	if (!json)
		printf("%-24s %-8s %8s %14s %8s  %-30s %s\n", "TENANT", "SOURCE", "SESSIONS", "MEM", "STREAMS", "RULE",
		       "LIMITS");
	for (uint32_t i = 0; i < n; i++) {
		const cua_tenant_info *t = &rows[i];
		if (json) {
			json_array_append_new(list, json_tenant(t));
			continue;
		}
		char name[CUA_LOG_ESCAPED(65)], rule[CUA_LOG_ESCAPED(1024)], lim[1024] = "";
		for (uint32_t k = 0; k < t->nlimits; k++) {
			size_t used = strlen(lim);
			snprintf(lim + used, sizeof(lim) - used, "%s%s=%s", used ? " " : "", t->limits[k].key,
				 t->limits[k].value);
		}
		printf("%-24s %-8s %8u %14llu %8llu  %-30s %s%s\n", esc(name, sizeof(name), t->name), t->source,
		       t->sessions, (unsigned long long)t->mem_bytes, (unsigned long long)t->streams,
		       t->rule[0] ? esc(rule, sizeof(rule), t->rule) : "-", lim[0] ? lim : "-",
		       t->removing ? "  (removing)" : "");
	}
	free(rows);
	return json ? json_print(json_pack("{s:o}", "tenants", list)) : 0;
}

/* `tenant VERB ...`: args are the words after "tenant". Its own options (getopt_long over them, which may come
 * after NAME), so that the limit options are named exactly as the configuration file's keys. */
static int
cmd_tenant(const char *url, bool json, int argc, char **argv)
{
	struct option opts[NTENANT_OPTS + 5];
	const char *kv[2 * NTENANT_OPTS + 1];
	size_t nkv = 0;
	bool one_off = false, drain = false, rules = false;
	for (size_t i = 0; i < NTENANT_OPTS; i++)
		opts[i] = (struct option){tenant_opts[i].name, 1, NULL, (int)i};
	opts[NTENANT_OPTS] = (struct option){"one-off-token", 0, NULL, OPT_ONE_OFF};
	opts[NTENANT_OPTS + 1] = (struct option){"drain", 0, NULL, OPT_DRAIN};
	opts[NTENANT_OPTS + 2] = (struct option){"json", 0, NULL, OPT_JSON};
	opts[NTENANT_OPTS + 3] = (struct option){"url", 1, NULL, OPT_URL};
	opts[NTENANT_OPTS + 4] = (struct option){NULL, 0, NULL, 0};
	int ch;
	optind = 0; /* glibc: start over on the new argv */
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch >= 0 && ch < (int)NTENANT_OPTS) {
			if (nkv + 2 >= sizeof(kv) / sizeof(kv[0])) /* each option once is plenty; a repeat beyond */
				ch = '?';
			else {
				kv[nkv++] = tenant_opts[ch].name;
				kv[nkv++] = optarg;
				rules |= tenant_opts[ch].rule;
				continue;
			}
		}
		if (ch == OPT_ONE_OFF || ch == OPT_DRAIN || ch == OPT_JSON || ch == OPT_URL) {
			one_off |= ch == OPT_ONE_OFF;
			drain |= ch == OPT_DRAIN;
			json |= ch == OPT_JSON;
			url = ch == OPT_URL ? optarg : url;
			continue;
		}
		tenant_usage(stderr);
		return 2;
	}
	kv[nkv] = NULL;
	const char *verb = optind < argc ? argv[optind] : "";
	const char *name = optind + 1 < argc ? argv[optind + 1] : NULL;
	bool list = strcmp(verb, "list") == 0, add = strcmp(verb, "add") == 0, set = strcmp(verb, "set") == 0,
	     rm = strcmp(verb, "remove") == 0;
	int words = argc - optind;
	const char *bad = !list && !add && !set && !rm          ? "unknown tenant command"
			  : list                                ? (words != 1 ? "tenant list takes no NAME" : NULL)
			  : words != 2                          ? "expected one NAME"
			  : (one_off && !add) || (drain && !rm) ? "option not for this command"
			  : (rules && !add)                     ? "--uid, --user, --group and --token only with add"
			  : (rm && nkv > 0)                     ? "tenant remove takes only --drain"
			  : (set && nkv == 0)                   ? "tenant set: nothing to set"
								: NULL;
	if (bad != NULL) {
		fprintf(stderr, "cuasyncctl: %s\n", bad);
		tenant_usage(stderr);
		return 2;
	}
	if (url == NULL)
		url = getenv("CUASYNC_OPERATOR_URL");
	if (url == NULL && access(OPERATOR_SOCKET, F_OK) == 0)
		url = "ipc://" OPERATOR_SOCKET;
	cua_client *c;
	int rc = cua_connect(url, &c);
	if (rc != CUA_OK)
		return die("connect", rc);
	char token[80] = "", what[32];
	snprintf(what, sizeof(what), "tenant %s", verb);
	if (list)
		rc = tenant_list(c, json);
	else if ((rc = add   ? cua_tenant_add(c, name, kv, one_off ? token : NULL, sizeof(token))
		       : set ? cua_tenant_set(c, name, kv)
			     : cua_tenant_remove(c, name, drain)) != CUA_OK)
		rc = die(what, rc);
	else if (json)
		rc = json_print(one_off ? json_pack("{s:s,s:s}", "tenant", name, "token", token)
					: json_pack("{s:s,s:s}", "tenant", name, "done", verb));
	else if (one_off)
		printf("%s\n", token); /* alone on stdout: a prolog reads it */
	else
		fprintf(stderr, "cuasyncctl: tenant %s: %s%s\n", name,
			add     ? "added"
			: set   ? "changed"
			: drain ? "removing: it goes when its sessions end"
				: "removed",
			rm && !drain ? " (its sessions are disconnected)" : "");
	explicit_bzero(token, sizeof(token));
	cua_disconnect(c);
	return rc;
}

/* The commands: one row each (arg: the name of the one argument it takes, NULL: none). */
static const struct ctl_cmd {
	const char *name, *arg;
	int (*run)(cua_client *c, bool json, const char *arg);
} cmds[] = {
	{"status", NULL, cmd_status},
	{"devices", NULL, cmd_devices},
	{"ping", NULL, cmd_ping},
	{"sessions", NULL, cmd_sessions},
	{"disconnect", "SESSION", cmd_disconnect},
	{"drain", "DEVICE", cmd_drain},
	{"undrain", "DEVICE", cmd_undrain},
	{"top", NULL, cmd_top},
};

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: cuasyncctl [--url URL] [--json] COMMAND\n\n"
		"  status              sessions, requests, errors, per-device workers and memory\n"
		"  devices             the devices and their backends\n"
		"  ping                round-trip time\n"
		"  sessions            one line per session (the operator endpoint lists every one)\n"
		"  disconnect SESSION  close a session's connection (operator endpoint)\n"
		"  drain DEVICE        the device takes no new objects; says what still holds it (operator endpoint)\n"
		"  undrain DEVICE      it takes new objects again\n"
		"  top                 live usage by tenant: sessions, requests/s, device busy time, memory\n"
		"                      (--interval SECONDS, default 1; --count N samples, default: until Ctrl-C)\n"
		"  tenant add|set|remove|list ...\n"
		"                      tenants at run time (operator endpoint; see cuasyncctl(1))\n\n"
		"--json prints one JSON document on stdout (top: one per sample, one sample unless --count).\n");
}

int
main(int argc, char **argv)
{
	const char *url = NULL;
	bool json = false;
	static const struct option opts[] = {{"url", 1, NULL, 'u'},      {"json", 0, NULL, 'j'},
					     {"interval", 1, NULL, 'i'}, {"count", 1, NULL, 'n'},
					     {"help", 0, NULL, 'h'},     {NULL, 0, NULL, 0}};
	int ch, tenant_at = argc;
	for (int i = 1; i < argc; i++) /* `tenant ...` has options of its own: the words from there are its */
		if (strcmp(argv[i], "tenant") == 0) {
			tenant_at = i;
			break;
		}
	while ((ch = getopt_long(tenant_at, argv, "", opts, NULL)) != -1) {
		if (ch == 'u') {
			url = optarg;
		} else if (ch == 'j') {
			json = true;
		} else if (ch == 'i' && (top_interval = atof(optarg)) >= 0.05 && top_interval <= 3600) {
			continue;
		} else if (ch == 'n' && (top_count = atol(optarg)) >= 1) {
			continue;
		} else {
			usage(ch == 'h' ? stdout : stderr);
			return ch == 'h' ? 0 : 2;
		}
	}
	if (tenant_at < argc && optind == tenant_at)
		return cmd_tenant(url, json, argc - tenant_at, argv + tenant_at);
	const char *name = optind < argc ? argv[optind] : "status";
	const struct ctl_cmd *cmd = NULL;
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(cmds[i].name, name) == 0)
			cmd = &cmds[i];
	int want = cmd != NULL && cmd->arg != NULL ? 2 : 1; /* words: the command and its argument */
	if (cmd == NULL || (optind < argc && argc - optind != want)) {
		fprintf(stderr, "cuasyncctl: %s '%s'\n", cmd == NULL ? "unknown command" : "wrong arguments for", name);
		usage(stderr);
		return 2;
	}
	if (url == NULL)
		url = getenv("CUASYNC_OPERATOR_URL");
	if (url == NULL && access(OPERATOR_SOCKET, F_OK) == 0)
		url = "ipc://" OPERATOR_SOCKET;
	cua_client *c;
	int rc = cua_connect(url, &c);
	if (rc != CUA_OK)
		return die("connect", rc);
	rc = cmd->run(c, json, want == 2 ? argv[optind + 1] : NULL);
	cua_disconnect(c);
	return rc;
}
