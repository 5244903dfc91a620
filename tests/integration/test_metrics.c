/* Monitoring (issue 14). The Prometheus endpoint (--metrics-listen): the daemon serves it on a port the kernel
 * chose (port 0, read back from its log); requests of every kind move the counters by exactly what was done,
 * /healthz answers 200, and `promtool check metrics` accepts the text when promtool is installed (CI installs
 * it). And the operator's view of sessions: `cuasyncctl sessions`, and --json of every cuasyncctl command.
 * Issue 21.9 / 22.7 / 22.5: device series carry dcgm-exporter's UUID and modelName, build_info and process_
 * series; /livez stays 200 while /readyz says 503 for a drained device; per-tenant and per-session series only
 * to a scrape with the --metrics-token-file bearer token; exact paths only; a flood of half-sent requests from
 * one address holds a bounded number of the daemon's descriptors, for a bounded time, while a local client and
 * a scrape from another address are served; STOPPING=1 and WATCHDOG=1 reach systemd's notify socket. */
#include "config.h"

#include "harness.h"

#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct daemon D;
static int port;
static char token_path[64];

#define TOKEN "s3cret-scraper-token-0123456789"
/* Device 0's series name{labels}: its index, dcgm-exporter's UUID (the one the daemon logs for it at start, as
 * --devices takes it; "" when it logs none), its name (model_name: modelName fails promtool's lint). */
static const char *
dev0(const char *name)
{
	static char series[512];
	char uuid[64] = "", line[512];
	FILE *f = fopen(D.log, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *at = strstr(line, "device 0: ");
		if (at != NULL && (at = strstr(at, "UUID GPU-")) != NULL)
			sscanf(at + 5, "%63[0-9a-zA-Z-]", uuid);
	}
	fclose(f);
	snprintf(series, sizeof(series), "%s{device=\"0\",UUID=\"%s\",model_name=\"cuasync emulated device 0\"}", name,
		 uuid);
	return series;
}

static void
up(void)
{
	snprintf(token_path, sizeof(token_path), "/tmp/cua-metrics-token.XXXXXX");
	int fd = mkstemp(token_path); /* 0600 */
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, TOKEN "\n", strlen(TOKEN) + 1), (ssize_t)strlen(TOKEN) + 1);
	close(fd);
	const char *const args[] = {"--metrics-listen",     "http://127.0.0.1:0", "--metrics-sessions",
				    "--metrics-token-file", token_path,           NULL};
	daemon_start(&D, args);
	port = daemon_metrics_port(&D);
	ck_assert_msg(port > 0, "no metrics address in %s", D.log);
}

static void
down(void)
{
	daemon_stop(&D);
	unlink(token_path);
}

/* Sends request (raw bytes) from 127.0.0.1 and reads the answer: its status (0: the daemon closed without one)
 * and, when body is not NULL, its body (malloc'd). */
static int
http_raw(const char *request, char **body)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	size_t n = strlen(request);
	ck_assert_int_eq(send(fd, request, n, MSG_NOSIGNAL), (ssize_t)n);
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
	sscanf(buf, "HTTP/1.1 %d", &status);
	char *start = strstr(buf, "\r\n\r\n");
	if (body != NULL)
		*body = strdup(start ? start + 4 : "");
	free(buf);
	return status;
}

/* GET path with an Authorization header (NULL: none); status and body as http_raw. */
static int
http_auth(const char *path, const char *auth, char **body)
{
	char req[600];
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%sConnection: close\r\n\r\n", path,
		 auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
	return http_raw(req, body);
}

/* An operator's scrape (the bearer token). */
static char *
scrape_operator(void)
{
	char *text = NULL;
	ck_assert_int_eq(http_auth("/metrics", "Bearer " TOKEN, &text), 200);
	return text;
}

static int
http_get(const char *path, char **body)
{
	return metrics_get(port, path, body);
}

static char *
scrape(void)
{
	char *text = NULL;
	ck_assert_int_eq(http_get("/metrics", &text), 200);
	return text;
}

static double
value(const char *text, const char *series)
{
	return metric_value(text, series);
}

/* How much series moved from before to after (a series absent before counts from 0). */
static double
delta(const char *before, const char *after, const char *series)
{
	double a = value(after, series), b = value(before, series);
	ck_assert_msg(a >= 0, "%s missing", series);
	return a - (b < 0 ? 0 : b);
}

#define N_BYTES 4096u

START_TEST(counters_move_by_what_was_done)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function empty = get_fn(c, m, "empty_kernel");
	char *before = scrape();
	cua_deviceptr a, b;
	static unsigned char host[N_BYTES];
	CK(cua_mem_alloc(c, 0, N_BYTES, &a));
	CK(cua_mem_alloc(c, 0, 2 * N_BYTES, &b));
	CK(cua_memcpy_htod(c, a, host, N_BYTES));
	CK(cua_memcpy_dtod(c, b, a, N_BYTES));
	CK(cua_memcpy_dtoh(c, host, b, N_BYTES / 2));
	for (int i = 0; i < 3; i++)
		launch_and_wait(launch_1d(c, empty, 1, 1));
	int bad = cua_mem_free(c, a + 1); /* not the start of an allocation: refused */
	ck_assert_int_ne(bad, CUA_OK);
	CK(cua_mem_free(c, a));
	char *after = scrape();

	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEM_ALLOC\",status=\"OK\"}"), 2);
	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEM_FREE\",status=\"OK\"}"), 1);
	char series[160];
	snprintf(series, sizeof(series), "cuasyncd_requests_total{op=\"MEM_FREE\",status=\"%s\"}",
		 cua_strerror_name(bad));
	ck_assert_double_eq(delta(before, after, series), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_errors_total"), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEMCPY_HTOD\",status=\"OK\"}"), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEMCPY_DTOD\",status=\"OK\"}"), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_requests_total{op=\"MEMCPY_DTOH\",status=\"OK\"}"), 1);
	ck_assert_double_eq(delta(before, after, "cuasyncd_copied_bytes_total{direction=\"htod\"}"), N_BYTES);
	ck_assert_double_eq(delta(before, after, "cuasyncd_copied_bytes_total{direction=\"dtod\"}"), N_BYTES);
	ck_assert_double_eq(delta(before, after, "cuasyncd_copied_bytes_total{direction=\"dtoh\"}"), N_BYTES / 2);
	ck_assert_double_eq(delta(before, after, "cuasyncd_request_duration_seconds_count{family=\"copy\"}"), 3);
	ck_assert_double_eq(delta(before, after, "cuasyncd_request_duration_seconds_count{family=\"memory\"}"), 4);
	/* the client sends a launch alone (LAUNCH) or with others in flight (BATCH): launches count either way */
	ck_assert_double_eq(delta(before, after, "cuasyncd_launches_total"), 3);
	ck_assert_double_eq(delta(before, after, "cuasyncd_messages_total"), 10);
	ck_assert_double_eq(value(after, dev0("cuasyncd_device_memory_used_bytes")), 2 * N_BYTES);
	ck_assert_double_eq(value(after, "cuasyncd_sessions"), 1);
	ck_assert_double_eq(value(after, "cuasyncd_sessions_opened_total"), 1);
	ck_assert_double_eq(value(after, "cuasyncd_requests_in_flight"), 0);
	ck_assert_double_eq(value(after, "cuasyncd_requests_queued"), 0);
	ck_assert_double_eq(value(after, dev0("cuasyncd_device_ready")), 1);
	ck_assert_double_eq(value(after, dev0("cuasyncd_worker_generation")), 1);
	ck_assert_double_eq(value(after, dev0("cuasyncd_worker_restarts_total")), 0);
	free(before);
	free(after);
	/* an operator's scrape: --metrics-sessions' series for the one session (its id is the first one, 1) and
	 * the tenant's counters (every session here is in the default tenant) */
	after = scrape_operator();
	ck_assert_double_eq(value(after, "cuasyncd_session_device_memory_bytes{session=\"1\"}"), 2 * N_BYTES);
	ck_assert_double_gt(value(after, "cuasyncd_session_requests_total{session=\"1\"}"), 10);
	ck_assert_double_ge(value(after, "cuasyncd_tenant_requests_total{tenant=\"default\",family=\"memory\"}"), 4);
	ck_assert_double_ge(value(after, "cuasyncd_tenant_requests_total{tenant=\"default\",family=\"copy\"}"), 3);
	snprintf(series, sizeof(series), "cuasyncd_tenant_errors_total{tenant=\"default\",error=\"%s\"}",
		 cua_strerror_name(bad));
	ck_assert_double_eq(value(after, series), 1);
	free(after);
	cua_disconnect(c);
}
END_TEST

START_TEST(healthz_ok_while_serving)
{
	char *body = NULL;
	static const char *const ok[] = {"/healthz", "/livez", "/readyz"};
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(http_get(ok[i], &body), 200);
		ck_assert_str_eq(body, "ok\n");
		free(body);
	}
	ck_assert_int_eq(http_get("/nothing-here", &body), 404);
	free(body);
}
END_TEST

/* Exact paths: NNG's HTTP server decoded %00 and matched /metrics as a prefix of /metrics%00.txt. */
START_TEST(only_exact_paths)
{
	static const char *const missing[] = {"/metrics%00.txt", "/metrics/x",      "/metrics/", "/METRICS",
					      "/metrics.txt",    "/%6detrics",      "/livez/",   "/readyz%00",
					      "//metrics",       "http://x/metrics"};
	char *body = NULL;
	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		ck_assert_msg(http_auth(missing[i], NULL, &body) == 404, "GET %s: not 404: %.80s", missing[i], body);
		ck_assert_msg(strstr(body, "cuasyncd_") == NULL, "GET %s served metrics", missing[i]);
		free(body);
	}
	ck_assert_int_eq(http_auth("/metrics?x=1", NULL, &body), 200); /* a query string is not part of the path */
	ck_assert_ptr_nonnull(strstr(body, "cuasyncd_sessions "));
	free(body);
	ck_assert_int_eq(http_raw("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", NULL), 405);
	ck_assert_int_eq(http_raw("GET /metrics\r\n\r\n", NULL), 400); /* HTTP/0.9 */
	ck_assert_int_eq(http_raw("HEAD /livez HTTP/1.1\r\nHost: x\r\n\r\n", &body), 200);
	ck_assert_str_eq(body, ""); /* HEAD: no body */
	free(body);
}
END_TEST

/* Issue 22.7: a scraper that is not an operator (any user of the host, from loopback) gets aggregate series
 * only; the per-tenant and per-session ones (who uses the GPU, how much) need the bearer token. */
START_TEST(tenant_series_for_operators_only)
{
	cua_client *c = connect_to(&D);
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 1 << 20, &p));
	char *text = scrape();
	const char *t = strstr(text, "tenant="), *ss = strstr(text, "session=");
	ck_assert_msg(t == NULL, "tenant series served without the token: …%.80s", t);
	ck_assert_msg(ss == NULL, "session series served without the token: …%.80s", ss);
	ck_assert_double_eq(value(text, "cuasyncd_sessions"), 1); /* the aggregate is there */
	ck_assert_double_eq(value(text, dev0("cuasyncd_device_memory_used_bytes")), 1 << 20);
	free(text);
	text = scrape_operator();
	ck_assert_double_eq(value(text, "cuasyncd_tenant_device_memory_bytes{tenant=\"default\"}"), 1 << 20);
	ck_assert_double_eq(value(text, "cuasyncd_tenant_sessions{tenant=\"default\"}"), 1);
	ck_assert_ptr_nonnull(strstr(text, "cuasyncd_session_device_memory_bytes{session="));
	free(text);
	static const char *const wrong[] = {"Bearer wrong-token", "Bearer " TOKEN "x", "Basic " TOKEN, "Bearer"};
	for (int i = 0; i < 4; i++) {
		ck_assert_msg(http_auth("/metrics", wrong[i], &text) == 401, "Authorization: %s: not 401", wrong[i]);
		ck_assert_msg(strstr(text, "tenant=") == NULL && strstr(text, "--metrics-token-file"), "%.200s", text);
		free(text);
	}
	cua_disconnect(c);
}
END_TEST

/* What the DCGM exporter and Prometheus's client libraries name: build_info, process_*. */
START_TEST(conventional_series)
{
	char *text = scrape();
	ck_assert_double_eq(value(text, "cuasyncd_build_info{version=\"" PACKAGE_VERSION "\"}"), 1);
	ck_assert_double_gt(value(text, "process_open_fds"), 3);
	ck_assert_double_ge(value(text, "process_max_fds"), value(text, "process_open_fds"));
	ck_assert_double_gt(value(text, "process_resident_memory_bytes"), 1 << 20);
	ck_assert_double_ge(value(text, "process_virtual_memory_bytes"), value(text, "process_resident_memory_bytes"));
	ck_assert_double_ge(value(text, "process_cpu_seconds_total"), 0);
	double start = value(text, "process_start_time_seconds"), now = (double)time(NULL);
	ck_assert_msg(start > now - 3600 && start <= now + 1, "process_start_time_seconds %f, now %f", start, now);
	ck_assert_double_eq(value(text, dev0("cuasyncd_device_memory_total_bytes")) > 0, 1);
	free(text);
}
END_TEST

/* promtool (Debian package prometheus) checks the text's syntax and naming; CI installs it. */
START_TEST(promtool_accepts_the_text)
{
	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		fprintf(stderr, "test_metrics: promtool not installed: format check skipped\n");
		return;
	}
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	launch_and_wait(launch_1d(c, get_fn(c, m, "empty_kernel"), 1, 1));
	ck_assert_int_ne(cua_mem_free(c, 12345), CUA_OK);
	char *text = scrape_operator(); /* every series: the per-tenant and per-session ones too */
	char path[400], cmd[600];
	snprintf(path, sizeof(path), "%s/metrics.txt", D.dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s >&2", path);
	ck_assert_msg(system(cmd) == 0, "promtool check metrics rejected %s", path);
	free(text);
	cua_disconnect(c);
}
END_TEST

/* The daemon's open descriptors. */
static int
daemon_fds(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)D.pid);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Waits (poll: bounded by 90 s) until at most keep of the n sockets in fd[] are still open at the daemon's end:
 * the closed ones are closed here too (set to -1). Returns how many are still open. The bound covers Linux's
 * SYN-ACK retransmissions (1, 2, 4, …, 32 s: 63 s in all): a connection made while the listen backlog was full
 * is ESTABLISHED on the client's side before the daemon can accept it, and only reaches the daemon (which then
 * closes it) at the next retransmission, or is reset once the kernel gives up on it. */
static int
wait_closed_by_daemon(int *fd, int n, int keep)
{
	struct pollfd *p = calloc((size_t)n, sizeof(*p));
	int open = 0;
	for (int i = 0; i < n; i++)
		open += fd[i] >= 0;
	for (int round = 0; round < 900 && open > keep; round++) {
		int k = 0;
		for (int i = 0; i < n; i++)
			if (fd[i] >= 0)
				p[k++] = (struct pollfd){fd[i], POLLIN | POLLRDHUP, 0};
		ck_assert_int_ge(poll(p, (nfds_t)k, 100), 0);
		for (int j = 0; j < k; j++) {
			if (p[j].revents == 0)
				continue;
			char b[256];
			if (recv(p[j].fd, b, sizeof(b), MSG_DONTWAIT) > 0) /* an answer (408 or such): then its end */
				continue;
			for (int i = 0; i < n; i++)
				if (fd[i] == p[j].fd) {
					close(fd[i]);
					fd[i] = -1;
					open--;
				}
		}
	}
	free(p);
	return open;
}

#define FLOOD 1100

/* Issue 22.5: 1100 connections from one address (127.0.0.2) each send half a request and wait. The daemon holds
 * at most METRICS_MAX_PER_PEER (8) of them, closes the rest at once and those 8 after the request-head deadline
 * (5 s); meanwhile a local client and a scrape from 127.0.0.1 are served. (NNG's HTTP server held all 1100, with
 * no deadline.) */
START_TEST(half_sent_requests_flood_is_bounded)
{
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < FLOOD + 200 && rl.rlim_max >= FLOOD + 200) {
		rl.rlim_cur = FLOOD + 200;
		ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	ck_assert_msg(rl.rlim_cur >= FLOOD + 200, "this test needs %d descriptors (ulimit -n)", FLOOD + 200);
	cua_client *c = connect_to(&D);
	int base = daemon_fds();
	static int fd[FLOOD];
	struct sockaddr_in from = {.sin_family = AF_INET},
			   to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	from.sin_addr.s_addr = htonl(0x7f000002); /* 127.0.0.2: another address of loopback */
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	static const char half[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow"; /* no end */
	for (int i = 0; i < FLOOD; i++) {
		fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_ge(fd[i], 0);
		ck_assert_int_eq(bind(fd[i], (struct sockaddr *)&from, sizeof(from)), 0);
		ck_assert_msg(connect(fd[i], (struct sockaddr *)&to, sizeof(to)) == 0, "connect %d: %s", i,
			      strerror(errno));
		send(fd[i], half, sizeof(half) - 1, MSG_NOSIGNAL); /* may fail: closed already */
	}
	/* the well-behaved: a local client, and a scrape from another address */
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 4096, &p));
	CK(cua_mem_free(c, p));
	free(scrape());
	/* the bound in number: all but 8 closed at once */
	int open = wait_closed_by_daemon(fd, FLOOD, 8);
	ck_assert_msg(open <= 8, "%d of %d half-sent requests still held by the daemon", open, FLOOD);
	int now = daemon_fds(); /* the 8, and closed ones NNG's reaper has not freed yet: never over the 64 */
	ck_assert_msg(now <= base + 64 + 2, "daemon holds %d descriptors, %d before the flood", now, base);
	for (int i = 0; i < 500 && (now = daemon_fds()) > base + 8 + 2; i++) /* bounded: 5 s for the reaper */
		usleep(10000);
	ck_assert_msg(now <= base + 8 + 2, "daemon holds %d descriptors, %d before the flood", now, base);
	char *text = scrape();
	ck_assert_double_gt(value(text, "cuasyncd_http_connections_refused_total"), 0);
	free(text);
	/* the bound in time: those 8 too, at the head's deadline */
	open = wait_closed_by_daemon(fd, FLOOD, 0);
	ck_assert_msg(open == 0, "%d half-sent requests held past the deadline", open);
	CK(cua_mem_alloc(c, 0, 4096, &p));
	cua_disconnect(c);
}
END_TEST

/* A token file every user may read is refused, with what to do: the daemon does not start. */
START_TEST(world_readable_token_file_refused)
{
	char exe[512], out[600], line[512];
	snprintf(exe, sizeof(exe), "%s/daemon/cuasyncd", builddir());
	snprintf(out, sizeof(out), "%s/refused.log", D.dir);
	ck_assert_int_eq(chmod(token_path, 0644), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, STDERR_FILENO);
		execl(exe, exe, "--backend", "emu", "--listen", "ipc:///tmp/cua-metrics-refused.sock",
		      "--metrics-listen", "http://127.0.0.1:0", "--metrics-token-file", token_path, (char *)NULL);
		_exit(127);
	}
	int st = 0, k = 0;
	pid_t w = 0;
	while (k++ < 3000 && (w = waitpid(pid, &st, WNOHANG)) == 0) /* bounded: 30 s */
		usleep(10000);
	if (w == 0)
		kill(pid, SIGKILL), waitpid(pid, &st, 0);
	ck_assert_msg(w == pid && WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 127,
		      "cuasyncd started with a world-readable --metrics-token-file (0x%x)", st);
	FILE *f = fopen(out, "r");
	ck_assert_ptr_nonnull(f);
	bool said = false;
	while (fgets(line, sizeof(line), f) != NULL)
		said |= strstr(line, "--metrics-token-file") && strstr(line, "chmod 0600");
	fclose(f);
	ck_assert_msg(said, "no line naming --metrics-token-file and chmod 0600 in %s", out);
}
END_TEST

/* systemd (Type=notify, WatchdogSec=): READY=1, WATCHDOG=1 while serving, STOPPING=1 at SIGTERM. */
START_TEST(systemd_watchdog_and_stopping)
{
	daemon_stop(&D); /* this test starts its own */
	char npath[300];
	snprintf(npath, sizeof(npath), "/tmp/cua-notify.%d", (int)getpid());
	unlink(npath);
	int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(nfd, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, npath, strlen(npath) + 1);
	ck_assert_int_eq(bind(nfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", npath, 1);
	setenv("WATCHDOG_USEC", "200000", 1); /* 0.2 s: a ping every 0.1 s */
	daemon_start(&D, NULL);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	char msg[512];
	bool ready = false;
	int pings = 0;
	for (int i = 0; i < 100 && pings < 3; i++) { /* bounded: 100 notices */
		struct pollfd p = {nfd, POLLIN, 0};
		ck_assert_msg(poll(&p, 1, 30000) == 1, "no notification within 30 s (ready %d, pings %d)", ready,
			      pings);
		ssize_t n = recv(nfd, msg, sizeof(msg) - 1, 0);
		ck_assert_int_gt(n, 0);
		msg[n] = '\0';
		ready |= strstr(msg, "READY=1") != NULL;
		pings += ready && strcmp(msg, "WATCHDOG=1") == 0;
	}
	ck_assert_msg(ready && pings == 3, "ready %d, %d watchdog pings", ready, pings);
	daemon_stop(&D); /* SIGTERM; the notices wait in the socket */
	bool stopping = false;
	for (int i = 0; i < 1000 && !stopping; i++) {
		struct pollfd p = {nfd, POLLIN, 0};
		ck_assert_msg(poll(&p, 1, 0) == 1, "no STOPPING=1 before the daemon exited");
		ssize_t n = recv(nfd, msg, sizeof(msg) - 1, 0);
		ck_assert_int_gt(n, 0);
		msg[n] = '\0';
		stopping = strncmp(msg, "STOPPING=1", 10) == 0;
	}
	ck_assert(stopping);
	close(nfd);
	unlink(npath);
}
END_TEST

/* Runs `cuasyncctl --url OPERATOR args` and returns its stdout (malloc'd); asserts it exited 0. */
static char *
ctl(const char *args)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s %s", builddir(), D.op_url, args);
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	char *out = calloc(1, 65536);
	size_t n = fread(out, 1, 65535, f);
	out[n] = '\0';
	ck_assert_msg(pclose(f) == 0, "%s failed: %s", cmd, out);
	return out;
}

/* out is one JSON object on one line; python3 (when there) parses it. */
static void
assert_json(const char *what, const char *out)
{
	size_t n = strlen(out);
	ck_assert_msg(n > 2 && out[0] == '{' && out[n - 2] == '}' && out[n - 1] == '\n' &&
			      strchr(out, '\n') == out + n - 1,
		      "%s: not one JSON document on one line: %s", what, out);
	if (system("command -v python3 >/dev/null 2>&1") != 0)
		return;
	char path[400], cmd[600];
	snprintf(path, sizeof(path), "%s/ctl.json", D.dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(out, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "python3 -m json.tool %s >/dev/null", path);
	ck_assert_msg(system(cmd) == 0, "%s: python3 rejects %s", what, out);
}

START_TEST(cuasyncctl_lists_sessions)
{
	cua_client *c = connect_to(&D);
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 3 << 20, &p));
	char want[160];
	char *out = ctl("sessions");
	snprintf(want, sizeof(want), " %d ", (int)getpid()); /* HELLO's pid and the kernel's both */
	ck_assert_msg(strstr(out, "SESSION") && strstr(out, "libcuasync") && strstr(out, want), "%s", out);
	ck_assert_msg(strstr(out, "3.0") && strstr(out, "(operator)"), "%s", out);
	free(out);
	out = ctl("--json sessions");
	assert_json("sessions", out);
	snprintf(want, sizeof(want), "\"pid\":%d,\"peer_pid\":%d,", (int)getpid(), (int)getpid());
	ck_assert_msg(strstr(out, want) && strstr(out, "\"alloc_bytes\":3145728,"), "%s", out);
	ck_assert_msg(strstr(out, "\"operator\":true") && strstr(out, "\"operator\":false"), "%s", out);
	free(out);
	static const char *const verbs[] = {"--json status", "--json devices", "--json ping"};
	for (int v = 0; v < 3; v++) {
		out = ctl(verbs[v]);
		assert_json(verbs[v], out);
		free(out);
	}
	cua_disconnect(c);
}
END_TEST

/* cuasyncctl top: usage by tenant over an interval (every session here is in the default tenant). */
START_TEST(cuasyncctl_top_by_tenant)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_deviceptr p;
	CK(cua_mem_alloc(a, 0, 1 << 20, &p));
	CK(cua_mem_alloc(b, 0, 1 << 20, &p));
	char *out = ctl("--json --interval 0.2 top");
	assert_json("top", out);
	ck_assert_msg(strstr(out, "\"tenant\":\"default\",\"sessions\":2,") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "\"alloc_bytes\":2097152,") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "\"tenant\":\"(operator)\",\"sessions\":1,") != NULL, "%s", out);
	free(out);
	out = ctl("--interval 0.1 --count 2 top");
	ck_assert_msg(strstr(out, "TENANT") && strstr(out, "default") && strstr(out, "2.0"), "%s", out);
	free(out);
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

/* Whether the operator's SESSIONS lists session id. */
static bool
listed(cua_client *op, uint64_t id)
{
	cua_session_info *rows;
	uint32_t n;
	bool found = false;
	CK(cua_sessions(op, &rows, &n));
	for (uint32_t i = 0; i < n; i++)
		found |= rows[i].id == id;
	free(rows);
	return found;
}

START_TEST(cuasyncctl_disconnects_a_session)
{
	cua_client *c = connect_to(&D), *op = connect_operator(&D);
	cua_session_info *own;
	uint32_t n;
	CK(cua_sessions(c, &own, &n)); /* a client sees its own row only */
	ck_assert_uint_eq(n, 1);
	uint64_t id = own[0].id;
	free(own);
	ck_assert_int_eq(cua_disconnect_session(c, id), CUA_EPERMISSION_DENIED); /* the operator's alone */
	ck_assert(listed(op, id));
	char args[64], want[64];
	snprintf(args, sizeof(args), "--json disconnect %llu", (unsigned long long)id);
	char *out = ctl(args);
	snprintf(want, sizeof(want), "{\"disconnected\":%llu}\n", (unsigned long long)id);
	ck_assert_str_eq(out, want);
	free(out);
	int k = 0; /* the edge closes it within a second */
	while (k++ < 500 && listed(op, id))
		usleep(10000);
	ck_assert_msg(k < 500, "session %llu still listed 5 s after DISCONNECT", (unsigned long long)id);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s disconnect %llu 2>/dev/null", builddir(), D.op_url,
		 (unsigned long long)id);
	ck_assert_int_ne(system(cmd), 0); /* gone: NOT_FOUND */
	cua_disconnect(op);
	cua_disconnect(c);
}
END_TEST

/* drain: no new objects on the device, what is held works on, /healthz says 503 (the one device is drained),
 * the metrics say drained; undrain undoes it all. */
START_TEST(cuasyncctl_drains_a_device)
{
	cua_client *c = connect_to(&D);
	cua_deviceptr p, q;
	CK(cua_mem_alloc(c, 0, 4096, &p));
	char *out = ctl("--json drain 0"), *body = NULL;
	ck_assert_str_eq(out, "{\"device\":0,\"drained\":true,\"holding\":1,\"in_flight\":0}\n");
	free(out);
	ck_assert_int_eq(cua_mem_alloc(c, 0, 4096, &q), CUA_ENO_DEVICE);
	ck_assert_msg(strstr(cua_last_error(), "drained"), "%s", cua_last_error());
	static unsigned char host[4096];
	CK(cua_memcpy_htod(c, p, host, sizeof(host))); /* what it holds works on */
	ck_assert_int_eq(http_get("/healthz", &body), 503);
	ck_assert_msg(strstr(body, "no device ready"), "%s", body);
	free(body);
	/* a liveness probe must not kill a daemon drained for maintenance: /livez 200, /readyz 503 */
	ck_assert_int_eq(http_get("/livez", &body), 200);
	ck_assert_str_eq(body, "ok\n");
	free(body);
	ck_assert_int_eq(http_get("/readyz", &body), 503);
	ck_assert_msg(strstr(body, "no device ready"), "%s", body);
	free(body);
	body = scrape();
	ck_assert_double_eq(value(body, dev0("cuasyncd_device_drained")), 1);
	free(body);
	CK(cua_mem_free(c, p));
	out = ctl("drain 0"); /* again: nothing held any more but the session's pool streams */
	ck_assert_msg(strstr(out, "device 0 drained"), "%s", out);
	free(out);
	out = ctl("--json undrain 0");
	ck_assert_msg(strstr(out, "\"drained\":false"), "%s", out);
	free(out);
	CK(cua_mem_alloc(c, 0, 4096, &q));
	ck_assert_int_eq(http_get("/healthz", &body), 200);
	free(body);
	ck_assert_int_eq(http_get("/readyz", &body), 200);
	free(body);
	cua_disconnect(c);
}
END_TEST

static Suite *
metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("endpoint");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, counters_move_by_what_was_done);
	tcase_add_test(tc, healthz_ok_while_serving);
	tcase_add_test(tc, only_exact_paths);
	tcase_add_test(tc, tenant_series_for_operators_only);
	tcase_add_test(tc, conventional_series);
	tcase_add_test(tc, half_sent_requests_flood_is_bounded);
	tcase_add_test(tc, systemd_watchdog_and_stopping);
	tcase_add_test(tc, world_readable_token_file_refused);
	tcase_add_test(tc, promtool_accepts_the_text);
	tcase_add_test(tc, cuasyncctl_lists_sessions);
	tcase_add_test(tc, cuasyncctl_top_by_tenant);
	tcase_add_test(tc, cuasyncctl_disconnects_a_session);
	tcase_add_test(tc, cuasyncctl_drains_a_device);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(metrics_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
