/*
 * client.c — the client handle: connecting (socket, HELLO, the device table) and disconnecting (waiting for
 * every launch to be answered first). The top of libcuasync: no client file calls it.
 */
#include "config.h"

#include "cua_clock.h"
#include "cuac_builder.h"
#include "cuac_error.h"
#include "cuac_flight.h"
#include "cuac_transport.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A client with nothing connected; NULL when out of memory. */
static cua_client *
client_new(void)
{
	cua_client *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	cua_cond_init(&c->cond);
	TAILQ_INIT(&c->queue);
	LIST_INIT(&c->layouts);
	LIST_INIT(&c->hostbufs);
	c->efd = -1;
	c->fdc_fd = -1;
	pthread_mutex_init(&c->fdc_lock, NULL);
	pthread_mutex_init(&c->stage_lock, NULL);
	const char *def = getenv("CUASYNC_DEFAULT_STREAM"); /* "ordered": runtime-API ports get their ordering */
	atomic_init(&c->default_stream, def && strcmp(def, "ordered") == 0 ? CUA_STREAM_ORDERED.id : 0);
	return c;
}

/* Frees c after any part of cua_connect: closes the socket first (the daemon then releases the session's
 * host buffers), then what the client kept. Nothing may be queued or in flight. */
static void
client_free(cua_client *c)
{
	if (c == NULL)
		return;
	cuac_transport_close(c);
	cuac_fdchan_close(c);
	cuac_hostbufs_fini(c);
	cuac_layouts_fini(c);
	for (unsigned i = 0; i < CUA_MAX_DEVICES; i++)
		free(c->attrs[i]);
	if (c->efd >= 0)
		close(c->efd);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->fdc_lock);
	pthread_mutex_destroy(&c->stage_lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

int
cua_connect(const char *url, cua_client **out)
{
	cua_client *c = NULL;
	int r;

	*out = NULL;
	cuac_error_clear();
	if ((c = client_new()) == NULL) {
		r = cuac_fail(CUA_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = cuac_transport_open(c, url)) != 0 || (r = cuac_hello(c)) != 0 || (r = cuac_load_devices(c)) != 0)
		goto out;
	*out = c;
	c = NULL; /* transferred */
	r = 0;
out:
	client_free(c);
	return r;
}

void
cua_disconnect(cua_client *c)
{
	if (c == NULL)
		return;
	cuac_wait_idle(c, false, NULL, 0);
	client_free(c);
}
