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

/* X(code, NAME, value, message that says what to do) */
#define CUA_ERROR_TABLE(X)                                                                                   \
	X(CUA_OK, "OK", 0, "success")                                                                        \
	X(CUA_EINTERNAL, "INTERNAL", 1, "internal error in cuasyncd; please report it with the daemon log")  \
	X(CUA_EPROTOCOL, "PROTOCOL", 2, "malformed message: the request does not follow PROTOCOL.md")      \
	X(CUA_EVERSION, "VERSION", 3, "unsupported protocol version: upgrade the client or the daemon")     \
	X(CUA_EUNKNOWN_OP, "UNKNOWN_OP", 4, "unknown request kind: the daemon is older than the client")    \
	X(CUA_EBAD_ARGUMENT, "BAD_ARGUMENT", 5, "invalid argument: check the values passed to the call")    \
	X(CUA_ENOT_FOUND, "NOT_FOUND", 6, "no such object in this session: the handle is unknown or was freed") \
	X(CUA_ECONTEXT_LOST, "CONTEXT_LOST", 7,                                                              \
	  "the GPU context was lost (a fault or worker restart); recreate modules, memory and streams")      \
	X(CUA_EQUOTA, "QUOTA", 8, "session quota exceeded: free objects or raise the daemon's limits")       \
	X(CUA_EPDL_UNSUPPORTED, "PDL_UNSUPPORTED", 9,                                                        \
	  "programmatic dependent launch is not supported by the target device")                            \
	X(CUA_ENOMEM, "NO_MEMORY", 10, "out of memory: free memory or ask for less")                         \
	X(CUA_EDEVICE, "DEVICE", 11, "the device reported an error; the detail names the CUDA error")      \
	X(CUA_ETOO_LARGE, "TOO_LARGE", 12, "message or value exceeds a protocol limit: split the request")  \
	X(CUA_ETIMEOUT, "TIMEOUT", 13, "timed out waiting for the daemon: is cuasyncd running and responsive?") \
	X(CUA_ETRANSPORT, "TRANSPORT", 14, "transport error talking to the daemon: check the URL and that cuasyncd runs") \
	X(CUA_ECLOSED, "CLOSED", 15, "the connection or object is closed")                                    \
	X(CUA_ENO_SESSION, "NO_SESSION", 16, "no session on this connection: send hello first")              \
	X(CUA_EBUSY, "BUSY", 17, "the object is in use by work in flight: synchronize first")                \
	X(CUA_ENO_DEVICE, "NO_DEVICE", 18, "no usable device: see the daemon log for why")                   \
	X(CUA_EUNSUPPORTED, "UNSUPPORTED", 19, "not supported by this backend or build")                     \
	X(CUA_EMODULE, "MODULE", 20, "the module image was rejected; the detail holds the JIT/loader log")

enum cua_status {
#define CUA_X_ENUM(code, name, value, msg) code = value,
	CUA_ERROR_TABLE(CUA_X_ENUM)
#undef CUA_X_ENUM
	CUA_ERROR_COUNT
};

/* Stable upper-case name ("CONTEXT_LOST"); "UNKNOWN" for a code not in the table. Never NULL. */
const char *cua_strerror_name(int code);
/* Human message saying what to do. Never NULL. */
const char *cua_strerror(int code);
/* 1 when code is a known status code. */
int cua_status_valid(int code);

#define CUA_ERR_DETAIL_MAX 256

/* An error with its foreign detail ("CUDA_ERROR_ILLEGAL_ADDRESS", an NNG message, a JIT log excerpt). */
typedef struct cua_err {
	int code;
	char detail[CUA_ERR_DETAIL_MAX];
} cua_err;

/* Sets e (if not NULL) to code with a printf-style detail; returns code so callers can `return cua_err_set(...)`. */
int cua_err_set(cua_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void cua_err_clear(cua_err *e);

#endif
