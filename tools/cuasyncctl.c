/*
 * cuasyncctl — look at a running cuasyncd.
 *
 *   cuasyncctl [--url URL] [--json] status     sessions, requests, errors, per-device workers and memory
 *   cuasyncctl [--url URL] [--json] devices    the devices and their backends
 *   cuasyncctl [--url URL] [--json] ping       round-trip time
 *   cuasyncctl [--url URL] [--json] sessions   one line per session: id, client and pid, requests, work in
 *                                              flight, memory, streams
 *   cuasyncctl [--url URL] [--json] disconnect SESSION
 *                                              close a session's connection (operator endpoint only)
 *   cuasyncctl [--url URL] [--json] drain|undrain DEVICE
 *                                              the device takes no new objects (or again); says how many
 *                                              sessions still hold it and how much work is in flight there
 *
 * URL defaults to $CUASYNC_OPERATOR_URL, else the operator socket of a system daemon
 * (/run/cuasyncd/operator.sock, when it is there), else $CUASYNC_URL or the default socket. Through the
 * daemon's operator endpoint STATUS and SESSIONS show every session; through a client socket only this
 * connection's own. --json prints one JSON document on stdout and nothing else there (errors go to stderr).
 * Exit status 0 when the daemon answered, 1 when it did not or refused, 2 for a usage error.
 *
 * Every string the daemon returns may be a client's choice (a session's HELLO name) and is printed escaped
 * (cua_log_escape in the tables and messages, JSON's escapes with --json): no byte of it reaches the terminal
 * as a control character, and no row is split.
 */
#include "cua_clock.h"
#include "cua_log.h"
#include "cuasync.h"

#include <getopt.h>
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

/* s as a JSON string (RFC 8259), quotes included: '"' and '\\' escaped, control characters (C0, DEL, C1) and
 * U+2028/U+2029 as \\uXXXX, valid UTF-8 kept, every byte that is not as U+FFFD (JSON text is UTF-8). */
static void
json_str(const char *s)
{
	putchar('"');
	size_t left = strlen(s);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = cua_utf8_seq(p, left);
		unsigned cp = n == 2 ? (unsigned)(p[0] & 0x1f) << 6 | (p[1] & 0x3f) : 0;
		if (n == 1 && (*p == '"' || *p == '\\'))
			printf("\\%c", *p);
		else if (n == 1 && (*p == '\n' || *p == '\r' || *p == '\t'))
			printf("\\%c", *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't');
		else if (n == 1 && (*p < 0x20 || *p == 0x7f))
			printf("\\u%04x", *p);
		else if (n == 2 && cp <= 0x9f) /* C1 */
			printf("\\u%04x", cp);
		else if (n == 3 && p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9))
			printf("\\u%04x", 0x2000u | (p[2] & 0x3f));
		else if (n == 0)
			printf("\\ufffd");
		else
			fwrite(p, 1, n, stdout);
		p += n ? n : 1;
		left -= n ? n : 1;
	}
	putchar('"');
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

static void
json_counts(const char *label, const cua_status_counts *c)
{
	printf("\"%s\":{\"allocations\":%llu,\"alloc_bytes\":%llu,\"modules\":%llu,\"functions\":%llu,\"streams\":%llu,"
	       "\"in_flight\":%llu}",
	       label, (unsigned long long)c->allocations, (unsigned long long)c->alloc_bytes,
	       (unsigned long long)c->modules, (unsigned long long)c->functions, (unsigned long long)c->streams,
	       (unsigned long long)c->in_flight);
}

static int
cmd_status(cua_client *c, bool json, const char *arg)
{
	(void)arg;
	cua_daemon_status st;
	int rc = cua_status(c, &st);
	if (rc != CUA_OK)
		return die("status", rc);
	if (json) {
		printf("{\"uptime_ms\":%llu,\"sessions\":%u,\"requests\":%llu,\"errors\":%llu,\"devices\":[",
		       (unsigned long long)st.uptime_ms, st.sessions, (unsigned long long)st.requests,
		       (unsigned long long)st.errors);
		for (uint32_t d = 0; d < st.ndevices; d++)
			printf("%s{\"index\":%u,\"generation\":%u,\"restarts\":%u,\"in_flight\":%u,\"allocations\":%"
			       "llu,"
			       "\"alloc_bytes\":%llu}",
			       d ? "," : "", d, st.devices[d].generation, st.devices[d].restarts,
			       st.devices[d].in_flight, (unsigned long long)st.devices[d].allocations,
			       (unsigned long long)st.devices[d].alloc_bytes);
		printf("],");
		json_counts("session", &st.session);
		putchar(',');
		json_counts("total", &st.total);
		printf(",\"insecure_listeners\":%u}\n", st.insecure_listeners);
		return 0;
	}
	printf("uptime    %.1f s\nsessions  %u (this one included)\nrequests  %llu (%llu errors)\n",
	       (double)st.uptime_ms / 1000, st.sessions, (unsigned long long)st.requests,
	       (unsigned long long)st.errors);
	for (uint32_t d = 0; d < st.ndevices; d++)
		printf("device %u  worker generation %u (%u restarts), %u requests in flight, %llu allocations "
		       "(%.1f MiB)\n",
		       d, st.devices[d].generation, st.devices[d].restarts, st.devices[d].in_flight,
		       (unsigned long long)st.devices[d].allocations, (double)st.devices[d].alloc_bytes / (1 << 20));
	print_counts("total", &st.total);
	if (st.insecure_listeners > 0)
		printf("insecure  %u plain tcp:// listener(s) (--allow-insecure-tcp): unauthenticated, unencrypted\n",
		       st.insecure_listeners);
	return 0;
}

static void
json_device(int d, const cua_device_info *in)
{
	printf("%s{\"index\":%d,\"name\":", d ? "," : "", d);
	json_str(in->name);
	printf(",\"sm\":\"%d%d\",\"total_mem\":%llu,\"multiprocessors\":%d,\"priority_least\":%d,"
	       "\"priority_greatest\":%d,\"backend\":",
	       in->sm_major, in->sm_minor, (unsigned long long)in->total_mem, in->multiprocessors, in->priority_least,
	       in->priority_greatest);
	json_str(in->backend);
	printf(",\"generation\":%u}", in->generation);
}

static int
cmd_devices(cua_client *c, bool json, const char *arg)
{
	(void)arg;
	static cua_device_info in[64];
	int n = 0, rc;
	cua_device_count(c, &n);
	n = n < 64 ? n : 64;
	for (int d = 0; d < n; d++) /* all of them first: a failure prints no half document */
		if ((rc = cua_device_get_info(c, d, &in[d])) != CUA_OK)
			return die("devices", rc);
	if (json)
		printf("{\"devices\":[");
	for (int d = 0; d < n; d++) {
		char name[CUA_LOG_ESCAPED(sizeof(in[d].name))], backend[CUA_LOG_ESCAPED(sizeof(in[d].backend))];
		if (json)
			json_device(d, &in[d]);
		else
			printf("device %d  %s  sm_%d%d  %.1f GiB  %d SMs  priorities %d..%d  %s backend  generation "
			       "%u\n",
			       d, esc(name, sizeof(name), in[d].name), in[d].sm_major, in[d].sm_minor,
			       (double)in[d].total_mem / (1 << 30), in[d].multiprocessors, in[d].priority_least,
			       in[d].priority_greatest, esc(backend, sizeof(backend), in[d].backend), in[d].generation);
	}
	if (json)
		printf("]}\n");
	return 0;
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
	printf(json ? "{\"round_trip_us\":%.1f}\n" : "pong in %.1f us\n", us);
	return 0;
}

static void
json_session(const cua_session_info *s, bool first)
{
	printf("%s{\"id\":%llu,\"client\":", first ? "" : ",", (unsigned long long)s->id);
	json_str(s->client);
	printf(",\"pid\":%u,\"peer_pid\":%u,\"age_ms\":%llu,\"requests\":%llu,\"errors\":%llu,\"in_flight\":%llu,"
	       "\"alloc_bytes\":%llu,\"streams\":%llu,\"modules\":%llu,\"operator\":%s}",
	       s->pid, s->peer_pid, (unsigned long long)s->age_ms, (unsigned long long)s->requests,
	       (unsigned long long)s->errors, (unsigned long long)s->in_flight, (unsigned long long)s->alloc_bytes,
	       (unsigned long long)s->streams, (unsigned long long)s->modules, s->operator_endpoint ? "true" : "false");
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
	if (json)
		printf("{\"sessions\":[");
	else
		printf("%-8s %-16s %8s %8s %9s %9s %7s %9s %10s %7s %7s\n", "SESSION", "CLIENT", "PID", "PEER", "AGE_S",
		       "REQUESTS", "ERRORS", "IN_FLIGHT", "MEMORY_MIB", "STREAMS", "MODULES");
	for (uint32_t i = 0; i < n; i++) {
		const cua_session_info *s = &rows[i];
		if (json) {
			json_session(s, i == 0);
			continue;
		}
		char peer[16] = "-", client[17]; /* the column's 16 characters: a longer name ends in "..." */
		if (s->peer_pid != 0)
			snprintf(peer, sizeof(peer), "%u", s->peer_pid);
		printf("%-8llu %-16s %8u %8s %9.1f %9llu %7llu %9llu %10.1f %7llu %7llu%s\n", (unsigned long long)s->id,
		       esc(client, sizeof(client), s->client), s->pid, peer, (double)s->age_ms / 1000,
		       (unsigned long long)s->requests, (unsigned long long)s->errors, (unsigned long long)s->in_flight,
		       (double)s->alloc_bytes / (1 << 20), (unsigned long long)s->streams,
		       (unsigned long long)s->modules, s->operator_endpoint ? "  (operator)" : "");
	}
	if (json)
		printf("]}\n");
	free(rows);
	return 0;
}

static int
cmd_disconnect(cua_client *c, bool json, const char *arg)
{
	char *end;
	unsigned long long id = strtoull(arg, &end, 10);
	if (*arg == '\0' || *end != '\0') {
		fprintf(stderr, "cuasyncctl: disconnect: '%s' is not a session id (see cuasyncctl sessions)\n", arg);
		return 2;
	}
	int rc = cua_disconnect_session(c, id);
	if (rc != CUA_OK)
		return die("disconnect", rc);
	printf(json ? "{\"disconnected\":%llu}\n" : "session %llu disconnected\n", id);
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
		fprintf(stderr, "cuasyncctl: '%s' is not a device index (see cuasyncctl devices)\n", arg);
		return 2;
	}
	int rc = cua_drain_device(c, (int)dev, drain, &holding, &in_flight);
	if (rc != CUA_OK)
		return die(drain ? "drain" : "undrain", rc);
	if (json)
		printf("{\"device\":%ld,\"drained\":%s,\"holding\":%u,\"in_flight\":%u}\n", dev,
		       drain ? "true" : "false", holding, in_flight);
	else
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
		printf("{\"interval_s\":%.3f,\"tenants\":[", secs);
		for (unsigned i = 0; i < n; i++) {
			const struct top_row *r = &rows[i];
			printf("%s{\"tenant\":", i ? "," : "");
			json_str(r->tenant);
			printf(",\"sessions\":%u,\"requests_per_s\":%.1f,\"busy_s_per_s\":%.3f,\"in_flight\":%llu,"
			       "\"alloc_bytes\":%llu,\"streams\":%llu,\"modules\":%llu}",
			       r->sessions, (double)r->requests / secs, (double)r->busy_ns / 1e9 / secs,
			       (unsigned long long)r->in_flight, (unsigned long long)r->bytes,
			       (unsigned long long)r->streams, (unsigned long long)r->modules);
		}
		printf("]}\n");
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
		"                      (--interval SECONDS, default 1; --count N samples, default: until Ctrl-C)\n\n"
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
	int ch;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
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
