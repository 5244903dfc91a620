/*
 * launch.c — the launch builder, after cuda-async's AsyncKernelLaunch: arguments pushed in order into an
 * arena (cua_arena.h), a configuration, a stream and flags; submitted as one pipelined LAUNCH (flight.c
 * coalesces launches into BATCH messages) or added to an explicit batch (batch.c). The launch record is freed
 * by pending.c (cua_launch_free), below flight.c, which frees launches once they are answered.
 */
#include "config.h"

#include "cuac_builder.h"
#include "cuac_error.h"
#include "cuac_flight.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

cua_launch *
cua_launch_new(cua_client *c, cua_function f)
{
	cua_launch *l = calloc(1, sizeof(*l));
	if (l == NULL)
		return NULL;
	l->c = c;
	l->f = f;
	cua_arena_init(&l->vals);
	l->sizes = l->sizes_inline;
	l->kinds = l->kinds_inline;
	l->cap = CUAC_ARG_SLOTS;
	return l;
}

/* Doubles the per-argument size and kind arrays (moving them off the inline slots). 0 or CUA_ENOMEM. */
static int
grow(cua_launch *l)
{
	size_t cap = 2 * l->cap;
	uint32_t *s = malloc(cap * sizeof(*s));
	uint8_t *k = malloc(cap);
	int r = CUA_ENOMEM;

	if (s == NULL || k == NULL)
		goto out;
	memcpy(s, l->sizes, l->nargs * sizeof(*s));
	memcpy(k, l->kinds, l->nargs);
	if (l->sizes != l->sizes_inline)
		free(l->sizes);
	if (l->kinds != l->kinds_inline)
		free(l->kinds);
	l->sizes = s;
	l->kinds = k;
	s = NULL; /* transferred */
	k = NULL; /* transferred */
	l->cap = cap;
	r = 0;
out:
	free(s);
	free(k);
	return r;
}

/* Appends one argument; the first error sticks and is reported again by submit. */
static int
push(cua_launch *l, const void *v, size_t size, uint8_t kind)
{
	if (l->error)
		return l->error;
	if (size == 0 || size > CUA_MAX_ARG_BYTES)
		return l->error = cuac_fail(CUA_EBAD_ARGUMENT, "argument %zu: %zu bytes (1..%u allowed)", l->nargs,
					    size, CUA_MAX_ARG_BYTES);
	if (l->nargs == CUA_MAX_ARGS)
		return l->error = cuac_fail(CUA_ETOO_LARGE, "more than %u arguments", CUA_MAX_ARGS);
	if (l->nargs == l->cap && grow(l) != 0)
		return l->error = cuac_fail(CUA_ENOMEM, "out of memory");
	int r = cua_arena_push(&l->vals, v, size);
	if (r != 0)
		return l->error = cuac_fail(r, "cannot store argument %zu", l->nargs);
	l->sizes[l->nargs] = (uint32_t)size;
	l->kinds[l->nargs] = kind;
	l->nargs++;
	return 0;
}

int
cua_launch_push_arg(cua_launch *l, const void *value, size_t size)
{
	return push(l, value, size, CUA_ARG_BYTES);
}
int
cua_launch_push_u8(cua_launch *l, uint8_t v)
{
	return push(l, &v, sizeof(v), CUA_ARG_BYTES);
}
int
cua_launch_push_u16(cua_launch *l, uint16_t v)
{
	return push(l, &v, sizeof(v), CUA_ARG_BYTES);
}
int
cua_launch_push_u32(cua_launch *l, uint32_t v)
{
	return push(l, &v, sizeof(v), CUA_ARG_BYTES);
}
int
cua_launch_push_u64(cua_launch *l, uint64_t v)
{
	return push(l, &v, sizeof(v), CUA_ARG_BYTES);
}
int
cua_launch_push_i32(cua_launch *l, int32_t v)
{
	return push(l, &v, sizeof(v), CUA_ARG_BYTES);
}
int
cua_launch_push_i64(cua_launch *l, int64_t v)
{
	return push(l, &v, sizeof(v), CUA_ARG_BYTES);
}
int
cua_launch_push_f32(cua_launch *l, float v)
{
	return push(l, &v, sizeof(v), CUA_ARG_BYTES);
}
int
cua_launch_push_f64(cua_launch *l, double v)
{
	return push(l, &v, sizeof(v), CUA_ARG_BYTES);
}
int
cua_launch_push_device_ptr(cua_launch *l, cua_deviceptr p)
{
	return push(l, &p, sizeof(p), CUA_ARG_DEVPTR);
}

int
cua_launch_set_config(cua_launch *l, cua_launch_config cfg)
{
	l->cfg = cfg;
	l->has_cfg = true;
	return 0;
}

int
cua_launch_set_stream(cua_launch *l, cua_stream s)
{
	l->stream = s;
	return 0;
}

int
cua_launch_programmatic_dependent_launch(cua_launch *l)
{
	l->flags |= CUA_LAUNCH_PDL;
	return 0;
}

int
cua_launch_set_cluster_dims(cua_launch *l, unsigned x, unsigned y, unsigned z)
{
	l->cluster[0] = x;
	l->cluster[1] = y;
	l->cluster[2] = z;
	return 0;
}

int
cua_launch_cooperative(cua_launch *l, bool on)
{
	l->flags = on ? l->flags | CUA_LAUNCH_COOPERATIVE : l->flags & ~CUA_LAUNCH_COOPERATIVE;
	return 0;
}

int
cua_launch_set_priority(cua_launch *l, int priority)
{
	l->priority = priority;
	l->has_priority = true;
	return 0;
}

/* Checks l and fills p's LAUNCH item from it (the arguments are encoded from l when sent). */
static int
launch_item(cua_launch *l, struct cuac_pending *p)
{
	if (l->error)
		return l->error;
	if (!l->has_cfg)
		return cuac_fail(CUA_EBAD_ARGUMENT, "launch submitted without a configuration (cua_launch_set_config)");
	p->item.kind = CUA_OP_LAUNCH;
	struct cua_req_launch *q = &p->item.u.launch;
	q->function = l->f.id;
	memcpy(q->grid, l->cfg.grid, sizeof(q->grid));
	memcpy(q->block, l->cfg.block, sizeof(q->block));
	q->shared_mem = l->cfg.shared_mem_bytes;
	q->stream = cuac_stream(l->c, l->stream);
	q->flags = l->flags;
	q->nargs = (uint32_t)l->nargs;
	/* the optional tail only when used, so that a plain launch is what older daemons read */
	memcpy(q->cluster, l->cluster, sizeof(q->cluster));
	q->priority = l->priority;
	q->nfields = l->has_priority                                        ? CUA_LAUNCH_FIELDS_PRIORITY
		     : (l->cluster[0] | l->cluster[1] | l->cluster[2]) != 0 ? CUA_LAUNCH_FIELDS_CLUSTER
									    : CUA_LAUNCH_FIELDS;
	return 0;
}

int
cuac_pending_launch(cua_launch *l, struct cuac_pending **out)
{
	struct cuac_pending *p = NULL;
	int r;

	*out = NULL;
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		r = cuac_fail(CUA_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = launch_item(l, p)) != 0)
		goto out;
	p->launch = l;
	l = NULL; /* transferred */
	*out = p;
	p = NULL; /* transferred */
	r = 0;
out:
	free(p);
	cua_launch_free(l);
	return r;
}

int
cua_launch_submit(cua_launch *l, cua_future **out)
{
	struct cuac_pending *p = NULL;
	cua_client *c;
	int r;

	if (out)
		*out = NULL;
	if (l == NULL)
		return cuac_fail(CUA_EBAD_ARGUMENT, "no launch");
	c = l->c;
	if ((r = cuac_pending_launch(l, &p)) != 0)
		goto out; /* l was freed */
	if (out) {
		if ((p->fut = cuac_future_new(c, 1)) == NULL) {
			r = cuac_fail(CUA_ENOMEM, "out of memory");
			goto out;
		}
		*out = p->fut;
	}
	/* Sent now unless enough batches are already in flight: then it rides in the next batch. */
	cuac_enqueue(c, p);
	p = NULL; /* transferred */
	r = 0;
out:
	cuac_pending_free(p);
	return r;
}
