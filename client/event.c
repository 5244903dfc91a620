/*
 * event.c — CUDA events through the daemon (cuasync.h, "events"): EVENT_CREATE, EVENT_DESTROY, EVENT_RECORD,
 * STREAM_WAIT_EVENT, EVENT_SYNC, EVENT_ELAPSED and EVENT_QUERY. A record or a wait goes out after the launches
 * still queued in the client (cuac_wait_sent), so that on its stream it comes after the work submitted before it.
 */
#include "config.h"

#include "cuac_error.h"
#include "cuac_flight.h"
#include "cuac_transport.h"
#include "internal.h"

#include <string.h>

int
cua_event_create_on(cua_client *c, int dev, unsigned flags, cua_event *out)
{
	if (dev < 0)
		return cuac_fail(CUA_EBAD_ARGUMENT, "device %d", dev);
	struct cua_req_event_create q = {(uint32_t)dev, flags};
	return cuac_call_u64(c, CUA_OP_EVENT_CREATE, &q, &out->id);
}

int
cua_event_create(cua_client *c, unsigned flags, cua_event *out)
{
	return cua_event_create_on(c, 0, flags, out);
}

int
cua_event_destroy(cua_client *c, cua_event ev)
{
	struct cua_req_event q = {ev.id};
	return cuac_call(c, CUA_OP_EVENT_DESTROY, &q);
}

int
cua_event_record(cua_client *c, cua_event ev, cua_stream s)
{
	cuac_wait_sent(c); /* launches submitted before it go out first: on its stream they come first */
	struct cua_req_event_stream q = {ev.id, cuac_stream(c, s)};
	return cuac_call(c, CUA_OP_EVENT_RECORD, &q);
}

int
cua_stream_wait_event(cua_client *c, cua_stream s, cua_event ev)
{
	cuac_wait_sent(c); /* work submitted to s before the wait must not wait */
	struct cua_req_event_stream q = {ev.id, cuac_stream(c, s)};
	return cuac_call(c, CUA_OP_STREAM_WAIT_EVENT, &q);
}

int
cua_event_synchronize(cua_client *c, cua_event ev)
{
	struct cua_req_event q = {ev.id};
	return cuac_call(c, CUA_OP_EVENT_SYNC, &q);
}

int
cua_event_query(cua_client *c, cua_event ev, int *ready)
{
	struct cua_req_event q = {ev.id};
	struct cuac_reply rep;
	int r = cuac_rpc(c, CUA_OP_EVENT_QUERY, &q, true, &rep);
	if (r == 0)
		*ready = rep.w.body.event_query.ready != 0;
	cuac_reply_done(&rep);
	return r;
}

int
cua_event_elapsed_ms(cua_client *c, cua_event start, cua_event end, float *ms)
{
	struct cua_req_event_elapsed q = {start.id, end.id};
	struct cuac_reply rep;
	int r = cuac_rpc(c, CUA_OP_EVENT_ELAPSED, &q, true, &rep);
	if (r == 0) {
		uint32_t bits = rep.w.body.event_elapsed.ms_bits;
		memcpy(ms, &bits, sizeof(*ms));
	}
	cuac_reply_done(&rep);
	return r;
}
