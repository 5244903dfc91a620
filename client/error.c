/*
 * error.c — the calling thread's last error (cua_last_error): the bottom of libcuasync, called by every other
 * client file and calling none.
 */
#include "config.h"

#include "cua_proto.h"
#include "cuac_error.h"
#include "cuasync.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[CUA_MAX_MESSAGE_TEXT / 16];

const char *
cua_last_error(void)
{
	return last_error;
}

int
cuac_fail(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return status;
}

void
cuac_error_clear(void)
{
	last_error[0] = '\0';
}
