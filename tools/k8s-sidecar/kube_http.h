/*
 * kube_http.h — one HTTP/1.0 request to the Kubernetes API server or a kubelet, over NNG's HTTP client (TLS
 * through nng_tls_config), with a bounded response body.
 *
 * Why HTTP/1.0: NNG 1.5's client reads a chunked body without a limit (nng_http_conn_transact), and a server
 * that answers an HTTP/1.0 request may not chunk (Go's net/http, the API server's and the kubelet's, does not),
 * so the body is either Content-Length bytes, checked against the limit before anything is read, or the bytes
 * up to the close, counted as they come. Every response is hostile: a body over the limit, a chunked one or
 * a slow one (every step has a share of one deadline) is an error, never a crash or an unbounded buffer.
 */
#ifndef KUBE_HTTP_H
#define KUBE_HTTP_H

#include <stddef.h>

struct kube_tls {
	const char *ca_file; /* PEM bundle the server's certificate must chain to; NULL: the system's is not read */
	int insecure;        /* 1: no verification (a kubelet's self-signed certificate, tests); logged by callers */
};

struct kube_resp {
	int status;    /* HTTP status, 0 when none arrived */
	char *body;    /* NUL-terminated (the NUL not counted in len); free() it; NULL when status is 0 */
	size_t len;    /* bytes of body */
	char why[256]; /* when kube_http returns -1: what went wrong, for the log */
};

/*
 * method url (http:// or https://) with Authorization: Bearer token when token is non-NULL and not empty, and
 * body (ctype its Content-Type) when body is non-NULL. Reads at most max_body bytes of response body; the
 * whole exchange ends within timeout_ms. Returns 0 with r->status and r->body set (any status), or -1 with
 * r->why (no connection, TLS failure, malformed or over-long head, chunked or over-long body, timeout).
 */
int kube_http(const char *method, const char *url, const struct kube_tls *tls, const char *token, const char *ctype,
	      const char *body, size_t max_body, int timeout_ms, struct kube_resp *r);
void kube_resp_free(struct kube_resp *r);

#endif
