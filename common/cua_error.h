/*
 * cua_error.h — the one error enum of cuasyncd, shared by daemon, worker and client.
 *
 * Codes are stable on the wire (PROTOCOL.md, "Status codes"): never renumber, retire a code by keeping its
 * row with the name kept and a "(retired)" message. 0 is success. A foreign detail (a CUresult name, an NNG
 * error string, a JIT log line) travels beside the code in a cua_err, never as a new code.
 */
#ifndef CUA_ERROR_H
#define CUA_ERROR_H

#include <stddef.h>

/* The table itself (codes, names, messages) is public: it lives in client/cuasync.h. */
#include "cuasync.h"

/* 1 when code is a known status code. */
int cua_status_valid(int code);

#define CUA_ERR_DETAIL_MAX 2048 /* room for a JIT log excerpt */

/* An error with its foreign detail ("CUDA_ERROR_ILLEGAL_ADDRESS", an NNG message, a JIT log excerpt). */
typedef struct cua_err {
	int code;
	char detail[CUA_ERR_DETAIL_MAX];
} cua_err;

/* Sets e (if not NULL) to code with a printf-style detail; returns code so callers can `return cua_err_set(...)`. */
int cua_err_set(cua_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void cua_err_clear(cua_err *e);

#endif
