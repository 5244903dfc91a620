/*
 * cmd-func.c — FUNC_GET_ATTRIBUTE, FUNC_SET_ATTRIBUTE and OCCUPANCY: a kernel's attributes (what the compiler
 * decided, and those a client may change: its maximum dynamic shared memory, its preferred shared-memory
 * carveout and its cluster attributes) and how many of its blocks fit a multiprocessor. Values are range-checked against the device here,
 * before the worker sees them.
 */
#include "config.h"

#include "cmd.h"

static const char *const attr_names[CUA_FATTR_LAST + 1] = {
	[CUA_FATTR_MAX_THREADS_PER_BLOCK] = "MAX_THREADS_PER_BLOCK",
	[CUA_FATTR_SHARED_SIZE_BYTES] = "SHARED_SIZE_BYTES",
	[CUA_FATTR_CONST_SIZE_BYTES] = "CONST_SIZE_BYTES",
	[CUA_FATTR_LOCAL_SIZE_BYTES] = "LOCAL_SIZE_BYTES",
	[CUA_FATTR_NUM_REGS] = "NUM_REGS",
	[CUA_FATTR_PTX_VERSION] = "PTX_VERSION",
	[CUA_FATTR_BINARY_VERSION] = "BINARY_VERSION",
	[CUA_FATTR_CACHE_MODE_CA] = "CACHE_MODE_CA",
	[CUA_FATTR_MAX_DYNAMIC_SHARED] = "MAX_DYNAMIC_SHARED_SIZE_BYTES",
	[CUA_FATTR_PREFERRED_CARVEOUT] = "PREFERRED_SHARED_MEMORY_CARVEOUT",
	[CUA_FATTR_CLUSTER_SIZE_MUST_BE_SET] = "CLUSTER_SIZE_MUST_BE_SET",
	[CUA_FATTR_REQUIRED_CLUSTER_WIDTH] = "REQUIRED_CLUSTER_WIDTH",
	[CUA_FATTR_REQUIRED_CLUSTER_HEIGHT] = "REQUIRED_CLUSTER_HEIGHT",
	[CUA_FATTR_REQUIRED_CLUSTER_DEPTH] = "REQUIRED_CLUSTER_DEPTH",
	[CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED] = "NON_PORTABLE_CLUSTER_SIZE_ALLOWED",
	[CUA_FATTR_CLUSTER_SCHEDULING_POLICY] = "CLUSTER_SCHEDULING_POLICY_PREFERENCE",
};

/* The function of handle h, the request bound to its device. 0 or a status with a message in e. */
static int
plan_function(struct fe *fe, struct request *r, uint64_t h, struct hslot **fn, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	int rc = do_handle_get(fe, r->s, h, CUA_HK_FUNCTION, fn, e);
	if (rc == 0)
		rc = plan_bind_device(fe, r, (*fn)->dev, (*fn)->gen, e);
	return rc;
}

static int
v_func_get_attribute(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_func_attribute *q = &r->w.body.func_attribute;
	struct hslot *fn;
	int rc = plan_function(fe, r, q->function, &fn, e);
	if (rc != 0)
		return rc;
	struct wrec_func_attr c = {{WR_FUNC_GET_ATTR, 0}, fn->wid, q->attribute, 0};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

/* The cluster attributes (11..14): settable only where the device has clusters. */
static int
check_set_cluster(const struct device *d, uint32_t attr, int32_t v, cua_err *e)
{
	if (!d->info.cluster_launch)
		return cua_err_set(e, CUA_EUNSUPPORTED,
				   "%s: thread block clusters require sm_90 or newer; target sm_%u%u", attr_names[attr],
				   d->info.sm_major, d->info.sm_minor);
	if (attr == CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED && (v < 0 || v > 1))
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "%s = %d is out of range: 0 or 1", attr_names[attr], v);
	if (attr != CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED && (v < 0 || (uint32_t)v > CUA_MAX_CLUSTER_SIZE))
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "%s = %d is out of range: 0..%u blocks (0 in all three: no required cluster)",
				   attr_names[attr], v, CUA_MAX_CLUSTER_SIZE);
	return 0;
}

/* The value of a settable attribute within the device's range. */
static int
check_set(const struct device *d, uint32_t attr, int32_t v, cua_err *e)
{
	if (attr >= CUA_FATTR_REQUIRED_CLUSTER_WIDTH && attr <= CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)
		return check_set_cluster(d, attr, v, e);
	if (attr != CUA_FATTR_MAX_DYNAMIC_SHARED && attr != CUA_FATTR_PREFERRED_CARVEOUT)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "attribute %u (%s) cannot be set; only %s (%u), %s (%u), REQUIRED_CLUSTER_WIDTH, "
				   "HEIGHT, DEPTH (11..13) and %s (%u) can",
				   attr, attr_names[attr], attr_names[CUA_FATTR_MAX_DYNAMIC_SHARED],
				   CUA_FATTR_MAX_DYNAMIC_SHARED, attr_names[CUA_FATTR_PREFERRED_CARVEOUT],
				   CUA_FATTR_PREFERRED_CARVEOUT,
				   attr_names[CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED],
				   CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
	if (attr == CUA_FATTR_MAX_DYNAMIC_SHARED && (v < 0 || (uint32_t)v > d->info.max_shared_optin))
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "%s = %d is out of range: device %d allows 0..%u bytes of dynamic shared memory "
				   "per block",
				   attr_names[attr], v, d->index, d->info.max_shared_optin);
	if (attr == CUA_FATTR_PREFERRED_CARVEOUT && (v < -1 || v > 100))
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "%s = %d is out of range: a percentage 0..100, or -1 for the device's default",
				   attr_names[attr], v);
	return 0;
}

static int
v_func_set_attribute(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_func_attribute *q = &r->w.body.func_attribute;
	struct hslot *fn;
	int rc = plan_function(fe, r, q->function, &fn, e);
	if (rc != 0 || (rc = check_set(&fe->devs[fn->dev], q->attribute, q->value, e)) != 0)
		return rc;
	struct wrec_func_attr c = {{WR_FUNC_SET_ATTR, 0}, fn->wid, q->attribute, q->value};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
v_occupancy(struct fe *fe, struct request *r, cua_err *e) CUA_REQUIRES(cuad_fe_lock)
{
	const struct cua_req_occupancy *q = &r->w.body.occupancy;
	struct hslot *fn;
	int rc = plan_function(fe, r, q->function, &fn, e);
	if (rc != 0)
		return rc;
	const struct device *d = &fe->devs[fn->dev];
	if (q->block_size == 0 || q->block_size > CUA_MAX_BLOCK_THREADS)
		return cua_err_set(e, CUA_EBAD_ARGUMENT, "block_size %u is out of range (1..%u threads)", q->block_size,
				   CUA_MAX_BLOCK_THREADS);
	if (q->shared_mem > d->info.max_shared_optin)
		return cua_err_set(e, CUA_EBAD_ARGUMENT,
				   "shared_mem %u is out of range: device %d allows 0..%u bytes "
				   "of dynamic shared memory per block",
				   q->shared_mem, d->index, d->info.max_shared_optin);
	struct wrec_occupancy c = {{WR_OCCUPANCY, 0}, fn->wid, q->block_size, q->shared_mem};
	r->items[0].cmd = plan_cmd(r, &c, sizeof(c), NULL, 0);
	return r->items[0].cmd < 0 ? cua_err_set(e, CUA_ENOMEM, "out of memory") : 0;
}

static int
r_func_get_attribute(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	(void)fe;
	(void)scratch;
	b->func_get_attribute.value = (int32_t)(int64_t)r->items[0].value;
	return 0;
}

static int
r_occupancy(struct fe *fe, struct request *r, cua_rep_body *b, void **scratch)
{
	(void)fe;
	(void)scratch;
	b->occupancy.blocks = (uint32_t)r->items[0].value;
	return 0;
}

const struct cmd_entry cmd_func_get_attribute_entry = {.op = CUA_OP_FUNC_GET_ATTRIBUTE,
						       .flags = CMD_HELLO,
						       .family = SF_MODULE,
						       .wrec = WR_FUNC_GET_ATTR,
						       .validate = v_func_get_attribute,
						       .reply = r_func_get_attribute};
const struct cmd_entry cmd_func_set_attribute_entry = {.op = CUA_OP_FUNC_SET_ATTRIBUTE,
						       .flags = CMD_HELLO,
						       .family = SF_MODULE,
						       .wrec = WR_FUNC_SET_ATTR,
						       .validate = v_func_set_attribute};
const struct cmd_entry cmd_occupancy_entry = {.op = CUA_OP_OCCUPANCY,
					      .flags = CMD_HELLO,
					      .family = SF_MODULE,
					      .wrec = WR_OCCUPANCY,
					      .validate = v_occupancy,
					      .reply = r_occupancy};
