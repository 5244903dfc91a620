#include "config.h"

#include "cua_nngmsg.h"

#include <nng/nng.h>

int
cua_nngmsg_write(void *data, const char *buf, size_t len)
{
	nng_msg *m = data;
	size_t need = nng_msg_len(m) + len, cap = nng_msg_capacity(m);
	if (need > cap) {
		size_t want = cap < 256 ? 256 : cap * 2;
		if (nng_msg_reserve(m, want > need ? want : need) != 0)
			return -1;
	}
	return nng_msg_append(m, buf, len) == 0 ? 0 : -1;
}

cua_wire_out
cua_nngmsg_out(void *msg)
{
	return (cua_wire_out){cua_nngmsg_write, msg};
}
