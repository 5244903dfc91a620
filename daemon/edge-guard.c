/*
 * edge-guard.c — the edge's guard over remote connections and descriptors (see edge.h).
 *
 * NNG 1.5.2 shows the daemon a connection only once its TLS and SP handshakes are done (a pipe); until then a
 * tcp:// or tls+tcp:// peer holds a descriptor that the daemon cannot see through NNG, and the TLS transport
 * never gives up on a handshake. So the guard looks at the process's own descriptors: every tick of the
 * listener watchdog it lists /proc/self/fd, and each connected socket whose local port is one of the remote
 * listeners' and whose peer is no pipe's remote address is a connection still in its handshakes. Those older
 * than --handshake-timeout are closed, the oldest past --handshake-max are closed, and when fewer than
 * --fd-reserve descriptors are left the oldest are closed until there are enough; a new remote pipe is refused
 * (NNG_PIPE_EV_ADD_PRE) while they are short. (Pausing the remote listeners while short, as HAProxy does with
 * shutdown(2) and listen(2) on the listening socket, was tried: NNG 1.5.2's TLS listener did not recover
 * reliably from it.) Local (ipc://) connections are never touched: the reserve is
 * theirs. Closing is shutdown(2), never close(2): the descriptor stays NNG's, its read fails and NNG closes it
 * itself. The socket's inode is checked just before, so that a number NNG closed and reused meanwhile is left
 * alone. A connection that goes away during its handshake without the guard closing it (a TLS handshake that
 * failed, a peer that gave up) is logged with its peer's address, as every closing is — rate-limited.
 */
#include "config.h"

#include "cua_log.h"
#include "edge.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>

#define GUARD_LOG_BURST 10        /* log lines of one kind per window; then a count */
#define GUARD_LOG_WINDOW_MS 10000 /* the rate-limit window */

/* A peer's address as a hash key (network byte order, zero-padded). */
struct guard_addr {
	uint16_t family; /* AF_INET, AF_INET6 */
	uint16_t port;
	uint8_t addr[16];
};

/* A remote pipe: NNG finished its handshakes. */
struct guard_pipe {
	uint32_t pipe;
	struct guard_addr peer;
	UT_hash_handle hh;
};

/* A remote connection seen in /proc/self/fd. */
struct guard_conn {
	ino_t ino;
	int fd;
	int listener; /* index in ed->listeners */
	uint64_t born_ms;
	struct guard_addr peer;
	bool piped;  /* its handshakes are done */
	bool closed; /* the guard shut it down */
	bool seen;   /* in this tick's listing */
	UT_hash_handle hh;
};

/* A temporary set of the pipes' peers, for one tick. */
struct guard_peer {
	struct guard_addr peer;
	UT_hash_handle hh;
};

void
edge_guard_init(struct edge_guard *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->lock, NULL);
	/* opened once: when descriptors run out, the guard must still see them to free some */
	g->fds = opendir("/proc/self/fd");
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		atomic_store(&g->fd_limit, rl.rlim_cur > 0x7fffffff ? 0x7fffffffu : (unsigned)rl.rlim_cur);
}

void
edge_guard_fini(struct edge_guard *g)
{
	struct guard_pipe *p, *pt;
	struct guard_conn *c, *ct;
	pthread_mutex_lock(&g->lock);
	HASH_ITER(hh, g->pipes, p, pt)
	{
		HASH_DEL(g->pipes, p);
		free(p);
	}
	HASH_ITER(hh, g->conns, c, ct)
	{
		HASH_DEL(g->conns, c);
		free(c);
	}
	if (g->fds != NULL)
		closedir(g->fds);
	g->fds = NULL;
	pthread_mutex_unlock(&g->lock);
}

/* sa as a key; false for anything but IPv4 and IPv6. */
static bool
key_of_sockaddr(const struct sockaddr_storage *sa, struct guard_addr *k)
{
	memset(k, 0, sizeof(*k));
	if (sa->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		k->family = AF_INET;
		k->port = in->sin_port;
		memcpy(k->addr, &in->sin_addr, 4);
		return true;
	}
	if (sa->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		k->family = AF_INET6;
		k->port = in6->sin6_port;
		memcpy(k->addr, &in6->sin6_addr, 16);
		return true;
	}
	return false;
}

/* The printable address of k ("a.b.c.d:port", "[v6]:port"): numeric, so nothing in it needs escaping. */
static const char *
addr_str(const struct guard_addr *k, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	inet_ntop(k->family, k->addr, host, sizeof(host));
	snprintf(buf, len, k->family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, (unsigned)ntohs(k->port));
	return buf;
}

void
edge_guard_pipe_added(struct edge *ed, nng_pipe p)
{
	nng_sockaddr sa;
	struct guard_pipe *gp;
	if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0 ||
	    (sa.s_family != NNG_AF_INET && sa.s_family != NNG_AF_INET6) || (gp = calloc(1, sizeof(*gp))) == NULL)
		return; /* ipc, or out of memory: the connection is then counted as in its handshake until it goes */
	gp->pipe = nng_pipe_id(p);
	if (sa.s_family == NNG_AF_INET) {
		gp->peer.family = AF_INET;
		gp->peer.port = sa.s_in.sa_port;
		memcpy(gp->peer.addr, &sa.s_in.sa_addr, 4);
	} else {
		gp->peer.family = AF_INET6;
		gp->peer.port = sa.s_in6.sa_port;
		memcpy(gp->peer.addr, sa.s_in6.sa_addr, 16);
	}
	pthread_mutex_lock(&ed->guard.lock);
	struct guard_pipe *old;
	HASH_FIND(hh, ed->guard.pipes, &gp->pipe, sizeof(gp->pipe), old);
	if (old == NULL)
		HASH_ADD(hh, ed->guard.pipes, pipe, sizeof(gp->pipe), gp);
	pthread_mutex_unlock(&ed->guard.lock);
	if (old != NULL)
		free(gp);
}

void
edge_guard_pipe_removed(struct edge *ed, uint32_t pipe)
{
	struct guard_pipe *gp;
	pthread_mutex_lock(&ed->guard.lock);
	HASH_FIND(hh, ed->guard.pipes, &pipe, sizeof(pipe), gp);
	if (gp != NULL)
		HASH_DEL(ed->guard.pipes, gp);
	pthread_mutex_unlock(&ed->guard.lock);
	free(gp);
}

bool
edge_guard_short(struct edge *ed)
{
	unsigned limit = atomic_load(&ed->guard.fd_limit), open = atomic_load(&ed->guard.fds_open);
	return limit > 0 && open + ed->fe->cfg.fd_reserve >= limit;
}

bool
edge_guard_refuse(struct edge *ed, nng_pipe p)
{
	uint64_t pid;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0 || !edge_guard_short(ed))
		return false; /* local clients are always let in */
	atomic_fetch_add(&ed->guard.refused, 1);
	return true;
}

/* A log line of kind k (0: closed by the guard, 1: gone during its handshake), at most GUARD_LOG_BURST per window
 * and kind; the lines held back are counted in the next one. */
static bool
may_log(struct edge_guard *g, int k, unsigned *held)
{
	uint64_t now = cua_now_ms();
	if (now - g->log_window_ms[k] >= GUARD_LOG_WINDOW_MS) {
		g->log_window_ms[k] = now;
		g->logged[k] = 0;
	}
	*held = 0;
	if (g->logged[k]++ >= GUARD_LOG_BURST) {
		g->held[k]++;
		return false;
	}
	*held = g->held[k];
	g->held[k] = 0;
	return true;
}

/* Shuts conn c down for why, when its descriptor is still the same socket. */
static void
shut(struct edge *ed, struct guard_conn *c, const char *why)
{
	struct stat st;
	char peer[80];
	unsigned held;
	if (fstat(c->fd, &st) != 0 || st.st_ino != c->ino || !S_ISSOCK(st.st_mode))
		return; /* NNG closed it meanwhile */
	shutdown(c->fd, SHUT_RDWR);
	c->closed = true;
	ed->guard.closed++;
	if (may_log(&ed->guard, 0, &held))
		log_warn("%s: closed the connection from %s: %s%s", ed->listeners[c->listener].url,
			 addr_str(&c->peer, peer, sizeof(peer)), why,
			 held ? " (and earlier ones not logged: rate-limited)" : "");
}

/* Which remote listener sa (a socket's local address) belongs to, or -1. */
static int
listener_of(struct edge *ed, const struct sockaddr_storage *sa)
{
	struct guard_addr k;
	if (!key_of_sockaddr(sa, &k))
		return -1;
	for (int i = 0; i < ed->nlisteners; i++)
		if (ed->listeners[i].remote_port != 0 && ed->listeners[i].remote_port == k.port)
			return i;
	return -1;
}

/* Compares two connections by age, oldest first. */
static int
by_age(const void *a, const void *b)
{
	const struct guard_conn *x = *(struct guard_conn *const *)a, *y = *(struct guard_conn *const *)b;
	return x->born_ms < y->born_ms ? -1 : x->born_ms > y->born_ms;
}

void
edge_guard_tick(struct edge *ed)
{
	struct edge_guard *g = &ed->guard;
	const struct config *cfg = &ed->fe->cfg;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		atomic_store(&g->fd_limit, rl.rlim_cur > 0x7fffffff ? 0x7fffffffu : (unsigned)rl.rlim_cur);
	bool remote = false;
	for (int i = 0; i < ed->nlisteners; i++)
		remote |= ed->listeners[i].remote_port != 0;
	DIR *d = g->fds;
	if (d == NULL && (d = g->fds = opendir("/proc/self/fd")) == NULL)
		return; /* out of descriptors at start: the next tick */
	rewinddir(d);   /* /proc lists the descriptors as they are now */
	uint64_t now = cua_now_ms();
	unsigned open = 0;
	struct dirent *e;
	pthread_mutex_lock(&g->lock);
	/* the peers of the pipes, as a set */
	struct guard_peer *peers = NULL, *gpe, *gpt;
	struct guard_pipe *gp, *gpn;
	HASH_ITER(hh, g->pipes, gp, gpn)
	{
		HASH_FIND(hh, peers, &gp->peer, sizeof(gp->peer), gpe);
		if (gpe == NULL && (gpe = calloc(1, sizeof(*gpe))) != NULL) {
			gpe->peer = gp->peer;
			HASH_ADD(hh, peers, peer, sizeof(gpe->peer), gpe);
		}
	}
	while ((e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end != '\0' || e->d_name[0] == '.')
			continue;
		open++;
		struct stat st;
		struct sockaddr_storage me, them;
		socklen_t ml = sizeof(me), tl = sizeof(them);
		int li;
		if (!remote || fd == dirfd(d) || fstat((int)fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
		    getsockname((int)fd, (struct sockaddr *)&me, &ml) != 0 || (li = listener_of(ed, &me)) < 0)
			continue;
		if (getpeername((int)fd, (struct sockaddr *)&them, &tl) != 0)
			continue; /* the listening socket itself */
		struct guard_conn *c;
		HASH_FIND(hh, g->conns, &st.st_ino, sizeof(st.st_ino), c);
		if (c == NULL) {
			if ((c = calloc(1, sizeof(*c))) == NULL)
				continue;
			c->ino = st.st_ino;
			c->born_ms = now;
			c->listener = li;
			key_of_sockaddr(&them, &c->peer);
			HASH_ADD(hh, g->conns, ino, sizeof(c->ino), c);
		}
		c->fd = (int)fd;
		c->seen = true;
		if (!c->piped) {
			HASH_FIND(hh, peers, &c->peer, sizeof(c->peer), gpe);
			c->piped = gpe != NULL;
		}
	}
	atomic_store(&g->fds_open, open);
	/* connections gone, and those still in their handshakes, oldest first */
	struct guard_conn *c, *ct, **hs = NULL;
	unsigned nhs = 0, cap = 0;
	HASH_ITER(hh, g->conns, c, ct)
	{
		char peer[80];
		unsigned held;
		if (!c->seen) {
			if (!c->piped && !c->closed && may_log(g, 1, &held))
				log_info("%s: the connection from %s closed during its handshake (a failed TLS "
					 "handshake, "
					 "or a peer that gave up)%s",
					 ed->listeners[c->listener].url, addr_str(&c->peer, peer, sizeof(peer)),
					 held ? " (and earlier ones not logged: rate-limited)" : "");
			HASH_DEL(g->conns, c);
			free(c);
			continue;
		}
		c->seen = false;
		if (c->piped || c->closed)
			continue;
		if (nhs == cap) {
			struct guard_conn **grown = realloc(hs, (cap = cap ? 2 * cap : 64) * sizeof(*hs));
			if (grown == NULL)
				break;
			hs = grown;
		}
		hs[nhs++] = c;
	}
	HASH_ITER(hh, peers, gpe, gpt)
	{
		HASH_DEL(peers, gpe);
		free(gpe);
	}
	if (nhs > 1) /* qsort's array may not be NULL, even for 0 elements */
		qsort(hs, nhs, sizeof(*hs), by_age);
	unsigned limit = atomic_load(&g->fd_limit), freed = 0;
	char why[160];
	for (unsigned i = 0; i < nhs; i++) {
		c = hs[i];
		if (now - c->born_ms >= (uint64_t)cfg->handshake_timeout * 1000u) {
			snprintf(why, sizeof(why), "its handshake was not done within %u s (--handshake-timeout)",
				 cfg->handshake_timeout);
		} else if (nhs - i > cfg->handshake_max) {
			snprintf(why, sizeof(why), "%u connections in their handshakes (--handshake-max %u)", nhs - i,
				 cfg->handshake_max);
		} else if (limit > 0 && open - freed + cfg->fd_reserve >= limit) {
			snprintf(why, sizeof(why),
				 "%u of %u descriptors in use, %u kept for local clients (--fd-reserve)", open - freed,
				 limit, cfg->fd_reserve);
		} else {
			continue;
		}
		shut(ed, c, why);
		freed += c->closed;
	}
	g->handshaking = nhs - freed;
	pthread_mutex_unlock(&g->lock);
	free(hs);
}
