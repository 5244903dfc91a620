/*
 * cua_log.h — leveled logging, with call-site context. Thread-safe: one record per call, one system call.
 *
 * Where it goes: stderr, one line per record; or, when stderr is journald's stream ($JOURNAL_STREAM names it,
 * as systemd sets it for a service) or $CUASYNC_JOURNAL_SOCKET names a socket, journald's native protocol
 * with structured fields: MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FUNC, CODE_LINE, and the request context
 * of the calling thread (CUASYNC_SESSION, CUASYNC_TENANT, CUASYNC_REQUEST; cua_log_ctx_set). A record
 * journald does not take is written to stderr instead.
 */
#ifndef CUA_LOG_H
#define CUA_LOG_H

#include <stdint.h>

enum cua_log_level { CUA_LOG_ERROR = 0, CUA_LOG_WARN = 1, CUA_LOG_INFO = 2, CUA_LOG_DEBUG = 3 };

void cua_log_set_level(int level);
int cua_log_get_level(void);
/* Parses "error", "warn", "info", "debug"; returns -1 when unknown. */
int cua_log_parse_level(const char *s);
/* Prefix printed on every line ("cuasyncd", "worker[0]"); the string must outlive logging. */
void cua_log_set_ident(const char *ident);

/* The request the calling thread works for, named in its records' structured fields until cleared (0 / NULL:
 * none). tenant must outlive the context. */
void cua_log_ctx_set(uint64_t session, const char *tenant, uint64_t request);
void cua_log_ctx_clear(void);

void cua_log_emit(int level, const char *func, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define cua_log_(lvl, ...)                                                                                             \
	do {                                                                                                           \
		if ((lvl) <= cua_log_get_level())                                                                      \
			cua_log_emit((lvl), __func__, __LINE__, __VA_ARGS__);                                          \
	} while (0)
#define log_error(...) cua_log_(CUA_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) cua_log_(CUA_LOG_WARN, __VA_ARGS__)
#define log_info(...) cua_log_(CUA_LOG_INFO, __VA_ARGS__)
#define log_debug(...) cua_log_(CUA_LOG_DEBUG, __VA_ARGS__)

#endif
