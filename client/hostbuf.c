/*
 * hostbuf.c — host buffers shared with the daemon: memfd memory, sealed against shrinking, registered with
 * HOST_REGISTER so that copies to and from it skip the socket (calls.c looks buffers up by address). The memfd
 * reaches the daemon over the fd channel (fdchan.c); HOST_REGISTER names its ticket. One such buffer of the
 * client's own stages calls.c's synchronous copies from and to other host memory.
 */
#include "config.h"

#include "cuac_builder.h"
#include "cuac_error.h"
#include "cuac_transport.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Synchronous copies from or to other host memory of at least STAGE_MIN bytes go through the client's staging
 * buffer of STAGE_BYTES, a host buffer (shared memory the daemon's worker maps): the client copies the bytes in or
 * out at memory speed and the message names the buffer, as CUDA stages pageable copies through pinned memory.
 * Smaller ones travel in their message (through the shared-memory channel's ring when there is one). */
#define STAGE_MIN ((size_t)64 << 10)
#define STAGE_BYTES ((size_t)8 << 20)

struct cuac_hostbuf {
	unsigned char *p; /* the mapping, len bytes */
	size_t len;
	int fd;
	int dev;
	uint64_t handle; /* the daemon's */
	LIST_ENTRY(cuac_hostbuf) link;
};

/* Unmaps and closes hb, then frees it; after partial setup too (p NULL or MAP_FAILED, fd -1). */
static void
hostbuf_free(struct cuac_hostbuf *hb)
{
	if (hb == NULL)
		return;
	if (hb->p != NULL && hb->p != MAP_FAILED)
		munmap(hb->p, hb->len);
	if (hb->fd >= 0)
		close(hb->fd);
	free(hb);
}

/* bytes of new shared memory, mapped (not registered); NULL with the last error set (CUA_ENOMEM) if not. */
static struct cuac_hostbuf *
hostbuf_map(size_t bytes)
{
	struct cuac_hostbuf *hb = calloc(1, sizeof(*hb)), *ret = NULL;

	if (hb == NULL) {
		cuac_fail(CUA_ENOMEM, "out of memory");
		return NULL;
	}
	hb->len = bytes;
	hb->p = MAP_FAILED;
	if ((hb->fd = memfd_create("cuasync-host", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0) {
		cuac_fail(CUA_ENOMEM, "memfd_create: %s", strerror(errno));
		goto out;
	}
	/* sealed against shrinking: the daemon refuses a buffer that could vanish under the GPU worker */
	if (ftruncate(hb->fd, (off_t)bytes) != 0 || fcntl(hb->fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
	    (hb->p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, hb->fd, 0)) == MAP_FAILED) {
		cuac_fail(CUA_ENOMEM, "cannot create %zu bytes of shared memory: %s", bytes, strerror(errno));
		goto out;
	}
	ret = hb;
	hb = NULL; /* transferred */
out:
	hostbuf_free(hb);
	return ret;
}

/* ------------------------------------------------------------------ the copies' staging buffer */

/* The staging buffer for a copy of bytes, locked for the caller (stage_release), with its handle; NULL when the
 * copy is to carry its bytes: too small, the daemon shows more than one device (the buffer is registered for one,
 * and a pointer's device is the daemon's to know), another thread's copy holds the buffer, or no buffer can be
 * made (tried once: a remote daemon has no fd channel, the session's host memory is used up). */
static void *
stage_take(cua_client *c, size_t bytes, uint64_t *handle)
{
	uint64_t off;
	pthread_mutex_lock(&c->lock);
	int ndevs = c->ndevs;
	pthread_mutex_unlock(&c->lock);
	if (bytes < STAGE_MIN || ndevs != 1 || pthread_mutex_trylock(&c->stage_lock) != 0)
		return NULL;
	if (c->stage == NULL && !c->stage_failed) {
		/* a failure to make it is no failure of the copy: the caller's last error text stays */
		char why[CUA_MAX_MESSAGE_TEXT / 16];
		snprintf(why, sizeof(why), "%s", cua_last_error());
		c->stage_failed = cua_host_alloc(c, 0, STAGE_BYTES, &c->stage) != CUA_OK;
		cuac_fail(0, "%s", why);
	}
	if (c->stage == NULL || !cuac_host_lookup(c, c->stage, STAGE_BYTES, handle, &off)) {
		pthread_mutex_unlock(&c->stage_lock);
		return NULL;
	}
	return c->stage;
}

static void
stage_release(cua_client *c)
{
	pthread_mutex_unlock(&c->stage_lock);
}

/* Frees the staging buffer for the application's own (its host buffers hit the session's limit): true when one
 * was freed; none is made again. Not while a copy holds it (false then). */
static bool
stage_drop(cua_client *c)
{
	if (pthread_mutex_trylock(&c->stage_lock) != 0)
		return false;
	void *p = c->stage;
	c->stage = NULL;
	c->stage_failed |= p != NULL; /* a buffer it had to give up is not made again */
	pthread_mutex_unlock(&c->stage_lock);
	return p != NULL && cua_host_free(c, p) == CUA_OK;
}

int
cuac_staged_copy(cua_client *c, uint32_t op, cua_deviceptr dev, void *h, size_t bytes, cua_stream s, int *r)
{
	uint64_t handle;
	unsigned char *stage = stage_take(c, bytes, &handle);
	if (stage == NULL)
		return 0;
	*r = 0;
	for (size_t off = 0; off < bytes && *r == 0; off += STAGE_BYTES) {
		size_t n = bytes - off < STAGE_BYTES ? bytes - off : STAGE_BYTES;
		if (op == CUA_OP_MEMCPY_HTOD_HOST)
			memcpy(stage, (const char *)h + off, n);
		struct cua_req_memcpy_host q = {dev + off, cuac_stream(c, s), handle, 0, n};
		*r = cuac_call(c, op, &q);
		if (*r == 0 && op == CUA_OP_MEMCPY_DTOH_HOST)
			memcpy((char *)h + off, stage, n);
	}
	/* A copy whose answer did not come (a timeout, a broken connection) may still run later: its buffer is
	 * abandoned (it stays registered until the session ends), never used again under another copy. */
	if (*r == CUA_ETIMEOUT || *r == CUA_ETRANSPORT)
		c->stage = NULL;
	stage_release(c);
	return 1;
}

/* ------------------------------------------------------------------ host buffers */

int
cua_host_alloc(cua_client *c, int dev, size_t bytes, void **out)
{
	struct cuac_hostbuf *hb = NULL;
	int r;

	*out = NULL;
	if (bytes == 0)
		return cuac_fail(CUA_EBAD_ARGUMENT, "cannot allocate 0 bytes");
	if ((hb = hostbuf_map(bytes)) == NULL) {
		r = CUA_ENOMEM;
		goto out;
	}
	/* The daemon takes the memfd itself from the fd channel (SCM_RIGHTS), never by our pid: HOST_REGISTER names
	 * the ticket the channel gave it. */
	uint64_t ticket;
	if ((r = cuac_fdchan_pass(c, &hb->fd, 1, &ticket)) != 0)
		goto out;
	struct cua_req_host_register q = {(uint32_t)dev, ticket, bytes};
	r = cuac_call_u64(c, CUA_OP_HOST_REGISTER, &q, &hb->handle);
	/* the application's buffers come before the copies' staging one; a refusal by a limit leaves the ticket
	 * with the session (PROTOCOL.md §9), so the same one is named again */
	if (r == CUA_EQUOTA && stage_drop(c))
		r = cuac_call_u64(c, CUA_OP_HOST_REGISTER, &q, &hb->handle);
	if (r != 0)
		goto out;
	hb->dev = dev;
	*out = hb->p;
	pthread_mutex_lock(&c->lock);
	LIST_INSERT_HEAD(&c->hostbufs, hb, link);
	pthread_mutex_unlock(&c->lock);
	hb = NULL; /* transferred */
	r = 0;
out:
	hostbuf_free(hb);
	return r;
}

int
cua_host_free(cua_client *c, void *p)
{
	struct cuac_hostbuf *hb;
	pthread_mutex_lock(&c->lock);
	LIST_FOREACH(hb, &c->hostbufs, link)
	if (hb->p == p)
		break;
	if (hb != NULL)
		LIST_REMOVE(hb, link);
	pthread_mutex_unlock(&c->lock);
	if (hb == NULL)
		return cuac_fail(CUA_ENOT_FOUND, "%p is not a host buffer of this client", p);
	struct cua_req_host_unregister q = {hb->handle};
	int r = cuac_call(c, CUA_OP_HOST_UNREGISTER, &q); /* waits until no copy uses it */
	hostbuf_free(hb);
	return r == CUA_ECONTEXT_LOST ? 0 : r;
}

int
cuac_host_lookup(cua_client *c, const void *p, size_t len, uint64_t *handle, uint64_t *off)
{
	const unsigned char *q = p;
	struct cuac_hostbuf *hb;
	int found = 0;
	pthread_mutex_lock(&c->lock);
	LIST_FOREACH(hb, &c->hostbufs, link)
	{
		if (q >= hb->p && (size_t)(q - hb->p) <= hb->len && len <= hb->len - (size_t)(q - hb->p)) {
			*handle = hb->handle;
			*off = (uint64_t)(q - hb->p);
			found = 1;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

void
cuac_hostbufs_fini(cua_client *c)
{
	struct cuac_hostbuf *hb;
	while ((hb = LIST_FIRST(&c->hostbufs)) != NULL) {
		LIST_REMOVE(hb, link);
		hostbuf_free(hb);
	}
}
