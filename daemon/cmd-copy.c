/*
 * cmd-copy.c — MEMCPY_HTOD, MEMCPY_DTOH, MEMCPY_DTOD, MEMSET and the host-buffer copies (MEMCPY_HTOD_HOST,
 * MEMCPY_DTOH_HOST): stream work between device memory of the session and the message (through the
 * device's staging area) or a registered host buffer.
 */
#include "config.h"

#include "cmd.h"

static int
copy_cmd(struct request *r, struct ritem *it, uint32_t op, uint32_t sid, uint32_t hostbuf, uint64_t dev,
	 uint64_t host_off, uint64_t bytes, cua_err *e)
{
	struct wrec_copy c = {{op, 0}, sid, hostbuf, dev, host_off, bytes};
	it->cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return it->cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

int
plan_htod(struct fe *fe, struct request *r, const struct cua_req_memcpy_htod *q, struct ritem *it, cua_err *e)
{
	int dev, rc;
	uint32_t sid;
	if ((rc = plan_range(fe, r, q->dst, q->data.len, &dev, e)) != 0 ||
	    (rc = plan_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	if (q->data.len > fe->cfg.staging_bytes)
		return cua_err_set(e, CUA_ETOO_LARGE, "copy of %u bytes exceeds the staging area", q->data.len);
	if ((rc = copy_cmd(r, it, WR_HTOD, sid, 0, q->dst, 0, q->data.len, e)) != 0)
		return rc;
	it->stage = plan_stage(r, q->data.len, q->data.ptr);
	return it->stage < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

int
plan_dtoh(struct fe *fe, struct request *r, const struct cua_req_memcpy_dtoh *q, struct ritem *it, cua_err *e)
{
	int dev, rc;
	uint32_t sid;
	if (q->bytes > plan_max_copy(fe))
		return plan_copy_too_large(fe, q->bytes, e);
	if ((rc = plan_range(fe, r, q->src, q->bytes, &dev, e)) != 0 ||
	    (rc = plan_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	if ((rc = copy_cmd(r, it, WR_DTOH, sid, 0, q->src, 0, q->bytes, e)) != 0)
		return rc;
	it->stage = plan_stage(r, q->bytes, NULL);
	return it->stage < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

int
plan_dtod(struct fe *fe, struct request *r, const struct cua_req_memcpy_dtod *q, struct ritem *it, cua_err *e)
{
	int dev, dev2, rc;
	uint32_t sid;
	if ((rc = plan_range(fe, r, q->dst, q->bytes, &dev, e)) != 0 ||
	    (rc = plan_range(fe, r, q->src, q->bytes, &dev2, e)) != 0 ||
	    (rc = plan_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	struct wrec_dtod c = {{WR_DTOD, 0}, sid, 0, q->dst, q->src, q->bytes};
	it->cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return it->cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

int
plan_memset(struct fe *fe, struct request *r, const struct cua_req_memset *q, struct ritem *it, cua_err *e)
{
	int dev, rc;
	uint32_t sid;
	if (q->width != 1 && q->width != 2 && q->width != 4)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "memset width must be 1, 2 or 4 bytes, not %u", q->width);
	if (q->width < 4 && q->value >> (8 * q->width))
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "memset value 0x%x does not fit %u byte(s)", q->value,
				   q->width);
	if (q->count > UINT64_MAX / q->width)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "memset count overflows");
	if ((rc = plan_range(fe, r, q->dst, q->count * q->width, &dev, e)) != 0 ||
	    (rc = plan_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	struct wrec_memset c = {{WR_MEMSET, 0}, sid, q->width, q->dst, q->value, q->count};
	it->cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return it->cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* A copy between device memory and a registered host buffer of the session (no data in the message). */
int
plan_host_copy(struct fe *fe, struct request *r, uint32_t op, const struct cua_req_memcpy_host *q, struct ritem *it,
	       cua_err *e)
{
	int dev, rc;
	uint32_t sid;
	struct hslot *hb;
	if ((rc = do_handle_get(fe, r->s, q->buffer, CUA_HK_HOSTBUF, &hb, e)) != 0)
		return rc;
	if (q->offset > hb->size || q->bytes > hb->size - q->offset)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "[%llu, +%llu) is outside the %llu-byte host buffer",
				   (unsigned long long)q->offset, (unsigned long long)q->bytes,
				   (unsigned long long)hb->size);
	if ((rc = plan_range(fe, r, q->dev_ptr, q->bytes, &dev, e)) != 0)
		return rc;
	if (hb->dev != dev)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "host buffer is registered with device %u, the memory is on %d", hb->dev, dev);
	if ((rc = plan_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	return copy_cmd(r, it, op == CUA_OP_MEMCPY_HTOD_HOST ? WR_HTOD : WR_DTOH, sid, (uint32_t)hb->wid, q->dev_ptr,
			q->offset, q->bytes, e);
}

/* The rows' item functions (CMD_BATCHED): the request alone, or one item of a BATCH. */
static int
i_htod(struct fe *fe, struct request *r, const void *q, struct ritem *it, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	return plan_htod(fe, r, q, it, e);
}

static int
i_dtoh(struct fe *fe, struct request *r, const void *q, struct ritem *it, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	return plan_dtoh(fe, r, q, it, e);
}

static int
i_dtod(struct fe *fe, struct request *r, const void *q, struct ritem *it, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	return plan_dtod(fe, r, q, it, e);
}

static int
i_memset(struct fe *fe, struct request *r, const void *q, struct ritem *it, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	return plan_memset(fe, r, q, it, e);
}

static int
i_htod_host(struct fe *fe, struct request *r, const void *q, struct ritem *it, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	return plan_host_copy(fe, r, CUA_OP_MEMCPY_HTOD_HOST, q, it, e);
}

static int
i_dtoh_host(struct fe *fe, struct request *r, const void *q, struct ritem *it, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	return plan_host_copy(fe, r, CUA_OP_MEMCPY_DTOH_HOST, q, it, e);
}

/* The rows' counters: bytes copied, by direction (and through shared host buffers). */
static void
n_htod(struct stats *st, const void *q)
{
	st->copied[SD_HTOD] += ((const struct cua_req_memcpy_htod *)q)->data.len;
}

static void
n_dtoh(struct stats *st, const void *q)
{
	st->copied[SD_DTOH] += ((const struct cua_req_memcpy_dtoh *)q)->bytes;
}

static void
n_dtod(struct stats *st, const void *q)
{
	st->copied[SD_DTOD] += ((const struct cua_req_memcpy_dtod *)q)->bytes;
}

static void
n_htod_host(struct stats *st, const void *q)
{
	uint64_t n = ((const struct cua_req_memcpy_host *)q)->bytes;
	st->copied[SD_HTOD] += n;
	st->host_copied[SD_HTOD] += n;
}

static void
n_dtoh_host(struct stats *st, const void *q)
{
	uint64_t n = ((const struct cua_req_memcpy_host *)q)->bytes;
	st->copied[SD_DTOH] += n;
	st->host_copied[SD_DTOH] += n;
}

static int
r_dtoh(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	(void)scratch;
	const struct ritem *it = &r->items[0];
	b->memcpy_dtoh.data =
		(cua_bytes){dev_stage_bytes(r->wdev, r, (uint32_t)it->stage), (uint32_t)r->stages[it->stage].len};
	return 0;
}

const struct cmd_entry cmd_memcpy_htod_entry = {.op = CUA_OP_MEMCPY_HTOD,
						.flags = CMD_HELLO | CMD_BATCHED | CMD_STREAM,
						.family = SF_COPY,
						.wrec = WR_HTOD,
						.item = i_htod,
						.count = n_htod};
const struct cmd_entry cmd_memcpy_dtoh_entry = {.op = CUA_OP_MEMCPY_DTOH,
						.flags = CMD_HELLO | CMD_BATCHED | CMD_STREAM | CMD_REPLY_UNLOCKED,
						.family = SF_COPY,
						.wrec = WR_DTOH,
						.item = i_dtoh,
						.count = n_dtoh,
						.reply = r_dtoh};
const struct cmd_entry cmd_memcpy_dtod_entry = {.op = CUA_OP_MEMCPY_DTOD,
						.flags = CMD_HELLO | CMD_BATCHED | CMD_STREAM,
						.family = SF_COPY,
						.wrec = WR_DTOD,
						.item = i_dtod,
						.count = n_dtod};
const struct cmd_entry cmd_memset_entry = {.op = CUA_OP_MEMSET,
					   .flags = CMD_HELLO | CMD_BATCHED | CMD_STREAM,
					   .family = SF_COPY,
					   .wrec = WR_MEMSET,
					   .item = i_memset};
const struct cmd_entry cmd_memcpy_htod_host_entry = {.op = CUA_OP_MEMCPY_HTOD_HOST,
						     .flags = CMD_HELLO | CMD_BATCHED | CMD_STREAM,
						     .family = SF_COPY,
						     .wrec = WR_HTOD,
						     .item = i_htod_host,
						     .count = n_htod_host};
const struct cmd_entry cmd_memcpy_dtoh_host_entry = {.op = CUA_OP_MEMCPY_DTOH_HOST,
						     .flags = CMD_HELLO | CMD_BATCHED | CMD_STREAM,
						     .family = SF_COPY,
						     .wrec = WR_DTOH,
						     .item = i_dtoh_host,
						     .count = n_dtoh_host};
