#include "config.h"

#include "cua_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

static atomic_int cua_log_level = CUA_LOG_INFO;
static const char *cua_log_ident = "cuasync";
static const char *const cua_log_names[] = {"error", "warn", "info", "debug"};

void
cua_log_set_level(int level)
{
	if (level >= CUA_LOG_ERROR && level <= CUA_LOG_DEBUG)
		atomic_store(&cua_log_level, level);
}

int
cua_log_get_level(void)
{
	return atomic_load_explicit(&cua_log_level, memory_order_relaxed);
}

int
cua_log_parse_level(const char *s)
{
	for (int i = 0; i <= CUA_LOG_DEBUG; i++)
		if (strcmp(s, cua_log_names[i]) == 0)
			return i;
	return -1;
}

void
cua_log_set_ident(const char *ident)
{
	cua_log_ident = ident;
}

static _Thread_local struct {
	uint64_t session, request;
	const char *tenant;
} ctx;

void
cua_log_ctx_set(uint64_t session, const char *tenant, uint64_t request)
{
	ctx.session = session;
	ctx.tenant = tenant;
	ctx.request = request;
}

void
cua_log_ctx_clear(void)
{
	ctx.session = ctx.request = 0;
	ctx.tenant = NULL;
}

/* journald: its socket, when records go there (decided once). */
static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static int journal_fd = -1;
static struct sockaddr_un journal_addr;

static void
journal_open(void)
{
	const char *path = getenv("CUASYNC_JOURNAL_SOCKET");
	if (path == NULL || *path == '\0') {
		/* stderr is journald's stream when $JOURNAL_STREAM names its device and inode */
		const char *js = getenv("JOURNAL_STREAM");
		struct stat st;
		unsigned long long dev, ino;
		if (js == NULL || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0 ||
		    (unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino)
			return;
		path = "/run/systemd/journal/socket";
	}
	if (strlen(path) >= sizeof(journal_addr.sun_path))
		return;
	journal_addr.sun_family = AF_UNIX;
	memcpy(journal_addr.sun_path, path, strlen(path) + 1);
	journal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

static const int syslog_priority[] = {3, 4, 6, 7}; /* err, warning, info, debug */

/* One record in journald's native protocol: KEY=value lines, MESSAGE in the binary form (it may hold newlines,
 * a JIT log). false: not sent (the caller writes stderr). */
static bool
journal_send(int level, const char *func, int line, const char *msg, size_t len)
{
	char head[512];
	int n = snprintf(head, sizeof(head), "PRIORITY=%d\nSYSLOG_IDENTIFIER=%s\nCODE_FUNC=%s\nCODE_LINE=%d\n",
			 syslog_priority[level], cua_log_ident, func, line);
	if (ctx.session && n < (int)sizeof(head))
		n += snprintf(head + n, sizeof(head) - (size_t)n, "CUASYNC_SESSION=%llu\n",
			      (unsigned long long)ctx.session);
	if (ctx.tenant && n < (int)sizeof(head))
		n += snprintf(head + n, sizeof(head) - (size_t)n, "CUASYNC_TENANT=%s\n", ctx.tenant);
	if (ctx.request && n < (int)sizeof(head))
		n += snprintf(head + n, sizeof(head) - (size_t)n, "CUASYNC_REQUEST=%llu\n",
			      (unsigned long long)ctx.request);
	if (n >= (int)sizeof(head))
		return false;
	uint64_t le = len; /* little-endian on every host this runs on */
	struct iovec iov[5] = {{head, (size_t)n},
			       {(void *)"MESSAGE\n", 8},
			       {&le, sizeof(le)},
			       {(void *)msg, len},
			       {(void *)"\n", 1}};
	struct msghdr mh = {.msg_name = &journal_addr,
			    .msg_namelen = sizeof(journal_addr),
			    .msg_iov = iov,
			    .msg_iovlen = 5};
	return sendmsg(journal_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0; /* a full journal: stderr instead */
}

void
cua_log_emit(int level, const char *func, int line, const char *fmt, ...)
{
	char buf[1024];
	pthread_once(&journal_once, journal_open);
	int n = snprintf(buf, sizeof(buf), "%s: %s: ", cua_log_ident, cua_log_names[level]);
	if (level == CUA_LOG_DEBUG || level == CUA_LOG_ERROR)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s:%d: ", func, line);
	int body = n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1;
	va_list ap;
	va_start(ap, fmt);
	if (n < (int)sizeof(buf))
		n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	if (journal_fd >= 0 && journal_send(level, func, line, buf + body, (size_t)(n - body)))
		return;
	buf[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
	(void)w;
}
