/*
 * cua_nngmsg.h — msgpack straight into an nng_msg body.
 *
 * nng_msg_append in NNG 1.5.2 grows the body to the exact size on every call, so packing a message field
 * by field is quadratic; this writer reserves capacity geometrically first.
 */
#ifndef CUA_NNGMSG_H
#define CUA_NNGMSG_H

#include <stddef.h>

/* msgpack_packer write callback; data is the nng_msg *. Returns 0 or -1 (out of memory). */
int cua_nngmsg_write(void *data, const char *buf, size_t len);

#endif
