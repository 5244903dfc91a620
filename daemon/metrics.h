/*
 * metrics.h — the Prometheus endpoint (--metrics-listen http://HOST:PORT, off by default).
 *
 * Paths, matched byte for byte (no percent-decoding: `/metrics%00.txt` and `/metrics/x` are 404; a query string
 * is ignored), GET or HEAD:
 *   /metrics  text format 0.0.4 (stats.h's snapshot, formatted). Aggregate series for every scraper; the
 *             per-tenant and per-session series (they say who uses the GPU, and how much) only to an operator:
 *             a scrape with `Authorization: Bearer TOKEN`, TOKEN being --metrics-token-file's (what Prometheus
 *             sends with `authorization: {credentials_file: …}`). A wrong or unexpected token: 401.
 *   /livez    200 "ok" while the process answers and its core is not stuck (the handler takes fe->lock, what
 *             every request needs); for a liveness probe: a drained device or a restarting worker does not fail
 *             it.
 *   /readyz   200 "ok" while serving with at least one device ready and not drained, else 503 and why; for a
 *             readiness probe or a load balancer.
 *   /healthz  the same as /readyz (its meaning before /livez and /readyz existed; kept for old probes).
 *
 * The server: NNG's stream listener (tcp) with a bounded pool of connections, one request and one response
 * each (`Connection: close`). NNG 1.5.2's own HTTP server bounds neither the number of connections nor the time
 * a request head may take (its accept loop reads every connection with no timeout), so 1100 half-sent requests
 * held 1100 descriptors of the daemon. Here: METRICS_MAX_CONNS at once, METRICS_MAX_PER_PEER of them from one
 * address (a scraper from another address is still served while one address floods), the request head within
 * METRICS_HEAD_MS of the accept and METRICS_HEAD_MAX bytes, the response sent within METRICS_SEND_MS;
 * a connection over a bound is closed at once (counted: cuasyncd_http_connections_refused_total).
 *
 * Threads: the callbacks run on NNG's threads; a handler takes fe->lock once, only to copy the numbers out
 * (stats_snapshot), and formats and sends without it. m->mtx guards the pool's slots.
 */
#ifndef CUAD_METRICS_H
#define CUAD_METRICS_H

#include "daemon.h"

#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

#define METRICS_MAX_CONNS 64   /* connections at once (descriptors the endpoint may hold) */
#define METRICS_MAX_PER_PEER 8 /* of them from one IP address */
#define METRICS_HEAD_MAX 8192  /* bytes of a request head (request line and headers) */
#define METRICS_HEAD_MS 5000   /* for the whole request head, from the accept (not per byte: slow senders too) */
#define METRICS_SEND_MS 10000  /* for the whole response */
#define METRICS_TOKEN_MAX 512  /* bytes of the bearer token */

struct metrics;

/* One connection: a slot of the pool. */
struct metrics_conn {
	struct metrics *m;
	nng_aio *aio;       /* its receive, then its send */
	nng_stream *stream; /* NULL: a free slot (m->mtx) */
	nng_sockaddr peer;
	uint64_t deadline_ms; /* of the step under way */
	bool sending;
	size_t got; /* bytes of head received */
	char *out;  /* the response (malloc'd) */
	size_t outlen, sent;
	char head[METRICS_HEAD_MAX];
};

struct metrics {
	struct fe *fe;
	nng_url *url;
	nng_stream_listener *listener; /* NULL: not serving */
	nng_aio *accept;
	bool backoff; /* the accept aio is sleeping after an accept error (descriptors short) */
	nng_mtx *mtx;
	bool stopping;                     /* m->mtx */
	uint64_t refused;                  /* connections closed at once for a bound (m->mtx) */
	char token[METRICS_TOKEN_MAX + 1]; /* --metrics-token-file's token ("" : none) */
	size_t token_len;
	int port; /* the bound port (the URL's, or the one chosen for port 0) */
	struct metrics_conn conn[METRICS_MAX_CONNS];
};

/* Starts serving fe->cfg.metrics_listen (an http:// URL; port 0 picks a free port, logged with the address),
 * reading fe->cfg.metrics_token_file first when set. Main thread, without fe->lock, after the devices
 * started. 0, or -1 with the reason logged; metrics_stop may be called either way. */
int metrics_start(struct metrics *m, struct fe *fe);
/* Stops the listener, closes every connection and waits for the callbacks to end (so fe may go away
 * afterwards). Main thread, without fe->lock. Idempotent. */
void metrics_stop(struct metrics *m);

#endif
