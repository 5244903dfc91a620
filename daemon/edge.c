/*
 * edge.c — the NNG edge (see edge.h): contexts, pipes, and the reply path.
 */
#include "config.h"

#include "cmd.h"
#include "cua_clock.h"
#include "cua_log.h"
#include "cua_nngmsg.h"
#include "cua_wire.h"
#include "edge.h"
#include "session.h"
#include "shmchan.h"

#include <arpa/inet.h>
#include <nng/protocol/reqrep0/rep.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* An NNG context with its aio: receives a request, later sends its reply. */
struct edge_ctx {
	uint32_t kind; /* 0; a shared-memory channel's reply context says SHMCHAN_CTX_KIND here (shmchan.h) */
	struct edge *ed;
	nng_ctx ctx;
	nng_aio *aio;
	int sending;
	bool counted;  /* the reply being sent counts in its session (request_reply_sent when done) */
	uint32_t pipe; /* the connection of the request it received */
	size_t bytes;  /* the reply's length */
};

static void
ctx_recv(struct edge_ctx *c)
{
	nng_aio_set_timeout(c->aio, NNG_DURATION_INFINITE);
	atomic_fetch_add(&c->ed->nfree, 1);
	nng_ctx_recv(c->ctx, c->aio);
}

/* Sends m; a connection that does not take it within --send-timeout is closed (ctx_cb). */
static void
ctx_send(struct edge_ctx *c, nng_msg *m)
{
	c->sending = 1;
	atomic_fetch_add(&c->ed->sends, 1);
	nng_aio_set_timeout(c->aio, (nng_duration)c->ed->fe->cfg.send_timeout_ms);
	nng_aio_set_msg(c->aio, m);
	nng_ctx_send(c->ctx, c->aio);
}

/* rep as a message, or NULL (out of memory, logged). */
static nng_msg *
encode_msg(const struct reply *rep, size_t *bytes)
{
	nng_msg *m;
	*bytes = 0;
	if (nng_msg_alloc(&m, 0) != 0) {
		log_error("out of memory for a reply; the client will time out");
		return NULL;
	}
	if (cua_wire_pack_reply(cua_nngmsg_out(m), rep->op, rep->status, rep->message, rep->body) != 0) {
		nng_msg_clear(m);
		cua_wire_pack_reply(cua_nngmsg_out(m), rep->op, CUA_EINTERNAL, "cannot encode the reply", NULL);
	}
	*bytes = nng_msg_len(m);
	return m;
}

/* A reply that NNG is to send on a socket, encoded in a frame of its own: tests/lsan.supp names it. NNG 1.5.2's
 * rep protocol hands a reply to a connection that is closing at that moment to the pipe's send aio, which the
 * closing already stopped: the transport refuses it without a callback (nni_aio_begin), and the pipe's
 * teardown never frees it (rep0_pipe_fini). One reply per connection that closes in that window stays
 * allocated; no public symbol lies on that path for nngfix.c to mend. */
static __attribute__((noinline)) nng_msg *
socket_reply_msg(const struct reply *rep, size_t *bytes)
{
	nng_msg *m = encode_msg(rep, bytes);
	__asm__ volatile("" ::: "memory"); /* not a tail call: this frame must stay on the allocation's stack */
	return m;
}

/* edge_ops.encode */
static void *
edge_encode(void *arg, const struct reply *rep, size_t *bytes)
{
	if (((struct edge_ctx *)arg)->kind == SHMCHAN_CTX_KIND) /* copied into the ring, freed by shmchan_send */
		return encode_msg(rep, bytes);
	return socket_reply_msg(rep, bytes);
}

/* edge_ops.send: m on the context it answers (NULL: the context receives again, nothing is sent). */
static size_t
edge_send(void *arg, void *msg, bool counted)
{
	struct edge_ctx *c = arg;
	nng_msg *m = msg;
	if (c->kind == SHMCHAN_CTX_KIND) /* the request came through a shared-memory ring */
		return shmchan_send(arg, msg, counted);
	if (m == NULL) {
		ctx_recv(c);
		return 0;
	}
	c->counted = counted;
	c->bytes = nng_msg_len(m);
	ctx_send(c, m);
	return c->bytes;
}

/* edge_ops.reply: encodes rep and sends it on the context it belongs to. */
static size_t
edge_reply(void *arg, const struct reply *rep)
{
	size_t bytes;
	/* CLOSED is the answer of a session that is closing: on a socket it goes nowhere (the connection goes), and
	 * neither does it through a shared-memory ring, whose client is to see SESSION_LOST when the channel closes
	 * (PROTOCOL.md §10), not a reply that reached it before */
	if (rep->status == CUA_ECLOSED && ((struct edge_ctx *)arg)->kind == SHMCHAN_CTX_KIND)
		return shmchan_send(arg, NULL, false);
	return edge_send(arg, edge_encode(arg, rep, &bytes), rep->counted);
}

/* edge_ops.forget */
static void
edge_forget(void *arg)
{
	if (((struct edge_ctx *)arg)->kind == SHMCHAN_CTX_KIND)
		shmchan_drop(arg); /* the channel is closed by now: nothing is written, the context and its ref go */
}

/* edge_ops.drop */
static void
edge_drop(void *arg)
{
	if (((struct edge_ctx *)arg)->kind == SHMCHAN_CTX_KIND)
		shmchan_drop(arg);
	else
		ctx_recv(arg);
}

static void
edge_msg_free(void *msg)
{
	nng_msg_free(msg);
}

static int64_t
edge_peer_pid(uint32_t pipe)
{
	nng_pipe p = NNG_PIPE_INITIALIZER;
	uint64_t pid;
	p.id = pipe;
	return nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0 ? (int64_t)pid : -1;
}

/* The remote address of a tcp:// or tls+tcp:// pipe as "IP:port" ("[IPv6]:port"); "" when NNG has none. */
static void
peer_addr(nng_pipe p, char *buf, size_t len)
{
	nng_sockaddr sa;
	char ip[INET6_ADDRSTRLEN] = "";
	buf[0] = '\0';
	if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) != 0)
		return;
	if (sa.s_family == NNG_AF_INET && inet_ntop(AF_INET, &sa.s_in.sa_addr, ip, sizeof(ip)) != NULL)
		snprintf(buf, len, "%s:%u", ip, ntohs(sa.s_in.sa_port));
	else if (sa.s_family == NNG_AF_INET6 && inet_ntop(AF_INET6, sa.s_in6.sa_addr, ip, sizeof(ip)) != NULL)
		snprintf(buf, len, "[%s]:%u", ip, ntohs(sa.s_in6.sa_port));
}

/* edge_ops.peer: ipc:// pipes answer the kernel's credentials of the peer (NNG reads SO_PEERCRED, which holds
 * them as of connect()); tls+tcp:// pipes whether the peer's certificate was verified; anything else is tcp. */
static void
edge_peer(uint32_t pipe, struct identity *id)
{
	nng_pipe p = NNG_PIPE_INITIALIZER;
	uint64_t uid, gid, pid;
	bool verified;
	p.id = pipe;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) == 0) {
		id->transport = ID_IPC;
		if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_GID, &gid) == 0) {
			id->has_cred = true;
			id->uid = (uint32_t)uid;
			id->gid = (uint32_t)gid;
		}
		if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0)
			id->pid = (int64_t)pid;
	} else if (nng_pipe_get_bool(p, NNG_OPT_TLS_VERIFIED, &verified) == 0) {
		id->transport = ID_TLS;
		id->cert_verified = verified;
	} else {
		id->transport = ID_TCP;
	}
	if (id->transport != ID_IPC)
		peer_addr(p, id->addr, sizeof(id->addr));
}

static const struct edge_ops nng_edge_ops = {.reply = edge_reply,
					     .encode = edge_encode,
					     .send = edge_send,
					     .drop = edge_drop,
					     .forget = edge_forget,
					     .msg_free = edge_msg_free,
					     .peer_pid = edge_peer_pid,
					     .peer = edge_peer};

static void grow_contexts(struct edge *ed);

/* A reply's send finished (rv). A send that timed out means the peer stopped reading: its connection is
 * closed (this is an aio callback, not a pipe callback: closing a pipe is allowed here), and the core cleans
 * its session up as after a crash (request_pipe_removed, from NNG's pipe event). */
static void
ctx_sent(struct edge_ctx *c, int rv)
{
	struct edge *ed = c->ed;
	c->sending = 0;
	atomic_fetch_sub(&ed->sends, 1);
	if (rv != 0) {
		nng_msg *m = nng_aio_get_msg(c->aio);
		if (m)
			nng_msg_free(m);
		nng_aio_set_msg(c->aio, NULL);
	}
	if (rv == NNG_ETIMEDOUT) {
		nng_pipe p = NNG_PIPE_INITIALIZER;
		p.id = c->pipe;
		if (nng_pipe_close(p) == 0)
			log_warn("pipe %u: a reply waited %u ms for the connection to read it (--send-timeout); "
				 "closing the connection",
				 c->pipe, ed->fe->cfg.send_timeout_ms);
	}
	if (c->counted) {
		c->counted = false;
		request_reply_sent(ed->fe, c->pipe, c->bytes);
	}
	if (rv == NNG_ECLOSED || atomic_load(&ed->stopping))
		return;
	ctx_recv(c);
}

static void
ctx_cb(void *arg)
{
	struct edge_ctx *c = arg;
	struct edge *ed = c->ed;
	int rv = nng_aio_result(c->aio);
	if (c->sending) {
		ctx_sent(c, rv);
		return;
	}
	atomic_fetch_sub(&ed->nfree, 1);
	if (rv != 0) {
		if (rv == NNG_ECLOSED || atomic_load(&ed->stopping))
			return;
		ctx_recv(c);
		return;
	}
	grow_contexts(ed);
	nng_msg *m = nng_aio_get_msg(c->aio);
	nng_pipe p = nng_msg_get_pipe(m);
	c->pipe = nng_pipe_id(p);
	struct incoming in = {m, nng_msg_body(m), nng_msg_len(m), c, c->pipe, edge_pipe_is_operator(ed, p)};
	request_receive(ed->fe, &in); /* takes m */
}

static void
pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct edge *ed = arg;
	/* No NNG calls on the socket in here (it runs inside NNG's pipe handling): closing a session, which
	 * may answer requests, is left to the dispatcher thread. */
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		/* shutting down, or a remote peer while descriptors are short (the reserve is for local clients):
		 * closing is allowed here, the socket never sees the pipe */
		bool probe = edge_listener_is_probe(ed, p);
		if (probe)
			atomic_fetch_add(&ed->probe_pres, 1);
		if (atomic_load(&ed->quiet) || (!probe && edge_guard_refuse(ed, p)))
			nng_pipe_close(p);
	} else if (ev == NNG_PIPE_EV_ADD_POST && edge_listener_is_probe(ed, p)) {
		atomic_fetch_add(&ed->probe_adds, 1); /* the listener watchdog's probe: not a client */
	} else if (ev == NNG_PIPE_EV_ADD_POST) {
		edge_guard_pipe_added(ed, p);
		request_pipe_added(ed->fe, nng_pipe_id(p), edge_pipe_is_operator(ed, p));
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		if (edge_listener_is_probe(ed, p)) /* the pipe is still known to NNG during REM_POST */
			atomic_fetch_add(&ed->probe_rems, 1);
		edge_guard_pipe_removed(ed, nng_pipe_id(p));
		request_pipe_removed(ed->fe, nng_pipe_id(p));
	}
}

/* Opens n more contexts (up to ed->maxctxs); with recv, each starts receiving. Caller holds ed->grow_lock.
 * 0 or -1 (logged). */
static int
open_contexts(struct edge *ed, unsigned n, bool recv)
{
	int rv;
	for (unsigned i = 0; i < n && ed->nctxs < ed->maxctxs; i++) {
		struct edge_ctx *c = calloc(1, sizeof(*c));
		if (c == NULL)
			return -1;
		c->ed = ed;
		if ((rv = nng_aio_alloc(&c->aio, ctx_cb, c)) != 0 || (rv = nng_ctx_open(&c->ctx, ed->sock)) != 0) {
			if (c->aio)
				nng_aio_free(c->aio);
			free(c);
			log_error("cannot open context %u: %s", ed->nctxs, nng_strerror(rv));
			return -1;
		}
		ed->ctxs[ed->nctxs] = c;
		atomic_store(&ed->nctxs_now, ++ed->nctxs);
		if (recv)
			ctx_recv(c);
	}
	return 0;
}

/*
 * Receive capacity grows on demand: when fewer than a quarter of the contexts wait for a message, half as
 * many again are opened, up to --contexts-max. A connection holds at most 2 × --session-pending of them
 * (request.c's do_admit), so with the defaults (8192 / 128) it takes 64 connections that all stop reading to
 * use them up — and each is closed within --send-timeout. Growth is never undone: an idle context costs
 * about a kilobyte. Called from a context's callback (no NNG lock held); one thread grows at a time.
 */
static void
grow_contexts(struct edge *ed)
{
	unsigned n = atomic_load(&ed->nctxs_now);
	if (atomic_load(&ed->nfree) >= n / 4 || n >= ed->maxctxs || atomic_load(&ed->stopping))
		return;
	if (pthread_mutex_trylock(&ed->grow_lock) != 0)
		return; /* another thread is growing them */
	if (!atomic_load(&ed->stopping) && atomic_load(&ed->nfree) < ed->nctxs / 4) {
		unsigned before = ed->nctxs;
		open_contexts(ed, ed->nctxs / 2 > 16 ? ed->nctxs / 2 : 16, true);
		ed->grown += ed->nctxs - before;
		log_info("%u of %u receive contexts were busy: now %u (--contexts-max %u)",
			 before - (unsigned)atomic_load(&ed->nfree), before, ed->nctxs, ed->maxctxs);
	}
	pthread_mutex_unlock(&ed->grow_lock);
}

int
edge_start(struct edge *ed, struct fe *fe)
{
	int rv;
	ed->fe = fe;
	fe->edge = &nng_edge_ops;
	pthread_mutex_init(&ed->wd_lock, NULL);
	cua_cond_init(&ed->wd_cond);
	pthread_mutex_init(&ed->grow_lock, NULL);
	edge_guard_init(&ed->guard);
	ed->maxctxs = fe->cfg.contexts_max > fe->cfg.contexts ? fe->cfg.contexts_max : fe->cfg.contexts;
	if ((ed->ctxs = calloc(ed->maxctxs, sizeof(*ed->ctxs))) == NULL)
		return -1;
	if ((rv = nng_rep0_open(&ed->sock)) != 0) {
		log_error("cannot open the REP socket: %s", nng_strerror(rv));
		return -1;
	}
	nng_socket_set_size(ed->sock, NNG_OPT_RECVMAXSZ, fe->cfg.max_message);
	nng_pipe_notify(ed->sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, ed);
	nng_pipe_notify(ed->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, ed);
	nng_pipe_notify(ed->sock, NNG_PIPE_EV_REM_POST, pipe_cb, ed);
	if (open_contexts(ed, fe->cfg.contexts, false) != 0)
		return -1;
	for (int i = 0; i <= fe->cfg.nlisten; i++) {
		struct edge_listener *el = &ed->listeners[ed->nlisteners];
		el->url = i < fe->cfg.nlisten ? fe->cfg.listen[i] : fe->cfg.operator_url;
		el->operator= i == fe->cfg.nlisten;
		if (el->url == NULL)
			break;
		if (edge_listener_open(ed, el) != 0)
			return -1;
		ed->nlisteners++;
		log_info("listening on %s%s", el->url, el->operator? " (operator)" : "");
	}
	if (edge_watchdog_start(ed) != 0)
		return -1;
	pthread_mutex_lock(&ed->grow_lock);
	for (unsigned i = 0; i < ed->nctxs; i++)
		ctx_recv(ed->ctxs[i]);
	pthread_mutex_unlock(&ed->grow_lock);
	return 0;
}

void
edge_quiesce(struct edge *ed)
{
	atomic_store(&ed->quiet, 1);
	edge_watchdog_stop(ed); /* it would restart a listener whose socket file went */
	for (int i = 0; i < ed->nlisteners; i++)
		if (ed->listeners[i].kind == EL_IPC && unlink(ed->listeners[i].url + 6) == 0)
			log_info("%s removed: no new connections", ed->listeners[i].url);
}

void
edge_flush(struct edge *ed, unsigned timeout_ms)
{
	uint64_t until = cua_now_ms() + timeout_ms;
	while (atomic_load(&ed->sends) > 0 && cua_now_ms() < until) {
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (atomic_load(&ed->sends) > 0)
		log_warn("%u replies not sent after %u ms (their clients do not read); dropped",
			 atomic_load(&ed->sends), timeout_ms);
	/* A completed send was handed to the connection, which writes it at once when the peer's socket has
	 * room; give the last write of each connection a moment to leave before closing. */
	struct timespec ts = {0, 50 * 1000 * 1000};
	nanosleep(&ts, NULL);
}

void
edge_stop(struct edge *ed)
{
	atomic_store(&ed->stopping, 1);
	edge_watchdog_stop(ed);
	pthread_mutex_lock(&ed->grow_lock); /* no context is opened after this */
	pthread_mutex_unlock(&ed->grow_lock);
	nng_close(ed->sock);
	for (unsigned i = 0; i < ed->nctxs; i++)
		nng_aio_stop(ed->ctxs[i]->aio);
}

void
edge_fini(struct edge *ed)
{
	for (unsigned i = 0; i < ed->nctxs; i++) {
		nng_aio_free(ed->ctxs[i]->aio);
		free(ed->ctxs[i]);
	}
	free(ed->ctxs);
	ed->ctxs = NULL;
	ed->nctxs = 0;
	edge_guard_fini(&ed->guard);
	/* Reclaims what NNG still holds, e.g. a listener that the watchdog replaced (its accept loop is dead
	 * and its socket's close cannot reach it). */
	nng_fini();
}
