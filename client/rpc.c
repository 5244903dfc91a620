/*
 * rpc.c — the synchronous exchanges whose reply body is nothing or one u64 (most calls), over transport.c's
 * cuac_rpc.
 */
#include "config.h"

#include "cuac_transport.h"
#include "internal.h"

#include <string.h>

int
cuac_call(cua_client *c, uint32_t op, const void *body)
{
	struct cuac_reply rep;
	int r = cuac_rpc(c, op, body, true, &rep);
	cuac_reply_done(&rep);
	return r;
}

int
cuac_call_u64(cua_client *c, uint32_t op, const void *body, uint64_t *out)
{
	struct cuac_reply rep;
	int r = cuac_rpc(c, op, body, true, &rep);
	if (r == 0)
		memcpy(out, &rep.w.body, sizeof(*out)); /* every one-u64 reply body starts with that u64 */
	cuac_reply_done(&rep);
	return r;
}
