/*
 * transport.c — libcuasync's NNG edge: the REQ socket and its dialer (TLS for tls+ URLs), one request
 * context per exchange, the session's sequence numbers, and synchronous and asynchronous request/reply.
 * The only client file that includes NNG headers.
 *
 * A session is one NNG pipe (PROTOCOL.md). NNG's dialer re-dials by itself when the pipe goes (a daemon
 * restart, `cuasyncctl disconnect`), and a REQ socket would send the next request on the new pipe, which never
 * said HELLO: the daemon then waits for sequence numbers that never come, and answers NO_SESSION forever. So,
 * once HELLO was answered, the transport is bound to that pipe (cuac_session_bind): a new pipe is closed before
 * the socket may use it (NNG_PIPE_EV_ADD_PRE), and when the bound pipe goes (NNG_PIPE_EV_REM_POST) the session
 * is lost: every exchange in flight is aborted and every later one fails at once with CUA_ESESSION_LOST.
 */
#include "config.h"

#include "cua_clock.h"
#include "cua_nngmsg.h"
#include "cuac_error.h"
#include "cuac_transport.h"
#include "internal.h"

#include <errno.h>
#include <grp.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

/* An aio between the start of its exchange's send and the end of its receive: aborted if the session is lost. */
struct live {
	nng_aio *aio;
	LIST_ENTRY(live) link;
};

struct cuac_transport {
	nng_socket sock;
	nng_dialer dialer;
	atomic_int timeout_ms; /* of each wait in a synchronous call; cua_set_timeout may change it from any thread */
	uint64_t seq;          /* last sequence number sent; guarded by the client's lock */
	char ipc_path[108];    /* an ipc:// URL's socket path ("": another transport); never changes */
	/* plock guards the fields below. It is taken in NNG's pipe callbacks and around every nng_ctx_send and
	 * nng_ctx_recv of an exchange (so that an exchange either sees lost or is in live when the pipe goes), and
	 * is taken before NNG's own locks, never while waiting. Never held with c->lock taken after it. */
	pthread_mutex_t plock;
	uint32_t gone[16]; /* the last pipes that went (REM_POST), round robin: HELLO's may be among them */
	unsigned ngone;
	uint32_t session_pipe; /* the pipe HELLO was answered on, 0 before (any pipe may carry HELLO then) */
	bool lost;             /* session_pipe went: nothing is sent any more */
	unsigned exchanges;    /* asynchronous exchanges whose callback has not finished (it closes their context) */
	pthread_cond_t idle;   /* broadcast when exchanges drops to 0 */
	LIST_HEAD(, live) live;
	struct cuac_shm *shm; /* the shared-memory channel (shmchan.c), set once right after HELLO; NULL: NNG only */
};

/* One asynchronous exchange: its own context, the aio that sends then receives, whom to tell. */
struct exchange {
	nng_ctx ctx;
	bool ctx_open;
	nng_aio *aio;
	bool receiving;
	struct live live;
	struct cuac_transport *t;
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

/* ------------------------------------------------------------------ the session's pipe */

/* NNG pipe events (on NNG threads; they must not wait on the socket). ADD_PRE: a pipe after the bound one never
 * joins the socket, so nothing is ever sent on a pipe that did not say HELLO. REM_POST: when the bound one goes,
 * the session is lost and every exchange in flight ends at once (a request queued on a socket with no pipe would
 * otherwise wait out its timeout); the pipes that went before the binding are remembered for it. */
static void
pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct cuac_transport *t = arg;
	uint32_t id = (uint32_t)nng_pipe_id(p);
	bool reject = false, went = false;
	struct live *l;

	pthread_mutex_lock(&t->plock);
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		reject = t->session_pipe != 0 || t->lost;
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		t->gone[t->ngone++ % (sizeof(t->gone) / sizeof(t->gone[0]))] = id;
		went = t->session_pipe == id; /* lost may be set already (an exchange reset): this again is harmless */
		if (went) {
			t->lost = true;
			cuac_shm_lost(t->shm);
			LIST_FOREACH(l, &t->live, link)
			nng_aio_abort(l->aio, NNG_ECONNRESET);
		}
	}
	pthread_mutex_unlock(&t->plock);
	if (reject)
		nng_pipe_close(p);
	/* Nothing will be sent again: the dialer goes now, before NNG's pipe removal (which runs after REM_POST)
	 * would start its re-dial timer. NNG 1.5.2 draws that back-off as (int)random() % back_off, negative half the
	 * time, so it re-dialed at once whatever RECONNMINT said; each new pipe was refused above, and a dialer left
	 * with such churn at nng_close kept its objects (LeakSanitizer saw them). nng_dialer_close does not wait. */
	if (went)
		nng_dialer_close(t->dialer);
}

int
cuac_session_bind(cua_client *c, const struct cuac_reply *rep)
{
	struct cuac_transport *t = c->t;
	uint32_t id = (uint32_t)nng_pipe_id(nng_msg_get_pipe(rep->msg));
	bool lost;

	pthread_mutex_lock(&t->plock);
	t->session_pipe = id;
	/* it went while the reply was on its way: its REM_POST came already (ADD_POST may still be to come: NNG
	 * runs it after the pipe may carry requests, so a pipe's presence cannot be told by it) */
	for (unsigned i = 0; i < t->ngone && i < sizeof(t->gone) / sizeof(t->gone[0]); i++)
		t->lost |= t->gone[i] == id;
	lost = t->lost;
	pthread_mutex_unlock(&t->plock);
	if (lost) /* its REM_POST found no session pipe yet: the dialer goes here (pipe_event) */
		nng_dialer_close(t->dialer);
	return lost ? cuac_fail(CUA_ESESSION_LOST, "%s", CUAC_SESSION_LOST_WHY) : 0;
}

/* The status of an exchange that ended with NNG error rv: the session is lost when the bound pipe went, or
 * the request on it was reset (its REM_POST may not have come yet): NNG_ECONNRESET when the reply was awaited,
 * NNG_ESTATE when the pipe went between the send and the receive (the context forgot the request). */
static int
exchange_status(struct cuac_transport *t, int rv)
{
	bool lost;
	pthread_mutex_lock(&t->plock);
	if ((rv == NNG_ECONNRESET || rv == NNG_ESTATE) && t->session_pipe != 0)
		t->lost = true;
	lost = t->lost;
	pthread_mutex_unlock(&t->plock);
	return lost ? CUA_ESESSION_LOST : nng_status(rv);
}

/* Starts the send (recv false) or the receive of an exchange on ctx with aio, unless the session is lost
 * (then false: nothing started). Registers aio in t->live on its send; live_end takes it out. */
static bool
live_start(struct cuac_transport *t, struct live *l, nng_ctx ctx, nng_aio *aio, bool recv)
{
	bool ok;
	pthread_mutex_lock(&t->plock);
	ok = !t->lost;
	if (ok && !recv) {
		l->aio = aio;
		LIST_INSERT_HEAD(&t->live, l, link);
	}
	if (ok && recv)
		nng_ctx_recv(ctx, aio);
	else if (ok)
		nng_ctx_send(ctx, aio);
	pthread_mutex_unlock(&t->plock);
	return ok;
}

/* Takes l out of t->live (if live_start put it there). */
static void
live_end(struct cuac_transport *t, struct live *l)
{
	pthread_mutex_lock(&t->plock);
	if (l->aio != NULL)
		LIST_REMOVE(l, link);
	l->aio = NULL;
	pthread_mutex_unlock(&t->plock);
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

/* The system's CA store (Debian's ca-certificates), which verifies a daemon when $CUASYNC_TLS_CA is unset. */
#define SYSTEM_CA_FILE "/etc/ssl/certs/ca-certificates.crt"

/* What a tls+ dialer was given, for the messages of a failed connection. */
struct tls_info {
	char host[256];   /* the server name expected in its certificate: the URL's host */
	const char *ca;   /* the CA file that verifies the server: $CUASYNC_TLS_CA or SYSTEM_CA_FILE */
	bool ca_from_env; /* ca is $CUASYNC_TLS_CA */
	const char *cert; /* this client's certificate ($CUASYNC_TLS_CERT), NULL when none */
};

/* A file the user named in an environment variable is readable, else a status with the last error naming
 * both. */
static int
readable(const char *var, const char *path)
{
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return cuac_fail(CUA_EBAD_ARGUMENT, "$%s %s: %s", var, path, strerror(errno));
	fclose(f);
	return 0;
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
 * with the certificate and its key, or the key apart in $CUASYNC_TLS_KEY. 0 (also when none is set) or a
 * status with the last error naming the file. */
static int
tls_own_cert(nng_tls_config *cfg, struct tls_info *ti)
{
	const char *cert = getenv("CUASYNC_TLS_CERT"), *key = getenv("CUASYNC_TLS_KEY");
	char *cpem = NULL, *kpem = NULL;
	int r = 0, rv = 0;
	if (cert == NULL || *cert == '\0') {
		if (key != NULL && *key != '\0')
			r = cuac_fail(CUA_EBAD_ARGUMENT,
				      "$CUASYNC_TLS_KEY is set but $CUASYNC_TLS_CERT is not: set it to the client "
				      "certificate that goes with the key %s",
				      key);
		goto out;
	}
	ti->cert = cert;
	if ((r = readable("CUASYNC_TLS_CERT", cert)) != 0)
		goto out;
	if (key == NULL || *key == '\0') {
		rv = nng_tls_config_cert_key_file(cfg, cert, NULL);
	} else if ((r = readable("CUASYNC_TLS_KEY", key)) != 0) {
		goto out;
	} else if ((cpem = read_pem(cert)) == NULL || (kpem = read_pem(key)) == NULL) {
		r = cuac_fail(CUA_ENOMEM, "out of memory");
		goto out;
	} else {
		rv = nng_tls_config_own_cert(cfg, cpem, kpem, NULL);
	}
	if (rv != 0)
		r = cuac_fail(CUA_EBAD_ARGUMENT,
			      "$CUASYNC_TLS_CERT %s%s%s: %s: it must hold a PEM certificate and, unless "
			      "$CUASYNC_TLS_KEY names another file, its unencrypted private key",
			      cert, key && *key ? " with $CUASYNC_TLS_KEY " : "", key && *key ? key : "",
			      nng_strerror(rv));
out:
	free(cpem);
	if (kpem != NULL)
		explicit_bzero(kpem, strlen(kpem));
	free(kpem);
	return r;
}

/* The CA that verifies the server: $CUASYNC_TLS_CA, else the system's store; never none (a client that
 * skips verification talks to whoever answers at the address). 0 or a status with the last error set. */
static int
tls_ca(nng_tls_config *cfg, struct tls_info *ti)
{
	const char *env = getenv("CUASYNC_TLS_CA");
	int r, rv;
	ti->ca_from_env = env != NULL && *env != '\0';
	ti->ca = ti->ca_from_env ? env : SYSTEM_CA_FILE;
	if (ti->ca_from_env && (r = readable("CUASYNC_TLS_CA", ti->ca)) != 0)
		return r;
	if (!ti->ca_from_env && access(SYSTEM_CA_FILE, R_OK) != 0)
		return cuac_fail(CUA_EBAD_ARGUMENT,
				 "tls+tcp:// verifies the daemon's certificate, and there is no CA to verify it with: "
				 "set "
				 "$CUASYNC_TLS_CA to the CA file that signed it (the system store " SYSTEM_CA_FILE
				 " is missing: %s)",
				 strerror(errno));
	if ((rv = nng_tls_config_ca_file(cfg, ti->ca)) != 0)
		return cuac_fail(CUA_EBAD_ARGUMENT, "%s%s %s: %s: it must hold PEM CA certificates",
				 ti->ca_from_env ? "$CUASYNC_TLS_CA" : "the system CA store", "", ti->ca,
				 nng_strerror(rv));
	if ((rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED)) != 0)
		return cuac_fail(CUA_ETRANSPORT, "cannot require TLS verification: %s", nng_strerror(rv));
	return 0;
}

/* tls_setup's flags for the probes of a failed handshake (tls_probe): no verification of the server at all, or
 * no check of its name. */
#define TLS_NO_VERIFY 1u
#define TLS_NO_NAME 2u

/* The TLS configuration of a tls+ dialer: tls_ca verifies the server, the URL's host is the expected server
 * name, and tls_own_cert presents ours (flags: 0, but for tls_probe). 0 or a status with the last error set. */
static int
tls_setup(nng_dialer d, const char *url, struct tls_info *ti, unsigned flags)
{
	nng_tls_config *cfg;
	int r, rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT);
	if (rv != 0)
		return cuac_fail(nng_status(rv), "cannot set up TLS: %s", nng_strerror(rv));
	const char *h = strstr(url, "://");
	if (h) {
		h += 3;
		size_t n = strcspn(h, ":/");
		if (n < sizeof(ti->host)) {
			memcpy(ti->host, h, n);
			ti->host[n] = '\0';
		}
	}
	if (flags & TLS_NO_VERIFY)
		r = (rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_NONE)) != 0 ? CUA_ETRANSPORT : 0;
	else
		r = tls_ca(cfg, ti);
	if (r != 0 || (r = tls_own_cert(cfg, ti)) != 0)
		goto out;
	if ((ti->host[0] && !(flags & TLS_NO_NAME) && (rv = nng_tls_config_server_name(cfg, ti->host)) != 0) ||
	    (rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg)) != 0)
		r = cuac_fail(nng_status(rv), "cannot set up TLS: %s", nng_strerror(rv));
out:
	nng_tls_config_free(cfg);
	return r;
}

/* Whether a TLS handshake with url succeeds with flags (TLS_NO_VERIFY, TLS_NO_NAME): after one failed, says
 * which side refused. A probe connection is closed as soon as it is up; it sends nothing. */
static bool
tls_probe(const char *url, unsigned flags)
{
	struct tls_info ti = {"", NULL, false, NULL};
	nng_socket s;
	nng_dialer d;
	bool ok;
	if (nng_req0_open(&s) != 0)
		return false;
	ok = nng_dialer_create(&d, s, url) == 0 && tls_setup(d, url, &ti, flags) == 0 && nng_dialer_start(d, 0) == 0;
	nng_close(s);
	return ok;
}

/* The group that owns the ipc socket at url, for the advice of a refused connection: "" when unknown. */
static void
socket_group(const char *url, char *buf, size_t len)
{
	struct stat st;
	struct group *g;
	buf[0] = '\0';
	if (strncmp(url, "ipc://", 6) == 0 && stat(url + 6, &st) == 0 && (g = getgrgid(st.st_gid)) != NULL)
		snprintf(buf, len, "%s", g->gr_name);
}

/* Sets the last error to what a failed TLS handshake with url (NNG error rv) means, found by probing: with no
 * verification of the daemon it succeeds (then its certificate is the problem: with no check of its name too, the
 * name), or it fails (then the daemon refused us: our certificate, or none). Returns the status. */
static int
tls_fail(const char *url, int rv, const struct tls_info *ti)
{
	const char *ca_hint = ti->ca_from_env ? "$CUASYNC_TLS_CA"
					      : "the system store: set $CUASYNC_TLS_CA to the CA "
						"file that signed it";
	if (tls_probe(url, TLS_NO_VERIFY) && tls_probe(url, TLS_NO_NAME))
		return cuac_fail(CUA_ETRANSPORT,
				 "cannot connect to cuasyncd at %s: the daemon's TLS certificate did not verify: it is "
				 "signed by a CA of %s but does not name %s: the host in the URL must be in its "
				 "subjectAltName (or connect by a name it has)",
				 url, ti->ca, ti->host);
	if (tls_probe(url, TLS_NO_VERIFY))
		return cuac_fail(CUA_ETRANSPORT,
				 "cannot connect to cuasyncd at %s: the daemon's TLS certificate did not verify "
				 "against %s "
				 "(%s): it is signed by another CA, or expired",
				 url, ti->ca, ca_hint);
	if (ti->cert == NULL)
		return cuac_fail(
			CUA_ETRANSPORT,
			"cannot connect to cuasyncd at %s: the TLS handshake failed (%s): the daemon requires a "
			"client certificate (its --tls-ca): set $CUASYNC_TLS_CERT (and $CUASYNC_TLS_KEY) to one "
			"signed by that CA (or it does not speak TLS on that port)",
			url, nng_strerror(rv));
	return cuac_fail(
		CUA_ETRANSPORT,
		"cannot connect to cuasyncd at %s: the TLS handshake failed (%s): the daemon did not accept the "
		"client certificate %s ($CUASYNC_TLS_CERT): it must be signed by the CA of the daemon's --tls-ca",
		url, nng_strerror(rv), ti->cert);
}

/* Sets the last error to what a dial to url that failed with NNG error rv means, and what to do; returns the
 * status. One row per cause: the daemon not running, no access to its socket, a TLS failure, a bad URL. */
static int
dial_fail(const char *url, int rv, const struct tls_info *ti)
{
	bool ipc = strncmp(url, "ipc://", 6) == 0, tls = strncmp(url, "tls+", 4) == 0;
	char grp[64];

	if (ipc && rv == NNG_ECONNREFUSED && access(url + 6, F_OK) != 0 && errno == ENOENT)
		rv = NNG_ENOENT; /* NNG says refused for a missing socket file too */
	switch (rv) {
	case NNG_ENOENT:
		if (ipc)
			return cuac_fail(
				CUA_ETRANSPORT,
				"cannot connect to cuasyncd at %s: there is no socket %s: the daemon is not running "
				"(start it: systemctl start cuasyncd) or listens elsewhere (set $CUASYNC_URL to its "
				"--listen URL)",
				url, url + 6);
		break;
	case NNG_ECONNREFUSED:
		return cuac_fail(
			CUA_ETRANSPORT,
			ipc ? "cannot connect to cuasyncd at %s: nothing listens on that socket: the daemon is not "
			      "running (start it: systemctl start cuasyncd; its log says why it stopped) or set "
			      "$CUASYNC_URL to its --listen URL"
			    : "cannot connect to cuasyncd at %s: connection refused: cuasyncd is not running there "
			      "or does not listen on that port (its --listen)",
			url);
	case NNG_EPERM:
		socket_group(url, grp, sizeof(grp));
		return cuac_fail(
			CUA_ETRANSPORT,
			"cannot connect to cuasyncd at %s: permission denied: this user may not use that socket; "
			"join its group (%s%s: sudo usermod -aG %s $USER, then log in again) or ask its operator",
			url, grp[0] ? "group " : "see ls -l on it, the system service's is cuasync", grp[0] ? grp : "",
			grp[0] ? grp : "cuasync");
	case NNG_EPEERAUTH:
	case NNG_ECRYPTO:
	case NNG_ECONNSHUT:
	case NNG_ECLOSED:
	case NNG_ECONNRESET:
		if (tls)
			return tls_fail(url, rv, ti);
		break;
	case NNG_EADDRINVAL:
	case NNG_ENOTSUP:
		return cuac_fail(CUA_EBAD_ARGUMENT,
				 "cannot connect to cuasyncd at %s: %s: a cuasyncd URL is ipc:///PATH, tcp://HOST:PORT "
				 "or tls+tcp://HOST:PORT ($CUASYNC_URL)",
				 url, nng_strerror(rv));
	default: break;
	}
	return cuac_fail(nng_status(rv),
			 "cannot connect to cuasyncd at %s: %s (check the URL, $CUASYNC_URL, and that %s)", url,
			 nng_strerror(rv),
			 ipc ? "the daemon runs" : "the host is reachable and the daemon listens on that port");
}

/*
 * Dials url on sock, synchronously; *dp is the dialer. A listener whose accept queue is full (a burst of
 * connections the daemon has not accepted yet) answers NNG_EAGAIN: that passes, so it is tried again, backing off
 * from 5 ms for about two seconds in all. 0, or a status with the last error saying why.
 */
static int
dial(nng_socket sock, const char *url, nng_dialer *dp)
{
	struct tls_info ti = {"", NULL, false, NULL};
	int r, rv;
	nng_duration backoff = 5, waited = 0;
	for (;;) {
		nng_dialer d;
		if ((rv = nng_dialer_create(&d, sock, url)) != 0)
			return dial_fail(url, rv, &ti);
		if (strncmp(url, "tls+", 4) == 0 && (r = tls_setup(d, url, &ti, 0)) != 0) {
			nng_dialer_close(d);
			return r;
		}
		if ((rv = nng_dialer_start(d, 0)) == 0) {
			*dp = d;
			return 0;
		}
		nng_dialer_close(d);
		if (rv != NNG_EAGAIN || waited >= 2000)
			return dial_fail(url, rv, &ti);
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
	pthread_mutex_init(&t->plock, NULL);
	cua_cond_init(&t->idle);
	LIST_INIT(&t->live);
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
	if ((rv = nng_pipe_notify(t->sock, NNG_PIPE_EV_ADD_PRE, pipe_event, t)) != 0 ||
	    (rv = nng_pipe_notify(t->sock, NNG_PIPE_EV_REM_POST, pipe_event, t)) != 0) {
		r = cuac_fail(nng_status(rv), "cannot watch the connection: %s", nng_strerror(rv));
		goto out;
	}
	if (strncmp(url, "ipc://", 6) == 0 && strlen(url + 6) < sizeof(t->ipc_path))
		memcpy(t->ipc_path, url + 6, strlen(url + 6) + 1);
	if ((r = dial(t->sock, url, &t->dialer)) != 0)
		goto out;
	c->t = t;
	t = NULL; /* transferred */
	r = 0;
out:
	if (t != NULL && sock_open)
		nng_close(t->sock); /* waits for the pipe callbacks: t may go */
	if (t != NULL) {
		pthread_cond_destroy(&t->idle);
		pthread_mutex_destroy(&t->plock);
	}
	free(t);
	return r;
}

void
cuac_transport_close(cua_client *c)
{
	if (c->t == NULL)
		return;
	/* An exchange's callback tells its owner (who may then come here) before it closes its context, which
	 * must not race with nng_close (NNG 1.5.2 panics on the socket's freed mutex): wait for those tails. Every
	 * exchange was answered or failed by now (the caller waited for its flights), so this is short. */
	pthread_mutex_lock(&c->t->plock); /* pipe_event reads t->shm under it */
	struct cuac_shm *shm = c->t->shm;
	c->t->shm = NULL;
	pthread_mutex_unlock(&c->t->plock);
	cuac_shm_close(shm); /* fails what waits on it (nothing should) */
	pthread_mutex_lock(&c->t->plock);
	while (c->t->exchanges > 0)
		pthread_cond_wait(&c->t->idle, &c->t->plock);
	pthread_mutex_unlock(&c->t->plock);
	nng_close(c->t->sock); /* fails what is in flight and runs the last pipe callbacks: then t may go */
	pthread_cond_destroy(&c->t->idle);
	pthread_mutex_destroy(&c->t->plock);
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

/* Stamps m with the session's next sequence number (ordered) and sends it (m is the aio's from now on, and l
 * live); the daemon then handles requests in the order they were sent, whichever of its contexts receives them
 * first. false, with nothing sent and m still the caller's, when the session is lost. Caller holds c->lock when
 * ordered. */
static bool
send_on(struct cuac_transport *t, struct live *l, nng_ctx ctx, nng_aio *aio, nng_msg *m, bool ordered)
{
	if (ordered)
		cua_wire_patch_seq(nng_msg_body(m), nng_msg_len(m), t->seq + 1);
	nng_aio_set_msg(aio, m);
	if (!live_start(t, l, ctx, aio, false)) {
		nng_aio_set_msg(aio, NULL);
		return false;
	}
	if (ordered)
		t->seq++;
	return true;
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
	struct cuac_transport *t = c->t;
	struct live l = {NULL, {NULL, NULL}};
	bool sent;
	int r = 0, rv;

	if (ordered)
		pthread_mutex_lock(&c->lock);
	sent = send_on(t, &l, ctx, aio, *m, ordered);
	if (ordered)
		pthread_mutex_unlock(&c->lock);
	if (!sent) {
		r = cuac_fail(CUA_ESESSION_LOST, "%s", CUAC_SESSION_LOST_WHY);
		goto out;
	}
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) != 0) { /* *m still ours */
		r = exchange_status(t, rv);
		r = cuac_fail(r, "%s%s", r == CUA_ESESSION_LOST ? CUAC_SESSION_LOST_WHY : "sending to cuasyncd: ",
			      r == CUA_ESESSION_LOST ? "" : nng_strerror(rv));
		goto out;
	}
	*m = NULL; /* transferred */
	if (!live_start(t, &l, ctx, aio, true)) {
		r = cuac_fail(CUA_ESESSION_LOST, "%s", CUAC_SESSION_LOST_WHY);
		goto out;
	}
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)) != 0) {
		r = exchange_status(t, rv);
		r = cuac_fail(r, "%s%s", r == CUA_ESESSION_LOST ? CUAC_SESSION_LOST_WHY : "waiting for cuasyncd: ",
			      r == CUA_ESESSION_LOST ? "" : nng_strerror(rv));
		goto out;
	}
	*m = nng_aio_get_msg(aio);
out:
	live_end(t, &l);
	return r;
}

/* The synchronous exchange through the shared-memory channel: *taken false when the channel did not take it
 * (no channel, no room, too large: the caller sends it over NNG); else as roundtrip, *m replaced by the reply. */
static int
shm_roundtrip(cua_client *c, nng_msg **m, bool *taken)
{
	struct cuac_transport *t = c->t;
	struct cuac_shm_wait w;
	nng_msg *reply;
	memset(&w, 0, sizeof(w));
	pthread_mutex_lock(&c->lock);
	cua_wire_patch_seq(nng_msg_body(*m), nng_msg_len(*m), t->seq + 1);
	*taken = cuac_shm_send(t->shm, nng_msg_body(*m), nng_msg_len(*m), &w);
	if (*taken)
		t->seq++;
	pthread_mutex_unlock(&c->lock);
	if (!*taken)
		return 0;
	if (!cuac_shm_wait_reply(t->shm, &w, atomic_load(&t->timeout_ms)))
		return cuac_fail(CUA_ETIMEOUT, "waiting for cuasyncd: timed out");
	if (w.status != 0)
		return cuac_fail(w.status, "%s", w.why);
	if (nng_msg_alloc(&reply, w.len) != 0) {
		free(w.buf);
		return cuac_fail(CUA_ENOMEM, "out of memory");
	}
	memcpy(nng_msg_body(reply), w.buf, w.len);
	free(w.buf);
	nng_msg_free(*m);
	*m = reply;
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
	bool taken = false;
	if (ordered && c->t->shm != NULL && (r = shm_roundtrip(c, &m, &taken)) != 0)
		goto out;
	if (!taken && (r = roundtrip(c, ctx, aio, &m, ordered)) != 0)
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
	char why[512];

	memset(&rep, 0, sizeof(rep));
	if (rv != 0) {
		int st = exchange_status(x->t, rv);
		if (st == CUA_ESESSION_LOST)
			snprintf(why, sizeof(why), "%s", CUAC_SESSION_LOST_WHY);
		else
			snprintf(why, sizeof(why), "lost the connection to cuasyncd: %s", nng_strerror(rv));
		x->done(x->arg, st, why, NULL);
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
		if (live_start(x->t, &x->live, x->ctx, x->aio, true))
			return;
		rv = NNG_ECONNRESET; /* the session was lost between the send and the receive */
	}
	live_end(x->t, &x->live);
	if (rv == 0 || !x->receiving)
		m = nng_aio_get_msg(x->aio); /* the reply, or the message that could not be sent */
	exchange_end(x, rv, m);
	if (m)
		nng_msg_free(m);
	struct cuac_transport *t = x->t;
	exchange_free(x); /* closes its context: the socket must still be open (cuac_transport_close waits) */
	pthread_mutex_lock(&t->plock);
	if (--t->exchanges == 0)
		pthread_cond_broadcast(&t->idle);
	pthread_mutex_unlock(&t->plock);
}

/* An asynchronous exchange through the shared-memory channel. */
struct shm_exchange {
	struct cuac_shm_wait w; /* first: the channel hands back &w */
	struct cuac_transport *t;
	cuac_done_fn done;
	void *arg;
};

/* cuac_shm_fn: the reply (or failure) of a shm_exchange, on the channel's reader thread. */
static void
shm_exchange_cb(void *arg, int status, const char *why, void *buf, size_t len)
{
	struct shm_exchange *x = arg;
	struct cuac_transport *t = x->t;
	cua_wire_reply rep;
	cua_err e;
	memset(&rep, 0, sizeof(rep));
	cua_err_clear(&e);
	if (status != 0)
		x->done(x->arg, status, why, NULL);
	else if (cua_wire_decode_reply(buf, len, &rep, &e) != 0)
		x->done(x->arg, CUA_EPROTOCOL, e.detail, NULL);
	else
		x->done(x->arg, 0, NULL, &rep);
	cua_wire_reply_free(&rep);
	free(buf);
	free(x);
	pthread_mutex_lock(&t->plock);
	if (--t->exchanges == 0)
		pthread_cond_broadcast(&t->idle);
	pthread_mutex_unlock(&t->plock);
}

/* cuac_send_async through the channel: 1 when the channel did not take it (send it over NNG), else as
 * cuac_send_async. Caller holds c->lock. */
static int
shm_send_async(cua_client *c, uint32_t op, const void *body, cuac_done_fn done, void *arg)
{
	struct cuac_transport *t = c->t;
	struct shm_exchange *x = calloc(1, sizeof(*x));
	nng_msg *m = NULL;
	int r = CUA_ENOMEM;
	if (x == NULL || (r = encode_request(op, body, &m)) != 0)
		goto out;
	*x = (struct shm_exchange){.t = t, .done = done, .arg = arg};
	x->w.fn = shm_exchange_cb;
	x->w.arg = x;
	cua_wire_patch_seq(nng_msg_body(m), nng_msg_len(m), t->seq + 1);
	pthread_mutex_lock(&t->plock);
	t->exchanges++; /* before the send: its callback may end it at once */
	pthread_mutex_unlock(&t->plock);
	if (cuac_shm_send(t->shm, nng_msg_body(m), nng_msg_len(m), &x->w)) {
		t->seq++;
		x = NULL; /* the channel answers it */
		r = 0;
	} else {
		pthread_mutex_lock(&t->plock);
		t->exchanges--;
		pthread_mutex_unlock(&t->plock);
		r = 1;
	}
out:
	if (m)
		nng_msg_free(m);
	free(x);
	return r;
}

void
cuac_transport_set_shm(cua_client *c, struct cuac_shm *s)
{
	pthread_mutex_lock(&c->t->plock);
	c->t->shm = s;
	pthread_mutex_unlock(&c->t->plock);
}

uint64_t
cua_shm_requests(const cua_client *c)
{
	return c != NULL && c->t != NULL ? cuac_shm_count(c->t->shm) : 0;
}

int
cuac_send_async(cua_client *c, uint32_t op, const void *body, cuac_done_fn done, void *arg)
{
	struct exchange *x = NULL;
	nng_msg *m = NULL;
	int r = CUA_ENOMEM;

	if (c->t->shm != NULL && (r = shm_send_async(c, op, body, done, arg)) != 1)
		return r;
	r = CUA_ENOMEM;

	if ((x = calloc(1, sizeof(*x))) == NULL)
		goto out;
	x->done = done;
	x->arg = arg;
	x->t = c->t;
	if (open_ctx(c->t, &x->ctx) != 0)
		goto out;
	x->ctx_open = true;
	if (nng_aio_alloc(&x->aio, exchange_cb, x) != 0)
		goto out;
	if ((r = encode_request(op, body, &m)) != 0)
		goto out;
	pthread_mutex_lock(&c->t->plock);
	c->t->exchanges++; /* before the send: its callback may end it at once */
	pthread_mutex_unlock(&c->t->plock);
	if (!send_on(c->t, &x->live, x->ctx, x->aio, m, true)) {
		pthread_mutex_lock(&c->t->plock);
		c->t->exchanges--;
		pthread_mutex_unlock(&c->t->plock);
		r = CUA_ESESSION_LOST;
		goto out;
	}
	m = NULL; /* transferred */
	x = NULL; /* transferred: exchange_cb frees it */
	r = 0;
out:
	if (m)
		nng_msg_free(m);
	exchange_free(x);
	return r;
}
