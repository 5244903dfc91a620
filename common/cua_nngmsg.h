/*
 * cua_nngmsg.h — encode (cua_wire_pack_*) straight into an nng_msg body.
 *
 * nng_msg_append in NNG 1.5.2 grows the body to the exact size on every call, so packing a message field
 * by field is quadratic; this writer reserves capacity geometrically first. No NNG type appears here: the
 * message is passed as void * so that callers need not include nng.h for this header.
 */
#ifndef CUA_NNGMSG_H
#define CUA_NNGMSG_H

#include "cua_wire.h"

#include <stddef.h>

/* cua_wire_out writer; data is the nng_msg *. Returns 0 or -1 (out of memory). Any thread that owns the msg. */
int cua_nngmsg_write(void *data, const char *buf, size_t len);

/* A writer that appends to the body of msg (an nng_msg * the caller owns for as long as the writer is used). */
cua_wire_out cua_nngmsg_out(void *msg);

#endif
