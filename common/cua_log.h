/*
 * cua_log.h — leveled logging, with call-site context. Thread-safe: one record per call, one system call.
 *
 * Where it goes: stderr, one line per record; or, when stderr is journald's stream ($JOURNAL_STREAM names it,
 * as systemd sets it for a service) or $CUASYNC_JOURNAL_SOCKET names a socket, journald's native protocol
 * with structured fields: MESSAGE, PRIORITY, SYSLOG_IDENTIFIER, CODE_FUNC, CODE_LINE, and the request context
 * of the calling thread (CUASYNC_SESSION, CUASYNC_TENANT, CUASYNC_REQUEST; cua_log_ctx_set). A record
 * journald does not take is written to stderr instead. Every value is escaped (cua_log_escape) so that it can
 * neither end a line nor forge a field or a record.
 */
#ifndef CUA_LOG_H
#define CUA_LOG_H

#include <stddef.h>
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

/*
 * Untrusted text (a client's HELLO name, a kernel or global name, anything a request carries) made safe for one
 * line of a log or of an operator's terminal. Kept: printable ASCII and valid UTF-8. Escaped: '\\' as "\\\\",
 * newline, CR and tab as "\\n", "\\r", "\\t"; every other byte below 0x20, 0x7f, the bytes of a C1 control
 * (U+0080..U+009F), of a line or paragraph separator or a bidirectional override (U+2028..U+202E,
 * U+2066..U+2069) and every byte that is not part of valid UTF-8 (a stray 0x9b, overlong forms, surrogates) as
 * "\\xHH". Reads len bytes of s (NULs included, escaped); writes at most cap bytes into buf, NUL included, never
 * cutting an escape or a character: text that does not fit ends in "...". CUA_LOG_ESCAPED(n) is the room for n
 * bytes with nothing cut. Returns buf (cap 0: buf untouched).
 */
#define CUA_LOG_ESCAPED(n) (4 * (size_t)(n) + 1)
char *cua_log_escape(char *buf, size_t cap, const void *s, size_t len);
/* The length of the valid UTF-8 sequence that starts s (len bytes there), or 0 when it is not one (a lone
 * continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short). s[0] < 0x80: 1. */
size_t cua_utf8_seq(const void *s, size_t len);

/* Each record is one line: whatever the format's arguments hold, a control byte or a byte that is not valid
 * UTF-8 is written escaped as above (a backslash is left as it is), so no value splits a record or forges
 * another, and none reaches a terminal raw. */
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
