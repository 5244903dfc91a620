/*
 * kube_http.c — see kube_http.h. One connection per request: the sidecar makes a few requests a poll, and a
 * fresh connection re-reads nothing stale (a rotated CA bundle is read again at the next request).
 */
#include "kube_http.h"

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Everything one request holds; released in one place (req_close). */
struct req {
	nng_url *url;
	nng_http_client *client;
	nng_tls_config *tls;
	nng_http_conn *conn;
	nng_http_req *req;
	nng_http_res *res;
	nng_aio *aio;
	nng_time deadline;
};

static int fail(struct kube_resp *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int
fail(struct kube_resp *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	return -1;
}

/* Runs the operation already submitted on q->aio to its end; its time is what is left of the deadline. */
static int
step(struct req *q)
{
	nng_aio_wait(q->aio);
	return nng_aio_result(q->aio);
}

/* Arms q->aio with what is left of the request's deadline (at least 1 ms, so an expired one times out). */
static void
arm(struct req *q)
{
	nng_time now = nng_clock();
	nng_aio_set_timeout(q->aio, q->deadline > now ? (nng_duration)(q->deadline - now) : 1);
}

static int
setup_tls(struct req *q, const struct kube_tls *tls, struct kube_resp *r)
{
	int rv;
	if ((rv = nng_tls_config_alloc(&q->tls, NNG_TLS_MODE_CLIENT)) != 0)
		return fail(r, "TLS: %s", nng_strerror(rv));
	if (tls != NULL && tls->insecure) {
		rv = nng_tls_config_auth_mode(q->tls, NNG_TLS_AUTH_MODE_NONE);
	} else {
		if (tls == NULL || tls->ca_file == NULL)
			return fail(r, "https:// needs a CA file (--ca-file) or --insecure");
		if ((rv = nng_tls_config_ca_file(q->tls, tls->ca_file)) != 0)
			return fail(r, "TLS: CA file %s: %s", tls->ca_file, nng_strerror(rv));
		if ((rv = nng_tls_config_server_name(q->tls, q->url->u_hostname)) == 0)
			rv = nng_tls_config_auth_mode(q->tls, NNG_TLS_AUTH_MODE_REQUIRED);
	}
	if (rv == 0)
		rv = nng_http_client_set_tls(q->client, q->tls);
	return rv == 0 ? 0 : fail(r, "TLS: %s", nng_strerror(rv));
}

/* Reads the body after the head into r->body: Content-Length bytes (refused over max before any is read),
 * else up to the close (refused when it passes max). A chunked body is refused: the request was HTTP/1.0. */
static int
read_body(struct req *q, size_t max, struct kube_resp *r)
{
	const char *te = nng_http_res_get_header(q->res, "Transfer-Encoding");
	const char *cl = nng_http_res_get_header(q->res, "Content-Length");
	if (te != NULL && strcmp(te, "identity") != 0)
		return fail(r, "Transfer-Encoding '%.40s' in the answer to an HTTP/1.0 request", te);
	size_t want = max + 1; /* until the close: one byte more than allowed tells an over-long body */
	if (cl != NULL) {
		char *end;
		unsigned long long n = strtoull(cl, &end, 10);
		if (*cl < '0' || *cl > '9' || *end != '\0')
			return fail(r, "malformed Content-Length '%.40s'", cl);
		if (n > max)
			return fail(r, "response body of %llu bytes, over the limit of %zu (--max-body)", n, max);
		want = (size_t)n;
	}
	if ((r->body = malloc(want + 1)) == NULL)
		return fail(r, "out of memory for a body of %zu bytes", want);
	while (r->len < want) {
		nng_iov iov = {.iov_buf = r->body + r->len, .iov_len = want - r->len};
		nng_aio_set_iov(q->aio, 1, &iov);
		arm(q);
		nng_http_conn_read(q->conn, q->aio);
		int rv = step(q);
		if (rv == NNG_ECLOSED || rv == NNG_ECONNSHUT || rv == NNG_ECONNRESET) {
			if (cl != NULL)
				return fail(r, "connection closed after %zu of %zu body bytes", r->len, want);
			break;
		}
		if (rv != 0)
			return fail(r, "reading the body: %s", nng_strerror(rv));
		r->len += nng_aio_count(q->aio);
	}
	if (r->len > max)
		return fail(r, "response body over the limit of %zu bytes (--max-body)", max);
	r->body[r->len] = '\0';
	return 0;
}

static int
exchange(struct req *q, const char *method, const char *url, const struct kube_tls *tls, const char *token,
	 const char *ctype, const char *body, size_t max_body, struct kube_resp *r)
{
	int rv;
	if ((rv = nng_url_parse(&q->url, url)) != 0)
		return fail(r, "bad URL: %s", nng_strerror(rv));
	bool https = strcmp(q->url->u_scheme, "https") == 0;
	if (!https && strcmp(q->url->u_scheme, "http") != 0)
		return fail(r, "URL scheme '%s': http or https only", q->url->u_scheme);
	if ((rv = nng_http_client_alloc(&q->client, q->url)) != 0 || (rv = nng_aio_alloc(&q->aio, NULL, NULL)) != 0)
		return fail(r, "%s", nng_strerror(rv));
	if (https && setup_tls(q, tls, r) != 0)
		return -1;
	arm(q);
	nng_http_client_connect(q->client, q->aio);
	if ((rv = step(q)) != 0)
		return fail(r, "connecting to %s: %s", q->url->u_host, nng_strerror(rv));
	q->conn = nng_aio_get_output(q->aio, 0);

	char auth[8192];
	if ((rv = nng_http_req_alloc(&q->req, q->url)) != 0 || (rv = nng_http_req_set_method(q->req, method)) != 0 ||
	    (rv = nng_http_req_set_version(q->req, "HTTP/1.0")) != 0 ||
	    (rv = nng_http_req_set_header(q->req, "Host", q->url->u_host)) != 0 ||
	    (rv = nng_http_req_set_header(q->req, "Accept", "application/json")) != 0 ||
	    (rv = nng_http_req_set_header(q->req, "User-Agent", "cuasync-k8s-sidecar")) != 0)
		return fail(r, "building the request: %s", nng_strerror(rv));
	if (token != NULL && *token != '\0') {
		if ((size_t)snprintf(auth, sizeof(auth), "Bearer %s", token) >= sizeof(auth))
			return fail(r, "the token is over %zu bytes", sizeof(auth) - 8);
		rv = nng_http_req_set_header(q->req, "Authorization", auth);
		explicit_bzero(auth, sizeof(auth));
		if (rv != 0)
			return fail(r, "building the request: %s", nng_strerror(rv));
	}
	if (body != NULL && ((rv = nng_http_req_set_header(q->req, "Content-Type", ctype)) != 0 ||
			     (rv = nng_http_req_copy_data(q->req, body, strlen(body))) != 0))
		return fail(r, "building the request: %s", nng_strerror(rv));
	arm(q);
	nng_http_conn_write_req(q->conn, q->req, q->aio);
	if ((rv = step(q)) != 0) /* NNG's TLS handshake is done with the first write */
		return fail(r, "sending the request%s: %s",
			    https ? " (TLS handshake: does its certificate chain to the CA file and name the host?)"
				  : "",
			    nng_strerror(rv));

	if ((rv = nng_http_res_alloc(&q->res)) != 0)
		return fail(r, "%s", nng_strerror(rv));
	arm(q);
	nng_http_conn_read_res(q->conn, q->res, q->aio); /* the head only: the body is ours to bound */
	if ((rv = step(q)) != 0)
		return fail(r, "reading the response head: %s", nng_strerror(rv));
	r->status = nng_http_res_get_status(q->res);
	return read_body(q, max_body, r);
}

int
kube_http(const char *method, const char *url, const struct kube_tls *tls, const char *token, const char *ctype,
	  const char *body, size_t max_body, int timeout_ms, struct kube_resp *r)
{
	struct req q = {.deadline = nng_clock() + (nng_time)timeout_ms};
	*r = (struct kube_resp){0};
	int rc = exchange(&q, method, url, tls, token, ctype, body, max_body, r);
	if (q.conn != NULL)
		nng_http_conn_close(q.conn);
	if (q.res != NULL) /* NNG 1.5's frees do not all take NULL */
		nng_http_res_free(q.res);
	if (q.req != NULL)
		nng_http_req_free(q.req);
	if (q.aio != NULL)
		nng_aio_free(q.aio);
	if (q.client != NULL)
		nng_http_client_free(q.client);
	if (q.tls != NULL)
		nng_tls_config_free(q.tls);
	if (q.url != NULL)
		nng_url_free(q.url);
	if (rc != 0) {
		free(r->body);
		r->body = NULL;
		r->len = 0;
	}
	return rc;
}

void
kube_resp_free(struct kube_resp *r)
{
	free(r->body);
	r->body = NULL;
	r->len = 0;
}
