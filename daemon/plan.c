/*
 * plan.c — building blocks of validation and planning, shared by the cmd-*.c files (see cmd.h).
 * All functions run with fe->lock held.
 */
#include "config.h"

#include "cmd.h"
#include "streampool.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 0 when device dev exists and is usable, else BAD_ARGUMENT / NO_DEVICE with a message in e. */
static int
device_usable(struct fe *fe, uint32_t dev, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	if (dev >= (uint32_t)fe->ndevs)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "device %u does not exist (%d devices)", dev, fe->ndevs);
	if (fe->devs[dev].state == DEV_FAILED)
		return cua_err_set(e, CUA_ENO_DEVICE, "device %u is unusable: %s", dev, fe->devs[dev].why);
	return 0;
}

int
plan_need_device(struct fe *fe, uint32_t dev, cua_err *e)
{
	int rc = device_usable(fe, dev, e);
	if (rc == 0 && (fe->drained >> dev & 1u))
		rc = cua_err_set(e, CUA_ENO_DEVICE,
				 "device %u is drained by the operator: no new memory, modules, streams or host "
				 "buffers there; use another device",
				 dev);
	return rc;
}

int
plan_bind_device(struct fe *fe, struct request *r, int dev, uint32_t gen, cua_err *e)
{
	(void)fe;
	if (r->dev < 0)
		r->dev = dev;
	else if (r->dev != dev)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "one request must target one device (device %d, then %d)",
				   r->dev, dev);
	if (gen != 0)
		r->dep_gen = gen;
	return 0;
}

int
plan_range(struct fe *fe, struct request *r, uint64_t p, uint64_t len, int *dev, cua_err *e)
{
	if (len == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "zero-byte range at 0x%llx", (unsigned long long)p);
	int rc = do_alloc_find(fe, r->s, p, len, dev, NULL, e);
	if (rc == 0) /* an allocation it holds: usable on a drained device too */
		rc = device_usable(fe, (uint32_t)*dev, e);
	if (rc == 0)
		rc = plan_bind_device(fe, r, *dev, do_session_gen(fe, r->s, *dev), e);
	return rc;
}

int
plan_stream(struct fe *fe, struct request *r, uint64_t h, int dev, uint32_t *wsid, cua_err *e)
{
	if (h == 0 || h == CUA_STREAM_ORDERED_ID) {
		*wsid = h == 0 ? do_spool_slot(fe, r, dev) : do_spool_ordered(fe, r, dev);
		return 0;
	}
	struct hslot *hs;
	int rc = do_handle_get(fe, r->s, h, CUA_HK_STREAM, &hs, e);
	if (rc != 0)
		return rc;
	if (hs->dev != dev)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "stream is on device %u, the work on device %d", hs->dev, dev);
	*wsid = (uint32_t)hs->wid;
	return 0;
}

uint64_t
plan_max_reply_data(struct fe *fe)
{
	return fe->cfg.max_message > CUA_REPLY_ENVELOPE ? fe->cfg.max_message - CUA_REPLY_ENVELOPE : 0;
}

uint64_t
plan_max_copy(struct fe *fe)
{
	uint64_t m = fe->cfg.staging_bytes;
	return plan_max_reply_data(fe) < m ? plan_max_reply_data(fe) : m;
}

int
plan_copy_too_large(struct fe *fe, uint64_t bytes, cua_err *e)
{
	if (plan_max_reply_data(fe) <= fe->cfg.staging_bytes)
		return cua_err_set(e, CUA_ETOO_LARGE,
				   "copy of %llu bytes exceeds %llu, the most one reply can carry (the largest "
				   "message, "
				   "%zu bytes, less %u for the reply's envelope); split it",
				   (unsigned long long)bytes, (unsigned long long)plan_max_reply_data(fe),
				   fe->cfg.max_message, CUA_REPLY_ENVELOPE);
	return cua_err_set(e, CUA_ETOO_LARGE,
			   "copy of %llu bytes exceeds the device's staging area of %llu bytes; split it",
			   (unsigned long long)bytes, (unsigned long long)fe->cfg.staging_bytes);
}

int
reply_value(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	(void)fe;
	(void)scratch;
	b->module_load.module = r->items[0].value; /* module, stream, buffer handle or pointer: one u64 */
	return 0;
}
