/*
 * reqobj.c — the request as an object: its items, its worker commands and staged bytes, its status, and
 * freeing it. Below everything that plans or moves requests (plan.c, cmd-*.c, streampool.c, cleanup.c,
 * request.c), so they can all use it without calling each other. Nothing here takes a lock or moves a
 * request from one stage to another (request.c does that).
 *
 * Memory: a request and what is planned for it live in the request's pool (request.h); growing arrays double
 * into the pool (cua_pool_realloc_last grows the newest allocation in place, reallocs a large one, else copies
 * and leaves the old one to the pool's end).
 */
#include "config.h"

#include "request.h"
#include "wrec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The bytes of a request's pool blocks. The first block holds the struct request, its item and commands of a
 * usual single request (a launch with its arguments); a big batch's arrays go large (their own malloc). */
#define REQUEST_POOL_BLOCK 2048
_Static_assert(sizeof(struct request) <= REQUEST_POOL_BLOCK / 4,
	       "struct request no longer fits a quarter of its pool's first block: raise REQUEST_POOL_BLOCK");

struct request *
request_new(struct fe *fe)
{
	cua_pool *pool = cua_pool_create(REQUEST_POOL_BLOCK);
	if (pool == NULL)
		return NULL;
	struct request *r = cua_pool_calloc(pool, 1, sizeof(*r)); /* fits the first block: cannot fail */
	if (r == NULL) {
		cua_pool_destroy(pool);
		return NULL;
	}
	r->pool = pool;
	r->fe = fe;
	r->dev = -1;
	r->host_fd = -1;
	return r;
}

void *
request_alloc(struct request *r, size_t n)
{
	return cua_pool_alloc(r->pool, n);
}

char *
request_strndup(struct request *r, const char *s, size_t n)
{
	return cua_pool_strndup(r->pool, s, n);
}

/* Replaces the malloc'd message *msg by fmt's text (NULL when out of memory: the status's own text is used). */
static void __attribute__((format(printf, 2, 0))) set_message(char **msg, const char *fmt, va_list ap)
{
	char buf[CUA_ERR_DETAIL_MAX];
	vsnprintf(buf, sizeof(buf), fmt, ap);
	free(*msg);
	*msg = strdup(buf);
}

int
request_fail(struct request *r, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_message(&r->status_msg, fmt, ap);
	va_end(ap);
	r->status = (uint32_t)status;
	return status;
}

uint32_t
request_status(const struct request *r)
{
	if (r->status != CUA_OK)
		return r->status;
	for (uint32_t i = 0; i < r->nitems; i++)
		if (r->items[i].status != CUA_OK)
			return r->items[i].status;
	return CUA_OK;
}

void
request_free(struct fe *fe, struct request *r)
{
	if (r->host_fd >= 0)
		close(r->host_fd);
	if (r->decoded)
		cua_wire_request_free(&r->w);
	if (r->msg)
		fe->edge->msg_free(r->msg);
	if (r->msg_counted) { /* its session is freed only after its requests (request.c's do_admit) */
		r->s->request_bytes -= r->msg_len;
		fe->request_bytes -= r->msg_len;
	}
	for (uint32_t i = 0; i < r->nitems; i++) {
		free(r->items[i].msg);
		free(r->items[i].data);
	}
	free(r->status_msg);
	cua_pool_destroy(r->pool); /* r with it */
}

int
item_fail(struct ritem *it, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	set_message(&it->msg, fmt, ap);
	va_end(ap);
	it->status = (uint32_t)status;
	return status;
}

int
item_fail_err(struct ritem *it, const cua_err *e)
{
	return item_fail(it, e->code, "%s", e->detail[0] ? e->detail : cua_strerror(e->code));
}

int
items_init(struct request *r, uint32_t n)
{
	for (uint32_t i = 0; i < r->nitems; i++) {
		free(r->items[i].msg);
		free(r->items[i].data);
	}
	/* the old array's bytes are not kept: grown in place when it is the pool's newest (a batch's items_init
	 * right after request.c's items_init(r, 1)), else left to the pool */
	struct ritem *items = cua_pool_realloc_last(r->pool, r->items, 0, (size_t)(n ? n : 1) * sizeof(*items));
	r->nitems = 0;
	if (items == NULL)
		return CUA_ENOMEM;
	r->items = items;
	memset(items, 0, (size_t)(n ? n : 1) * sizeof(*items));
	r->nitems = n;
	for (uint32_t i = 0; i < n; i++)
		r->items[i].cmd = r->items[i].stage = -1;
	return 0;
}

int
plan_cmd(struct request *r, void *rec, size_t fixed, const void *extra, uint32_t elen)
{
	uint32_t size = wrec_size(fixed, elen);
	if (r->cmds_len + size > r->cmds_cap) {
		size_t cap = r->cmds_cap ? r->cmds_cap : 256;
		while (cap < r->cmds_len + size)
			cap *= 2;
		unsigned char *n = cua_pool_realloc_last(r->pool, r->cmds, r->cmds_len, cap);
		if (n == NULL)
			return -1;
		r->cmds = n;
		r->cmds_cap = cap;
	}
	((struct wrec_hdr *)rec)->size = size;
	unsigned char *p = r->cmds + r->cmds_len;
	memcpy(p, rec, fixed);
	if (elen)
		memcpy(p + fixed, extra, elen);
	memset(p + fixed + elen, 0, size - fixed - elen);
	r->last_cmd_off = r->cmds_len;
	r->cmds_len += size;
	return (int)r->ncmds++;
}

int
plan_stage(struct request *r, uint64_t len, const void *src)
{
	if (r->nstages == r->stages_cap) {
		uint32_t cap = r->stages_cap ? 2 * r->stages_cap : 4;
		struct stage *n =
			cua_pool_realloc_last(r->pool, r->stages, r->nstages * sizeof(*n), (size_t)cap * sizeof(*n));
		if (n == NULL)
			return -1;
		r->stages = n;
		r->stages_cap = cap;
	}
	r->stages[r->nstages] = (struct stage){r->last_cmd_off, len, 0, src, false};
	return (int)r->nstages++;
}
