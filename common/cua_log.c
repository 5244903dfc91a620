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

size_t
cua_utf8_seq(const void *s, size_t len)
{
	const unsigned char *p = s;
	if (len == 0)
		return 0;
	if (p[0] < 0x80)
		return 1;
	size_t n;
	/* the second byte's range: it excludes overlong forms, surrogates and code points past U+10FFFF */
	unsigned char lo = 0x80, hi = 0xbf;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		n = 3;
		if (p[0] == 0xe0)
			lo = 0xa0;
		else if (p[0] == 0xed)
			hi = 0x9f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		n = 4;
		if (p[0] == 0xf0)
			lo = 0x90;
		else if (p[0] == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (len < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* Whether the valid n-byte UTF-8 sequence at p is a character a terminal or a log reader acts on: a C1 control,
 * a line or paragraph separator, a bidirectional embedding, override or isolate. */
static bool
utf8_is_control(const unsigned char *p, size_t n)
{
	if (n == 2)
		return p[0] == 0xc2 && p[1] <= 0x9f; /* U+0080..U+009F */
	return n == 3 && p[0] == 0xe2 &&
	       ((p[1] == 0x80 && p[2] >= 0xa8 && p[2] <= 0xae) || /* U+2028..U+202E */
		(p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9));  /* U+2066..U+2069 */
}

/* cua_log_escape, and with backslash false what cua_log_emit does to a whole record (a backslash kept). */
static char *
escape(char *buf, size_t cap, const void *s, size_t len, bool backslash)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = s;
	if (cap == 0)
		return buf;
	size_t room = cap - 1, o = 0, keep = 0; /* keep: where "..." goes when the rest does not fit */
	for (size_t i = 0; i < len;) {
		char piece[16];
		size_t pn = 0, n = cua_utf8_seq(p + i, len - i);
		unsigned char c = p[i];
		if (n == 1 && c >= 0x20 && c < 0x7f && !(backslash && c == '\\'))
			piece[pn++] = (char)c;
		else if (n == 1 && (c == '\n' || c == '\r' || c == '\t' || c == '\\')) {
			piece[pn++] = '\\';
			piece[pn++] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : '\\';
		} else if (n > 1 && !utf8_is_control(p + i, n)) {
			memcpy(piece, p + i, n);
			pn = n;
		} else {
			if (n == 0)
				n = 1; /* not UTF-8: this byte alone, the next one may start a valid sequence */
			for (size_t k = 0; k < n; k++) {
				piece[pn++] = '\\';
				piece[pn++] = 'x';
				piece[pn++] = hex[p[i + k] >> 4];
				piece[pn++] = hex[p[i + k] & 15];
			}
		}
		if (o + pn > room) { /* cut before this piece, and say so where there is room for it */
			if (room >= 3) {
				memcpy(buf + keep, "...", 3);
				o = keep + 3;
			}
			break;
		}
		memcpy(buf + o, piece, pn);
		o += pn;
		i += n;
		if (o + 3 <= room)
			keep = o;
	}
	buf[o] = '\0';
	return buf;
}

char *
cua_log_escape(char *buf, size_t cap, const void *s, size_t len)
{
	return escape(buf, cap, s, len, true);
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
	char head[768], ident[128], tenant[CUA_LOG_ESCAPED(64)];
	/* a field's value ends at a newline: none may hold one (the message, in the binary form, holds none either) */
	int n = snprintf(head, sizeof(head), "PRIORITY=%d\nSYSLOG_IDENTIFIER=%s\nCODE_FUNC=%s\nCODE_LINE=%d\n",
			 syslog_priority[level],
			 cua_log_escape(ident, sizeof(ident), cua_log_ident, strlen(cua_log_ident)), func, line);
	if (ctx.session && n < (int)sizeof(head))
		n += snprintf(head + n, sizeof(head) - (size_t)n, "CUASYNC_SESSION=%llu\n",
			      (unsigned long long)ctx.session);
	if (ctx.tenant && n < (int)sizeof(head))
		n += snprintf(head + n, sizeof(head) - (size_t)n, "CUASYNC_TENANT=%s\n",
			      cua_log_escape(tenant, sizeof(tenant), ctx.tenant, strlen(ctx.tenant)));
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
	char pre[256], msg[1024], buf[1024];
	pthread_once(&journal_once, journal_open);
	int n = snprintf(pre, sizeof(pre), "%s: %s: ", cua_log_ident, cua_log_names[level]);
	if ((level == CUA_LOG_DEBUG || level == CUA_LOG_ERROR) && n < (int)sizeof(pre))
		n += snprintf(pre + n, sizeof(pre) - (size_t)n, "%s:%d: ", func, line);
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* one line whatever the values held: the record escaped, room left for its newline */
	escape(buf, sizeof(buf) - 1, pre, n < (int)sizeof(pre) ? (size_t)n : sizeof(pre) - 1, false);
	size_t at = strlen(buf); /* where the message starts */
	escape(buf + at, sizeof(buf) - 1 - at, msg,
	       m < 0                  ? 0
	       : m < (int)sizeof(msg) ? (size_t)m
				      : sizeof(msg) - 1,
	       false);
	size_t len = at + strlen(buf + at);
	if (journal_fd >= 0 && journal_send(level, func, line, buf + at, len - at))
		return;
	buf[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, buf, len);
	(void)w;
}
