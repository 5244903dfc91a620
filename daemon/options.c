/*
 * options.c — the daemon's configuration (see options.h): one table of options that is both getopt's input
 * and `--help`, the command line, the configuration file under it, and reloading it.
 */
#include "config.h"

#include "conffile.h"
#include "cua_log.h"
#include "options.h"
#include "request.h"
#include "session.h"
#include "tenant.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CUAD_CONF_DEFAULT
#define CUAD_CONF_DEFAULT "/etc/cuasyncd/cuasyncd.conf"
#endif

/* Options: one row each (name, argument, what it sets, help). */
enum {
	O_LISTEN = 1,
	O_BACKEND,
	O_EMU_SM,
	O_EMU_DEVICES,
	O_EMU_MEM,
	O_DEVICES,
	O_POOL,
	O_CONTEXTS,
	O_MAX_MESSAGE,
	O_STAGING,
	O_RING,
	O_SESSION_MEM,
	O_SESSION_STREAMS,
	O_SESSION_EVENTS,
	O_SESSION_MODULES,
	O_SESSION_MODULE_BYTES,
	O_SESSION_HOST_BYTES,
	O_SESSION_HANDLES,
	O_SESSION_GRAPHS,
	O_SESSION_GRAPH_NODES,
	O_SESSION_INFLIGHT,
	O_SESSION_WINDOW,
	O_SESSION_PENDING,
	/* flow control (issue 10) */
	O_SESSION_REPLY_BYTES,
	O_SEND_TIMEOUT,
	O_CONTEXTS_MAX,
	O_SEQ_GAP_TIMEOUT,
	O_TLS_CERT,
	O_TLS_KEY,
	O_READY_FD,
	O_LOG_LEVEL,
	O_IPC_MODE,
	O_OPERATOR_URL,
	O_OPERATOR_MODE,
	O_ISOLATION,
	O_ISOLATION_POOL,
	O_SCRUB,
	O_WATCHDOG,
	O_EMU_THREADS,
	O_SUBMIT_THREADS,
	O_DRAIN_TIMEOUT,
	O_HELLO_TIMEOUT,
	/* authentication (issue 12, auth.c) */
	O_ALLOW_INSECURE_TCP,
	O_TLS_CA,
	O_TOKEN_FILE,
	O_OPERATOR_GROUP,
	O_SOCKET_GROUP,
	O_METRICS_LISTEN,
	O_METRICS_SESSIONS,
	O_CONFIG,
	O_HELP,
	O_VERSION,
	/* worker mode (internal) */
	O_WORKER,
	O_WORKER_DEVICE,
	O_WORKER_GEN,
	O_LOG_LEVEL_NUM,
	O_CUDA_PROBE,
	O_COUNT
};

static const struct opt_row {
	const char *name;
	int has_arg;
	int id;
	const char *arg, *help;
} opt_rows[] = {
	{"listen", 1, O_LISTEN, "URL", "listen on URL (ipc://, tcp://, tls+tcp://); repeatable"},
	{"backend", 1, O_BACKEND, "auto|cuda|emu", "device backend (auto: cuda when a GPU is present, else emu)"},
	{"emu-sm", 1, O_EMU_SM, "NN", "compute capability the emulated device reports (default 90)"},
	{"emu-devices", 1, O_EMU_DEVICES, "N", "number of emulated devices (default 1)"},
	{"emu-mem", 1, O_EMU_MEM, "BYTES", "memory of each emulated device (default 1G)"},
	{"devices", 1, O_DEVICES, "LIST", "comma-separated device ordinals to serve (default all)"},
	{"pool-streams", 1, O_POOL, "N", "streams per device for launches that name none (default 4)"},
	{"contexts", 1, O_CONTEXTS, "N", "NNG contexts, i.e. requests received concurrently (default 512)"},
	{"max-message", 1, O_MAX_MESSAGE, "BYTES", "largest request accepted (default 65M)"},
	{"staging", 1, O_STAGING, "BYTES", "shared staging area per device for copies and modules (default 256M)"},
	{"ring", 1, O_RING, "BYTES", "command/completion ring size per device, a power of two (default 16M)"},
	{"session-mem", 1, O_SESSION_MEM, "BYTES|N%",
	 "device memory per session on each device (default 25%: four tenants fit; 0: no limit)"},
	{"session-streams", 1, O_SESSION_STREAMS, "N", "streams per session, its pool streams included (default 64)"},
	{"session-events", 1, O_SESSION_EVENTS, "N", "events per session (default 4096)"},
	{"session-modules", 1, O_SESSION_MODULES, "N", "modules per session (default 256)"},
	{"session-module-bytes", 1, O_SESSION_MODULE_BYTES, "BYTES",
	 "bytes of module images per session (default 256M)"},
	{"session-host-bytes", 1, O_SESSION_HOST_BYTES, "BYTES",
	 "registered (page-locked) host memory per session (default 1G)"},
	{"session-handles", 1, O_SESSION_HANDLES, "N", "modules+functions+streams per session (default 65536)"},
	{"session-graphs", 1, O_SESSION_GRAPHS, "N", "CUDA graphs per session (default 256)"},
	{"session-graph-nodes", 1, O_SESSION_GRAPH_NODES, "N",
	 "nodes of all of a session's graphs together (default 65536; one graph has at most 4096)"},
	{"session-inflight", 1, O_SESSION_INFLIGHT, "N", "requests queued or running per session (default 65536)"},
	{"session-window", 1, O_SESSION_WINDOW, "N", "requests of one session inside the workers at once (default 8)"},
	{"session-pending", 1, O_SESSION_PENDING, "N",
	 "requests per connection unanswered, or answered and not yet read (default: contexts / 8); past it QUOTA, "
	 "at twice it requests are dropped unanswered"},
	/* flow control (issue 10) */
	{"session-reply-bytes", 1, O_SESSION_REPLY_BYTES, "BYTES",
	 "bytes of replies queued for a connection that does not read them; past it QUOTA and no more of its work "
	 "runs (default 64M)"},
	{"send-timeout", 1, O_SEND_TIMEOUT, "MS",
	 "a connection that does not take a reply within MS milliseconds is closed, its session cleaned up "
	 "(default 10000)"},
	{"contexts-max", 1, O_CONTEXTS_MAX, "N",
	 "receive contexts grow on demand from --contexts up to N (default 8192)"},
	{"seq-gap-timeout", 1, O_SEQ_GAP_TIMEOUT, "MS",
	 "ordered requests waiting longer for a missing sequence number are answered PROTOCOL, the missing "
	 "numbers count as used (default 5000)"},
	{"tls-cert", 1, O_TLS_CERT, "FILE", "PEM certificate and key for tls+tcp:// listeners"},
	{"tls-key", 1, O_TLS_KEY, "FILE", "PEM key when not in --tls-cert"},
	{"ready-fd", 1, O_READY_FD, "FD", "write 'ready <url>' to FD once serving, then close it"},
	{"log-level", 1, O_LOG_LEVEL, "LEVEL", "error, warn, info (default) or debug"},
	{"ipc-mode", 1, O_IPC_MODE, "OCTAL", "permissions of ipc:// sockets (default: by umask), e.g. 0660"},
	{"operator-url", 1, O_OPERATOR_URL, "URL",
	 "ipc:// endpoint for the operator (cuasyncctl): its sessions see every session in STATUS; clients on the "
	 "other "
	 "listeners see only their own"},
	{"operator-mode", 1, O_OPERATOR_MODE, "OCTAL", "permissions of the operator socket (default 0600: root only)"},
	{"isolation", 1, O_ISOLATION, "shared|session",
	 "shared (default): one worker per device, all sessions in one context, kernels of different sessions overlap; "
	 "session: a worker process (own context) per session, so a session's kernels cannot reach another's memory "
	 "and "
	 "its fault ends only its own worker, at the cost of time-sliced contexts"},
	{"isolation-pool", 1, O_ISOLATION_POOL, "N",
	 "idle workers kept ready per device with --isolation session (default 1)"},
	{"scrub", 1, O_SCRUB, "on|off",
	 "clear freed device memory before it is handed out again (default on: the next session cannot read the "
	 "last one's data; costs one device memset per freed block, see BENCHMARKS.md)"},
	{"watchdog-timeout", 1, O_WATCHDOG, "SECONDS",
	 "a worker with work in flight whose heartbeat (a thread of its own, which keeps beating while kernels run) "
	 "stands this long is killed and restarted; its requests answer DEVICE_HUNG (default 5; 0: off)"},
	{"emu-threads", 1, O_EMU_THREADS, "N",
	 "threads that run the emulated device's streams, whatever their number (default 0: twice the cores, 4 to "
	 "32)"},
	{"submit-threads", 1, O_SUBMIT_THREADS, "N",
	 "threads per GPU worker issuing stream work, each owning a share of the streams (a stream's order holds: "
	 "one stream, one thread); 1: the command loop issues everything (default 0: half the cores, at most 8)"},
	{"drain-timeout", 1, O_DRAIN_TIMEOUT, "SECONDS",
	 "on SIGTERM, how long to wait for the work already in the workers before exiting anyway (default 30)"},
	{"hello-timeout", 1, O_HELLO_TIMEOUT, "SECONDS",
	 "close a connection that has not sent HELLO after this long (default 10; 0: never)"},
	{"allow-insecure-tcp", 0, O_ALLOW_INSECURE_TCP, NULL,
	 "allow plain tcp:// listeners (unencrypted, unauthenticated: anyone reaching the port is served); without "
	 "it they are refused at start: use tls+tcp://"},
	{"tls-ca", 1, O_TLS_CA, "FILE",
	 "mutual TLS: tls+tcp:// clients must present a certificate signed by a CA in FILE (PEM)"},
	{"token-file", 1, O_TOKEN_FILE, "FILE",
	 "name:token lines (# comments; not readable by every user): tcp:// and tls+tcp:// sessions must send one "
	 "in HELLO, else UNAUTHENTICATED"},
	{"operator-group", 1, O_OPERATOR_GROUP, "GROUP",
	 "its members may use the operator endpoint too (besides root and the daemon's own uid); it also gets the "
	 "operator socket"},
	{"socket-group", 1, O_SOCKET_GROUP, "GROUP",
	 "group of the ipc:// socket files (with --ipc-mode 0660: only its members may connect)"},
	{"metrics-listen", 1, O_METRICS_LISTEN, "URL",
	 "serve Prometheus metrics (GET /metrics) and a health check (GET /healthz) at URL, e.g. "
	 "http://127.0.0.1:9464 (default: off; port 0 picks a free port, logged)"},
	{"metrics-sessions", 0, O_METRICS_SESSIONS, NULL,
	 "add per-session series to /metrics (one set per client connection: mind the cardinality)"},
	{"config", 1, O_CONFIG, "FILE",
	 "read options from FILE: INI, its [daemon] keys are these options without the dashes, e.g. `session-mem = "
	 "50%` (default " CUAD_CONF_DEFAULT " when it exists); the command line wins over the file; SIGHUP re-reads "
	 "it (limits take effect at once, the rest at the next start)"},
	{"help", 0, O_HELP, NULL, "this help"},
	{"version", 0, O_VERSION, NULL, "print the version"},
	{"worker", 1, O_WORKER, NULL, NULL},
	{"worker-device", 1, O_WORKER_DEVICE, NULL, NULL},
	{"worker-generation", 1, O_WORKER_GEN, NULL, NULL},
	{"log-level-num", 1, O_LOG_LEVEL_NUM, NULL, NULL},
	{"cuda-probe", 0, O_CUDA_PROBE, NULL, NULL},
};
#define NOPTS (sizeof(opt_rows) / sizeof(opt_rows[0]))

static void
usage(FILE *f)
{
	fprintf(f, "usage: cuasyncd [options]\n\nShares the GPUs of this host among client processes (see "
		   "README.md).\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		if (opt_rows[i].help == NULL)
			continue;
		char left[64];
		snprintf(left, sizeof(left), "--%s%s%s", opt_rows[i].name, opt_rows[i].arg ? " " : "",
			 opt_rows[i].arg ? opt_rows[i].arg : "");
		fprintf(f, "  %-28s %s\n", left, opt_rows[i].help);
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

/* `cuasyncd --cuda-probe`: prints "ok COUNT" or "no REASON" (run as a child: CUDA stays out of the front-end). */
static int
cuda_probe_main(void)
{
#ifdef HAVE_CUDA_H
	cua_err e;
	cua_err_clear(&e);
	int n = 0;
	if (cuda_probe(&n, &e) == 0)
		printf("ok %d\n", n);
	else
		printf("no %s\n", e.detail);
#else
	printf("no this cuasyncd was built without CUDA support (configure --with-cuda)\n");
#endif
	return 0;
}

/* The configuration file and what the command line said (the file does not override it). */
static struct {
	const char *path;            /* --config, or the default once it exists; NULL: none */
	bool given[O_COUNT];         /* options set on the command line */
	struct config cmdline;       /* the defaults and the command line alone: what a reload starts from */
	struct conf_strings strings; /* the file's values in effect (the configuration points into them) */
} conf;

/* apply_option's second half: access, monitoring, the file, and what workers and probes are started with. */
static int
apply_other(struct config *c, struct worker_opts *wo, int ch, const char *arg)
{
	unsigned u;
	int bad;
	switch (ch) {
	case O_ALLOW_INSECURE_TCP: c->allow_insecure_tcp = true; return 0;
	case O_TLS_CA: c->tls_ca = arg; return 0;
	case O_TOKEN_FILE: c->token_file = arg; return 0;
	case O_OPERATOR_GROUP: c->operator_group = arg; return 0;
	case O_SOCKET_GROUP: c->socket_group = arg; return 0;
	case O_METRICS_LISTEN: c->metrics_listen = arg; return strncmp(arg, "http://", 7) != 0;
	case O_METRICS_SESSIONS: c->metrics_sessions = true; return 0;
	case O_CONFIG: conf.path = arg; return 0;
	case O_LOG_LEVEL_NUM:
		bad = cfg_parse_uint(arg, 0, 3, &u);
		cua_log_set_level((int)u);
		return bad;
	case O_WORKER:
		bad = cfg_parse_uint(arg, 0, 65535, &u);
		wo->shm_fd = (int)u;
		return bad;
	case O_WORKER_DEVICE:
		bad = cfg_parse_uint(arg, 0, CUA_MAX_DEVICES, &u);
		wo->device = (int)u;
		return bad;
	case O_WORKER_GEN:
		bad = cfg_parse_uint(arg, 0, UINT32_MAX >> 1, &u);
		wo->generation = u;
		return bad;
	case O_CUDA_PROBE: return 100 + cuda_probe_main();
	case O_HELP: usage(stdout); return 100;
	case O_VERSION: printf("%s %s (protocol %u)\n", PACKAGE_NAME, PACKAGE_VERSION, CUA_PROTO_VERSION); return 100;
	default: usage(stderr); return 102;
	}
}

/* One option into c or wo. Returns 0, 1 (a bad value), or 100 + an exit status to stop with now. */
static int
apply_option(struct config *c, struct worker_opts *wo, int ch, const char *arg)
{
	uint64_t sz;
	unsigned u;
	int bad = 0, l;
	char *end;
	long mode;
	switch (ch) {
	case O_LISTEN:
		if (c->nlisten == CUAD_MAX_LISTEN)
			return 1;
		c->listen[c->nlisten++] = arg;
		return 0;
	case O_BACKEND: c->backend = arg; return strcmp(arg, "auto") && strcmp(arg, "cuda") && strcmp(arg, "emu");
	case O_EMU_SM:
		bad = cfg_parse_uint(arg, 10, 199, &u);
		c->emu_sm = (int)u;
		return bad;
	case O_EMU_DEVICES:
		bad = cfg_parse_uint(arg, 1, CUA_MAX_DEVICES, &u);
		c->emu_devices = (int)u;
		return bad;
	case O_EMU_MEM: return cfg_parse_size(arg, &c->emu_mem) || c->emu_mem == 0;
	case O_DEVICES: c->devices = arg; return 0;
	case O_POOL: return cfg_parse_uint(arg, 1, 64, &c->pool_streams);
	case O_CONTEXTS: return cfg_parse_uint(arg, 1, 65536, &c->contexts);
	case O_MAX_MESSAGE:
		bad = cfg_parse_size(arg, &sz) || sz < 65536 || sz > CUA_WIRE_MAX_MESSAGE;
		c->max_message = (size_t)sz;
		return bad;
	case O_STAGING: return cfg_parse_size(arg, &c->staging_bytes) || c->staging_bytes < 65536;
	case O_RING:
		return cfg_parse_size(arg, &c->ring_bytes) || c->ring_bytes < 65536 ||
		       (c->ring_bytes & (c->ring_bytes - 1));
	case O_SESSION_MEM: return cfg_parse_share(arg, &c->session_mem, &c->session_mem_pct);
	case O_SESSION_STREAMS: return cfg_parse_uint(arg, 1, 4000, &c->session_streams);
	case O_SESSION_EVENTS: return cfg_parse_uint(arg, 1, 1u << 20, &c->session_events);
	case O_SESSION_MODULES: return cfg_parse_uint(arg, 1, 1u << 20, &c->session_modules);
	case O_SESSION_MODULE_BYTES:
		return cfg_parse_size(arg, &c->session_module_bytes) || c->session_module_bytes == 0;
	case O_SESSION_HOST_BYTES: return cfg_parse_size(arg, &c->session_host_bytes);
	case O_SESSION_HANDLES: return cfg_parse_uint(arg, 1, 0xffffff, &c->session_handles);
	case O_SESSION_GRAPHS: return cfg_parse_uint(arg, 1, 0xffffff, &c->session_graphs);
	case O_SESSION_GRAPH_NODES: return cfg_parse_uint(arg, 1, 1u << 30, &c->session_graph_nodes);
	case O_SESSION_INFLIGHT: return cfg_parse_uint(arg, 1, 1u << 24, &c->session_inflight);
	case O_SESSION_PENDING: return cfg_parse_uint(arg, 1, 65536, &c->session_pending);
	case O_SESSION_WINDOW: return cfg_parse_uint(arg, 1, 65536, &c->session_window);
	case O_SESSION_REPLY_BYTES: return cfg_parse_size(arg, &c->session_reply_bytes) || c->session_reply_bytes == 0;
	case O_SEND_TIMEOUT: return cfg_parse_uint(arg, 1, 86400000, &c->send_timeout_ms);
	case O_CONTEXTS_MAX: return cfg_parse_uint(arg, 1, 1u << 20, &c->contexts_max);
	case O_SEQ_GAP_TIMEOUT: return cfg_parse_uint(arg, 1, 86400000, &c->seq_gap_timeout_ms);
	case O_TLS_CERT: c->tls_cert = arg; return 0;
	case O_TLS_KEY: c->tls_key = arg; return 0;
	case O_READY_FD:
		bad = cfg_parse_uint(arg, 0, 65535, &u);
		c->ready_fd = (int)u;
		return bad;
	case O_LOG_LEVEL:
		l = cua_log_parse_level(arg);
		cua_log_set_level(l);
		return l < 0;
	case O_IPC_MODE:
	case O_OPERATOR_MODE:
		mode = strtol(arg, &end, 8);
		*(ch == O_IPC_MODE ? &c->ipc_mode : &c->operator_mode) = (int)mode;
		return *end != '\0' || mode < 0 || mode > 0777;
	case O_OPERATOR_URL: c->operator_url = arg; return strncmp(arg, "ipc://", 6) != 0;
	case O_ISOLATION:
		c->isolation = strcmp(arg, "session") == 0 ? ISO_SESSION : ISO_SHARED;
		return strcmp(arg, "session") != 0 && strcmp(arg, "shared") != 0;
	case O_ISOLATION_POOL: return cfg_parse_uint(arg, 0, 64, &c->isolation_pool);
	case O_SCRUB: c->scrub = strcmp(arg, "on") == 0; return strcmp(arg, "on") && strcmp(arg, "off");
	case O_WATCHDOG: return cfg_parse_uint(arg, 0, 3600, &c->watchdog_s);
	case O_EMU_THREADS: return cfg_parse_uint(arg, 0, 256, &c->emu_threads);
	case O_SUBMIT_THREADS: return cfg_parse_uint(arg, 0, 64, &c->submit_threads);
	case O_DRAIN_TIMEOUT: return cfg_parse_uint(arg, 0, 86400, &c->drain_timeout);
	case O_HELLO_TIMEOUT: return cfg_parse_uint(arg, 0, 86400, &c->hello_timeout);
	default: return apply_other(c, wo, ch, arg);
	}
}

struct file_ctx {
	struct config *c;
	bool pending; /* the file set session-pending */
};

/* One key of the configuration file into F->c (conffile.h), unless the command line set it. */
static int
file_apply(void *ud, const char *section, const char *key, const char *value, char *why, size_t whylen)
{
	struct file_ctx *F = ud;
	const struct opt_row *o = NULL;
	struct worker_opts wo = {.shm_fd = -1};
	if (strncmp(section, "tenant ", 7) == 0 && section[7] != '\0' && section[7] != ' ')
		return tenant_table_set(F->c->tenants, section + 7, key, value, why, whylen);
	if (strcmp(section, "daemon") != 0) {
		snprintf(why, whylen, "unknown section [%s] (expected [daemon] or [tenant NAME])", section);
		return -1;
	}
	for (size_t i = 0; i < NOPTS && o == NULL; i++)
		if (opt_rows[i].help != NULL && strcmp(opt_rows[i].name, key) == 0)
			o = &opt_rows[i];
	if (o == NULL || o->id == O_CONFIG || o->id == O_READY_FD || o->id == O_HELP || o->id == O_VERSION) {
		snprintf(why, whylen,
			 "unknown key '%s' (keys are the long options of `cuasyncd --help` without the dashes; "
			 "config and ready-fd only on the command line)",
			 key);
		return -1;
	}
	if (conf.given[o->id]) /* the command line wins */
		return 0;
	if (o->arg == NULL) { /* a flag: yes or no */
		bool yes = strcmp(value, "yes") == 0, no = strcmp(value, "no") == 0;
		if (!yes && !no) {
			snprintf(why, whylen, "invalid value '%s' for %s (expected yes or no)", value, key);
			return -1;
		}
		return yes ? apply_option(F->c, &wo, o->id, NULL) : 0;
	}
	if (apply_option(F->c, &wo, o->id, value) != 0) {
		snprintf(why, whylen, "invalid value '%s' for %s (expected %s; see --help)", value, key, o->arg);
		return -1;
	}
	F->pending |= o->id == O_SESSION_PENDING;
	return 0;
}

/* The configuration file (--config, else the default when it exists) into c. 0, or -1 with why in err. */
static int
config_file(struct config *c, bool *pending, struct conf_strings *keep, char *err, size_t errlen)
{
	struct file_ctx F = {c, false};
	if ((c->tenants = tenant_table_new()) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (conf.path == NULL && access(CUAD_CONF_DEFAULT, F_OK) == 0)
		conf.path = CUAD_CONF_DEFAULT;
	if (conf.path == NULL)
		return 0;
	int rc = conf_read(conf.path, file_apply, &F, keep, err, errlen);
	*pending = F.pending;
	return rc;
}

int
options_parse(struct config *c, struct worker_opts *wo, int argc, char **argv)
{
	struct option longopts[NOPTS + 1];
	int ch;
	for (size_t i = 0; i < NOPTS; i++)
		longopts[i] = (struct option){opt_rows[i].name, opt_rows[i].has_arg, NULL, opt_rows[i].id};
	longopts[NOPTS] = (struct option){NULL, 0, NULL, 0};
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		int rc = apply_option(c, wo, ch, optarg);
		if (rc >= 100)
			return rc - 100;
		if (rc == 0) {
			conf.given[ch > 0 && ch < O_COUNT ? ch : 0] = true;
			continue;
		}
		const char *name = "?";
		for (size_t i = 0; i < NOPTS; i++)
			if (opt_rows[i].id == ch)
				name = opt_rows[i].name;
		fprintf(stderr, "cuasyncd: invalid value '%s' for --%s (see --help)\n", optarg ? optarg : "", name);
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "cuasyncd: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	bool pending = false;
	if (wo->shm_fd < 0) { /* a worker takes everything from its command line */
		char err[512];
		conf.cmdline = *c;
		if (config_file(c, &pending, &conf.strings, err, sizeof(err)) != 0) {
			fprintf(stderr, "cuasyncd: %s\n", err);
			return 2;
		}
	}
	config_settle(c, conf.given[O_SESSION_PENDING] || pending);
	return -1;
}

/* The settings a reload changes at once: limits read under fe->lock when a request is checked. */
#define LIVE(name, field)                                                                                              \
	{                                                                                                              \
		name, offsetof(struct config, field), sizeof(((struct config *)0)->field)                              \
	}
static const struct cfg_field {
	const char *name;
	size_t off, size;
} live_fields[] =
	{
		LIVE("session-mem", session_mem),
		LIVE("session-mem", session_mem_pct),
		LIVE("session-streams", session_streams),
		LIVE("session-events", session_events),
		LIVE("session-modules", session_modules),
		LIVE("session-module-bytes", session_module_bytes),
		LIVE("session-host-bytes", session_host_bytes),
		LIVE("session-handles", session_handles),
		LIVE("session-graphs", session_graphs),
		LIVE("session-graph-nodes", session_graph_nodes),
		LIVE("session-inflight", session_inflight),
		LIVE("session-window", session_window),
		LIVE("session-reply-bytes", session_reply_bytes),
		LIVE("seq-gap-timeout", seq_gap_timeout_ms),
		LIVE("drain-timeout", drain_timeout),
},
  /* Numbers that shape what start-up built (sockets, workers, rings): a change waits for the next start. */
	restart_fields[] = {
		LIVE("emu-sm", emu_sm),
		LIVE("emu-devices", emu_devices),
		LIVE("emu-mem", emu_mem),
		LIVE("pool-streams", pool_streams),
		LIVE("contexts", contexts),
		LIVE("contexts-max", contexts_max),
		LIVE("max-message", max_message),
		LIVE("staging", staging_bytes),
		LIVE("ring", ring_bytes),
		LIVE("session-pending", session_pending),
		LIVE("send-timeout", send_timeout_ms),
		LIVE("ipc-mode", ipc_mode),
		LIVE("operator-mode", operator_mode),
		LIVE("isolation", isolation),
		LIVE("isolation-pool", isolation_pool),
		LIVE("scrub", scrub),
		LIVE("watchdog-timeout", watchdog_s),
		LIVE("emu-threads", emu_threads),
		LIVE("submit-threads", submit_threads),
		LIVE("hello-timeout", hello_timeout),
		LIVE("allow-insecure-tcp", allow_insecure_tcp),
};
#undef LIVE

static bool
str_differ(const char *a, const char *b)
{
	return (a == NULL) != (b == NULL) || (a != NULL && strcmp(a, b) != 0);
}

/* Appends name to list, ", "-separated. */
static void
list_add(char *list, size_t len, const char *name)
{
	size_t used = strlen(list);
	snprintf(list + used, len - used, "%s%s", used ? ", " : "", name);
}

/* Appends to list the names of the fields of t that differ between a and b, each once. */
static void
list_changed(const struct cfg_field *t, size_t n, const struct config *a, const struct config *b, char *list,
	     size_t len)
{
	const char *last = NULL;
	for (size_t i = 0; i < n; i++)
		if (t[i].name != last &&
		    memcmp((const char *)a + t[i].off, (const char *)b + t[i].off, t[i].size) != 0) {
			list_add(list, len, t[i].name);
			last = t[i].name;
		}
}

/* Appends to list the restart-only settings whose value in b differs from the running a. */
static void
list_restart_only(const struct config *a, const struct config *b, char *list, size_t len)
{
	list_changed(restart_fields, sizeof(restart_fields) / sizeof(restart_fields[0]), a, b, list, len);
	const struct {
		const char *name, *a, *b;
	} strs[] = {{"backend", a->backend, b->backend},
		    {"devices", a->devices, b->devices},
		    {"tls-cert", a->tls_cert, b->tls_cert},
		    {"tls-key", a->tls_key, b->tls_key},
		    {"operator-url", a->operator_url, b->operator_url},
		    {"tls-ca", a->tls_ca, b->tls_ca},
		    {"token-file", a->token_file, b->token_file},
		    {"operator-group", a->operator_group, b->operator_group},
		    {"socket-group", a->socket_group, b->socket_group},
		    {"metrics-listen", a->metrics_listen, b->metrics_listen}};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (str_differ(strs[i].a, strs[i].b))
			list_add(list, len, strs[i].name);
	bool listen = b->nlisten > 0 && b->nlisten != a->nlisten; /* none in b: the default, as at start */
	for (int i = 0; i < b->nlisten && !listen; i++)
		listen = str_differ(a->listen[i], b->listen[i]);
	if (listen)
		list_add(list, len, "listen");
}

/*
 * SIGHUP: reads the configuration file again, from the defaults and the command line (which still wins).
 * Limits change at once: sessions keep what they hold, and what they ask for next is checked against the new
 * limits. Settings that shaped start-up are named in the log and wait for the next start. A file that does
 * not read is refused as a whole: the configuration in effect stays. systemd hears RELOADING=1, then READY=1
 * with the outcome in STATUS=. Main thread.
 */
void
options_reload(struct fe *fe, char *status, size_t len)
{
	char err[512] = "", changed[512] = "", later[512] = "";
	struct config next = conf.cmdline;
	struct conf_strings keep = {NULL, 0};
	bool pending = false;
	int level = cua_log_get_level();
	if (config_file(&next, &pending, &keep, err, sizeof(err)) != 0) {
		tenant_table_free(next.tenants);
		cua_log_set_level(level);
		log_error("SIGHUP: %s; the configuration in effect is kept", err);
		snprintf(status, len, "configuration not reloaded: %s", err);
		goto out;
	}
	if (conf.path == NULL) {
		tenant_table_free(next.tenants);
		log_info("SIGHUP: no configuration file (--config, or %s); nothing changed", CUAD_CONF_DEFAULT);
		snprintf(status, len, "no configuration file");
		goto out;
	}
	config_settle(&next, conf.given[O_SESSION_PENDING] || pending);
	if (tenant_table_wants_session(next.tenants) && request_pool_ensure(fe) != 0) {
		tenant_table_free(next.tenants);
		snprintf(err, sizeof(err), "a tenant asks for isolation = session and no session worker starts");
		log_error("SIGHUP: %s; the configuration in effect is kept", err);
		snprintf(status, len, "configuration not reloaded: %s", err);
		goto out;
	}
	pthread_mutex_lock(&fe->lock);
	list_changed(live_fields, sizeof(live_fields) / sizeof(live_fields[0]), &fe->cfg, &next, changed,
		     sizeof(changed));
	list_restart_only(&fe->cfg, &next, later, sizeof(later));
	for (size_t i = 0; i < sizeof(live_fields) / sizeof(live_fields[0]); i++)
		memcpy((char *)&fe->cfg + live_fields[i].off, (const char *)&next + live_fields[i].off,
		       live_fields[i].size);
	struct tenant_table *old = fe->cfg.tenants;
	tenant_table_carry(next.tenants, old);
	fe->cfg.tenants = next.tenants; /* every session moves to the tenant of its tenant's name, else default */
	struct session *s;
	TAILQ_FOREACH(s, &fe->sessions, link)
	if (s->tenant != NULL)
		s->tenant = tenant_by_name(next.tenants, s->tenant->name);
	pthread_mutex_unlock(&fe->lock);
	tenant_table_free(old);
	list_add(changed, sizeof(changed), "tenants");
	log_info("SIGHUP: %s reloaded; changed now: %s", conf.path, changed[0] ? changed : "nothing");
	if (later[0])
		log_warn("SIGHUP: %s changed in %s: takes effect at the next start", later, conf.path);
	snprintf(status, len, "configuration reloaded; changed now: %s%s%s", changed[0] ? changed : "nothing",
		 later[0] ? "; at the next start: " : "", later);
out:
	conf_strings_free(&keep); /* the running configuration points into conf.strings only */
}
