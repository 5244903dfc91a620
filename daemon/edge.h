/*
 * edge.h — the NNG edge of cuasyncd: the only part of the daemon that touches NNG but for metrics.c's HTTP
 * server (and, through the wire codec, msgpack). One REP socket with many contexts, each with its own aio: a
 * context receives a request, hands its bytes to the core (request_receive), and later sends the reply the core
 * gives it back through struct edge_ops. Listeners, their TLS configuration and their watchdog live here too
 * (edge-listen.c).
 */
#ifndef CUAD_EDGE_H
#define CUAD_EDGE_H

#include "daemon.h"

#include <nng/nng.h>

struct edge_listener {
	const char *url;
	nng_listener l;
	int kind;            /* EL_IPC, EL_TCP, EL_OTHER */
	bool operator;       /* the operator endpoint (--operator-url) */
	nng_sockaddr_in tcp; /* bound address of a tcp listener */
};
enum { EL_IPC, EL_TCP, EL_OTHER };

struct edge_ctx;

struct edge {
	struct fe *fe;
	nng_socket sock;
	struct edge_ctx **ctxs; /* maxctxs slots, nctxs of them open (growing on demand: edge.c) */
	unsigned nctxs, maxctxs;
	atomic_uint nctxs_now; /* nctxs, for readers without grow_lock */
	atomic_uint nfree;     /* contexts waiting for a message */
	uint64_t grown;        /* contexts opened on demand */
	pthread_mutex_t grow_lock;
	struct edge_listener listeners[CUAD_MAX_LISTEN + 1]; /* the clients', then the operator's */
	int nlisteners;
	uint64_t listener_restarts;
	pthread_t watchdog;
	bool watchdog_started;
	pthread_mutex_t wd_lock;
	pthread_cond_t wd_cond;
	atomic_ushort probe_port;
	atomic_uint_fast64_t probe_adds; /* probe pipes the socket has seen */
	atomic_int stopping;
	atomic_int quiet;  /* edge_quiesce: new connections are refused */
	atomic_uint sends; /* replies handed to NNG whose send has not completed */
};

/* Opens the socket, its contexts and the listeners of fe->cfg, and starts receiving. Sets fe->edge.
 * Main thread. 0 or -1 (logged). */
int edge_start(struct edge *ed, struct fe *fe);
/* Stops receiving: closes the socket and waits for the contexts' callbacks to finish. After it, nothing
 * calls into the core from NNG. Main thread, without fe->lock. */
void edge_stop(struct edge *ed);
/* Graceful shutdown, step one: stops accepting connections while those open keep being served. The
 * watchdog stops, the ipc:// socket files (clients' and operator's) are removed so that nobody can connect,
 * and a connection that still completes its handshake (tcp://) is closed at once. (NNG closes a listener's
 * connections with the listener, so the listeners stay open until edge_stop.) Main thread. */
void edge_quiesce(struct edge *ed);
/* Waits until every reply handed to NNG has been passed to its connection, at most timeout_ms (a client that
 * does not read can hold its replies back), so that edge_stop does not drop answers. Main thread. */
void edge_flush(struct edge *ed, unsigned timeout_ms);

/* Frees the contexts and what NNG still holds (after the core freed its requests). */
void edge_fini(struct edge *ed);

/* edge-listen.c: opens one listener (with TLS for tls+tcp://). 0 or -1 (logged). */
int edge_listener_open(struct edge *ed, struct edge_listener *el);
/* true when p came through the operator endpoint. Any thread. */
bool edge_pipe_is_operator(struct edge *ed, nng_pipe p);
/* true when p is the watchdog's own probe connection, not a client. Any thread. */
bool edge_listener_is_probe(struct edge *ed, nng_pipe p);
/* The watchdog also closes the connections that did not say HELLO in time or that an operator's DISCONNECT
 * named (request_hello_overdue): closing a pipe is not allowed inside NNG's pipe callback, so it is done from
 * this thread. */
int edge_watchdog_start(struct edge *ed);
void edge_watchdog_stop(struct edge *ed);

#endif
