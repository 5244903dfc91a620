/*
 * metrics.c — the Prometheus endpoint on a bounded pool of NNG stream connections (see metrics.h).
 */
#include "config.h"

#include "cua_log.h"
#include "metrics.h"
#include "nngfix.h"
#include "stats.h"

#include <arpa/inet.h>
#include <errno.h>
#include <mbedtls/constant_time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ the token */

/* Reads --metrics-token-file: one line, the token; refused when every user may read it. 0 or -1 (logged). */
static int
load_token(struct metrics *m, const char *path)
{
	struct stat st;
	char line[METRICS_TOKEN_MAX + 2] = "";
	int rc = -1;
	FILE *f = fopen(path, "re");
	if (f == NULL) {
		log_error("--metrics-token-file %s: %s", path, strerror(errno));
		goto out;
	}
	if (fstat(fileno(f), &st) != 0 || (st.st_mode & (S_IROTH | S_IWOTH))) {
		log_error("--metrics-token-file %s: every user of this host may read or change it (mode %04o): "
			  "chmod 0600 (or 0640 with the daemon's group) and start again",
			  path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if (fgets(line, sizeof(line), f) == NULL)
		line[0] = '\0';
	line[strcspn(line, "\r\n")] = '\0';
	m->token_len = strlen(line);
	if (m->token_len == 0 || m->token_len > METRICS_TOKEN_MAX || strpbrk(line, " \t") != NULL) {
		log_error("--metrics-token-file %s: the first line must be the token: 1 to %d bytes, no blanks", path,
			  METRICS_TOKEN_MAX);
		goto out;
	}
	memcpy(m->token, line, m->token_len + 1);
	rc = 0;
out:
	explicit_bzero(line, sizeof(line));
	if (f != NULL)
		fclose(f);
	return rc;
}

/* ------------------------------------------------------------------ the routes */

/* A response: status, its reason phrase, content type, body (malloc'd), and one extra header line or "". */
struct reply {
	int status;
	const char *reason, *type, *extra;
	char *body;
	size_t len;
};

static void
reply_text(struct reply *r, int status, const char *reason, const char *text)
{
	*r = (struct reply){status, reason, "text/plain; charset=utf-8", "", strdup(text), strlen(text)};
	if (r->body == NULL)
		r->len = 0;
}

/* Whether the scraper proved it is an operator: 1 yes, 0 no credentials, -1 wrong ones (answered 401). */
static int
operator_scrape(const struct metrics *m, const char *auth)
{
	if (auth == NULL)
		return 0;
	if (strncasecmp(auth, "Bearer ", 7) != 0 || m->token_len == 0)
		return -1;
	const char *tok = auth + 7;
	size_t n = strlen(tok);
	return n == m->token_len && mbedtls_ct_memcmp(tok, m->token, n) == 0 ? 1 : -1;
}

/* GET /metrics: aggregate series, and per-tenant and per-session ones for an operator. */
static void
on_metrics(struct metrics *m, const char *auth, struct reply *r)
{
	int op = operator_scrape(m, auth);
	if (op < 0) {
		reply_text(r, 401, "Unauthorized",
			   m->token_len ? "wrong bearer token: send the one in --metrics-token-file\n"
					: "this daemon has no --metrics-token-file: scrape without a token (aggregate "
					  "series) or start it with one\n");
		r->extra = "WWW-Authenticate: Bearer realm=\"cuasyncd\"\r\n";
		return;
	}
	struct stats_snap snap;
	char *text = NULL;
	size_t len = 0;
	if (stats_snapshot(m->fe, op > 0 && m->fe->cfg.metrics_sessions, &snap) == 0) {
		if (op == 0)
			stats_snap_aggregate(&snap);
		nng_mtx_lock(m->mtx);
		snap.http_refused = m->refused;
		nng_mtx_unlock(m->mtx);
		text = stats_format(&snap, &len);
	}
	stats_snap_free(&snap);
	if (text == NULL) {
		reply_text(r, 503, "Service Unavailable", "out of memory\n");
		return;
	}
	*r = (struct reply){200, "OK", "text/plain; version=0.0.4; charset=utf-8", "", text, len};
}

/* GET /livez: the core answers (stats_snapshot takes fe->lock, as every request does). */
static void
on_livez(struct metrics *m, const char *auth, struct reply *r)
{
	(void)auth;
	struct stats_snap snap;
	bool ok = stats_snapshot(m->fe, false, &snap) == 0;
	stats_snap_free(&snap);
	if (ok)
		reply_text(r, 200, "OK", "ok\n");
	else
		reply_text(r, 503, "Service Unavailable", "out of memory\n");
}

/* GET /readyz (and /healthz): 200 "ok", or 503 and why. */
static void
on_readyz(struct metrics *m, const char *auth, struct reply *r)
{
	(void)auth;
	struct stats_snap snap;
	char why[160] = "out of memory";
	bool ok = stats_snapshot(m->fe, false, &snap) == 0 && stats_healthy(&snap, why, sizeof(why) - 1);
	stats_snap_free(&snap);
	strcat(why, "\n");
	reply_text(r, ok ? 200 : 503, ok ? "OK" : "Service Unavailable", why);
}

static const struct {
	const char *path;
	void (*fn)(struct metrics *m, const char *auth, struct reply *r);
} routes[] = {
	{"/metrics", on_metrics},
	{"/livez", on_livez},
	{"/readyz", on_readyz},
	{"/healthz", on_readyz},
};

/* ------------------------------------------------------------------ one request */

/* The value of header name in head (its lines after the request line, NUL-terminated, CRLF line ends), in
 * val (NUL-terminated, blanks around it trimmed), or NULL. */
static const char *
header(const char *head, const char *name, char *val, size_t len)
{
	size_t n = strlen(name);
	for (const char *p = strstr(head, "\r\n"); p != NULL && p[2] != '\0'; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2;
		if (strncasecmp(line, name, n) != 0 || line[n] != ':')
			continue;
		const char *v = line + n + 1, *end = strstr(v, "\r\n");
		v += strspn(v, " \t");
		size_t k = (size_t)(end - v);
		while (k > 0 && (v[k - 1] == ' ' || v[k - 1] == '\t'))
			k--;
		if (k >= len)
			return NULL;
		memcpy(val, v, k);
		val[k] = '\0';
		return val;
	}
	return NULL;
}

/* Answers the request head in c->head (complete: it ends with an empty line) into r. The request line is
 * METHOD SP TARGET SP HTTP/1.x; TARGET's path (before any '?') must be a route's, byte for byte. */
static void
route(struct metrics_conn *c, bool *head_only, struct reply *r)
{
	char method[8], target[256], version[16], auth[METRICS_TOKEN_MAX + 16];
	*head_only = false;
	const char *eol = strstr(c->head, "\r\n");
	if (sscanf(c->head, "%7[A-Z] %255[^ \r\n] %15[^ \r\n]", method, target, version) != 3 ||
	    strncmp(version, "HTTP/1.", 7) != 0 ||
	    c->head + strlen(method) + strlen(target) + strlen(version) + 2 != eol) {
		reply_text(r, 400, "Bad Request", "not an HTTP/1.x request line (METHOD PATH HTTP/1.1)\n");
		return;
	}
	*head_only = strcmp(method, "HEAD") == 0;
	size_t plen = strcspn(target, "?");
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (strlen(routes[i].path) != plen || strncmp(target, routes[i].path, plen) != 0)
			continue;
		if (strcmp(method, "GET") != 0 && !*head_only) {
			reply_text(r, 405, "Method Not Allowed", "only GET and HEAD\n");
			r->extra = "Allow: GET, HEAD\r\n";
			return;
		}
		routes[i].fn(c->m, header(c->head, "Authorization", auth, sizeof(auth)), r);
		explicit_bzero(auth, sizeof(auth));
		return;
	}
	reply_text(r, 404, "Not Found", "not found: the paths are /metrics, /livez, /readyz and /healthz\n");
}

/* ------------------------------------------------------------------ the pool */

static uint64_t
now_ms(void)
{
	return (uint64_t)nng_clock();
}

/* Ends c's connection and frees its slot. Its aio has no operation pending (we are in its callback or it is
 * stopped). NNG frees the stream on its reaper (nng_stream_free is safe from a callback). */
static void
conn_end(struct metrics_conn *c)
{
	struct metrics *m = c->m;
	nng_stream *s = c->stream;
	free(c->out);
	c->out = NULL;
	nng_mtx_lock(m->mtx);
	c->stream = NULL;
	nng_mtx_unlock(m->mtx);
	nng_stream_free(s);
}

/* Starts the next step of c: receiving more of the head, or sending more of the response, each bounded by
 * c->deadline_ms. */
static void
conn_next(struct metrics_conn *c)
{
	uint64_t now = now_ms();
	if (now >= c->deadline_ms) {
		conn_end(c);
		return;
	}
	nng_iov iov;
	if (c->sending) {
		iov.iov_buf = c->out + c->sent;
		iov.iov_len = c->outlen - c->sent;
	} else {
		iov.iov_buf = c->head + c->got;
		iov.iov_len = sizeof(c->head) - 1 - c->got;
	}
	nng_aio_set_iov(c->aio, 1, &iov);
	nng_aio_set_timeout(c->aio, (nng_duration)(c->deadline_ms - now));
	if (c->sending)
		cuad_stream_send(c->stream, c->aio);
	else
		cuad_stream_recv(c->stream, c->aio);
}

/* Formats r as c's response and starts sending it (or ends c, out of memory). */
static void
conn_respond(struct metrics_conn *c, const struct reply *r, bool head_only)
{
	FILE *f = open_memstream(&c->out, &c->outlen);
	if (f != NULL) {
		fprintf(f,
			"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\n"
			"Connection: close\r\n%s\r\n",
			r->status, r->reason, r->type, r->len, r->extra);
		if (!head_only && r->body != NULL)
			fwrite(r->body, 1, r->len, f);
	}
	if (f == NULL || fclose(f) != 0) {
		conn_end(c);
		return;
	}
	c->sending = true;
	c->sent = 0;
	c->deadline_ms = now_ms() + METRICS_SEND_MS;
	conn_next(c);
}

static void
conn_cb(void *arg)
{
	struct metrics_conn *c = arg;
	struct metrics *m = c->m;
	int rv = nng_aio_result(c->aio);
	size_t n = nng_aio_count(c->aio);
	nng_mtx_lock(m->mtx);
	bool stopping = m->stopping;
	nng_mtx_unlock(m->mtx);
	if (rv != 0 || stopping) { /* closed by the peer, timed out (bounds), or we are stopping */
		conn_end(c);
		return;
	}
	if (c->sending) {
		c->sent += n;
		if (c->sent < c->outlen)
			conn_next(c);
		else
			conn_end(c);
		return;
	}
	c->got += n;
	c->head[c->got] = '\0';
	struct reply r = {0};
	bool head_only = false;
	if (memchr(c->head, '\0', c->got) != NULL)
		reply_text(&r, 400, "Bad Request", "a NUL byte in the request head\n");
	else if (strstr(c->head, "\r\n\r\n") != NULL)
		route(c, &head_only, &r);
	else if (c->got >= sizeof(c->head) - 1)
		reply_text(&r, 431, "Request Header Fields Too Large", "the request head is over 8192 bytes\n");
	else {
		conn_next(c); /* more of the head, within the same deadline */
		return;
	}
	conn_respond(c, &r, head_only);
	free(r.body);
}

/* Whether a and b are the same IP address (the port aside). */
static bool
same_peer(const nng_sockaddr *a, const nng_sockaddr *b)
{
	if (a->s_family != b->s_family)
		return false;
	if (a->s_family == NNG_AF_INET)
		return a->s_in.sa_addr == b->s_in.sa_addr;
	if (a->s_family == NNG_AF_INET6)
		return memcmp(a->s_in6.sa_addr, b->s_in6.sa_addr, sizeof(a->s_in6.sa_addr)) == 0;
	return true; /* no address known: one peer */
}

/* A slot for a connection from peer, or NULL when a bound is reached. m->mtx held. */
static struct metrics_conn *
take_slot(struct metrics *m, const nng_sockaddr *peer)
{
	struct metrics_conn *free_slot = NULL;
	int same = 0;
	for (int i = 0; i < METRICS_MAX_CONNS; i++) {
		struct metrics_conn *c = &m->conn[i];
		if (c->stream == NULL)
			free_slot = free_slot ? free_slot : c;
		else
			same += same_peer(&c->peer, peer);
	}
	return same < METRICS_MAX_PER_PEER ? free_slot : NULL;
}

static void
accept_cb(void *arg)
{
	struct metrics *m = arg;
	int rv = m->backoff ? 0 : nng_aio_result(m->accept);
	nng_mtx_lock(m->mtx);
	bool stopping = m->stopping;
	nng_mtx_unlock(m->mtx);
	if (m->backoff) { /* slept: accept again */
		m->backoff = false;
		if (!stopping)
			nng_stream_listener_accept(m->listener, m->accept);
		return;
	}
	if (rv != 0) {
		if (stopping || rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		/* out of descriptors or memory: try again shortly rather than spinning */
		log_debug("metrics: accept: %s", nng_strerror(rv));
		m->backoff = true;
		nng_sleep_aio(100, m->accept);
		return;
	}
	nng_stream *s = nng_aio_get_output(m->accept, 0);
	nng_sockaddr peer = {.s_family = NNG_AF_UNSPEC};
	nng_stream_get_addr(s, NNG_OPT_REMADDR, &peer);
	nng_mtx_lock(m->mtx);
	struct metrics_conn *c = stopping ? NULL : take_slot(m, &peer);
	if (c != NULL) {
		c->stream = s;
		c->peer = peer;
	} else {
		m->refused++;
	}
	nng_mtx_unlock(m->mtx);
	if (c == NULL) {
		nng_stream_free(s); /* over a bound: closed at once, holding nothing */
	} else {
		c->sending = false;
		c->got = 0;
		c->deadline_ms = now_ms() + METRICS_HEAD_MS;
		conn_next(c);
	}
	if (!stopping)
		nng_stream_listener_accept(m->listener, m->accept);
}

/* ------------------------------------------------------------------ start, stop */

int
metrics_start(struct metrics *m, struct fe *fe)
{
	const char *url = fe->cfg.metrics_listen;
	char tcp[300];
	int rv = 0, rc = -1;
	memset(m, 0, sizeof(*m));
	m->fe = fe;
	if ((rv = nng_url_parse(&m->url, url)) != 0 || strcmp(m->url->u_scheme, "http") != 0 ||
	    (strcmp(m->url->u_path, "") != 0 && strcmp(m->url->u_path, "/") != 0)) {
		log_error("--metrics-listen %s: %s", url, rv ? nng_strerror(rv) : "not an http://HOST:PORT URL");
		goto out;
	}
	if (fe->cfg.metrics_token_file != NULL && load_token(m, fe->cfg.metrics_token_file) != 0)
		goto out;
	/* the same address as a tcp:// stream listener's (an IPv6 literal back in its brackets) */
	snprintf(tcp, sizeof(tcp), strchr(m->url->u_hostname, ':') ? "tcp://[%s]:%s" : "tcp://%s:%s",
		 m->url->u_hostname, m->url->u_port);
	if ((rv = nng_mtx_alloc(&m->mtx)) != 0 || (rv = nng_aio_alloc(&m->accept, accept_cb, m)) != 0)
		goto fail;
	for (int i = 0; i < METRICS_MAX_CONNS; i++) {
		m->conn[i].m = m;
		if ((rv = nng_aio_alloc(&m->conn[i].aio, conn_cb, &m->conn[i])) != 0)
			goto fail;
	}
	if ((rv = nng_stream_listener_alloc(&m->listener, tcp)) != 0 ||
	    (rv = nng_stream_listener_listen(m->listener)) != 0)
		goto fail;
	nng_sockaddr sa;
	m->port = atoi(m->url->u_port);
	if (nng_stream_listener_get_addr(m->listener, NNG_OPT_LOCADDR, &sa) == 0)
		m->port = sa.s_family == NNG_AF_INET6 ? ntohs(sa.s_in6.sa_port) : ntohs(sa.s_in.sa_port);
	nng_stream_listener_accept(m->listener, m->accept);
	log_info("metrics: serving http://%s:%d/metrics, /livez and /readyz (%s)", m->url->u_hostname, m->port,
		 m->token_len ? "per-tenant and per-session series to scrapes with the --metrics-token-file token"
			      : "aggregate series only: no --metrics-token-file");
	rc = 0;
	goto out;
fail:
	log_error("--metrics-listen %s: %s", url, nng_strerror(rv));
out:
	return rc;
}

void
metrics_stop(struct metrics *m)
{
	if (m->mtx != NULL) {
		nng_mtx_lock(m->mtx);
		m->stopping = true;
		nng_mtx_unlock(m->mtx);
	}
	if (m->listener != NULL)
		nng_stream_listener_close(m->listener);
	if (m->accept != NULL) {
		nng_aio_stop(m->accept); /* its callback, if running, ends without accepting again */
		nng_aio_free(m->accept);
		m->accept = NULL;
	}
	for (int i = 0; i < METRICS_MAX_CONNS; i++) {
		struct metrics_conn *c = &m->conn[i];
		if (c->aio == NULL)
			continue;
		nng_aio_stop(c->aio); /* a pending step completes (ECANCELED): its callback ends the connection */
		if (c->stream != NULL)
			conn_end(c);
		nng_aio_free(c->aio);
		c->aio = NULL;
	}
	if (m->listener != NULL) {
		nng_stream_listener_free(m->listener);
		m->listener = NULL;
	}
	if (m->mtx != NULL) {
		nng_mtx_free(m->mtx);
		m->mtx = NULL;
	}
	if (m->url != NULL) {
		nng_url_free(m->url);
		m->url = NULL;
	}
	explicit_bzero(m->token, sizeof(m->token));
}
