#include "config.h"

#include "cua_log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
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

void
cua_log_emit(int level, const char *func, int line, const char *fmt, ...)
{
	char buf[1024];
	int n = snprintf(buf, sizeof(buf), "%s: %s: ", cua_log_ident, cua_log_names[level]);
	if (level == CUA_LOG_DEBUG || level == CUA_LOG_ERROR)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s:%d: ", func, line);
	va_list ap;
	va_start(ap, fmt);
	if (n < (int)sizeof(buf))
		n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
	(void)w;
}
