/*
 * main.c — cuasyncd: options, start-up (workers first, then the dispatcher, then the edge and its
 * listeners), readiness notification, signals, shutdown. The same executable runs the GPU workers
 * (`--worker`, spawned by the front-end with fork+exec; see worker/).
 */
#include "config.h"

#include "cua_log.h"
#include "devlink.h"
#include "edge.h"
#include "metrics.h"
#include "request.h"
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char default_url[PATH_MAX + 16];

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
	O_SESSION_MODULES,
	O_SESSION_MODULE_BYTES,
	O_SESSION_HOST_BYTES,
	O_SESSION_HANDLES,
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
	O_METRICS_LISTEN,
	O_METRICS_SESSIONS,
	O_HELP,
	O_VERSION,
	/* worker mode (internal) */
	O_WORKER,
	O_WORKER_DEVICE,
	O_WORKER_GEN,
	O_LOG_LEVEL_NUM,
	O_CUDA_PROBE,
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
	{"session-modules", 1, O_SESSION_MODULES, "N", "modules per session (default 256)"},
	{"session-module-bytes", 1, O_SESSION_MODULE_BYTES, "BYTES",
	 "bytes of module images per session (default 256M)"},
	{"session-host-bytes", 1, O_SESSION_HOST_BYTES, "BYTES",
	 "registered (page-locked) host memory per session (default 1G)"},
	{"session-handles", 1, O_SESSION_HANDLES, "N", "modules+functions+streams per session (default 65536)"},
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
	 "one stream, one thread); 1: the command loop issues everything (default 0: half the cores, at most 4)"},
	{"drain-timeout", 1, O_DRAIN_TIMEOUT, "SECONDS",
	 "on SIGTERM, how long to wait for the work already in the workers before exiting anyway (default 30)"},
	{"hello-timeout", 1, O_HELLO_TIMEOUT, "SECONDS",
	 "close a connection that has not sent HELLO after this long (default 10; 0: never)"},
	{"metrics-listen", 1, O_METRICS_LISTEN, "URL",
	 "serve Prometheus metrics (GET /metrics) and a health check (GET /healthz) at URL, e.g. "
	 "http://127.0.0.1:9464 (default: off; port 0 picks a free port, logged)"},
	{"metrics-sessions", 0, O_METRICS_SESSIONS, NULL,
	 "add per-session series to /metrics (one set per client connection: mind the cardinality)"},
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
	fprintf(f, "\nDefault listen URL: ipc:///run/cuasyncd/cuasyncd.sock as root, else under $XDG_RUNTIME_DIR or "
		   "/tmp.\n"
		   "Environment: CUASYNC_URL is what clients connect to.\n");
}

/* "64M", "1G", "4096": bytes. Returns -1 on a malformed value. */
static int
parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	uint64_t mul = 1;
	switch (*end) {
	case '\0': break;
	case 'k':
	case 'K':
		mul = 1ull << 10;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1ull << 20;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1ull << 30;
		end++;
		break;
	default: return -1;
	}
	if (*end != '\0' || (v && mul > UINT64_MAX / v))
		return -1;
	*out = v * mul;
	return 0;
}

static int
parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < (long)lo || v > (long)hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* "25%" (a share of each device's memory), "4G" (bytes) or "0" (no limit). Returns -1 when malformed. */
static int
parse_share(const char *s, uint64_t *bytes, unsigned *pct)
{
	size_t n = strlen(s);
	if (n > 1 && s[n - 1] == '%') {
		char num[16];
		if (n > sizeof(num))
			return -1;
		memcpy(num, s, n - 1);
		num[n - 1] = '\0';
		*bytes = 0;
		return parse_uint(num, 1, 100, pct);
	}
	*pct = 0;
	return parse_size(s, bytes);
}

static const char *
default_listen(void)
{
	if (geteuid() == 0) {
		mkdir("/run/cuasyncd", 0755);
		snprintf(default_url, sizeof(default_url), "ipc:///run/cuasyncd/cuasyncd.sock");
	} else {
		const char *dir = getenv("XDG_RUNTIME_DIR");
		snprintf(default_url, sizeof(default_url), "ipc://%s/cuasyncd.sock", dir && *dir ? dir : "/tmp");
	}
	return default_url;
}

/* systemd readiness (Type=notify) without libsystemd: one datagram to $NOTIFY_SOCKET. */
static void
sd_notify_ready(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	if (path == NULL || (path[0] != '/' && path[0] != '@') ||
	    strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, path, strlen(path));
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	const char msg[] = "READY=1\nSTATUS=serving";
	sendto(fd, msg, sizeof(msg) - 1, 0, (struct sockaddr *)&sa,
	       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path)));
	close(fd);
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

static int cuda_count;

/* Runs the probe in a child process and reads its verdict. */
static int
probe_cuda(const char *self, char *why, size_t len)
{
	int fds[2];
	if (pipe(fds) != 0) {
		snprintf(why, len, "pipe: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl(self, self, "--cuda-probe", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char buf[512] = "";
	size_t have = 0;
	ssize_t n;
	while (pid > 0 && have < sizeof(buf) - 1 && (n = read(fds[0], buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)n;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	buf[have] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (strncmp(buf, "ok ", 3) == 0 && (cuda_count = atoi(buf + 3)) > 0)
		return 0;
	snprintf(why, len, "%s", strncmp(buf, "no ", 3) == 0 ? buf + 3 : "the CUDA probe failed");
	return -1;
}

static int
choose_backend(struct fe *fe)
{
	const char *b = fe->cfg.backend;
	if (strcmp(b, "emu") == 0) {
		fe->backend = "emu";
		return 0;
	}
	char why[512];
	if (probe_cuda(fe->cfg.self_exe, why, sizeof(why)) == 0) {
		fe->backend = "cuda";
		return 0;
	}
	if (strcmp(b, "cuda") == 0) {
		log_error("--backend cuda: no usable GPU: %s", why);
		return -1;
	}
	log_info("no usable GPU (%s); serving the emulated device", why);
	fe->backend = "emu";
	return 0;
}

static int
count_devices(struct fe *fe, int *ordinals, int max)
{
	int n = 0;
	if (fe->cfg.devices) {
		char *copy = strdup(fe->cfg.devices), *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) {
			unsigned v;
			if (parse_uint(t, 0, CUA_MAX_DEVICES - 1, &v) != 0) {
				log_error("--devices: '%s' is not a device ordinal", t);
				free(copy);
				return -1;
			}
			ordinals[n++] = (int)v;
		}
		free(copy);
		return n;
	}
	int total = strcmp(fe->backend, "cuda") == 0 ? cuda_count : fe->cfg.emu_devices;
	for (int i = 0; i < total && n < max; i++)
		ordinals[n++] = i;
	return n;
}

static bool pending_given; /* --session-pending was said */

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
		bad = parse_uint(arg, 10, 199, &u);
		c->emu_sm = (int)u;
		return bad;
	case O_EMU_DEVICES:
		bad = parse_uint(arg, 1, CUA_MAX_DEVICES, &u);
		c->emu_devices = (int)u;
		return bad;
	case O_EMU_MEM: return parse_size(arg, &c->emu_mem) || c->emu_mem == 0;
	case O_DEVICES: c->devices = arg; return 0;
	case O_POOL: return parse_uint(arg, 1, 64, &c->pool_streams);
	case O_CONTEXTS: return parse_uint(arg, 1, 65536, &c->contexts);
	case O_MAX_MESSAGE:
		bad = parse_size(arg, &sz) || sz < 65536 || sz > CUA_WIRE_MAX_MESSAGE;
		c->max_message = (size_t)sz;
		return bad;
	case O_STAGING: return parse_size(arg, &c->staging_bytes) || c->staging_bytes < 65536;
	case O_RING:
		return parse_size(arg, &c->ring_bytes) || c->ring_bytes < 65536 ||
		       (c->ring_bytes & (c->ring_bytes - 1));
	case O_SESSION_MEM: return parse_share(arg, &c->session_mem, &c->session_mem_pct);
	case O_SESSION_STREAMS: return parse_uint(arg, 1, 4000, &c->session_streams);
	case O_SESSION_MODULES: return parse_uint(arg, 1, 1u << 20, &c->session_modules);
	case O_SESSION_MODULE_BYTES: return parse_size(arg, &c->session_module_bytes) || c->session_module_bytes == 0;
	case O_SESSION_HOST_BYTES: return parse_size(arg, &c->session_host_bytes);
	case O_SESSION_HANDLES: return parse_uint(arg, 1, 0xffffff, &c->session_handles);
	case O_SESSION_INFLIGHT: return parse_uint(arg, 1, 1u << 24, &c->session_inflight);
	case O_SESSION_PENDING: pending_given = true; return parse_uint(arg, 1, 65536, &c->session_pending);
	case O_SESSION_WINDOW: return parse_uint(arg, 1, 65536, &c->session_window);
	case O_SESSION_REPLY_BYTES: return parse_size(arg, &c->session_reply_bytes) || c->session_reply_bytes == 0;
	case O_SEND_TIMEOUT: return parse_uint(arg, 1, 86400000, &c->send_timeout_ms);
	case O_CONTEXTS_MAX: return parse_uint(arg, 1, 1u << 20, &c->contexts_max);
	case O_SEQ_GAP_TIMEOUT: return parse_uint(arg, 1, 86400000, &c->seq_gap_timeout_ms);
	case O_TLS_CERT: c->tls_cert = arg; return 0;
	case O_TLS_KEY: c->tls_key = arg; return 0;
	case O_READY_FD:
		bad = parse_uint(arg, 0, 65535, &u);
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
	case O_ISOLATION_POOL: return parse_uint(arg, 0, 64, &c->isolation_pool);
	case O_SCRUB: c->scrub = strcmp(arg, "on") == 0; return strcmp(arg, "on") && strcmp(arg, "off");
	case O_WATCHDOG: return parse_uint(arg, 0, 3600, &c->watchdog_s);
	case O_EMU_THREADS: return parse_uint(arg, 0, 256, &c->emu_threads);
	case O_SUBMIT_THREADS: return parse_uint(arg, 0, 64, &c->submit_threads);
	case O_DRAIN_TIMEOUT: return parse_uint(arg, 0, 86400, &c->drain_timeout);
	case O_HELLO_TIMEOUT: return parse_uint(arg, 0, 86400, &c->hello_timeout);
	case O_METRICS_LISTEN: c->metrics_listen = arg; return strncmp(arg, "http://", 7) != 0;
	case O_METRICS_SESSIONS: c->metrics_sessions = true; return 0;
	case O_LOG_LEVEL_NUM:
		bad = parse_uint(arg, 0, 3, &u);
		cua_log_set_level((int)u);
		return bad;
	case O_WORKER:
		bad = parse_uint(arg, 0, 65535, &u);
		wo->shm_fd = (int)u;
		return bad;
	case O_WORKER_DEVICE:
		bad = parse_uint(arg, 0, CUA_MAX_DEVICES, &u);
		wo->device = (int)u;
		return bad;
	case O_WORKER_GEN:
		bad = parse_uint(arg, 0, UINT32_MAX >> 1, &u);
		wo->generation = u;
		return bad;
	case O_CUDA_PROBE: return 100 + cuda_probe_main();
	case O_HELP: usage(stdout); return 100;
	case O_VERSION: printf("%s %s (protocol %u)\n", PACKAGE_NAME, PACKAGE_VERSION, CUA_PROTO_VERSION); return 100;
	default: usage(stderr); return 102;
	}
}

/* The command line into c and wo. -1: go on; else the exit status to stop with. */
static int
parse_options(struct config *c, struct worker_opts *wo, int argc, char **argv)
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
		if (rc == 0)
			continue;
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
	config_settle(c, pending_given);
	return -1;
}

/* Starts one worker per device. The number of usable ones, or -1. */
static int
start_devices(struct fe *fe)
{
	int ordinals[CUA_MAX_DEVICES], usable = 0;
	int ndev = count_devices(fe, ordinals, CUA_MAX_DEVICES);
	if (ndev <= 0) {
		log_error("no devices to serve");
		return -1;
	}
	fe->devs = calloc((size_t)ndev, sizeof(*fe->devs));
	if (fe->devs == NULL)
		return -1;
	fe->ndevs = ndev;
	for (int i = 0; i < ndev; i++) {
		fe->devs[i].index = i;
		fe->devs[i].ordinal = ordinals[i];
		if (dev_start(fe, &fe->devs[i], do_request_done) == 0)
			usable++;
	}
	if (usable == 0)
		log_error("no usable device: %s", fe->devs[0].why);
	return usable;
}

/* Fills in what the options left open. 0 or -1. */
static int
settle_config(struct config *c)
{
	static char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		log_error("cannot find my own executable (/proc/self/exe) to start workers");
		return -1;
	}
	self[n] = '\0';
	c->self_exe = self;
	if (c->nlisten == 0)
		c->listen[c->nlisten++] = default_listen();
	if (c->staging_bytes > c->max_message * 4 + (256ull << 20))
		log_warn("staging area (%llu bytes) is much larger than the largest message",
			 (unsigned long long)c->staging_bytes);
	return 0;
}

/* SIGHUP. There is no configuration file yet, so nothing to re-read; this is where reading it will go (limits,
 * logging; what cannot change without a restart said in the log). Sessions are not touched either way. */
static void
reload(struct fe *fe)
{
	(void)fe;
	log_info("SIGHUP: no configuration file to reload; nothing changed, every session keeps being served");
}

/* Waits for the signal that stops the daemon, handling SIGHUP meanwhile. Returns that signal. */
static int
wait_for_stop(struct fe *fe, const sigset_t *set)
{
	int sig = 0;
	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		if (sig != SIGHUP)
			return sig;
		reload(fe);
	}
}

/* Graceful shutdown: no new connections or requests, queued work answered SHUTTING_DOWN, the work inside the
 * workers waited for until --drain-timeout or a second SIGTERM/SIGINT, its replies flushed. What is still in
 * the workers after that is abandoned: edge_stop closes its connection unanswered. */
static void
drain(struct fe *fe, struct edge *ed, const sigset_t *set)
{
	edge_quiesce(ed);
	uint32_t n = request_drain_begin(fe);
	uint64_t deadline = now_ms() + (uint64_t)fe->cfg.drain_timeout * 1000u;
	if (n > 0)
		log_info("draining %u request(s) in the workers (up to %u s; SIGTERM again stops at once)", n,
			 fe->cfg.drain_timeout);
	while ((n = request_in_flight(fe)) > 0) {
		uint64_t now = now_ms();
		if (now >= deadline) {
			log_warn("deadline passed (--drain-timeout %u s): %u request(s) abandoned",
				 fe->cfg.drain_timeout, n);
			break;
		}
		uint64_t wait = deadline - now < 10 ? deadline - now : 10;
		struct timespec ts = {0, (long)wait * 1000000L};
		int sig = sigtimedwait(set, NULL, &ts);
		if (sig == SIGHUP) {
			log_info("SIGHUP while shutting down: ignored");
		} else if (sig > 0) {
			log_warn("signal %d again: stopping now, %u request(s) abandoned", sig, n);
			break;
		}
	}
	if (n == 0)
		log_info("drained");
	edge_flush(ed, 2000);
}

/* The daemon: devices, dispatcher, edge; then serves until SIGINT/SIGTERM, drains and stops in reverse order. */
static int
serve(struct fe *fe)
{
	static struct edge ed;
	static struct metrics metrics;
	sigset_t block;
	int sig = 0, usable;
	cua_log_set_ident("cuasyncd");
	if (settle_config(&fe->cfg) != 0)
		return 1;
	/* Only this process may hold the ready pipe: a worker that inherited it would keep a reader waiting for
	 * its end after "ready" was written and the daemon closed it. */
	if (fe->cfg.ready_fd >= 0 && fcntl(fe->cfg.ready_fd, F_SETFD, FD_CLOEXEC) != 0) {
		log_error("--ready-fd %d: %s", fe->cfg.ready_fd, strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &block, NULL); /* threads inherit the mask; main waits for the signals */
	if (choose_backend(fe) != 0 || (usable = start_devices(fe)) <= 0)
		return 1;
	if (request_start(fe) != 0 || edge_start(&ed, fe) != 0)
		return 1;
	if (fe->cfg.metrics_listen != NULL && metrics_start(&metrics, fe) != 0)
		return 1;
	log_info("serving %d device(s) with the %s backend", usable, fe->backend);
	if (fe->cfg.ready_fd >= 0) {
		dprintf(fe->cfg.ready_fd, "ready %s\n", fe->cfg.listen[0]);
		close(fe->cfg.ready_fd);
	}
	sd_notify_ready();
	sig = wait_for_stop(fe, &block);
	log_info("signal %d: shutting down", sig);
	drain(fe, &ed, &block);
	metrics_stop(&metrics); /* before the core goes: its handlers read fe */
	edge_stop(&ed);
	request_stop(fe);
	edge_fini(&ed);
	free(fe->devs);
	return 0;
}

int
main(int argc, char **argv)
{
	static struct fe fe;
	struct worker_opts wo = {.shm_fd = -1};
	fe_init(&fe);
	int rc = parse_options(&fe.cfg, &wo, argc, argv);
	if (rc >= 0)
		return rc;
	if (wo.shm_fd >= 0) {
		wo.backend = fe.cfg.backend;
		wo.emu_sm = fe.cfg.emu_sm;
		wo.emu_mem = fe.cfg.emu_mem;
		wo.pool_streams = fe.cfg.pool_streams;
		wo.scrub = fe.cfg.scrub;
		wo.emu_threads = fe.cfg.emu_threads;
		wo.submit_threads = fe.cfg.submit_threads;
		return worker_main(&wo);
	}
	return serve(&fe);
}
