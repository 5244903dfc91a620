/*
 * transport.c — libcuasync's NNG edge: the REQ socket and its dialer (TLS for tls+ URLs), one request
 * context per exchange, the session's sequence numbers, and synchronous and asynchronous request/reply.
 * The only client file that includes NNG headers.
 */
#include "config.h"

#include "cua_nngmsg.h"
#include "cuac_error.h"
#include "cuac_transport.h"
#include "internal.h"

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cuac_transport {
	nng_socket sock;
	atomic_int timeout_ms; /* of each wait in a synchronous call; cua_set_timeout may change it from any thread */
	uint64_t seq;          /* last sequence number sent; guarded by the client's lock */
	char ipc_path[108];    /* an ipc:// URL's socket path ("": another transport); never changes */
};

/* One asynchronous exchange: its own context, the aio that sends then receives, whom to tell. */
struct exchange {
	nng_ctx ctx;
	bool ctx_open;
	nng_aio *aio;
	bool receiving;
	cuac_done_fn done;
	void *arg;
};

static int
nng_status(int rv)
{
	switch (rv) {
	case NNG_ETIMEDOUT: return CUA_ETIMEOUT;
	case NNG_ECLOSED: return CUA_ECLOSED;
	case NNG_ENOMEM: return CUA_ENOMEM;
	case NNG_EMSGSIZE: return CUA_ETOO_LARGE;
	default: return CUA_ETRANSPORT;
	}
}

/* ------------------------------------------------------------------ the socket */

static const char *
default_url(char *buf, size_t len)
{
	const char *env = getenv("CUASYNC_URL");
	if (env && *env)
		return env;
	/* the system service's socket when there is one (any user may be in its group), else a daemon of one's own */
	if (geteuid() == 0 || access("/run/cuasyncd/cuasyncd.sock", F_OK) == 0) {
		snprintf(buf, len, "ipc:///run/cuasyncd/cuasyncd.sock");
	} else {
		const char *dir = getenv("XDG_RUNTIME_DIR");
		snprintf(buf, len, "ipc://%s/cuasyncd.sock", dir && *dir ? dir : "/tmp");
	}
	return buf;
}

/* A PEM file as a NUL-terminated string (at most 1 MiB), or NULL. The caller frees it. */
static char *
read_pem(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t n = 0;
	if (f == NULL || (buf = malloc(1 << 20)) == NULL)
		goto out;
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
out:
	if (f != NULL)
		fclose(f);
	return buf;
}

/* This client's own certificate for a daemon that asks for one (--tls-ca): $CUASYNC_TLS_CERT, a PEM file
 * with the certificate and its key, or the key apart in $CUASYNC_TLS_KEY. 0 (also when none is set) or an
 * NNG error. */
static int
tls_own_cert(nng_tls_config *cfg)
{
	const char *cert = getenv("CUASYNC_TLS_CERT"), *key = getenv("CUASYNC_TLS_KEY");
	char *cpem = NULL, *kpem = NULL;
	int rv = 0;
	if (cert == NULL || *cert == '\0')
		goto out;
	if (key == NULL || *key == '\0') {
		rv = nng_tls_config_cert_key_file(cfg, cert, NULL);
		goto out;
	}
	if ((cpem = read_pem(cert)) == NULL || (kpem = read_pem(key)) == NULL) {
		rv = NNG_ENOENT;
		goto out;
	}
	rv = nng_tls_config_own_cert(cfg, cpem, kpem, NULL);
out:
	free(cpem);
	if (kpem != NULL)
		explicit_bzero(kpem, strlen(kpem));
	free(kpem);
	return rv;
}

/* The TLS configuration of a tls+ dialer: $CUASYNC_TLS_CA verifies the server (else no verification), the
 * URL's host is the expected server name, and tls_own_cert presents ours. Returns 0 or an NNG error. */
static int
tls_setup(nng_dialer d, const char *url)
{
	const char *ca = getenv("CUASYNC_TLS_CA");
	nng_tls_config *cfg;
	int rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT);
	if (rv != 0)
		return rv;
	char host[256] = "";
	const char *h = strstr(url, "://");
	if (h) {
		h += 3;
		size_t n = strcspn(h, ":/");
		if (n < sizeof(host)) {
			memcpy(host, h, n);
			host[n] = '\0';
		}
	}
	if (ca && *ca) {
		if ((rv = nng_tls_config_ca_file(cfg, ca)) == 0)
			rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED);
	} else {
		rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_NONE);
	}
	if (rv == 0 && host[0])
		rv = nng_tls_config_server_name(cfg, host);
	if (rv == 0)
		rv = tls_own_cert(cfg);
	if (rv == 0)
		rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg);
	nng_tls_config_free(cfg);
	return rv;
}

/*
 * Dials url on sock, synchronously. A listener whose accept queue is full (a burst of connections the daemon has
 * not accepted yet) answers NNG_EAGAIN: that passes, so it is tried again, backing off from 5 ms for about two
 * seconds in all. 0 or an NNG error.
 */
static int
dial(nng_socket sock, const char *url)
{
	int rv;
	nng_duration backoff = 5, waited = 0;
	for (;;) {
		nng_dialer d;
		if ((rv = nng_dialer_create(&d, sock, url)) != 0)
			return rv;
		if ((strncmp(url, "tls+", 4) != 0 || (rv = tls_setup(d, url)) == 0) &&
		    (rv = nng_dialer_start(d, 0)) == 0)
			return 0;
		nng_dialer_close(d);
		if (rv != NNG_EAGAIN || waited >= 2000)
			return rv;
		nng_msleep(backoff);
		waited += backoff;
		backoff = backoff < 200 ? backoff * 2 : 200;
	}
}

int
cuac_transport_open(cua_client *c, const char *url)
{
	char buf[512];
	struct cuac_transport *t = NULL;
	bool sock_open = false;
	int r, rv;

	if (url == NULL)
		url = default_url(buf, sizeof(buf));
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		r = cuac_fail(CUA_ENOMEM, "out of memory");
		goto out;
	}
	atomic_init(&t->timeout_ms, CUAC_DEFAULT_TIMEOUT_MS);
	const char *env = getenv("CUASYNC_TIMEOUT_MS");
	if (env && *env)
		atomic_store(&t->timeout_ms, atoi(env));
	if ((rv = nng_req0_open(&t->sock)) != 0) {
		r = cuac_fail(nng_status(rv), "cannot open a socket: %s", nng_strerror(rv));
		goto out;
	}
	sock_open = true;
	nng_socket_set_ms(t->sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_size(t->sock, NNG_OPT_RECVMAXSZ, CUA_WIRE_MAX_MESSAGE);
	if ((rv = dial(t->sock, url)) != 0) {
		r = cuac_fail(nng_status(rv),
			      "cannot connect to cuasyncd at %s: %s (is the daemon running? set $CUASYNC_URL)", url,
			      nng_strerror(rv));
		goto out;
	}
	if (strncmp(url, "ipc://", 6) == 0 && strlen(url + 6) < sizeof(t->ipc_path))
		memcpy(t->ipc_path, url + 6, strlen(url + 6) + 1);
	c->t = t;
	t = NULL; /* transferred */
	r = 0;
out:
	if (t != NULL && sock_open)
		nng_close(t->sock);
	free(t);
	return r;
}

void
cuac_transport_close(cua_client *c)
{
	if (c->t == NULL)
		return;
	nng_close(c->t->sock);
	free(c->t);
	c->t = NULL;
}

const char *
cuac_transport_ipc_path(const cua_client *c)
{
	return c->t != NULL && c->t->ipc_path[0] != '\0' ? c->t->ipc_path : NULL;
}

int
cuac_transport_timeout_ms(const cua_client *c)
{
	return atomic_load(&c->t->timeout_ms);
}

void
cua_set_timeout(cua_client *c, int timeout_ms)
{
	atomic_store(&c->t->timeout_ms, timeout_ms < 0 ? NNG_DURATION_INFINITE : timeout_ms);
}

/* ------------------------------------------------------------------ contexts and order */

/* A new request context on t's socket, never resending (requests are not idempotent). 0 or an NNG error. */
static int
open_ctx(struct cuac_transport *t, nng_ctx *ctx)
{
	int rv = nng_ctx_open(ctx, t->sock);
	if (rv == 0)
		nng_ctx_set_ms(*ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	return rv;
}

/* Stamps m with the session's next sequence number and sends it (m is the aio's from now on); the daemon
 * then handles requests in the order they were sent, whichever of its contexts receives them first.
 * Caller holds c->lock. */
static void
send_in_order(struct cuac_transport *t, nng_ctx ctx, nng_aio *aio, nng_msg *m)
{
	cua_wire_patch_seq(nng_msg_body(m), nng_msg_len(m), ++t->seq);
	nng_aio_set_msg(aio, m);
	nng_ctx_send(ctx, aio);
}

/* A new message holding the encoded request (seq 0 until sent). 0, CUA_ENOMEM, or the encoder's error. */
static int
encode_request(uint32_t op, const void *body, nng_msg **out)
{
	nng_msg *m = NULL;
	int r;
	*out = NULL;
	if (nng_msg_alloc(&m, 0) != 0)
		return CUA_ENOMEM;
	if ((r = cua_wire_pack_request(cua_nngmsg_out(m), op, 0, body)) != 0) {
		nng_msg_free(m);
		return r;
	}
	*out = m;
	return 0;
}

/* ------------------------------------------------------------------ synchronous exchange */

/* Sends *m on ctx and waits for the reply, which replaces *m. Blocks (up to aio's timeout each way); takes
 * c->lock briefly to stamp an ordered request. On failure *m is the unsent message, or NULL. */
static int
roundtrip(cua_client *c, nng_ctx ctx, nng_aio *aio, nng_msg **m, bool ordered)
{
	int rv;
	if (ordered) {
		pthread_mutex_lock(&c->lock);
		send_in_order(c->t, ctx, aio, *m);
		pthread_mutex_unlock(&c->lock);
	} else {
		nng_aio_set_msg(aio, *m);
		nng_ctx_send(ctx, aio);
	}
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) != 0)
		return cuac_fail(nng_status(rv), "sending to cuasyncd: %s", nng_strerror(rv)); /* *m still ours */
	*m = NULL;                                                                             /* transferred */
	nng_ctx_recv(ctx, aio);
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) != 0)
		return cuac_fail(nng_status(rv), "waiting for cuasyncd: %s", nng_strerror(rv));
	*m = nng_aio_get_msg(aio);
	return 0;
}

int
cuac_rpc(cua_client *c, uint32_t op, const void *body, bool ordered, struct cuac_reply *rep)
{
	nng_ctx ctx;
	bool ctx_open = false;
	nng_aio *aio = NULL;
	nng_msg *m = NULL;
	cua_err e;
	int r, rv;

	memset(rep, 0, sizeof(*rep));
	if ((rv = open_ctx(c->t, &ctx)) != 0) {
		r = cuac_fail(nng_status(rv), "cannot open a request context: %s", nng_strerror(rv));
		goto out;
	}
	ctx_open = true;
	if (nng_aio_alloc(&aio, NULL, NULL) != 0) {
		r = cuac_fail(CUA_ENOMEM, "out of memory");
		goto out;
	}
	if ((r = encode_request(op, body, &m)) != 0) {
		r = r == CUA_ENOMEM ? cuac_fail(r, "out of memory") : cuac_fail(r, "cannot encode the request");
		goto out;
	}
	nng_aio_set_timeout(aio, atomic_load(&c->t->timeout_ms));
	if ((r = roundtrip(c, ctx, aio, &m, ordered)) != 0)
		goto out;
	cua_err_clear(&e);
	if ((r = cua_wire_decode_reply(nng_msg_body(m), nng_msg_len(m), &rep->w, &e)) != 0) {
		r = cuac_fail(r, "undecodable reply from cuasyncd: %s", e.detail);
		goto out;
	}
	if (rep->w.status != CUA_OK) {
		r = cuac_fail((int)rep->w.status, "%.*s", (int)rep->w.message.len, (const char *)rep->w.message.ptr);
		goto out;
	}
	rep->msg = m;
	m = NULL; /* transferred */
	r = 0;
out:
	if (r != 0)
		cua_wire_reply_free(&rep->w);
	if (m)
		nng_msg_free(m);
	if (aio)
		nng_aio_free(aio);
	if (ctx_open)
		nng_ctx_close(ctx);
	return r;
}

void
cuac_reply_done(struct cuac_reply *rep)
{
	cua_wire_reply_free(&rep->w);
	if (rep->msg)
		nng_msg_free(rep->msg);
	rep->msg = NULL;
}

/* ------------------------------------------------------------------ asynchronous exchange */

/* Frees x after partial setup too. Reaps the aio: this may run in the aio's own callback, where
 * nng_aio_free would wait for that callback. */
static void
exchange_free(struct exchange *x)
{
	if (x == NULL)
		return;
	if (x->ctx_open)
		nng_ctx_close(x->ctx);
	if (x->aio)
		nng_aio_reap(x->aio);
	free(x);
}

/* Tells x's owner how the exchange ended: a failed send or receive (rv), or the reply in m (decoded here). */
static void
exchange_end(struct exchange *x, int rv, nng_msg *m)
{
	cua_wire_reply rep;
	cua_err e;
	char why[128];

	memset(&rep, 0, sizeof(rep));
	if (rv != 0) {
		snprintf(why, sizeof(why), "lost the connection to cuasyncd: %s", nng_strerror(rv));
		x->done(x->arg, nng_status(rv), why, NULL);
		return;
	}
	cua_err_clear(&e);
	if (cua_wire_decode_reply(nng_msg_body(m), nng_msg_len(m), &rep, &e) != 0)
		x->done(x->arg, CUA_EPROTOCOL, e.detail, NULL);
	else
		x->done(x->arg, 0, NULL, &rep);
	cua_wire_reply_free(&rep);
}

/* The aio callback, on an NNG thread: after the send, receive; after the receive (or any failure), end. */
static void
exchange_cb(void *arg)
{
	struct exchange *x = arg;
	nng_msg *m = NULL;
	int rv = nng_aio_result(x->aio);

	if (rv == 0 && !x->receiving) {
		x->receiving = true;
		nng_ctx_recv(x->ctx, x->aio);
		return;
	}
	if (rv == 0 || !x->receiving)
		m = nng_aio_get_msg(x->aio); /* the reply, or the message that could not be sent */
	exchange_end(x, rv, m);
	if (m)
		nng_msg_free(m);
	exchange_free(x);
}

int
cuac_send_async(cua_client *c, uint32_t op, const void *body, cuac_done_fn done, void *arg)
{
	struct exchange *x = NULL;
	nng_msg *m = NULL;
	int r = CUA_ENOMEM;

	if ((x = calloc(1, sizeof(*x))) == NULL)
		goto out;
	x->done = done;
	x->arg = arg;
	if (open_ctx(c->t, &x->ctx) != 0)
		goto out;
	x->ctx_open = true;
	if (nng_aio_alloc(&x->aio, exchange_cb, x) != 0)
		goto out;
	if ((r = encode_request(op, body, &m)) != 0)
		goto out;
	send_in_order(c->t, x->ctx, x->aio, m);
	m = NULL; /* transferred */
	x = NULL; /* transferred: exchange_cb frees it */
	r = 0;
out:
	exchange_free(x);
	return r;
}
