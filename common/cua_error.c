#include "config.h"

#include "cua_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	const char *msg;
} cua_error_rows[] = {
#define CUA_X_ROW(code, name, value, msg) [value] = {name, msg},
	CUA_ERROR_TABLE(CUA_X_ROW)
#undef CUA_X_ROW
};

int
cua_status_valid(int code)
{
	return code >= 0 && code < CUA_ERROR_COUNT && cua_error_rows[code].name != NULL;
}

const char *
cua_strerror_name(int code)
{
	return cua_status_valid(code) ? cua_error_rows[code].name : "UNKNOWN";
}

const char *
cua_strerror(int code)
{
	return cua_status_valid(code) ? cua_error_rows[code].msg : "unknown status code";
}

int
cua_err_set(cua_err *e, int code, const char *fmt, ...)
{
	if (e == NULL)
		return code;
	e->code = code;
	e->detail[0] = '\0';
	if (fmt != NULL) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
		va_end(ap);
	}
	return code;
}

void
cua_err_clear(cua_err *e)
{
	if (e != NULL) {
		e->code = CUA_OK;
		e->detail[0] = '\0';
	}
}
