/*
 * cmd-memory.c — MEM_ALLOC and MEM_FREE: device memory of a session, recorded in its allocation table
 * (launch and copy arguments are checked against it) and counted against its quota.
 */
#include "config.h"

#include "cmd.h"
#include "graphtab.h"

static int
v_mem_alloc(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_mem_alloc *q = &r->w.body.mem_alloc;
	int rc;
	if ((rc = plan_need_device(fe, q->device, e)) != 0)
		return rc;
	if (q->bytes == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "cannot allocate 0 bytes");
	if ((rc = plan_bind_device(fe, r, (int)q->device, 0, e)) != 0) /* the limits: .reserve */
		return rc;
	struct wrec_mem_alloc c = {{WR_MEM_ALLOC, 0}, q->bytes};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* Device memory on its device, against --session-mem and the tenant's `mem`. */
static void
rs_mem_alloc(const struct fe *fe, const struct request *r, struct resv *want)
{
	(void)fe;
	want->n[RES_MEM] = r->w.body.mem_alloc.bytes;
}

static void
c_mem_alloc(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct ritem *it = &r->items[0];
	if (it->status != CUA_OK)
		return;
	uint64_t len = r->w.body.mem_alloc.bytes;
	if (do_alloc_add(r->s, r->dev, r->wdev->gen, it->value, len) != 0) {
		item_fail(it, CUA_ENOMEM, "cannot record the allocation");
		return;
	}
	r->s->counts.allocations++;
	r->s->counts.alloc_bytes += len;
	r->s->dev_bytes[r->dev] += len;
	fe->devs[r->dev].allocations++;
	fe->devs[r->dev].alloc_bytes += len;
}

/* A pointer into a lost context: forget its record, and say so. */
static void
forget_stale(struct session *s, uint64_t p) CUA_REQUIRES(cuad_fe_lock)
{
	for (uint32_t i = 0; i < s->nallocs; i++)
		if (s->allocs[i].addr == p && s->allocs[i].stale) {
			do_alloc_remove(s, &s->allocs[i]);
			return;
		}
}

static int
v_mem_free(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	uint64_t p = r->w.body.mem_free.ptr;
	int dev;
	struct alloc_rec *a;
	int rc = do_alloc_find(fe, r->s, p, 1, &dev, &a, e);
	if (rc == CUA_ECONTEXT_LOST) {
		forget_stale(r->s, p);
		return rc;
	}
	if (rc == CUA_ENOT_FOUND) /* released by an earlier request: the message says which */
		return rc;
	if (rc != 0)
		return cua_err_set(e, CUA_ENOT_FOUND, "0x%llx is not an allocation of this session",
				   (unsigned long long)p);
	if (a == NULL)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "0x%llx is in a module global: it lives as long as its module (MODULE_UNLOAD frees "
				   "it)",
				   (unsigned long long)p);
	if (a->addr != p)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "0x%llx is inside an allocation; free 0x%llx instead",
				   (unsigned long long)p, (unsigned long long)a->addr);
	if ((rc = do_graph_check_free(fe, r->s, a->addr, a->len, e)) != 0) /* BUSY: a graph uses it */
		return rc;
	r->barrier = true;
	if ((rc = plan_bind_device(fe, r, dev, a->gen, e)) != 0)
		return rc;
	struct wrec_mem_free c = {{WR_MEM_FREE, 0}, p};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	if (r->items[0].cmd < 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	a->release = (struct release){r->id, r->seq}; /* later requests of the session no longer see it */
	return 0;
}

/* The free ran: the record leaves the table (when the worker failed to free it, it stays released and the
 * session's cleanup tries again). */
/* A MEM_FREE that failed as a whole after validation marked the allocation released: it was not freed, so it is
 * the session's again (a client may use it or free it once more; a stale one then answers CONTEXT_LOST). */
static void
a_mem_free(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct alloc_rec *a = do_alloc_released(r->s, r->w.body.mem_free.ptr, r->id);
	if (a != NULL)
		a->release = (struct release){0, 0};
}

static void
c_mem_free(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct alloc_rec *a = do_alloc_released(r->s, r->w.body.mem_free.ptr, r->id);
	if (a == NULL)
		return;
	if (r->items[0].status != CUA_OK) { /* not freed (a failed clear keeps it): the session's again */
		a->release = (struct release){0, 0};
		return;
	}
	if (!a->stale) { /* a closing session's too: it stays counted until its memory is freed (reserve.h) */
		r->s->counts.allocations--;
		r->s->counts.alloc_bytes -= a->len;
		r->s->dev_bytes[a->dev] -= a->len;
		fe->devs[a->dev].allocations--;
		fe->devs[a->dev].alloc_bytes -= a->len;
	}
	do_alloc_remove(r->s, a);
}

const struct cmd_entry cmd_mem_alloc_entry = {.op = CUA_OP_MEM_ALLOC,
					      .flags = CMD_HELLO,
					      .family = SF_MEMORY,
					      .wrec = WR_MEM_ALLOC,
					      .validate = v_mem_alloc,
					      .reserve = rs_mem_alloc,
					      .complete = c_mem_alloc,
					      .reply = reply_value};
const struct cmd_entry cmd_mem_free_entry = {.op = CUA_OP_MEM_FREE,
					     .flags = CMD_HELLO | CMD_RELEASES,
					     .family = SF_MEMORY,
					     .wrec = WR_MEM_FREE,
					     .validate = v_mem_free,
					     .complete = c_mem_free,
					     .abandon = a_mem_free};
