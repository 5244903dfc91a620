/*
 * reqobj.c — the request as an object: its items, its worker commands and staged bytes, its status, and
 * freeing it. Below everything that plans or moves requests (plan.c, cmd-*.c, streampool.c, cleanup.c,
 * request.c), so they can all use it without calling each other. Nothing here takes a lock or moves a
 * request from one stage to another (request.c does that).
 */
#include "config.h"

#include "request.h"
#include "wrec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
request_fail(struct request *r, int status, const char *fmt, ...)
{
	char buf[CUA_ERR_DETAIL_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	r->status = (uint32_t)status;
	free(r->status_msg);
	r->status_msg = strdup(buf);
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
	for (uint32_t i = 0; i < r->nitems; i++) {
		free(r->items[i].msg);
		free(r->items[i].data);
	}
	free(r->items);
	free(r->cmds);
	free(r->stages);
	free(r->status_msg);
	free(r);
}

int
item_fail(struct ritem *it, int status, const char *fmt, ...)
{
	char buf[CUA_ERR_DETAIL_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	it->status = (uint32_t)status;
	free(it->msg);
	it->msg = strdup(buf);
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
	free(r->items);
	r->nitems = 0;
	r->items = calloc(n ? n : 1, sizeof(*r->items));
	if (r->items == NULL)
		return CUA_ENOMEM;
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
		unsigned char *n = realloc(r->cmds, cap);
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
	struct stage *n = realloc(r->stages, (r->nstages + 1) * sizeof(*n));
	if (n == NULL)
		return -1;
	r->stages = n;
	r->stages[r->nstages] = (struct stage){r->last_cmd_off, len, 0, src, false};
	return (int)r->nstages++;
}
