/*
 * cmd-batch.c — BATCH: launches and copies in one message, validated item by item (an item that fails
 * validation is answered with its own status and does not run; the others do), one result per item.
 */
#include "config.h"

#include "cmd.h"

#include <stdlib.h>
#include <string.h>

/* What one result takes in the reply besides its data and its error text: [status, name, message, data] with
 * status < 2^32, name "OK" and message "success" for a success, and the bin header of its data. */
#define BATCH_RESULT_BYTES 24u

/* The reply's room: the DTOH data of every item, with BATCH_RESULT_BYTES per item, must fit the largest
 * message less CUA_REPLY_ENVELOPE. Checks item i (a DTOH of `bytes`) against `used`, the bytes the results
 * before it take. 0, or CUA_ETOO_LARGE. */
static int
check_reply_room(struct fe *fe, const struct cua_req_batch *q, uint32_t i, uint64_t bytes, uint64_t used, cua_err *e)
{
	uint64_t limit = plan_max_reply_data(fe);
	uint64_t rest = (uint64_t)(q->nitems - i) * BATCH_RESULT_BYTES; /* this result's and those after it */
	if (bytes <= limit && used + rest <= limit - bytes)
		return 0;
	return cua_err_set(e, CUA_ETOO_LARGE,
			   "the batch's replies would exceed %llu bytes (the largest message, %zu bytes, less %u for "
			   "the reply's envelope): this copy's %llu bytes do not fit after the %llu bytes of the items "
			   "before it; split the batch",
			   (unsigned long long)limit, fe->cfg.max_message, CUA_REPLY_ENVELOPE,
			   (unsigned long long)bytes, (unsigned long long)used);
}

/* The bytes item it's result takes in the reply (see check_reply_room). */
static uint64_t
result_bytes(const struct ritem *it, uint32_t kind, uint64_t dtoh_bytes)
{
	if (it->status != CUA_OK)
		return BATCH_RESULT_BYTES + CUA_MAX_IDENT + (it->msg ? strlen(it->msg) : 0);
	return BATCH_RESULT_BYTES + (kind == CUA_OP_MEMCPY_DTOH ? dtoh_bytes : 0);
}

static int
v_batch(struct fe *fe, struct request *r, const struct cmd_entry *(*find)(uint32_t op), cua_err *e)
{
	const struct cua_req_batch *q = &r->w.body.batch;
	uint64_t used = 0;
	/* bit 0 passes the schema's u32<=2 but is no flag of BATCH: unknown flag bits are PROTOCOL (§5) */
	if (q->flags & ~CUA_FLAG_NO_WAIT)
		return cua_err_set(e, CUA_EPROTOCOL, "BATCH flags %u: the only flag is NO_WAIT (2)", q->flags);
	r->no_wait = (q->flags & CUA_FLAG_NO_WAIT) != 0;
	if (items_init(r, q->nitems) != 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < q->nitems; i++) {
		const cua_batch_item *b = &q->items[i];
		uint64_t bytes = b->kind == CUA_OP_MEMCPY_DTOH ? b->u.dtoh.bytes : 0;
		cua_err ie;
		cua_err_clear(&ie);
		const struct cmd_entry *row = find(b->kind);
		if (row == NULL || !(row->flags & CMD_BATCHED))
			cua_err_set(&ie, CUA_EPROTOCOL, "item kind %u", b->kind);
		else if (bytes > 0)
			check_reply_room(fe, q, i, bytes, used, &ie);
		if (ie.code != 0 || row->item(fe, r, &b->u, &r->items[i], &ie) != 0)
			item_fail_err(&r->items[i], &ie);
		used += result_bytes(&r->items[i], b->kind, bytes);
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
			res[i].data = (cua_bytes){dev_stage_bytes(r->wdev, r, (uint32_t)it->stage),
						  (uint32_t)r->stages[it->stage].len};
	}
	*scratch = res;
	b->batch = (struct cua_rep_batch){res, r->nitems};
	return 0;
}

const struct cmd_entry cmd_batch_entry = {.op = CUA_OP_BATCH,
					  .flags = CMD_HELLO | CMD_REPLY_UNLOCKED,
					  .family = SF_BATCH,
					  .wrec = WR_NONE,
					  .validate_items = v_batch,
					  .reply = r_batch};
