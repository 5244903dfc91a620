/*
 * cmd-module.c — MODULE_LOAD, MODULE_UNLOAD and FUNCTION_GET: a session's modules and the kernels looked up
 * in them (with their parameter layout, which every launch is checked against).
 */
#include "config.h"

#include "cmd.h"
#include "graphtab.h"

#include <string.h>

static int
v_module_load(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_module_load *q = &r->w.body.module_load;
	int rc;
	if ((rc = plan_need_device(fe, q->device, e)) != 0)
		return rc;
	if (q->image.len == 0)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "empty module image");
	if (q->image.len > fe->cfg.staging_bytes)
		return cua_err_set(e, CUA_ETOO_LARGE, "module image of %u bytes exceeds the staging area",
				   q->image.len);
	if ((rc = plan_bind_device(fe, r, (int)q->device, 0, e)) != 0) /* the limits: .reserve */
		return rc;
	struct wrec_module_load c = {{WR_MODULE_LOAD, 0}, q->format, 0, 0, q->image.len};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	r->items[0].stage = r->items[0].cmd < 0 ? -1 : plan_stage(r, q->image.len, q->image.ptr);
	return r->items[0].stage < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* A module, its image's bytes and its handle (--session-modules, --session-module-bytes, --session-handles, the
 * tenant's `modules` and `module-bytes`). */
static void
rs_module_load(const struct fe *fe, const struct request *r, struct resv *want)
{
	(void)fe;
	want->n[RES_MODULES] = 1;
	want->n[RES_MODULE_BYTES] = r->w.body.module_load.image.len;
	want->n[RES_HANDLES] = 1;
}

static void
c_module_load(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct ritem *it = &r->items[0];
	uint64_t h;
	if (it->status != CUA_OK)
		return;
	int rc = do_handle_new(r->s, CUA_HK_MODULE, r->dev, r->wdev->gen, it->value, &h);
	if (rc != 0) {
		item_fail(it, rc, "cannot record the module");
		return;
	}
	it->value = h;
	r->s->slots[cua_handle_slot(h)].size = r->w.body.module_load.image.len;
	r->s->module_bytes += r->w.body.module_load.image.len;
	r->s->counts.modules++;
}

/* Drops module m and its functions from the session's tables (counted unless already stale). */
static void
forget_module(struct session *s, struct hslot *m) CUA_REQUIRES(cuad_fe_lock)
{
	uint32_t slot = (uint32_t)(m - s->slots);
	for (uint32_t i = 0; i < s->nslots; i++) {
		struct hslot *f = &s->slots[i];
		if (f->kind != CUA_HK_FUNCTION || f->module_slot != slot)
			continue;
		if (!f->stale)
			s->counts.functions--;
		do_handle_free(s, f);
	}
	do_globals_forget(s, slot);
	if (!m->stale) {
		s->counts.modules--;
		s->module_bytes -= m->size;
	}
	do_handle_free(s, m);
}

/* Marks m and its functions released by rel: later requests naming them are refused (session.h). */
static void
release_module(struct session *s, struct hslot *m, struct release rel) CUA_REQUIRES(cuad_fe_lock)
{
	uint32_t slot = (uint32_t)(m - s->slots);
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->slots[i].kind == CUA_HK_FUNCTION && s->slots[i].module_slot == slot)
			s->slots[i].release = rel;
	m->release = rel;
}

static int
v_module_unload(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	struct hslot *m;
	uint64_t h = r->w.body.module_unload.module;
	int rc = do_handle_get(fe, r->s, h, CUA_HK_MODULE, &m, e);
	if (rc == CUA_ECONTEXT_LOST) { /* forget it and its functions; say so */
		forget_module(r->s, do_handle_slot(r->s, h, CUA_HK_MODULE));
		return rc;
	}
	if (rc != 0 || (rc = do_graph_check_unload(fe, r->s, (uint32_t)(m - r->s->slots), e)) != 0 ||
	    (rc = plan_bind_device(fe, r, m->dev, m->gen, e)) != 0)
		return rc;
	r->barrier = true;
	struct wrec_module_unload c = {{WR_MODULE_UNLOAD, 0}, m->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	if (r->items[0].cmd < 0)
		return cua_err_set(e, CUA_ENOMEM, "out of memory");
	release_module(r->s, m, (struct release){r->id, r->seq});
	return 0;
}

static void
c_module_unload(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct hslot *m = do_handle_slot(r->s, r->w.body.module_unload.module, CUA_HK_MODULE);
	if (m == NULL || m->release.req != r->id)
		return;
	if (r->items[0].status == CUA_OK)
		forget_module(r->s, m);
	else /* still loaded (a failed clear of its globals keeps it): the session's again, functions too */
		release_module(r->s, m, (struct release){0, 0});
}

/* MODULE_UNLOAD failed as a whole after validation: the module and its functions are the session's again. */
static void
a_module_unload(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	struct hslot *m = do_handle_slot(r->s, r->w.body.module_unload.module, CUA_HK_MODULE);
	if (m != NULL && m->release.req == r->id)
		release_module(r->s, m, (struct release){0, 0});
}

static int
v_function_get(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_function_get *q = &r->w.body.function_get;
	struct hslot *m;
	int rc = do_handle_get(fe, r->s, q->module, CUA_HK_MODULE, &m, e);
	if (rc != 0)
		return rc;
	if (q->name.len == 0 || memchr(q->name.ptr, '\0', q->name.len) != NULL)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "kernel name must be non-empty text without NUL bytes");
	if ((rc = plan_bind_device(fe, r, m->dev, m->gen, e)) != 0) /* its handle: .reserve */
		return rc;
	char name[CUA_MAX_NAME + 1];
	memcpy(name, q->name.ptr, q->name.len);
	name[q->name.len] = '\0';
	struct wrec_function_get c = {{WR_FUNCTION_GET, 0}, m->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), name, q->name.len + 1);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* A function's handle (--session-handles). */
static void
rs_handle(const struct fe *fe, const struct request *r, struct resv *want)
{
	(void)fe, (void)r;
	want->n[RES_HANDLES] = 1;
}

static void
c_function_get(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct ritem *it = &r->items[0];
	uint64_t h;
	if (it->status != CUA_OK)
		return;
	if (it->data_len % sizeof(cua_param_info) != 0 || it->data_len / sizeof(cua_param_info) > CUA_MAX_PARAMS) {
		item_fail(it, CUA_EINTERNAL, "worker returned a malformed parameter layout");
		return;
	}
	int rc = do_handle_new(r->s, CUA_HK_FUNCTION, r->dev, r->wdev->gen, it->value, &h);
	if (rc != 0) {
		item_fail(it, rc, "cannot record the function");
		return;
	}
	struct hslot *hs = &r->s->slots[cua_handle_slot(h)];
	hs->module_slot = cua_handle_slot(r->w.body.function_get.module);
	hs->nparams = it->data_len / (uint32_t)sizeof(cua_param_info);
	hs->params = it->data;
	it->data = NULL; /* transferred to the handle */
	it->value = h;
	r->s->counts.functions++;
}

static int
r_function_get(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch) CUA_REQUIRES(cuad_fe_lock)
{
	(void)fe;
	(void)scratch;
	uint64_t h = r->items[0].value;
	const struct hslot *hs = &r->s->slots[cua_handle_slot(h)];
	b->function_get = (struct cua_rep_function_get){h, hs->params, hs->nparams};
	return 0;
}

/* A name for the worker: non-empty text without NUL, copied NUL-terminated into name[CUA_MAX_NAME + 1]. */
static int
plan_name(cua_bytes b, const char *what, char *name, cua_err *e)
{
	if (b.len == 0 || b.len > CUA_MAX_NAME || memchr(b.ptr, '\0', b.len) != NULL)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "%s name must be non-empty text without NUL bytes", what);
	memcpy(name, b.ptr, b.len);
	name[b.len] = '\0';
	return 0;
}

static int
v_module_get_global(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_module_get_global *q = &r->w.body.module_get_global;
	struct hslot *m;
	char name[CUA_MAX_NAME + 1];
	int rc = do_handle_get(fe, r->s, q->module, CUA_HK_MODULE, &m, e);
	if (rc != 0 || (rc = plan_name(q->name, "global", name, e)) != 0 ||
	    (rc = plan_bind_device(fe, r, m->dev, m->gen, e)) != 0)
		return rc;
	struct wrec_module_get_global c = {{WR_MODULE_GET_GLOBAL, 0}, m->wid};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), name, q->name.len + 1);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* The global joins the session's pointer table, tied to its module (session.h, struct global_rec). */
static void
c_module_get_global(struct fe *fe, struct request *r) CUA_REQUIRES(cuad_fe_lock)
{
	struct ritem *it = &r->items[0];
	uint64_t bytes;
	(void)fe;
	if (it->status != CUA_OK)
		return;
	if (it->data_len != sizeof(bytes)) {
		item_fail(it, CUA_EINTERNAL, "worker returned a malformed global");
		return;
	}
	memcpy(&bytes, it->data, sizeof(bytes));
	if (do_handle_slot(r->s, r->w.body.module_get_global.module, CUA_HK_MODULE) == NULL ||
	    do_global_add(r->s, cua_handle_slot(r->w.body.module_get_global.module), it->value, bytes) != 0)
		item_fail(it, CUA_ENOMEM, "cannot record the global");
}

static int
r_module_get_global(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	uint64_t bytes;
	(void)fe;
	(void)scratch;
	memcpy(&bytes, r->items[0].data, sizeof(bytes));
	b->module_get_global = (struct cua_rep_module_get_global){r->items[0].value, bytes};
	return 0;
}

const struct cmd_entry cmd_module_load_entry = {.op = CUA_OP_MODULE_LOAD,
						.flags = CMD_HELLO,
						.family = SF_MODULE,
						.wrec = WR_MODULE_LOAD,
						.validate = v_module_load,
						.reserve = rs_module_load,
						.complete = c_module_load,
						.reply = reply_value};
const struct cmd_entry cmd_module_unload_entry = {.op = CUA_OP_MODULE_UNLOAD,
						  .flags = CMD_HELLO | CMD_RELEASES,
						  .family = SF_MODULE,
						  .wrec = WR_MODULE_UNLOAD,
						  .validate = v_module_unload,
						  .complete = c_module_unload,
						  .abandon = a_module_unload};
const struct cmd_entry cmd_module_get_global_entry = {.op = CUA_OP_MODULE_GET_GLOBAL,
						      .flags = CMD_HELLO,
						      .family = SF_MODULE,
						      .wrec = WR_MODULE_GET_GLOBAL,
						      .validate = v_module_get_global,
						      .complete = c_module_get_global,
						      .reply = r_module_get_global};
const struct cmd_entry cmd_function_get_entry = {.op = CUA_OP_FUNCTION_GET,
						 .flags = CMD_HELLO,
						 .family = SF_MODULE,
						 .wrec = WR_FUNCTION_GET,
						 .validate = v_function_get,
						 .reserve = rs_handle,
						 .complete = c_function_get,
						 .reply = r_function_get};
