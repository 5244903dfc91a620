/*
 * options-table.c — the daemon's options, one row each (see options-table.h), and what walks the rows without
 * knowing any one option: the typed parsers, the defaults, --help.
 */
#include "config.h"

#include "cua_log.h"
#include "cuad-limits.h"
#include "options-table.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#ifndef CUAD_CONF_DEFAULT
#define CUAD_CONF_DEFAULT "/etc/cuasyncd/cuasyncd.conf"
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

/* The field of struct config that a row sets. */
#define F(field) offsetof(struct config, field), sizeof(((struct config *)0)->field)
#define NOFIELD 0, 0

/* --session-mem sets two fields, bytes and a share: the row's field spans both (compared and copied whole). */
_Static_assert(offsetof(struct config, session_mem_pct) == offsetof(struct config, session_mem) + sizeof(uint64_t),
	       "session_mem_pct follows session_mem");
#define F_SHARE offsetof(struct config, session_mem), sizeof(uint64_t) + sizeof(unsigned)

static int parse_listen(struct config *c, const struct opt_row *o, const char *arg);
static int parse_share(struct config *c, const struct opt_row *o, const char *arg);
static int parse_log_level(struct config *c, const struct opt_row *o, const char *arg);
static int parse_help(struct config *c, const struct opt_row *o, const char *arg);
static int parse_version(struct config *c, const struct opt_row *o, const char *arg);

/* clang-format off */
const struct opt_row options_table[] = {
	/* name, type, flags, field, default, lo, hi, choices, parse, arg, help, note */
	{"listen", OPT_CUSTOM, 0, F(listen), NULL, 0, 0, NULL, parse_listen, "URL",
	 "listen on URL (ipc://, tcp://, tls+tcp://); repeatable", NULL},
	{"backend", OPT_STRING, 0, F(backend), "auto", 0, 0, "auto|cuda|emu", NULL, "auto|cuda|emu",
	 "device backend", ": cuda when a GPU is present, else emu"},
	{"emu-sm", OPT_UINT, 0, F(emu_sm), "90", 10, 199, NULL, NULL, "NN",
	 "compute capability the emulated device reports", NULL},
	{"emu-devices", OPT_UINT, 0, F(emu_devices), "1", 1, CUA_MAX_DEVICES, NULL, NULL, "N",
	 "number of emulated devices", NULL},
	{"emu-mem", OPT_SIZE, 0, F(emu_mem), "1G", 1, UINT64_MAX, NULL, NULL, "BYTES",
	 "memory of each emulated device", NULL},
	{"devices", OPT_STRING, 0, F(devices), NULL, 0, 0, NULL, NULL, "LIST",
	 "comma-separated device ordinals to serve", ": all"},
	{"pool-streams", OPT_UINT, 0, F(pool_streams), "4", 1, CUAD_POOL_STREAMS_MAX, NULL, NULL, "N",
	 "streams per device for launches that name none, at most " STR(CUAD_POOL_STREAMS_MAX) " and --session-streams",
	 NULL},
	{"contexts", OPT_UINT, 0, F(contexts), "512", 1, 65536, NULL, NULL, "N",
	 "NNG contexts, i.e. requests received concurrently", NULL},
	{"max-message", OPT_SIZE, 0, F(max_message), "65M", 65536, CUA_WIRE_MAX_MESSAGE, NULL, NULL, "BYTES",
	 "largest request accepted", NULL},
	{"staging", OPT_SIZE, 0, F(staging_bytes), "256M", 65536, UINT64_MAX, NULL, NULL, "BYTES",
	 "shared staging area per device for copies and modules", NULL},
	{"ring", OPT_SIZE, OPT_POW2, F(ring_bytes), "16M", 65536, UINT64_MAX, NULL, NULL, "BYTES",
	 "command/completion ring size per device, a power of two", NULL},
	{"session-mem", OPT_CUSTOM, OPT_RELOAD, F_SHARE, "25%", 0, 0, NULL, parse_share, "BYTES|N%",
	 "device memory per session on each device", ": four tenants fit; 0: no limit"},
	{"session-streams", OPT_UINT, OPT_RELOAD, F(session_streams), STR(CUAD_SESSION_STREAMS_DEFAULT), 1,
	 CUAD_SESSION_STREAMS_MAX, NULL, NULL, "N", "streams per session, its pool streams included", NULL},
	{"session-events", OPT_UINT, OPT_RELOAD, F(session_events), "4096", 1, 1u << 20, NULL, NULL, "N",
	 "events per session", NULL},
	{"session-modules", OPT_UINT, OPT_RELOAD, F(session_modules), "256", 1, 1u << 20, NULL, NULL, "N",
	 "modules per session", NULL},
	{"session-module-bytes", OPT_SIZE, OPT_RELOAD, F(session_module_bytes), "256M", 1, UINT64_MAX, NULL, NULL,
	 "BYTES", "bytes of module images per session", NULL},
	{"session-host-bytes", OPT_SIZE, OPT_RELOAD, F(session_host_bytes), "1G", 0, UINT64_MAX, NULL, NULL, "BYTES",
	 "registered (page-locked) host memory per session", NULL},
	{"session-handles", OPT_UINT, OPT_RELOAD, F(session_handles), "65536", 1, 0xffffff, NULL, NULL, "N",
	 "modules+functions+streams per session", NULL},
	{"session-graphs", OPT_UINT, OPT_RELOAD, F(session_graphs), "256", 1, 0xffffff, NULL, NULL, "N",
	 "CUDA graphs per session", NULL},
	{"session-graph-nodes", OPT_UINT, OPT_RELOAD, F(session_graph_nodes), "65536", 1, 1u << 30, NULL, NULL, "N",
	 "nodes of all of a session's graphs together", "; one graph has at most 4096"},
	{"session-graph-bytes", OPT_SIZE, OPT_RELOAD, F(session_graph_bytes), "64M", 1, UINT64_MAX, NULL, NULL, "BYTES",
	 "bytes of a session's graphs (nodes and their kernel arguments, held by the worker while a graph lives)", NULL},
	{"session-workers", OPT_UINT, OPT_RELOAD, F(session_workers), "64", 1, 1u << 20, NULL, NULL, "N",
	 "--isolation session: workers of one session each, all sessions together; past it BUSY", NULL},
	{"tenant-session-workers", OPT_UINT, OPT_RELOAD, F(tenant_session_workers), "16", 0, 1u << 20, NULL, NULL, "N",
	 "--isolation session: workers of one tenant's sessions, unless its section sets `workers`; past it QUOTA",
	 ": 0: no limit"},
	{"session-inflight", OPT_UINT, OPT_RELOAD, F(session_inflight), "65536", 1, 1u << 24, NULL, NULL, "N",
	 "requests queued or running per session", NULL},
	{"session-window", OPT_UINT, OPT_RELOAD, F(session_window), "8", 1, 65536, NULL, NULL, "N",
	 "requests of one session inside the workers at once", NULL},
	/* derived from --contexts unless given (config_settle): the default is --contexts' 512 / 8 */
	{"session-pending", OPT_UINT, 0, F(session_pending), "64", 1, 65536, NULL, NULL, "N",
	 "requests per connection unanswered, or answered and not yet read; past it QUOTA, at twice it requests are "
	 "dropped unanswered", ": contexts / 8, at least 16"},
	/* flow control (issue 10) */
	{"session-reply-bytes", OPT_SIZE, OPT_RELOAD, F(session_reply_bytes), "64M", 1, UINT64_MAX, NULL, NULL,
	 "BYTES", "bytes of replies queued for a connection that does not read them; past it QUOTA and no more of its "
	 "work runs", NULL},
	/* the daemon's host memory held by requests (issue 22 point 6) */
	{"session-request-bytes", OPT_SIZE, OPT_RELOAD, F(session_request_bytes), "256M", 1, UINT64_MAX, NULL, NULL,
	 "BYTES", "bytes of one session's requests received and not yet finished (their messages stay in the "
	 "daemon's memory until then); past it QUOTA, though a session holding none is always admitted one", NULL},
	{"request-bytes", OPT_SIZE, OPT_RELOAD, F(request_bytes), "2G", 1, UINT64_MAX, NULL, NULL, "BYTES",
	 "the same, all sessions together", NULL},
	{"send-timeout", OPT_UINT, 0, F(send_timeout_ms), "10000", 1, 86400000, NULL, NULL, "MS",
	 "a connection that does not take a reply within MS milliseconds is closed, its session cleaned up", NULL},
	{"contexts-max", OPT_UINT, 0, F(contexts_max), "8192", 1, 1u << 20, NULL, NULL, "N",
	 "receive contexts grow on demand from --contexts up to N", NULL},
	{"seq-gap-timeout", OPT_UINT, OPT_RELOAD, F(seq_gap_timeout_ms), "5000", 1, 86400000, NULL, NULL, "MS",
	 "ordered requests waiting longer for a missing sequence number are answered PROTOCOL, the missing numbers "
	 "count as used", NULL},
	{"tls-cert", OPT_STRING, 0, F(tls_cert), NULL, 0, 0, NULL, NULL, "FILE",
	 "PEM certificate and key for tls+tcp:// listeners", NULL},
	{"tls-key", OPT_STRING, 0, F(tls_key), NULL, 0, 0, NULL, NULL, "FILE", "PEM key when not in --tls-cert", NULL},
	{"ready-fd", OPT_UINT, OPT_CMDLINE | OPT_UNSET_M1, F(ready_fd), NULL, 0, 65535, NULL, NULL, "FD",
	 "write 'ready <url>' to FD once serving, then close it", NULL},
	/* no field: the level is the logger's (changes at once on SIGHUP) */
	{"log-level", OPT_CUSTOM, OPT_RELOAD, NOFIELD, "info", 0, 0, NULL, parse_log_level, "LEVEL",
	 "error, warn, info or debug", NULL},
	{"ipc-mode", OPT_OCTAL, OPT_UNSET_M1, F(ipc_mode), NULL, 0, 0777, NULL, NULL, "OCTAL",
	 "permissions of ipc:// sockets, e.g. 0660", ": by umask"},
	{"operator-url", OPT_URL, 0, F(operator_url), NULL, 0, 0, "ipc://", NULL, "URL",
	 "ipc:// endpoint for the operator (cuasyncctl): its sessions see every session in STATUS; clients on the "
	 "other listeners see only their own", NULL},
	{"operator-mode", OPT_OCTAL, 0, F(operator_mode), "0600", 0, 0777, NULL, NULL, "OCTAL",
	 "permissions of the operator socket", ": root only"},
	{"isolation", OPT_ENUM, 0, F(isolation), "shared", 0, 0, "shared|session", NULL, "shared|session",
	 "shared: one worker per device, all sessions in one context, kernels of different sessions overlap; session: "
	 "a worker process (own context) per session, so a session's kernels cannot reach another's memory and its "
	 "fault ends only its own worker, at the cost of time-sliced contexts", NULL},
	{"isolation-pool", OPT_UINT, 0, F(isolation_pool), "1", 0, 64, NULL, NULL, "N",
	 "idle workers kept ready per device with --isolation session", NULL},
	{"isolation-staging", OPT_SIZE, 0, F(isolation_staging_bytes), "64M", 65536, UINT64_MAX, NULL, NULL, "BYTES",
	 "staging area of each session's own worker with --isolation session (at most --staging)",
	 ": the front-end maps one per session worker; one request's bulk bytes must fit it"},
	{"scrub", OPT_ENUM, 0, F(scrub), "on", 0, 0, "off|on", NULL, "on|off",
	 "clear freed device memory before it is handed out again",
	 ": the next session cannot read the last one's data; costs one device memset per freed block, see "
	 "BENCHMARKS.md"},
	{"watchdog-timeout", OPT_UINT, 0, F(watchdog_s), "5", 0, 3600, NULL, NULL, "SECONDS",
	 "a worker with work in flight whose heartbeat (a thread of its own, which keeps beating while kernels run) "
	 "stands this long is killed and restarted; its requests answer DEVICE_HUNG", "; 0: off"},
	{"emu-threads", OPT_UINT, 0, F(emu_threads), "0", 0, 256, NULL, NULL, "N",
	 "threads that run the emulated device's streams, whatever their number", ": twice the cores, 4 to 32"},
	{"submit-threads", OPT_UINT, 0, F(submit_threads), "0", 0, 64, NULL, NULL, "N",
	 "threads per GPU worker issuing stream work, each owning a share of the streams (a stream's order holds: one "
	 "stream, one thread); 1: the command loop issues everything", ": half the cores, at most 8"},
	{"spare-worker", OPT_ENUM, 0, F(spare_worker), "yes", 0, 0, "no|yes", NULL, "yes|no",
	 "keep a spare worker of each shared device started and initialised, so that a worker that faults or dies is "
	 "replaced at once; costs a second context's GPU memory per device (about 520 MiB on an H200)",
	 "; none is kept under --isolation session"},
	{"drain-timeout", OPT_UINT, OPT_RELOAD, F(drain_timeout), "30", 0, 86400, NULL, NULL, "SECONDS",
	 "on SIGTERM, how long to wait for the work already in the workers before exiting anyway", NULL},
	{"hello-timeout", OPT_UINT, 0, F(hello_timeout), "10", 0, 86400, NULL, NULL, "SECONDS",
	 "close a connection that has not sent HELLO after this long", "; 0: never"},
	/* remote connections before HELLO, and the descriptors kept for local clients (issue 22, edge-listen.c) */
	{"handshake-timeout", OPT_UINT, 0, F(handshake_timeout), "5", 1, 3600, NULL, NULL, "SECONDS",
	 "close a tcp:// or tls+tcp:// connection whose TLS and SP handshakes are not done after this long", NULL},
	{"handshake-max", OPT_UINT, 0, F(handshake_max), "256", 1, 1000000, NULL, NULL, "N",
	 "at most N remote connections in their handshakes; past it the oldest are closed", NULL},
	{"fd-reserve", OPT_UINT, 0, F(fd_reserve), "64", 8, 1000000, NULL, NULL, "N",
	 "descriptors kept free for local clients: remote connections are closed before the daemon gets nearer to its "
	 "limit",
	 NULL},
	/* authentication (issue 12, auth.c) */
	{"allow-insecure-tcp", OPT_FLAG, 0, F(allow_insecure_tcp), NULL, 0, 0, NULL, NULL, NULL,
	 "allow plain tcp:// listeners (unencrypted, unauthenticated: anyone reaching the port is served); without it "
	 "they are refused at start: use tls+tcp://", NULL},
	{"tls-ca", OPT_STRING, 0, F(tls_ca), NULL, 0, 0, NULL, NULL, "FILE",
	 "mutual TLS: tls+tcp:// clients must present a certificate signed by a CA in FILE (PEM)", NULL},
	{"token-file", OPT_STRING, 0, F(token_file), NULL, 0, 0, NULL, NULL, "FILE",
	 "name:token lines (# comments; not readable by every user): tcp:// and tls+tcp:// sessions must send one in "
	 "HELLO, else UNAUTHENTICATED", NULL},
	{"operator-group", OPT_STRING, 0, F(operator_group), NULL, 0, 0, NULL, NULL, "GROUP",
	 "its members may use the operator endpoint too (besides root and the daemon's own uid); it also gets the "
	 "operator socket", NULL},
	{"socket-group", OPT_STRING, 0, F(socket_group), NULL, 0, 0, NULL, NULL, "GROUP",
	 "group of the ipc:// socket files (with --ipc-mode 0660: only its members may connect)", NULL},
	/* monitoring (issue 14, metrics.c) */
	{"metrics-listen", OPT_URL, 0, F(metrics_listen), NULL, 0, 0, "http://", NULL, "URL",
	 "serve Prometheus metrics (GET /metrics) and probes (GET /livez, /readyz) at URL, e.g. "
	 "http://127.0.0.1:9464; port 0 picks a free port, logged", ": off"},
	{"metrics-sessions", OPT_FLAG, 0, F(metrics_sessions), NULL, 0, 0, NULL, NULL, NULL,
	 "add per-session series to /metrics for operators' scrapes (one set per client connection: mind the "
	 "cardinality)",
	 NULL},
	{"metrics-token-file", OPT_STRING, 0, F(metrics_token_file), NULL, 0, 0, NULL, NULL, "FILE",
	 "a bearer token (the file's first line; not readable by every user): scrapes that send it get the "
	 "per-tenant and per-session series too; others get aggregate series only",
	 NULL},
	{"config", OPT_STRING, OPT_CMDLINE, F(config_path), NULL, 0, 0, NULL, NULL, "FILE",
	 "read options from FILE: INI, its [daemon] keys are these options without the dashes, e.g. `session-mem = "
	 "50%`; the command line wins over the file; SIGHUP re-reads it (limits take effect at once, the rest at the "
	 "next start)", ": " CUAD_CONF_DEFAULT " when it exists"},
	{"help", OPT_CUSTOM, OPT_CMDLINE, NOFIELD, NULL, 0, 0, NULL, parse_help, NULL, "this help", NULL},
	{"version", OPT_CUSTOM, OPT_CMDLINE, NOFIELD, NULL, 0, 0, NULL, parse_version, NULL, "print the version", NULL},
};
/* clang-format on */
const size_t options_count = sizeof(options_table) / sizeof(options_table[0]);

const struct opt_row *
opt_find(const char *name)
{
	for (size_t i = 0; i < options_count; i++)
		if (strcmp(options_table[i].name, name) == 0)
			return &options_table[i];
	return NULL;
}

/* ------------------------------------------------------------------ custom parsers */

static int
parse_listen(struct config *c, const struct opt_row *o, const char *arg)
{
	(void)o;
	if (c->nlisten == CUAD_MAX_LISTEN)
		return -1;
	c->listen[c->nlisten++] = arg;
	return 0;
}

static int
parse_share(struct config *c, const struct opt_row *o, const char *arg)
{
	(void)o;
	return cfg_parse_share(arg, &c->session_mem, &c->session_mem_pct);
}

static int
parse_log_level(struct config *c, const struct opt_row *o, const char *arg)
{
	(void)c;
	(void)o;
	int l = cua_log_parse_level(arg);
	if (l < 0)
		return -1;
	cua_log_set_level(l);
	return 0;
}

static int
parse_help(struct config *c, const struct opt_row *o, const char *arg)
{
	(void)c;
	(void)o;
	(void)arg;
	options_usage(stdout);
	return OPT_EXIT(0);
}

static int
parse_version(struct config *c, const struct opt_row *o, const char *arg)
{
	(void)c;
	(void)o;
	(void)arg;
	printf("%s %s (protocol %u)\n", PACKAGE_NAME, PACKAGE_VERSION, CUA_PROTO_VERSION);
	return OPT_EXIT(0);
}

/* ------------------------------------------------------------------ the typed parsers */

static void
store(struct config *c, const struct opt_row *o, uint64_t v)
{
	char *p = (char *)c + o->off;
	if (o->size == sizeof(uint64_t)) {
		memcpy(p, &v, sizeof(v));
	} else if (o->size == sizeof(uint32_t)) { /* unsigned, int or an enum: the value is in range */
		uint32_t u = (uint32_t)v;
		memcpy(p, &u, sizeof(u));
	} else if (o->size == sizeof(bool)) {
		bool b = v != 0;
		memcpy(p, &b, sizeof(b));
	}
}

/* Whether word is one of choices ("a|b|c"); its index in *index. */
static bool
choice(const char *choices, const char *word, uint64_t *index)
{
	size_t n = strlen(word);
	uint64_t i = 0;
	for (const char *p = choices; p != NULL; i++) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (len == n && strncmp(p, word, n) == 0) {
			*index = i;
			return true;
		}
		p = bar ? bar + 1 : NULL;
	}
	return false;
}

int
opt_apply(struct config *c, const struct opt_row *o, const char *arg)
{
	uint64_t v = 0;
	char *end;
	if (o->type == OPT_CUSTOM)
		return o->parse(c, o, arg);
	if (o->type == OPT_FLAG) {
		store(c, o, 1);
		return 0;
	}
	if (arg == NULL)
		return -1;
	switch (o->type) {
	case OPT_UINT: {
		unsigned u;
		if (cfg_parse_uint(arg, (unsigned)o->lo, (unsigned)o->hi, &u) != 0)
			return -1;
		v = u;
		break;
	}
	case OPT_SIZE:
		if (cfg_parse_size(arg, &v) != 0 || v < o->lo || v > o->hi || ((o->flags & OPT_POW2) && (v & (v - 1))))
			return -1;
		break;
	case OPT_OCTAL: {
		errno = 0;
		long mode = strtol(arg, &end, 8);
		if (errno || *end != '\0' || mode < 0 || mode > (long)o->hi)
			return -1;
		v = (uint64_t)mode;
		break;
	}
	case OPT_ENUM:
		if (!choice(o->choices, arg, &v))
			return -1;
		break;
	case OPT_STRING:
	case OPT_URL:
		if (o->choices != NULL && (o->type == OPT_URL ? strncmp(arg, o->choices, strlen(o->choices)) != 0
							      : !choice(o->choices, arg, &v)))
			return -1;
		memcpy((char *)c + o->off, &arg, sizeof(arg));
		return 0;
	default: return -1;
	}
	store(c, o, v);
	return 0;
}

int
opt_differ(const struct opt_row *o, const struct config *a, const struct config *b)
{
	const char *pa = (const char *)a + o->off, *pb = (const char *)b + o->off;
	if (o->size == 0)
		return 0;
	if (o->type == OPT_STRING || o->type == OPT_URL) {
		const char *sa, *sb;
		memcpy(&sa, pa, sizeof(sa));
		memcpy(&sb, pb, sizeof(sb));
		return (sa == NULL) != (sb == NULL) || (sa != NULL && strcmp(sa, sb) != 0);
	}
	if (o->parse == parse_listen) { /* none in b: the default, as at start */
		bool differ = b->nlisten > 0 && b->nlisten != a->nlisten;
		for (int i = 0; i < b->nlisten && !differ; i++)
			differ = strcmp(a->listen[i], b->listen[i]) != 0;
		return differ;
	}
	return memcmp(pa, pb, o->size) != 0;
}

/* ------------------------------------------------------------------ defaults and --help */

void
config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < options_count; i++) {
		const struct opt_row *o = &options_table[i];
		if (o->size == 0) /* the log level is the logger's own */
			continue;
		if (o->def != NULL && opt_apply(c, o, o->def) != 0) { /* a bug: test_options catches it */
			log_error("option --%s: its default '%s' does not parse", o->name, o->def);
			abort();
		}
		if (o->def == NULL && (o->flags & OPT_UNSET_M1))
			store(c, o, (uint32_t)-1);
	}
}

void
options_usage(FILE *f)
{
	fprintf(f, "usage: cuasyncd [options]\n\nShares the GPUs of this host among client processes (see "
		   "README.md).\n\n");
	for (size_t i = 0; i < options_count; i++) {
		const struct opt_row *o = &options_table[i];
		if (o->help == NULL)
			continue;
		char left[64];
		snprintf(left, sizeof(left), "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-28s %s", left, o->help);
		if (o->def != NULL || o->note != NULL)
			fprintf(f, " (default%s%s%s)", o->def ? " " : "", o->def ? o->def : "", o->note ? o->note : "");
		fputc('\n', f);
	}
	fprintf(f, "\nDefault listen URL: cuasyncd.sock in $RUNTIME_DIRECTORY (systemd), else "
		   "ipc:///run/cuasyncd/cuasyncd.sock as root, else under $XDG_RUNTIME_DIR or "
		   "/tmp.\n"
		   "Who is who: ipc:// peers by their kernel credentials (uid, gid, pid; logged at HELLO), tls+tcp://\n"
		   "peers by a certificate of --tls-ca, and by a token of --token-file. The operator endpoint serves\n"
		   "root, the daemon's own uid and the members of --operator-group only (others: PERMISSION_DENIED).\n"
		   "Environment: CUASYNC_URL is what clients connect to; CUASYNC_TOKEN or CUASYNC_TOKEN_FILE their\n"
		   "token, CUASYNC_TLS_CA / CUASYNC_TLS_CERT / CUASYNC_TLS_KEY their TLS files.\n");
}
