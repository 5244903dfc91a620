/*
 * cmd-launch.c — LAUNCH: the launch is checked against the kernel's parameter layout (count and sizes),
 * device-pointer arguments against the session's allocations, PDL and the launch attributes (launch-attr.c)
 * against the device, before anything runs;
 * the argument bytes travel to the worker, which rebuilds the argument buffer.
 */
#include "config.h"

#include "cmd.h"

#include <stdlib.h>
#include <string.h>

static int
check_dims(const struct cua_req_launch *q, cua_err *e)
{
	for (int i = 0; i < 3; i++)
		if (q->grid[i] == 0 || q->block[i] == 0)
			return cua_err_set(e, CUA_EBAD_ARGUMENT,
					   "grid and block dimensions must be at least 1 (got grid %ux%ux%u, block "
					   "%ux%ux%u)",
					   q->grid[0], q->grid[1], q->grid[2], q->block[0], q->block[1], q->block[2]);
	return 0;
}

static int
check_pdl(const struct device *d, const struct cua_req_launch *q, cua_err *e)
{
	if (!(q->flags & CUA_LAUNCH_PDL) || d->info.sm_major * 10 + d->info.sm_minor >= 90)
		return 0;
	return cua_err_set(e, CUA_EPDL_UNSUPPORTED,
			   "programmatic dependent launch requires sm_90 or newer; target sm_%u%u", d->info.sm_major,
			   d->info.sm_minor);
}

/* The bytes of all arguments against what one launch may pass on the device (PROTOCOL.md: 32764 bytes with
 * CUDA 12.1+ on sm_70+, else 4096): checked first, as it holds whatever the kernel's layout. */
static int
check_param_bytes(const struct device *d, const struct cua_req_launch *q, cua_err *e)
{
	uint64_t total = 0;
	for (uint32_t i = 0; i < q->nargs; i++)
		total += q->args[i].kind == CUA_ARG_DEVPTR ? 8 : q->args[i].bytes.len;
	uint32_t max = d->info.max_param_bytes ? d->info.max_param_bytes : CUA_MAX_PARAM_BYTES_OLD;
	if (total > max)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "arguments take %llu bytes, more than the %u bytes a launch may pass on device %d "
				   "(sm_%u%u)",
				   (unsigned long long)total, max, d->index, d->info.sm_major, d->info.sm_minor);
	return 0;
}

/* Arguments against the layout; *plen: bytes of the command's payload. */
static int
check_args(struct fe *fe, struct request *r, const struct hslot *fn, const struct cua_req_launch *q, int dev,
	   uint32_t *plen, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	if (q->nargs != fn->nparams)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "the kernel takes %u arguments, the launch has %u",
				   fn->nparams, q->nargs);
	*plen = 0;
	for (uint32_t i = 0; i < q->nargs; i++) {
		const cua_wire_arg *a = &q->args[i];
		uint32_t want = fn->params[i].size;
		uint32_t have = a->kind == CUA_ARG_DEVPTR ? 8 : a->bytes.len;
		if (have != want)
			return cua_err_set(e, CUA_EBAD_ARGUMENT,
					   "argument %u is %u bytes, the kernel's parameter %u is %u bytes", i, have, i,
					   want);
		if (a->kind == CUA_ARG_DEVPTR && a->devptr != 0) {
			int pdev, rc;
			cua_err pe;
			if ((rc = do_alloc_find(fe, r->s, a->devptr, 1, &pdev, NULL, &pe)) != 0)
				return cua_err_set(e, rc, "argument %u: %s", i, pe.detail);
			if (pdev != dev)
				return cua_err_set(e, CUA_EBAD_ARGUMENT,
						   "argument %u points to device %d, the kernel runs on %d", i, pdev,
						   dev);
		}
		*plen += (uint32_t)sizeof(struct wrec_arg) + wrec_align8(have);
	}
	return 0;
}

/* The arguments as the worker reads them: nargs × (struct wrec_arg, the bytes padded to 8). */
static void
pack_args(const struct cua_req_launch *q, unsigned char *p)
{
	for (uint32_t i = 0; i < q->nargs; i++) {
		const cua_wire_arg *a = &q->args[i];
		struct wrec_arg h = {a->kind == CUA_ARG_DEVPTR ? 8 : a->bytes.len, 0};
		memcpy(p, &h, sizeof(h));
		p += sizeof(h);
		if (a->kind == CUA_ARG_DEVPTR)
			memcpy(p, &a->devptr, 8);
		else
			memcpy(p, a->bytes.ptr, h.size);
		memset(p + h.size, 0, wrec_align8(h.size) - h.size);
		p += wrec_align8(h.size);
	}
}

int
plan_launch(struct fe *fe, struct request *r, const struct cua_req_launch *q, struct ritem *it, cua_err *e)
{
	struct hslot *fn;
	uint32_t sid, plen;
	int rc = do_handle_get(fe, r->s, q->function, CUA_HK_FUNCTION, &fn, e);
	if (rc != 0)
		return rc;
	int dev = fn->dev;
	if ((rc = plan_bind_device(fe, r, dev, fn->gen, e)) != 0 || (rc = check_dims(q, e)) != 0 ||
	    (rc = check_pdl(&fe->devs[dev], q, e)) != 0 || (rc = check_launch_attrs(&fe->devs[dev], q, e)) != 0 ||
	    (rc = check_param_bytes(&fe->devs[dev], q, e)) != 0 ||
	    (rc = check_args(fe, r, fn, q, dev, &plen, e)) != 0 ||
	    (rc = plan_stream(fe, r, q->stream, dev, &sid, e)) != 0)
		return rc;
	unsigned char *payload = malloc(plen ? plen : 1);
	if (payload == NULL)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	pack_args(q, payload);
	struct wrec_launch c = {{WR_LAUNCH, 0},
				sid,
				launch_wrec_flags(q),
				fn->wid,
				{q->grid[0], q->grid[1], q->grid[2]},
				{q->block[0], q->block[1], q->block[2]},
				q->shared_mem,
				q->nargs,
				{q->cluster[0], q->cluster[1], q->cluster[2]},
				q->nfields >= CUA_LAUNCH_FIELDS_PRIORITY ? q->priority : 0};
	it->cmd = plan_cmd(r, &c, sizeof(c), payload, plen);
	free(payload);
	return it->cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
i_launch(struct fe *fe, struct request *r, const void *q, struct ritem *it, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	return plan_launch(fe, r, q, it, e);
}

static void
n_launch(struct stats *st, const void *q)
{
	(void)q;
	st->launches++;
}

static int
v_launch(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	r->no_wait = (r->w.body.launch.flags & CUA_FLAG_NO_WAIT) != 0;
	return plan_launch(fe, r, &r->w.body.launch, &r->items[0], e);
}

const struct cmd_entry cmd_launch_entry = {.op = CUA_OP_LAUNCH,
					   .flags = CMD_HELLO | CMD_BATCHED | CMD_STREAM,
					   .family = SF_LAUNCH,
					   .wrec = WR_LAUNCH,
					   .validate = v_launch,
					   .item = i_launch,
					   .count = n_launch};
