#include "config.h"

#include "harness.h"

#include "cua_fdchan.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char emu_image[] = "cuasync-emu-module\naxpy\nfill_u32\nempty_kernel\nspin\npdl_count\nbad_write\n";

const char *
builddir(void)
{
	const char *b = getenv("CUA_TEST_BUILDDIR"); /* a build carried to another machine */
	return b && *b ? b : CUA_BUILDDIR;
}

const char *
test_backend(void)
{
	const char *b = getenv("CUA_TEST_BACKEND");
	return b && *b ? b : "emu";
}

/* Reads the --ready-fd pipe to its end, as `cat` would: the daemon writes "ready <url>" and closes it, and
 * no process it started (its workers) may keep the pipe open. Fails the test after 30 s without the end. */
static void
read_ready(int fd, const char *log)
{
	char buf[512] = "";
	size_t len = 0;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		int n = poll(&p, 1, 30000);
		ck_assert_msg(n == 1, "the --ready-fd pipe did not reach end-of-file (have \"%s\"); see %s", buf, log);
		ssize_t got = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (got <= 0)
			break;
		len += (size_t)got;
		buf[len] = '\0';
	}
	ck_assert_msg(strncmp(buf, "ready ", 6) == 0, "cuasyncd did not start; see %s", log);
}

void
daemon_start(struct daemon *d, const char *const *extra)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/cuasync-test.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(d->dir));
	snprintf(d->url, sizeof(d->url), "ipc://%s/d.sock", d->dir);
	snprintf(d->op_url, sizeof(d->op_url), "ipc://%s/op.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	const char *argv[64];
	int n = 0;
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", ready[1]);
	static char exe[512];
	snprintf(exe, sizeof(exe), "%s/daemon/cuasyncd", builddir());
	argv[n++] = exe;
	argv[n++] = "--listen";
	argv[n++] = d->url;
	argv[n++] = "--operator-url";
	argv[n++] = d->op_url;
	argv[n++] = "--ready-fd";
	argv[n++] = fdarg;
	argv[n++] = "--backend";
	argv[n++] = test_backend();
	argv[n++] = "--emu-mem";
	argv[n++] = "256M";
	argv[n++] = "--staging";
	argv[n++] = "96M";
	argv[n++] = "--ring";
	argv[n++] = "4M";
	/* a loaded CI machine (two cores, sanitizers, suites in parallel) can starve a worker's heartbeat for
	 * seconds; the watchdog's own tests set their deadline after this */
	argv[n++] = "--watchdog-timeout";
	argv[n++] = "30";
	/* the host's own configuration file (/etc/cuasyncd/cuasyncd.conf) must not shape a test; a test's own
	 * --config among extra comes later and wins */
	argv[n++] = "--config";
	argv[n++] = "/dev/null";
	const char *iso = getenv("CUA_TEST_ISOLATION"); /* run a suite in the other mode: shared or session */
	if (iso != NULL && *iso) {
		argv[n++] = "--isolation";
		argv[n++] = iso;
		argv[n++] = "--isolation-pool"; /* a test's sessions should not wait for a worker to start */
		argv[n++] = "4";
	}
	const char *sub = getenv("CUA_TEST_SUBMIT_THREADS"); /* run a suite with parallel submission */
	if (sub != NULL && *sub) {
		argv[n++] = "--submit-threads";
		argv[n++] = sub;
	}
	for (int i = 0; extra && extra[i] && n < 60; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	/* the daemon's: see tests/lsan.supp (no effect without ASan; the test process read its options at start) */
	setenv("LSAN_OPTIONS", "suppressions=" CUA_SRCDIR "/tests/lsan.supp:print_suppressions=0", 1);
	d->pid = fork();
	if (d->pid == 0) {
		/* Only async-signal-safe calls until exec: another thread of the test may have held a lock (Check's
		 * assertion mutex, malloc's) at the fork, and the child would wait for it forever. */
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed test exits without its teardown: take the daemon along */
		close(ready[0]);
		int log = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (log >= 0) {
			dup2(log, STDERR_FILENO);
			close(log);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	ck_assert_int_gt(d->pid, 0);
	close(ready[1]);
	read_ready(ready[0], d->log);
	close(ready[0]);
}

void
daemon_stop(struct daemon *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGTERM);
	int st = 0;
	pid_t w = 0;
	/* a clean stop drains for at most --drain-timeout (30 s): past 60 s it hangs — say so, with its log */
	for (int waited = 0; waited < 60000 && (w = waitpid(d->pid, &st, WNOHANG)) == 0; waited += 10)
		usleep(10000);
	if (w == 0) {
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "tail -n 80 %s >&2", d->log);
		if (system(cmd) != 0)
			fprintf(stderr, "(no daemon log)\n");
		/* where it hangs, when gdb is there to say */
		snprintf(cmd, sizeof(cmd),
			 "command -v gdb >/dev/null && gdb -p %d -batch -ex 'thread apply all bt' >&2 2>/dev/null",
			 (int)d->pid);
		if (system(cmd) != 0)
			fprintf(stderr, "(no backtrace)\n");
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
		d->pid = 0;
		ck_abort_msg("cuasyncd did not stop within 60 s of SIGTERM (log above)");
	}
	ck_assert_int_eq(w, d->pid);
	d->pid = 0;
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		char cmd[400];
		snprintf(cmd, sizeof(cmd), "tail -n 60 %s >&2", d->log);
		if (system(cmd) != 0)
			fprintf(stderr, "(no daemon log)\n");
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cuasyncd exited uncleanly (status 0x%x)", st);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", d->dir);
}

/* The daemon's worker for device dev started as generation want, or (want 0) the one of the lowest generation, the
 * last found among equals; -1 when none. */
static pid_t
worker_scan(const struct daemon *d, int dev, unsigned want)
{
	/* The workers are the daemon's children, started as `cuasyncd --worker FD --worker-device N
	 * --worker-generation G ...`; a spare worker (--spare-worker) is started for the next generation. */
	DIR *dir = opendir("/proc");
	pid_t found = -1;
	unsigned best = UINT32_MAX;
	struct dirent *e;
	while (dir && (e = readdir(dir)) != NULL) {
		char path[300], buf[4096];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (f == NULL)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		char *rp = strrchr(buf, ')');
		int ppid = 0;
		char state;
		if (!rp || sscanf(rp + 2, "%c %d", &state, &ppid) != 2 || ppid != d->pid || state == 'Z')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
		f = fopen(path, "r");
		if (f == NULL)
			continue;
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		/* argv is NUL-separated: "--worker-device" followed by dev, "--worker-generation" by its generation */
		int device = -1;
		unsigned gen = 0;
		for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
			size_t next = i + strlen(buf + i) + 1;
			if (next >= n)
				break;
			if (strcmp(buf + i, "--worker-device") == 0)
				device = atoi(buf + next);
			else if (strcmp(buf + i, "--worker-generation") == 0)
				gen = (unsigned)strtoul(buf + next, NULL, 10);
		}
		if (device != dev || (want != 0 && gen != want) || (want == 0 && gen > best))
			continue;
		best = gen;
		found = atoi(e->d_name);
	}
	if (dir)
		closedir(dir);
	return found;
}

pid_t
daemon_worker_pid(const struct daemon *d, int dev)
{
	return worker_scan(d, dev, 0);
}

pid_t
daemon_worker_pid_of_gen(const struct daemon *d, int dev, unsigned gen)
{
	return worker_scan(d, dev, gen);
}

cua_client *
connect_to(const struct daemon *d)
{
	cua_client *c = NULL;
	CK(cua_connect(d->url, &c));
	cua_set_timeout(c, 60000);
	return c;
}

cua_client *
connect_operator(const struct daemon *d)
{
	cua_client *c = NULL;
	CK(cua_connect(d->op_url, &c));
	cua_set_timeout(c, 60000);
	return c;
}

cua_module
load_kernels(cua_client *c)
{
	cua_module m;
	CK(load_kernels_rc(c, &m));
	return m;
}

int
load_kernels_rc(cua_client *c, cua_module *m)
{
	char fatbin[512];
	snprintf(fatbin, sizeof(fatbin), "%s/tests/kernels/test_kernels.fatbin", builddir());
	if (access(fatbin, R_OK) == 0)
		return cua_module_load_file(c, 0, fatbin, m);
	return cua_module_load(c, 0, emu_image, sizeof(emu_image) - 1, m);
}

bool
on_gpu(void)
{
	return strcmp(test_backend(), "cuda") == 0;
}

cua_module
load_features(cua_client *c, const char *image)
{
	cua_module m;
	char fatbin[512];
	snprintf(fatbin, sizeof(fatbin), "%s/tests/kernels/feature_kernels.fatbin", builddir());
	if (on_gpu())
		CK(cua_module_load_file(c, 0, fatbin, &m));
	else if (image != NULL)
		CK(cua_module_load(c, 0, image, strlen(image), &m));
	else
		ck_abort_msg("the feature kernels of this test exist only as a fatbin (a GPU test)");
	return m;
}

int
submit_status(cua_launch *l, char *msg, size_t len)
{
	cua_future *f;
	int r = cua_launch_submit(l, &f);
	if (r != CUA_OK) {
		snprintf(msg, len, "%s", cua_last_error());
		return r;
	}
	r = cua_future_wait(f, -1);
	snprintf(msg, len, "%s", cua_future_error(f));
	cua_future_free(f);
	return r;
}

cua_function
get_fn(cua_client *c, cua_module m, const char *name)
{
	cua_function f;
	CK(cua_module_get_function(c, m, name, &f));
	return f;
}

cua_launch *
launch_1d(cua_client *c, cua_function f, unsigned grid, unsigned block)
{
	cua_launch *l = cua_launch_new(c, f);
	ck_assert_ptr_nonnull(l);
	cua_launch_set_config(l, (cua_launch_config){{grid, 1, 1}, {block, 1, 1}, 0});
	return l;
}

void
launch_and_wait(cua_launch *l)
{
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	int rc = cua_future_wait(f, -1);
	ck_assert_msg(rc == CUA_OK, "launch: %s: %s", cua_strerror_name(rc), cua_future_error(f));
	cua_future_free(f);
}

bool
wait_status(cua_client *c, bool (*pred)(const cua_daemon_status *s, void *ud), void *ud, cua_daemon_status *out)
{
	for (int i = 0; i < 2000; i++) {
		CK(cua_status(c, out));
		if (pred(out, ud))
			return true;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return false;
}

long long
spin_cycles(unsigned ms)
{
	/* emu: 1 cycle = 1 ns; an H200 runs near 1.98 GHz under load */
	return strcmp(test_backend(), "emu") == 0 ? (long long)ms * 1000000LL : (long long)ms * 1980000LL;
}

cua_future *
submit_spin(cua_client *c, cua_function spin, unsigned ms, cua_stream s)
{
	cua_launch *l = launch_1d(c, spin, 1, 1);
	cua_launch_push_i64(l, spin_cycles(ms));
	cua_launch_set_stream(l, s);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	return f;
}

bool
status_restarted(const cua_daemon_status *s, void *ud)
{
	return s->devices[0].restarts >= *(uint32_t *)ud;
}

/* ------------------------------------------------------------------ the metrics endpoint */

/* The port the daemon logged ("metrics: serving http://127.0.0.1:PORT/metrics"). */
int
daemon_metrics_port(const struct daemon *d)
{
	FILE *f = fopen(d->log, "r");
	char line[512];
	int p = -1;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		const char *at = strstr(line, "metrics: serving http://127.0.0.1:");
		if (at != NULL)
			p = atoi(at + strlen("metrics: serving http://127.0.0.1:"));
	}
	if (f != NULL)
		fclose(f);
	return p;
}

/* GET path from the endpoint: the status code, and the body in a malloc'd string (*body). */
int
metrics_get(int port, const char *path, char **body)
{
	return metrics_get_as(port, path, NULL, body);
}

int
metrics_get_as(int port, const char *path, const char *bearer, char **body)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	char req[1024];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%sConnection: close\r\n\r\n",
			 path, bearer ? "Authorization: Bearer " : "", bearer ? bearer : "", bearer ? "\r\n" : "");
	ck_assert_int_eq(write(fd, req, (size_t)n), n);
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	ssize_t got;
	while ((got = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)got;
		if (cap - len < 4096)
			buf = realloc(buf, cap *= 2);
	}
	close(fd);
	buf[len] = '\0';
	int status = 0;
	ck_assert_msg(sscanf(buf, "HTTP/1.1 %d", &status) == 1, "not an HTTP response: %.80s", buf);
	char *start = strstr(buf, "\r\n\r\n");
	ck_assert_ptr_nonnull(start);
	*body = strdup(start + 4);
	if (strcmp(path, "/metrics") == 0)
		ck_assert_msg(strstr(buf, "Content-Type: text/plain; version=0.0.4") != NULL, "content type: %.300s",
			      buf);
	free(buf);
	return status;
}

/* The value of series (name with its labels, exactly as written) in text; -1 when it is absent. */
double
metric_value(const char *text, const char *series)
{
	size_t n = strlen(series);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

/* True when file contains text. */
bool
file_has(const char *file, const char *text)
{
	static char buf[1 << 20];
	FILE *f = fopen(file, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/* ---- the fd channel (PROTOCOL.md §9), for raw sessions that register host buffers */

/* The connection of the last session that passed something, kept: the daemon allows a session 2 connections, and
 * a closed one counts until the daemon has seen it close. Tests pass from one thread. */
static int chan_fd = -1;
static uint64_t chan_sid;

static int
chan_reply_status(int s, uint64_t *ticket, char *msg, size_t len)
{
	unsigned char rep[sizeof(struct cua_fdchan_reply) + CUA_FDCHAN_MAX_TEXT];
	struct cua_fdchan_reply h;
	ssize_t n = recv(s, rep, sizeof(rep), 0);
	if (n < 0 && errno == ECONNRESET) /* closed with records unread: the REPLY is still queued */
		n = recv(s, rep, sizeof(rep), 0);
	ck_assert_int_ge(n, (ssize_t)sizeof(h));
	memcpy(&h, rep, sizeof(h));
	snprintf(msg, len, "%.*s", (int)(n - (ssize_t)sizeof(h)), (const char *)rep + sizeof(h));
	*ticket = le64toh(h.tickets[0]);
	return (int)le32toh(h.status);
}

uint64_t
fdchan_pass_one(const char *ipc_url, uint64_t session, const void *secret, int fd)
{
	char msg[CUA_FDCHAN_MAX_TEXT + 1];
	uint64_t ticket;
	int st;
	if (chan_fd >= 0 && chan_sid != session) {
		close(chan_fd);
		chan_fd = -1;
	}
	if (chan_fd < 0) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		ck_assert_int_eq(strncmp(ipc_url, "ipc://", 6), 0);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s%s", ipc_url + 6, CUA_FDCHAN_SUFFIX);
		chan_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(chan_fd, 0);
		struct timeval tv = {20, 0}; /* a bound on the daemon's answer */
		setsockopt(chan_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ck_assert_int_eq(connect(chan_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		struct cua_fdchan_auth a = {htole32(CUA_FDCHAN_AUTH),
					    htole32(CUA_FDCHAN_VERSION),
					    htole64(session),
					    {0}};
		memcpy(a.secret, secret, CUA_FDCHAN_SECRET);
		ck_assert_int_eq(send(chan_fd, &a, sizeof(a), 0), (ssize_t)sizeof(a));
		st = chan_reply_status(chan_fd, &ticket, msg, sizeof(msg));
		ck_assert_msg(st == CUA_OK, "AUTH: %s: %s", cua_strerror_name(st), msg);
		chan_sid = session;
	}
	struct cua_fdchan_pass p = {htole32(CUA_FDCHAN_PASS), htole32(1)};
	union {
		struct cmsghdr c;
		unsigned char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = {&p, sizeof(p)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	ck_assert_int_eq(sendmsg(chan_fd, &m, MSG_NOSIGNAL), (ssize_t)sizeof(p));
	st = chan_reply_status(chan_fd, &ticket, msg, sizeof(msg));
	ck_assert_msg(st == CUA_OK, "PASS: %s: %s", cua_strerror_name(st), msg);
	return ticket;
}
