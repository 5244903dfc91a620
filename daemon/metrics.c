/*
 * metrics.c — the Prometheus endpoint on NNG's HTTP server (see metrics.h).
 */
#include "config.h"

#include "cua_log.h"
#include "metrics.h"
#include "stats.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

/* Completes a handler's aio with status, content type and body (copied). */
static void
respond(nng_aio *aio, uint16_t status, const char *type, const char *body, size_t len)
{
	nng_http_res *res = NULL;
	int rv = nng_http_res_alloc(&res);
	if (rv == 0)
		rv = nng_http_res_set_status(res, status);
	if (rv == 0)
		rv = nng_http_res_set_header(res, "Content-Type", type);
	if (rv == 0)
		rv = nng_http_res_copy_data(res, body, len);
	if (rv != 0) {
		nng_http_res_free(res);
		nng_aio_finish(aio, rv); /* the server answers 500 and closes the connection */
		return;
	}
	nng_aio_set_output(aio, 0, res); /* the server sends and frees it */
	nng_aio_finish(aio, 0);
}

/* GET /metrics. NNG's thread: takes fe->lock only inside stats_snapshot. */
static void
on_metrics(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct metrics *m = nng_http_handler_get_data(h);
	struct stats_snap snap;
	char *text = NULL;
	size_t len = 0;
	if (stats_snapshot(m->fe, m->fe->cfg.metrics_sessions, &snap) == 0)
		text = stats_format(&snap, &len);
	stats_snap_free(&snap);
	if (text == NULL) {
		respond(aio, NNG_HTTP_STATUS_SERVICE_UNAVAILABLE, "text/plain", "out of memory\n", 14);
		return;
	}
	respond(aio, NNG_HTTP_STATUS_OK, "text/plain; version=0.0.4; charset=utf-8", text, len);
	free(text);
}

/* GET /healthz: 200 "ok", or 503 and why. */
static void
on_health(nng_aio *aio)
{
	nng_http_handler *h = nng_aio_get_input(aio, 1);
	struct metrics *m = nng_http_handler_get_data(h);
	struct stats_snap snap;
	char why[160] = "out of memory";
	bool ok = stats_snapshot(m->fe, false, &snap) == 0 && stats_healthy(&snap, why, sizeof(why) - 1);
	stats_snap_free(&snap);
	strcat(why, "\n");
	respond(aio, ok ? NNG_HTTP_STATUS_OK : NNG_HTTP_STATUS_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", why,
		strlen(why));
}

/* Allocates a GET handler for path with m as its data and adds it to the server. 0 or an NNG error. */
static int
add_handler(struct metrics *m, const char *path, void (*fn)(nng_aio *), nng_http_handler **out)
{
	nng_http_handler *h = NULL;
	int rv = nng_http_handler_alloc(&h, path, fn);
	if (rv == 0)
		rv = nng_http_handler_set_data(h, m, NULL);
	if (rv == 0)
		rv = nng_http_server_add_handler(m->server, h);
	if (rv != 0) {
		nng_http_handler_free(h);
		return rv;
	}
	*out = h; /* the server's now: freed when it is released */
	return 0;
}

/* The port the server is bound to (port 0 in the URL: the one the kernel chose), or -1. */
static int
bound_port(struct metrics *m)
{
	nng_sockaddr sa;
	if (nng_http_server_get_addr(m->server, &sa) == 0 && sa.s_family == NNG_AF_INET)
		return ntohs(sa.s_in.sa_port);
	if (nng_http_server_get_addr(m->server, &sa) == 0 && sa.s_family == NNG_AF_INET6)
		return ntohs(sa.s_in6.sa_port);
	return m->url->u_port ? atoi(m->url->u_port) : -1;
}

int
metrics_start(struct metrics *m, struct fe *fe)
{
	const char *url = fe->cfg.metrics_listen;
	int rv, rc = -1;
	memset(m, 0, sizeof(*m));
	m->fe = fe;
	if ((rv = nng_url_parse(&m->url, url)) != 0 || strcmp(m->url->u_scheme, "http") != 0) {
		log_error("--metrics-listen %s: %s", url, rv ? nng_strerror(rv) : "not an http:// URL");
		goto out;
	}
	if ((rv = nng_http_server_hold(&m->server, m->url)) != 0) {
		log_error("--metrics-listen %s: %s", url, nng_strerror(rv));
		goto out;
	}
	if ((rv = add_handler(m, "/metrics", on_metrics, &m->h_metrics)) != 0 ||
	    (rv = add_handler(m, "/healthz", on_health, &m->h_health)) != 0 ||
	    (rv = nng_http_server_start(m->server)) != 0) {
		log_error("--metrics-listen %s: %s", url, nng_strerror(rv));
		goto out;
	}
	m->port = bound_port(m);
	log_info("metrics: serving http://%s:%d/metrics and /healthz", m->url->u_hostname, m->port);
	rc = 0;
out:
	return rc;
}

void
metrics_stop(struct metrics *m)
{
	if (m->server != NULL) {
		nng_http_server_stop(m->server); /* waits for the handlers running now */
		nng_http_server_release(m->server);
		m->server = NULL;
	}
	if (m->url != NULL) {
		nng_url_free(m->url);
		m->url = NULL;
	}
}
