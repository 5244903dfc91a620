/*
 * future.c — futures: the results of a submitted launch or batch, one per item, filled in by flight.c as
 * replies arrive (under the client's lock) and read by the application; and the client's completion eventfd,
 * written when a future completes, for event loops that cannot block in cua_future_wait.
 */
#include "config.h"

#include "cua_clock.h"
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

cua_future *
cuac_future_new(cua_client *c, size_t n)
{
	cua_future *f = calloc(1, sizeof(*f));
	if (f == NULL)
		return NULL;
	f->c = c;
	f->nitems = f->remaining = n;
	f->item_status = calloc(n, sizeof(*f->item_status));
	f->item_msg = calloc(n, sizeof(*f->item_msg));
	f->dtoh_dst = calloc(n, sizeof(*f->dtoh_dst));
	f->dtoh_len = calloc(n, sizeof(*f->dtoh_len));
	if (!f->item_status || !f->item_msg || !f->dtoh_dst || !f->dtoh_len) {
		free(f->item_status);
		free(f->item_msg);
		free(f->dtoh_dst);
		free(f->dtoh_len);
		free(f);
		return NULL;
	}
	return f;
}

static void
future_destroy(cua_future *f)
{
	for (size_t i = 0; i < f->nitems; i++)
		free(f->item_msg[i]);
	free(f->item_status);
	free(f->item_msg);
	free(f->dtoh_dst);
	free(f->dtoh_len);
	free(f->error);
	free(f);
}

/* Makes c's eventfd readable, if there is one and it is not readable already (one write per clear, so the
 * counter cannot overflow and a busy client does not pay a system call per completion). Holds c->lock. */
static void
notify_locked(cua_client *c)
{
	if (c->efd < 0 || c->efd_armed)
		return;
	uint64_t one = 1;
	/* cannot block (the counter is 0 or 1) nor fail on a valid eventfd */
	if (write(c->efd, &one, sizeof(one)) == (ssize_t)sizeof(one))
		c->efd_armed = true;
}

int
cua_client_fd(cua_client *c)
{
	pthread_mutex_lock(&c->lock);
	if (c->efd < 0 && (c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		cuac_fail(CUA_ENOMEM, "eventfd: %s", strerror(errno));
	int fd = c->efd;
	pthread_mutex_unlock(&c->lock);
	return fd;
}

void
cua_client_fd_clear(cua_client *c)
{
	pthread_mutex_lock(&c->lock);
	if (c->efd >= 0 && c->efd_armed) {
		uint64_t n;
		/* cannot fail: armed means the counter is 1 and only this function reads it */
		if (read(c->efd, &n, sizeof(n)) == (ssize_t)sizeof(n))
			c->efd_armed = false;
	}
	pthread_mutex_unlock(&c->lock);
}

void
cuac_future_item_done(cua_future *f, size_t i, int status, const char *msg, size_t msglen)
{
	f->item_status[i] = status;
	if (status != CUA_OK) {
		f->item_msg[i] = strndup(msg, msglen);
		if (f->status == CUA_OK) {
			f->status = status;
			f->error = strndup(msg, msglen);
		}
	}
	if (--f->remaining == 0) {
		f->done = true;
		if (f->abandoned)
			future_destroy(f);
		else
			notify_locked(f->c);
	}
}

int
cua_future_poll(cua_future *f)
{
	pthread_mutex_lock(&f->c->lock);
	int d = f->done;
	pthread_mutex_unlock(&f->c->lock);
	return d;
}

int
cua_future_wait(cua_future *f, int timeout_ms)
{
	cua_client *c = f->c;
	struct timespec dl = cua_deadline_ts(timeout_ms < 0 ? 0 : (uint64_t)timeout_ms); /* c->cond: default clock */
	int st;

	pthread_mutex_lock(&c->lock);
	while (!f->done) {
		/* launches still queued in the client must go out for this one to complete: now, not when a reply
		 * (perhaps of a long kernel on another stream) frees the coalescing window */
		cuac_flush_now_locked(c);
		int rc = timeout_ms < 0 ? pthread_cond_wait(&c->cond, &c->lock)
					: pthread_cond_timedwait(&c->cond, &c->lock, &dl);
		if (rc == ETIMEDOUT && !f->done) {
			pthread_mutex_unlock(&c->lock);
			return cuac_fail(CUA_ETIMEOUT, "the work did not complete within %d ms", timeout_ms);
		}
	}
	st = f->status;
	pthread_mutex_unlock(&c->lock);
	if (st != CUA_OK)
		cuac_fail(st, "%s", f->error ? f->error : "");
	return st;
}

int
cua_future_status(cua_future *f)
{
	return f->status;
}

const char *
cua_future_error(cua_future *f)
{
	return f->error ? f->error : "";
}

size_t
cua_future_items(cua_future *f)
{
	return f->nitems;
}

int
cua_future_item(cua_future *f, size_t i, const char **message)
{
	if (i >= f->nitems)
		return CUA_EBAD_ARGUMENT;
	if (message)
		*message = f->item_msg[i] ? f->item_msg[i] : "";
	return f->item_status[i];
}

void
cua_future_free(cua_future *f)
{
	if (f == NULL)
		return;
	cua_client *c = f->c;
	pthread_mutex_lock(&c->lock);
	if (f->done)
		future_destroy(f);
	else
		f->abandoned = true;
	pthread_mutex_unlock(&c->lock);
}
