/*
 * cmd-batch.c — BATCH: launches and copies in one message, validated item by item (an item that fails
 * validation is answered with its own status and does not run; the others do), one result per item.
 */
#include "config.h"

#include "cmd.h"

#include <stdlib.h>
#include <string.h>

static int
plan_item(struct fe *fe, struct request *r, const cua_batch_item *b, struct ritem *it, cua_err *e)
{
	switch (b->kind) {
	case CUA_OP_LAUNCH: return plan_launch(fe, r, &b->u.launch, it, e);
	case CUA_OP_MEMCPY_HTOD: return plan_htod(fe, r, &b->u.htod, it, e);
	case CUA_OP_MEMCPY_DTOH: return plan_dtoh(fe, r, &b->u.dtoh, it, e);
	case CUA_OP_MEMCPY_DTOD: return plan_dtod(fe, r, &b->u.dtod, it, e);
	case CUA_OP_MEMSET: return plan_memset(fe, r, &b->u.memset, it, e);
	case CUA_OP_MEMCPY_HTOD_HOST:
	case CUA_OP_MEMCPY_DTOH_HOST: return plan_host_copy(fe, r, b->kind, &b->u.host, it, e);
	default: return cua_err_set(e, CUA_EPROTOCOL, "item kind %u", b->kind);
	}
}

static int
v_batch(struct fe *fe, struct request *r, cua_err *e)
{
	const struct cua_req_batch *q = &r->w.body.batch;
	r->no_wait = (q->flags & CUA_FLAG_NO_WAIT) != 0;
	if (items_init(r, q->nitems) != 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < q->nitems; i++) {
		cua_err ie;
		cua_err_clear(&ie);
		if (plan_item(fe, r, &q->items[i], &r->items[i], &ie) != 0)
			item_fail_err(&r->items[i], &ie);
	}
	return 0;
}

static int
r_batch(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	cua_item_result *res = calloc(r->nitems ? r->nitems : 1, sizeof(*res));
	if (res == NULL)
		return CUA_ENOMEM;
	for (uint32_t i = 0; i < r->nitems; i++) {
		const struct ritem *it = &r->items[i];
		const char *name = cua_strerror_name((int)it->status);
		const char *msg = it->msg ? it->msg : cua_strerror((int)it->status);
		res[i].status = it->status;
		res[i].name = (cua_bytes){name, (uint32_t)strlen(name)};
		res[i].message = (cua_bytes){msg, (uint32_t)strlen(msg)};
		/* DTOH data; a fire-and-forget batch is answered before any data exists */
		if (!r->no_wait && it->status == CUA_OK && it->stage >= 0 && r->stages[it->stage].src == NULL)
			res[i].data = (cua_bytes){dev_stage_bytes(&fe->devs[r->dev], r, (uint32_t)it->stage),
						  (uint32_t)r->stages[it->stage].len};
	}
	*scratch = res;
	b->batch = (struct cua_rep_batch){res, r->nitems};
	return 0;
}

const struct cmd_entry cmd_batch_entry = {CUA_OP_BATCH, true, v_batch, NULL, r_batch};
