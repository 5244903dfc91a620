/*
 * main.c — cuasyncd: start-up (workers first, then the dispatcher, then the edge and its listeners), readiness
 * notification, signals (SIGHUP reloads the configuration: options.c), shutdown. The same executable runs the GPU workers
 * (`--worker`, spawned by the front-end with fork+exec; see worker/).
 */
#include "config.h"

#include "auth.h"
#include "cua_log.h"
#include "devlink.h"
#include "edge.h"
#include "fdchan.h"
#include "metrics.h"
#include "options.h"
#include "request.h"
#include "shmchan.h"
#include "stats.h"
#include "tenant.h"
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

static char default_url[PATH_MAX + 16];

static const char *
default_listen(void)
{
	const char *rt = getenv("RUNTIME_DIRECTORY"); /* systemd's RuntimeDirectory= (the unit's /run/cuasyncd) */
	if (rt != NULL && *rt == '/' && strchr(rt, ':') == NULL) {
		snprintf(default_url, sizeof(default_url), "ipc://%s/cuasyncd.sock", rt);
	} else if (geteuid() == 0) {
		mkdir("/run/cuasyncd", 0755);
		snprintf(default_url, sizeof(default_url), "ipc:///run/cuasyncd/cuasyncd.sock");
	} else {
		const char *dir = getenv("XDG_RUNTIME_DIR");
		snprintf(default_url, sizeof(default_url), "ipc://%s/cuasyncd.sock", dir && *dir ? dir : "/tmp");
	}
	return default_url;
}

/* A state change for systemd (Type=notify: READY=1, RELOADING=1, STOPPING=1, WATCHDOG=1, STATUS=…) through
 * libsystemd, to $NOTIFY_SOCKET when there is one. Without libsystemd (--without-libsystemd): nothing. */
static void
notify(const char *msg)
{
#ifdef HAVE_LIBSYSTEMD
	sd_notify(0, msg);
#else
	(void)msg;
#endif
}

/* systemd's watchdog (WatchdogSec= in the unit: $WATCHDOG_USEC): WATCHDOG=1 every half period, sent by the main
 * thread from its signal loops after it took fe->lock, so that a ping proves that the core is not stuck (every
 * request needs that lock) and that the main thread still handles signals; 0 when off. */
static uint64_t watchdog_ms, watchdog_next_ms;

static void
watchdog_init(void)
{
#ifdef HAVE_LIBSYSTEMD
	uint64_t usec = 0;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000)
		watchdog_ms = usec / 2000; /* half the period */
#endif
	watchdog_next_ms = cua_now_ms();
}

/* Pings systemd's watchdog when one is due. Main thread, without fe->lock. */
static void
watchdog_tick(struct fe *fe)
{
	uint64_t now = cua_now_ms();
	if (watchdog_ms == 0 || now < watchdog_next_ms)
		return;
	fe_lock(fe);
	fe_unlock(fe);
	notify("WATCHDOG=1");
	watchdog_next_ms = now + watchdog_ms;
}

static int cuda_count;
/* The GPUs' UUIDs by ordinal, as the CUDA probe reports them ("-": unknown), for --devices GPU-...; the emulated
 * devices' are made up (emu_uuid). */
static char cuda_uuid[CUA_MAX_DEVICES][48];

/* The emulated device of ordinal i's UUID: fixed, so that tests and demos can name it as they would a GPU. */
static const char *
emu_uuid(int i, char *buf, size_t len)
{
	snprintf(buf, len, "GPU-e3e3e3e3-0000-4000-8000-%012x", (unsigned)i);
	return buf;
}

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
	char buf[512 + CUA_MAX_DEVICES * 48] = ""; /* a verdict, then one UUID a line */
	size_t have = 0;
	ssize_t n;
	while (pid > 0 && have < sizeof(buf) - 1 && (n = read(fds[0], buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)n;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	buf[have] = '\0';
	char *rest = buf + strcspn(buf, "\n"), *save = NULL;
	if (*rest)
		*rest++ = '\0';
	if (strncmp(buf, "ok ", 3) == 0 && (cuda_count = atoi(buf + 3)) > 0) {
		int i = 0;
		for (char *l = strtok_r(rest, "\n", &save); l && i < (int)CUA_MAX_DEVICES;
		     l = strtok_r(NULL, "\n", &save))
			snprintf(cuda_uuid[i++], sizeof(cuda_uuid[0]), "%s", l);
		return 0;
	}
	snprintf(why, len, "%.400s", strncmp(buf, "no ", 3) == 0 ? buf + 3 : "the CUDA probe failed");
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

/* The ordinal of the device whose UUID is uuid or starts with it (CUDA_VISIBLE_DEVICES's rule: an unambiguous
 * prefix, "GPU-" included, case ignored), among total devices; -1 (logged) when none or several match. */
static int
ordinal_of_uuid(struct fe *fe, const char *uuid, int total)
{
	char all[CUA_MAX_DEVICES * 56] = "", mine[48];
	int found = -1, matches = 0;
	size_t len = strlen(uuid), k = 0;
	for (int i = 0; i < total && i < (int)CUA_MAX_DEVICES; i++) {
		const char *u = strcmp(fe->backend, "cuda") == 0 ? cuda_uuid[i] : emu_uuid(i, mine, sizeof(mine));
		if (strncasecmp(u, uuid, len) == 0 && matches++ == 0)
			found = i;
		if (k < sizeof(all))
			k += (size_t)snprintf(all + k, sizeof(all) - k, "%s%d %s", i ? ", " : "", i, u);
	}
	if (matches == 1)
		return found;
	char shown[CUA_LOG_ESCAPED(64)];
	cua_log_escape(shown, sizeof(shown), uuid, len);
	if (matches == 0)
		log_error("--devices: no %s device has the UUID '%s'; the devices here are %s (nvidia-smi -L lists "
			  "GPUs; a GPU hidden by CUDA_VISIBLE_DEVICES is not among them)",
			  fe->backend, shown, all);
	else
		log_error("--devices: '%s' is the start of %d devices' UUIDs (%s): give more of it", shown, matches,
			  all);
	return -1;
}

/* The devices to serve: --devices (ordinals, GPU UUIDs or their unambiguous prefixes, as CUDA_VISIBLE_DEVICES
 * takes them; each at most once), else all. Their count, or -1 (logged). */
static int
count_devices(struct fe *fe, int *ordinals, int max)
{
	int n = 0, rc = 0;
	int total = strcmp(fe->backend, "cuda") == 0 ? cuda_count : fe->cfg.emu_devices;
	if (fe->cfg.devices == NULL) {
		for (int i = 0; i < total && n < max; i++)
			ordinals[n++] = i;
		return n;
	}
	char *copy = strdup(fe->cfg.devices), *save = NULL;
	if (copy == NULL)
		return -1;
	for (char *t = strtok_r(copy, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save)) {
		unsigned v;
		bool by_uuid = strncasecmp(t, "GPU-", 4) == 0;
		int ord = by_uuid                                              ? ordinal_of_uuid(fe, t, total)
			  : cfg_parse_uint(t, 0, CUA_MAX_DEVICES - 1, &v) == 0 ? (int)v
									       : -2;
		if (ord == -2)
			log_error("--devices: '%s' is neither a device ordinal nor a GPU UUID (GPU-..., see nvidia-smi "
				  "-L)",
				  t);
		for (int k = 0; k < n && ord >= 0; k++)
			if (ordinals[k] == ord) {
				log_error("--devices: device %d is named twice in '%s'", ord, fe->cfg.devices);
				ord = -1;
			}
		if (ord < 0) {
			rc = -1;
			break;
		}
		ordinals[n++] = ord;
	}
	free(copy);
	return rc == 0 ? n : -1;
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
		char uuid[48];
		fe->devs[i].index = i;
		fe->devs[i].ordinal = ordinals[i];
		snprintf(fe->devs[i].uuid, sizeof(fe->devs[i].uuid), "%s",
			 strcmp(fe->backend, "cuda") != 0           ? emu_uuid(ordinals[i], uuid, sizeof(uuid))
			 : strcmp(cuda_uuid[ordinals[i]], "-") != 0 ? cuda_uuid[ordinals[i]]
								    : "");
		log_info("device %d: %s device ordinal %d, UUID %s", i, fe->backend, ordinals[i],
			 fe->devs[i].uuid[0] ? fe->devs[i].uuid : "unknown");
		if (dev_start(fe, &fe->devs[i], request_done) == 0)
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

/* The files the options name, opened as the daemon's user before anything starts: one it cannot read is a
 * configuration error (exit status 2, which the unit does not restart on), said with the file, the user and what
 * to do rather than as a TLS error from inside NNG. 0, or -1 (logged). */
static int
check_files(const struct config *c)
{
	const struct {
		const char *opt, *path;
	} files[] = {{"tls-cert", c->tls_cert},
		     {"tls-key", c->tls_key},
		     {"tls-ca", c->tls_ca},
		     {"token-file", c->token_file}};
	int r = 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		if (files[i].path == NULL)
			continue;
		int fd = open(files[i].path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			continue;
		}
		int e = errno;
		const struct passwd *pw = getpwuid(geteuid());
		const char *user = pw ? pw->pw_name : "?";
		log_error("--%s %s: %s, as user %s (uid %u) that the daemon runs as: %s", files[i].opt, files[i].path,
			  strerror(e), user, (unsigned)geteuid(),
			  e == EACCES ? "make it readable by that user (a private key or the tokens by that user only: "
					"chown it to that user, mode 0600, or root:GROUP 0640 with a group of that "
					"user alone)"
				      : "name an existing file");
		r = -1;
	}
	return r;
}

/* Raises the descriptor limit to the hard limit: every remote peer holds one while it connects, and the local
 * listener needs one for each of its clients (edge-guard.c keeps --fd-reserve of them for those). Logged. */
static void
raise_fd_limit(const struct config *c)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	rlim_t was = rl.rlim_cur;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			log_warn("cannot raise the descriptor limit from %llu to %llu: %s", (unsigned long long)was,
				 (unsigned long long)rl.rlim_max, strerror(errno));
			rl.rlim_cur = was;
		}
	}
	if (rl.rlim_cur == was)
		log_info("descriptor limit %llu (the hard limit; %u kept for local clients, --fd-reserve)",
			 (unsigned long long)rl.rlim_cur, c->fd_reserve);
	else
		log_info("descriptor limit raised from %llu to the hard limit %llu (%u kept for local clients, "
			 "--fd-reserve)",
			 (unsigned long long)was, (unsigned long long)rl.rlim_cur, c->fd_reserve);
	if (rl.rlim_cur < (rlim_t)c->fd_reserve * 4)
		log_warn("the descriptor limit (%llu) is small for --fd-reserve %u: raise LimitNOFILE= (systemd) or "
			 "ulimit -Hn",
			 (unsigned long long)rl.rlim_cur, c->fd_reserve);
}

/* Waits for the signal that stops the daemon, handling SIGHUP meanwhile. Returns that signal. */
static int
wait_for_stop(struct fe *fe, const sigset_t *set)
{
	int sig = 0;
	for (;;) {
		watchdog_tick(fe);
		if (watchdog_ms == 0) {
			if (sigwait(set, &sig) != 0)
				continue;
		} else {
			struct timespec ts = cua_ms_ts(watchdog_ms);
			if ((sig = sigtimedwait(set, NULL, &ts)) <= 0)
				continue;
		}
		if (sig != SIGHUP)
			return sig;
		char msg[1200], status[1024];
		snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
			 (unsigned long long)cua_now_ns() / 1000u);
		notify(msg);
		options_reload(fe, status, sizeof(status));
		snprintf(msg, sizeof(msg), "READY=1\nSTATUS=serving; %s", status);
		notify(msg);
	}
}

/* Graceful shutdown: no new connections or requests, queued work answered SHUTTING_DOWN, the work inside the
 * workers waited for until --drain-timeout or a second SIGTERM/SIGINT, its replies flushed. What is still in
 * the workers after that is abandoned: edge_stop closes its connection unanswered. */
static void
drain(struct fe *fe, struct edge *ed, struct fdchan *fc, const sigset_t *set)
{
	edge_quiesce(ed);
	fdchan_quiesce(fc);
	uint32_t n = request_drain_begin(fe);
	uint64_t deadline = cua_now_ms() + (uint64_t)fe->cfg.drain_timeout * 1000u;
	if (n > 0)
		log_info("draining %u request(s) in the workers (up to %u s; SIGTERM again stops at once)", n,
			 fe->cfg.drain_timeout);
	while ((n = request_in_flight(fe)) > 0) {
		uint64_t now = cua_now_ms();
		if (now >= deadline) {
			log_warn("deadline passed (--drain-timeout %u s): %u request(s) abandoned",
				 fe->cfg.drain_timeout, n);
			break;
		}
		struct timespec ts = cua_ms_ts(deadline - now < 10 ? deadline - now : 10);
		watchdog_tick(fe); /* a drain may outlast the watchdog's period */
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
	static struct fdchan fc;
	static struct metrics metrics;
	sigset_t block;
	int sig = 0, usable;
	cua_log_set_ident("cuasyncd");
	options_log_config_file();
	if (settle_config(&fe->cfg) != 0)
		return 1;
	if (check_files(&fe->cfg) != 0 || auth_start(fe) != 0) { /* the configuration cannot work: 2 */
		auth_fini(fe);
		return 2;
	}
	raise_fd_limit(&fe->cfg);
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
	fc.shm = shmchan_start(fe); /* NULL: clients use NNG only (logged) */
	if (fdchan_start(&fc, fe) != 0)
		return 1;
	if (fe->cfg.metrics_listen != NULL && metrics_start(&metrics, fe) != 0)
		return 1;
	log_info("serving %d device(s) with the %s backend", usable, fe->backend);
	if (fe->cfg.ready_fd >= 0) {
		dprintf(fe->cfg.ready_fd, "ready %s\n", fe->cfg.listen[0]);
		close(fe->cfg.ready_fd);
	}
	watchdog_init();
	notify("READY=1\nSTATUS=serving");
	sig = wait_for_stop(fe, &block);
	log_info("signal %d: shutting down", sig);
	notify("STOPPING=1\nSTATUS=shutting down: draining");
	drain(fe, &ed, &fc, &block);
	metrics_stop(&metrics); /* before the core goes: its handlers read fe */
	fdchan_stop(&fc);       /* no channel attaches after this */
	shmchan_stop(fc.shm);   /* before edge_stop: its violations close NNG pipes; late ring replies are dropped */
	edge_stop(&ed);
	request_stop(fe);
	edge_fini(&ed);
	free(fe->devs);
	auth_fini(fe);
	tenant_table_free(fe->cfg.tenants);
	stats_fini(&fe->stats);
	return 0;
}

int
main(int argc, char **argv)
{
	static struct fe fe;
	struct worker_opts wo = {.shm_fd = -1};
	fe_init(&fe);
	int rc = options_parse(&fe.cfg, &wo, argc, argv);
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
