/*
 * metrics.h — the Prometheus endpoint (--metrics-listen http://HOST:PORT, off by default): NNG's own HTTP
 * server serving GET /metrics (text format 0.0.4: stats.h's snapshot, formatted) and GET /healthz (200 "ok"
 * while serving with at least one device ready, else 503 and why). Besides the edge, the only part of the
 * daemon that touches NNG. Its handlers run on NNG's threads; each takes fe->lock once, only to copy the
 * numbers out (stats_snapshot), and formats and sends without it.
 */
#ifndef CUAD_METRICS_H
#define CUAD_METRICS_H

#include "daemon.h"

#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

struct metrics {
	struct fe *fe;
	nng_url *url;
	nng_http_server *server;                /* NULL: not serving */
	nng_http_handler *h_metrics, *h_health; /* owned by server once added */
	int port;                               /* the bound port (the URL's, or the one chosen for port 0) */
};

/* Starts serving fe->cfg.metrics_listen (an http:// URL; port 0 picks a free port, logged with the address).
 * Main thread, without fe->lock, after the devices started. 0, or -1 with the reason logged; metrics_stop
 * may be called either way. */
int metrics_start(struct metrics *m, struct fe *fe);
/* Stops the server and waits for its handlers to end (so fe may go away afterwards). Main thread, without
 * fe->lock. Idempotent. */
void metrics_stop(struct metrics *m);

#endif
