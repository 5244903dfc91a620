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

#include <dirent.h>
#include <nng/nng.h>
#include <sys/types.h>

struct edge_listener {
	const char *url;
	nng_listener l;
	int kind;             /* EL_IPC, EL_TCP, EL_OTHER */
	bool operator;        /* the operator endpoint (--operator-url) */
	nng_sockaddr_in tcp;  /* bound address of a tcp listener */
	uint16_t remote_port; /* tcp:// and tls+tcp://: the bound port (network order), for the guard; 0: local */
};
enum { EL_IPC, EL_TCP, EL_OTHER };

struct edge_ctx;
struct guard_pipe;
struct guard_conn;

/* The guard over remote connections and descriptors (edge-guard.c). lock guards pipes, conns and the counts;
 * fd_limit and fds_open are read without it. */
struct edge_guard {
	pthread_mutex_t lock;
	struct guard_pipe *pipes; /* uthash on pipe id: remote pipes and their peers */
	struct guard_conn *conns; /* uthash on socket inode: remote connections seen in /proc/self/fd */
	DIR *fds;                 /* /proc/self/fd, open from the start (listing it then needs no new descriptor) */
	atomic_uint fd_limit;     /* RLIMIT_NOFILE's soft limit, as of the last tick */
	atomic_uint fds_open;     /* descriptors open, as of the last tick */
	atomic_uint refused;      /* remote pipes refused while descriptors were short */
	unsigned handshaking;     /* remote connections in their handshakes, as of the last tick */
	uint64_t closed;          /* connections the guard shut down */
	uint64_t log_window_ms[2];
	unsigned logged[2], held[2];
};

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
	struct edge_guard guard;
	atomic_uint_fast64_t probe_pres; /* probe pipes NNG has made (NNG_PIPE_EV_ADD_PRE) */
	atomic_uint_fast64_t probe_rems; /* probe pipes NNG has finished (NNG_PIPE_EV_REM_POST) */
	uint64_t probe_stuck_since;      /* watchdog: when a probe's pipe was first seen unfinished; 0: none */
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
/* edge-guard.c. Init and fini: main thread (edge_start, edge_fini). pipe_added/removed: NNG's pipe callback
 * (ADD_POST, REM_POST), any pipe (ipc ones are ignored). refuse: ADD_PRE, true when p is a remote pipe and
 * descriptors are short (the caller closes it). short: fewer than --fd-reserve descriptors left as of the last
 * tick. tick: the watchdog thread, every LISTENER_PROBE_MS. */
void edge_guard_init(struct edge_guard *g);
void edge_guard_fini(struct edge_guard *g);
void edge_guard_pipe_added(struct edge *ed, nng_pipe p);
void edge_guard_pipe_removed(struct edge *ed, uint32_t pipe);
bool edge_guard_refuse(struct edge *ed, nng_pipe p);
bool edge_guard_short(struct edge *ed);
void edge_guard_tick(struct edge *ed);
void edge_watchdog_stop(struct edge *ed);

#endif
