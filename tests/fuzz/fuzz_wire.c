/* libFuzzer harness for the wire decoder: any bytes, decoded as a request and as a reply; whatever decodes
 * must re-encode and decode again to the same bytes. Seed corpus: proto/vectors/ (see .ci/run). */
#include "config.h"

#include "cua_wire.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
reencode_request(cua_wire_request *req)
{
	cua_wbuf b = {0}, b2 = {0};
	if (cua_wire_pack_request(cua_wbuf_out(&b), req->op, req->seq, &req->body) != 0)
		abort();
	cua_wire_request again;
	cua_err err;
	if (cua_wire_decode_request(b.data, b.len, &again, &err) != 0)
		abort();
	if (cua_wire_pack_request(cua_wbuf_out(&b2), again.op, again.seq, &again.body) != 0 || b2.len != b.len ||
	    memcmp(b.data, b2.data, b.len))
		abort();
	cua_wire_request_free(&again);
	cua_wbuf_free(&b);
	cua_wbuf_free(&b2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Exact-size private copy so that any over-read is caught. */
	uint8_t *copy = malloc(size ? size : 1);
	memcpy(copy, data, size);
	cua_err err;
	cua_wire_request req;
	if (cua_wire_decode_request(copy, size, &req, &err) == 0)
		reencode_request(&req);
	cua_wire_request_free(&req);
	cua_wire_reply rep;
	(void)cua_wire_decode_reply(copy, size, &rep, &err);
	cua_wire_reply_free(&rep);
	free(copy);
	return 0;
}
