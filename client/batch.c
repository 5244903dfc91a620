/*
 * batch.c — explicit batches: launches and copies collected by the application and sent at submit as one
 * BATCH message (flight.c), with one future item per batch item.
 */
#include "config.h"

#include "cuac_builder.h"
#include "cuac_error.h"
#include "cuac_flight.h"
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>

cua_batch *
cua_batch_new(cua_client *c)
{
	cua_batch *b = calloc(1, sizeof(*b));
	if (b == NULL)
		return NULL;
	b->c = c;
	TAILQ_INIT(&b->items);
	return b;
}

/* Appends p (owned from now on: freed on failure too). */
static int
batch_append(cua_batch *b, struct cuac_pending *p)
{
	if (b->n == CUA_MAX_BATCH) {
		cuac_pending_free(p);
		return cuac_fail(CUA_ETOO_LARGE, "a batch holds at most %u items", CUA_MAX_BATCH);
	}
	p->fut_idx = b->n++;
	TAILQ_INSERT_TAIL(&b->items, p, link);
	return 0;
}

int
cua_batch_add_launch(cua_batch *b, cua_launch *l)
{
	struct cuac_pending *p;
	int r = cuac_pending_launch(l, &p);
	return r != 0 ? r : batch_append(b, p);
}

/* A new pending copy item of kind, or NULL (out of memory, the last error set). */
static struct cuac_pending *
copy_item(uint32_t kind)
{
	struct cuac_pending *p = calloc(1, sizeof(*p));
	if (p == NULL) {
		cuac_fail(CUA_ENOMEM, "out of memory");
		return NULL;
	}
	p->item.kind = kind;
	return p;
}

/* A copy between dst_or_src and host memory [h, +bytes) as a MEMCPY_HTOD_HOST or MEMCPY_DTOH_HOST item when h lies
 * in one of the client's host buffers: no bytes in the message, the host side read or written by the GPU when
 * the copy runs in stream order (as CUDA's asynchronous copies from page-locked memory). Only where the buffer is
 * certainly registered for the copy's device: one device (the daemon refuses a buffer of another device, and
 * an item cannot fall back to carrying its bytes once sent), not in a graph. 1: appended (or failed: *r); 0: not
 * a host buffer's, the caller carries the bytes. */
static int
host_item(cua_batch *b, uint32_t kind, cua_deviceptr dev_ptr, const void *h, size_t bytes, cua_stream s, int *r)
{
	uint64_t hb, off;
	pthread_mutex_lock(&b->c->lock);
	int ndevs = b->c->ndevs;
	pthread_mutex_unlock(&b->c->lock);
	if (b->graph || bytes == 0 || ndevs != 1 || !cuac_host_lookup(b->c, h, bytes, &hb, &off))
		return 0;
	struct cuac_pending *p = copy_item(kind);
	if (p == NULL) {
		*r = CUA_ENOMEM;
		return 1;
	}
	p->item.u.host = (struct cua_req_memcpy_host){dev_ptr, cuac_stream(b->c, s), hb, off, bytes};
	*r = batch_append(b, p);
	return 1;
}

int
cua_batch_add_memcpy_htod(cua_batch *b, cua_deviceptr dst, const void *src, size_t bytes, cua_stream s)
{
	int r;
	if (host_item(b, CUA_OP_MEMCPY_HTOD_HOST, dst, src, bytes, s, &r))
		return r;
	struct cuac_pending *p = copy_item(CUA_OP_MEMCPY_HTOD);
	if (p == NULL)
		return CUA_ENOMEM;
	if (bytes > UINT32_MAX) {
		free(p);
		return cuac_fail(CUA_ETOO_LARGE, "copy too large for one batch item");
	}
	p->item.u.htod = (struct cua_req_memcpy_htod){dst, cuac_stream(b->c, s), {src, (uint32_t)bytes}};
	p->htod_src = src;
	return batch_append(b, p);
}

int
cua_batch_add_memcpy_dtoh(cua_batch *b, void *dst, cua_deviceptr src, size_t bytes, cua_stream s)
{
	int r;
	if (host_item(b, CUA_OP_MEMCPY_DTOH_HOST, src, dst, bytes, s, &r))
		return r;
	struct cuac_pending *p = copy_item(CUA_OP_MEMCPY_DTOH);
	if (p == NULL)
		return CUA_ENOMEM;
	p->item.u.dtoh = (struct cua_req_memcpy_dtoh){src, bytes, cuac_stream(b->c, s)};
	p->htod_src = dst; /* remembered until the future exists: see cua_batch_submit */
	return batch_append(b, p);
}

int
cua_batch_add_memcpy_dtod(cua_batch *b, cua_deviceptr dst, cua_deviceptr src, size_t bytes, cua_stream s)
{
	struct cuac_pending *p = copy_item(CUA_OP_MEMCPY_DTOD);
	if (p == NULL)
		return CUA_ENOMEM;
	p->item.u.dtod = (struct cua_req_memcpy_dtod){dst, src, bytes, cuac_stream(b->c, s)};
	return batch_append(b, p);
}

int
cua_batch_add_memset(cua_batch *b, cua_deviceptr dst, uint32_t value, unsigned width, size_t count, cua_stream s)
{
	struct cuac_pending *p = copy_item(CUA_OP_MEMSET);
	if (p == NULL)
		return CUA_ENOMEM;
	p->item.u.memset = (struct cua_req_memset){dst, value, width, count, cuac_stream(b->c, s)};
	return batch_append(b, p);
}

size_t
cua_batch_count(const cua_batch *b)
{
	return b->n;
}

void
cua_batch_free(cua_batch *b)
{
	if (b == NULL)
		return;
	cuac_pendq_free(&b->items);
	free(b);
}

/* Points every item at f (NULL: fire-and-forget) and moves the DTOH targets into it. */
static void
attach_future(cua_batch *b, cua_future *f)
{
	struct cuac_pending *p;
	TAILQ_FOREACH(p, &b->items, link)
	{
		p->fut = f;
		if (p->item.kind != CUA_OP_MEMCPY_DTOH)
			continue;
		if (f) {
			f->dtoh_dst[p->fut_idx] = (void *)(uintptr_t)p->htod_src;
			f->dtoh_len[p->fut_idx] = p->item.u.dtoh.bytes;
		}
		p->htod_src = NULL;
	}
}

int
cua_batch_submit(cua_batch *b, cua_future **out)
{
	cua_client *c = b->c;
	cua_future *f = NULL;
	int r;

	if (out)
		*out = NULL;
	if (b->n == 0) {
		r = cuac_fail(CUA_EBAD_ARGUMENT, "empty batch");
		goto out;
	}
	if (out && (f = cuac_future_new(c, b->n)) == NULL) {
		r = cuac_fail(CUA_ENOMEM, "out of memory");
		goto out;
	}
	attach_future(b, f);
	cuac_wait_sent(c); /* launches submitted before it go out first: on one stream they run first */
	pthread_mutex_lock(&c->lock);
	while (c->inflight >= CUAC_MAX_INFLIGHT_MESSAGES)
		pthread_cond_wait(&c->cond, &c->lock);
	cuac_send_flight_locked(c, &b->items, b->n); /* an explicit batch goes out now, as one message */
	pthread_mutex_unlock(&c->lock);
	if (out)
		*out = f; /* the flight fills it in */
	r = 0;
out:
	cua_batch_free(b); /* empty after a send */
	return r;
}
