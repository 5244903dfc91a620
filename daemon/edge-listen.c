/*
 * edge-listen.c — the daemon's NNG listeners, and a watchdog that keeps them accepting.
 *
 * NNG 1.5.2 has a bug (upstream #1518, fixed after 1.5.2): a peer that disconnects while the SP handshake
 * is in progress can leave a listener that never accepts again. The daemon removes the known cause (the SP
 * header written to a peer already gone, EPIPE: daemon/nngfix.c), so a restart here means something new, and
 * it costs every connection of that listener. Debian 12 ships 1.5.2, so every
 * LISTENER_PROBE_MS the watchdog connects to each ipc:// and tcp:// listener like a client would, completes
 * the 8-byte SP handshake and waits for the socket to report the new pipe (the broken listener still
 * negotiates, it just never hands the pipe over); a listener that fails within LISTENER_PROBE_TIMEOUT_MS is
 * closed and started again on the same URL. Probe connections are recognised (by peer pid for ipc, by
 * source port for tcp) and never become sessions. tls+tcp:// listeners are not probed.
 *
 * On the same tick the watchdog closes connections that completed the SP handshake but did not say HELLO
 * within --hello-timeout (nng_pipe_close is not allowed inside the pipe callback). A connection that never
 * completes the SP handshake is NNG's: its ipc and tcp transports give up negotiating after 10 s (hard-wired
 * in NNG 1.5.2, src/sp/transport/{ipc,tcp}) and close it; until then it has no pipe the daemon could see.
 */
#include "config.h"

#include "auth.h"
#include "cua_clock.h"
#include "cua_log.h"
#include "edge.h"
#include "request.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <nng/supplemental/tls/tls.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LISTENER_PROBE_MS 500
#define LISTENER_PROBE_TIMEOUT_MS 3000

/* A PEM file's text (malloc'd, NUL-terminated), or NULL with what went wrong in why. At most 1 MiB. */
static char *
pem_read(const char *opt, const char *path, char *why, size_t len)
{
	char *text = NULL;
	FILE *f = fopen(path, "re");
	int e = errno;
	if (f == NULL) {
		snprintf(why, len, "%s %s: %s%s", opt, path, strerror(e),
			 e == EACCES ? " (the daemon's user must be able to read it: see OPERATIONS.md, TLS)" : "");
		return NULL;
	}
	if ((text = calloc(1, (1u << 20) + 1)) != NULL) {
		size_t n = fread(text, 1, 1u << 20, f);
		text[n] = '\0';
	} else {
		snprintf(why, len, "%s %s: out of memory", opt, path);
	}
	fclose(f);
	return text;
}

/* The TLS configuration of a tls+tcp:// listener from --tls-cert, --tls-key and --tls-ca. Each file is read here
 * first, so that a missing file, a certificate without its key or a key file without a key is named as such
 * (NNG only says "Cryptographic error"). 0, or -1 (logged). */
static int
tls_setup(struct edge *ed, struct edge_listener *fl)
{
	const struct config *c = &ed->fe->cfg;
	nng_tls_config *tls = NULL;
	char *cert = NULL, *key = NULL, why[512] = "";
	int rv = 0, r = -1;
	if (c->tls_cert == NULL) {
		snprintf(why, sizeof(why),
			 "a tls+tcp:// listener needs --tls-cert FILE (and --tls-key FILE unless the "
			 "certificate file holds the key too)");
		goto out;
	}
	if ((cert = pem_read("--tls-cert", c->tls_cert, why, sizeof(why))) == NULL)
		goto out;
	if (strstr(cert, "-----BEGIN CERTIFICATE-----") == NULL) {
		snprintf(why, sizeof(why), "--tls-cert %s holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
			 c->tls_cert);
		goto out;
	}
	if (c->tls_key != NULL && (key = pem_read("--tls-key", c->tls_key, why, sizeof(why))) == NULL)
		goto out;
	if (strstr(key ? key : cert, "PRIVATE KEY-----") == NULL) {
		if (key != NULL)
			snprintf(why, sizeof(why),
				 "--tls-key %s holds no PEM private key (-----BEGIN ... PRIVATE KEY-----)", c->tls_key);
		else
			snprintf(why, sizeof(why),
				 "--tls-cert %s holds a certificate but no private key: name the key's file with "
				 "--tls-key "
				 "FILE, or append the key to the certificate file",
				 c->tls_cert);
		goto out;
	}
	if ((rv = nng_tls_config_alloc(&tls, NNG_TLS_MODE_SERVER)) != 0 ||
	    (rv = nng_tls_config_own_cert(tls, cert, key ? key : cert, NULL)) != 0) {
		snprintf(why, sizeof(why),
			 "--tls-cert %s%s%s: %s (is the key the certificate's own, and not protected by a passphrase?)",
			 c->tls_cert, key ? " with --tls-key " : "", key ? c->tls_key : "", nng_strerror(rv));
		goto out;
	}
	if (c->tls_ca != NULL) { /* mutual TLS: no certificate of that CA, no handshake */
		char *ca = pem_read("--tls-ca", c->tls_ca, why, sizeof(why));
		bool has_cert = ca != NULL && strstr(ca, "-----BEGIN CERTIFICATE-----") != NULL;
		free(ca);
		if (ca == NULL)
			goto out;
		if (!has_cert) {
			snprintf(why, sizeof(why), "--tls-ca %s holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
				 c->tls_ca);
			goto out;
		}
		if ((rv = nng_tls_config_ca_file(tls, c->tls_ca)) != 0 ||
		    (rv = nng_tls_config_auth_mode(tls, NNG_TLS_AUTH_MODE_REQUIRED)) != 0) {
			snprintf(why, sizeof(why), "--tls-ca %s: %s", c->tls_ca, nng_strerror(rv));
			goto out;
		}
	}
	if ((rv = nng_listener_set_ptr(fl->l, NNG_OPT_TLS_CONFIG, tls)) != 0) {
		snprintf(why, sizeof(why), "cannot give the listener its TLS configuration: %s", nng_strerror(rv));
		goto out;
	}
	r = 0;
out:
	if (r != 0)
		log_error("listen %s: %s", fl->url, why);
	if (tls != NULL)
		nng_tls_config_free(tls); /* the listener holds its own reference */
	if (key != NULL)
		explicit_bzero(key, strlen(key));
	else if (cert != NULL)
		explicit_bzero(cert, strlen(cert)); /* it held the key */
	free(cert);
	free(key);
	return r;
}

/* Why a listener did not start, said so that the operator knows what to do: for an ipc:// socket, the directory
 * that is missing or not writable is named (NNG says only "Entry not found" or "Permission denied"). */
static void
listen_failed(const char *url, int rv)
{
	char dir[PATH_MAX];
	const char *path = url + 6, *slash = strrchr(path, '/');
	struct stat st;
	if (strncmp(url, "ipc://", 6) != 0 || slash == NULL || (size_t)(slash - path) >= sizeof(dir) ||
	    (rv != NNG_ENOENT && rv != NNG_EPERM)) {
		log_error("listen %s: %s", url, nng_strerror(rv));
		return;
	}
	snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if (stat(dir, &st) != 0)
		log_error("listen %s: the directory %s does not exist: create it (under systemd, "
			  "RuntimeDirectory=cuasyncd "
			  "in the unit makes /run/cuasyncd; by hand: install -d -m 0755 -o USER %s, USER the daemon's) "
			  "or "
			  "choose another --listen path",
			  url, dir, dir);
	else if (!S_ISDIR(st.st_mode))
		log_error("listen %s: %s is not a directory: choose another --listen path", url, dir);
	else
		log_error("listen %s: the daemon (uid %u) may not create its socket in %s (%s): give that user write "
			  "access to the directory, or choose another --listen path",
			  url, (unsigned)geteuid(), dir, nng_strerror(rv));
}

int
edge_listener_open(struct edge *ed, struct edge_listener *fl)
{
	int rv = nng_listener_create(&fl->l, ed->sock, fl->url);
	if (rv != 0) {
		log_error("listen %s: %s", fl->url, nng_strerror(rv));
		return -1;
	}
	int mode = fl->operator? ed->fe->cfg.operator_mode : ed->fe->cfg.ipc_mode;
	nng_listener_set_size(fl->l, NNG_OPT_RECVMAXSZ, ed->fe->cfg.max_message);
	if (mode >= 0 && strncmp(fl->url, "ipc://", 6) == 0 &&
	    (rv = nng_listener_set_int(fl->l, NNG_OPT_IPC_PERMISSIONS, mode)) != 0) {
		log_error("listen %s: cannot set permissions %o: %s", fl->url, mode, nng_strerror(rv));
		if (fl->operator) { /* an operator socket anyone could open would show everyone's usage */
			nng_listener_close(fl->l);
			return -1;
		}
	}
	if (strncmp(fl->url, "tls+", 4) == 0 && tls_setup(ed, fl) != 0) {
		nng_listener_close(fl->l);
		return -1;
	}
	if ((rv = nng_listener_start(fl->l, 0)) != 0) {
		listen_failed(fl->url, rv);
		nng_listener_close(fl->l);
		return -1;
	}
	long gid = auth_socket_gid(ed->fe, fl->operator);
	if (gid >= 0 && strncmp(fl->url, "ipc://", 6) == 0 && chown(fl->url + 6, (uid_t)-1, (gid_t)gid) != 0)
		log_warn("listen %s: cannot give the socket to group %ld: %s", fl->url, gid, strerror(errno));
	nng_sockaddr sa;
	fl->kind = strncmp(fl->url, "ipc://", 6) == 0 ? EL_IPC : strncmp(fl->url, "tcp", 3) == 0 ? EL_TCP : EL_OTHER;
	fl->remote_port = 0;
	if ((strncmp(fl->url, "tcp", 3) == 0 || strncmp(fl->url, "tls+tcp", 7) == 0) &&
	    nng_listener_get_addr(fl->l, NNG_OPT_LOCADDR, &sa) == 0)
		fl->remote_port = sa.s_family == NNG_AF_INET    ? sa.s_in.sa_port
				  : sa.s_family == NNG_AF_INET6 ? sa.s_in6.sa_port
								: 0;
	if (fl->kind == EL_TCP && nng_listener_get_addr(fl->l, NNG_OPT_LOCADDR, &sa) == 0 && sa.s_family == NNG_AF_INET)
		fl->tcp = sa.s_in;
	else if (fl->kind == EL_TCP)
		fl->kind = EL_OTHER; /* IPv6: not probed */
	return 0;
}

/* One probe: 0 when the listener completed the SP handshake, PROBE_NO_FD when the watchdog itself has no
 * descriptor for it (which says nothing about the listener), -1 otherwise. */
#define PROBE_NO_FD 1
static int
probe(struct edge *ed, struct edge_listener *fl)
{
	int fd = -1, r = -1;
	uint64_t adds_before = atomic_load(&ed->probe_adds);
	if (fl->kind == EL_IPC) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if (strlen(fl->url + 6) >= sizeof(sa.sun_path))
			return 0;
		memcpy(sa.sun_path, fl->url + 6, strlen(fl->url + 6));
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			return PROBE_NO_FD;
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			goto out;
	} else {
		struct sockaddr_in sa = {.sin_family = AF_INET,
					 .sin_port = fl->tcp.sa_port,
					 .sin_addr.s_addr = fl->tcp.sa_addr};
		if (sa.sin_addr.s_addr == 0)
			sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE))
			return PROBE_NO_FD;
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			goto out;
		struct sockaddr_in me;
		socklen_t len = sizeof(me);
		if (getsockname(fd, (struct sockaddr *)&me, &len) == 0)
			atomic_store(&ed->probe_port, me.sin_port);
	}
	/* SP header of a REQ peer: 0x00 'S' 'P' 0x00, protocol 48 (req0) big-endian, reserved */
	static const unsigned char hdr[8] = {0x00, 'S', 'P', 0x00, 0x00, 0x30, 0x00, 0x00};
	if (write(fd, hdr, sizeof(hdr)) != (ssize_t)sizeof(hdr))
		goto out;
	unsigned char got[8];
	size_t have = 0;
	while (have < sizeof(got)) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, LISTENER_PROBE_TIMEOUT_MS) != 1)
			goto out;
		ssize_t n = read(fd, got + have, sizeof(got) - have);
		if (n <= 0)
			goto out;
		have += (size_t)n;
	}
	if (got[0] != 0 || got[1] != 'S' || got[2] != 'P')
		goto out;
	/* The handshake alone is not enough: the broken listener still negotiates but never hands the pipe to
	 * the socket. Wait for the socket to see it (NNG_PIPE_EV_ADD_POST). */
	for (int waited = 0; waited < LISTENER_PROBE_TIMEOUT_MS; waited++) {
		if (atomic_load(&ed->probe_adds) != adds_before) {
			r = 0;
			break;
		}
		cua_sleep_ms(1);
	}
out:
	if (fd >= 0)
		close(fd);
	return r;
}

bool
edge_pipe_is_operator(struct edge *ed, nng_pipe p)
{
	nng_listener l = nng_pipe_listener(p);
	for (int i = 0; i < ed->nlisteners; i++)
		if (ed->listeners[i].operator&& nng_listener_id(ed->listeners[i].l) == nng_listener_id(l))
			return true;
	return false;
}

bool
edge_listener_is_probe(struct edge *ed, nng_pipe p)
{
	uint64_t pid;
	if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0)
		return pid == (uint64_t)getpid();
	nng_sockaddr sa;
	if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) == 0 && sa.s_family == NNG_AF_INET)
		return sa.s_in.sa_port == atomic_load(&ed->probe_port) && sa.s_in.sa_addr == htonl(INADDR_LOOPBACK);
	return false;
}

/* Closes the connections that did not say HELLO in time, or that an operator disconnected. */
static void
close_overdue(struct edge *ed)
{
	uint32_t pipes[64];
	unsigned n;
	while ((n = request_hello_overdue(ed->fe, pipes, 64)) > 0) {
		for (unsigned i = 0; i < n; i++) {
			nng_pipe p = NNG_PIPE_INITIALIZER;
			p.id = pipes[i];
			nng_pipe_close(p);
		}
		log_info("closed %u connection(s) that sent no HELLO within %u s (--hello-timeout) or that an "
			 "operator "
			 "disconnected",
			 n, ed->fe->cfg.hello_timeout);
	}
}

/*
 * Whether NNG has finished every probe connection so far (NNG_PIPE_EV_REM_POST). A probe's pipe is closed by its
 * peer at once, so NNG's reaper finishes it within a tick; one that stays unfinished means the reaper is stuck
 * (NNG 1.5.2, see edge.c) — then probing again would only add a descriptor that is never given back, every tick.
 * Said once in the log after 10 s.
 */
static bool
probe_finished(struct edge *ed)
{
	if (atomic_load(&ed->probe_pres) == atomic_load(&ed->probe_rems)) {
		if (ed->probe_stuck_since != 0)
			log_info("NNG finished the listener probe's connection again: probing resumes");
		ed->probe_stuck_since = 0;
		return true;
	}
	uint64_t now = cua_now_ms();
	if (ed->probe_stuck_since == 0)
		ed->probe_stuck_since = now;
	else if (now - ed->probe_stuck_since >= 10000 && now - ed->probe_stuck_since < 10000 + LISTENER_PROBE_MS)
		log_error("NNG has not finished a closed connection for 10 s (its reaper thread is stuck): closed "
			  "sessions "
			  "are no longer cleaned up and their descriptors stay; the listener watchdog stops probing. "
			  "Restart cuasyncd");
	return false;
}

static void *
watchdog_main(void *arg)
{
	struct edge *ed = arg;
	pthread_setname_np(pthread_self(), "cuad-edge-wd");
	pthread_mutex_lock(&ed->wd_lock);
	while (!atomic_load(&ed->stopping) && !atomic_load(&ed->quiet)) {
		struct timespec ts = cua_deadline_ts(LISTENER_PROBE_MS); /* wd_cond: monotonic (cua_cond_init) */
		pthread_cond_timedwait(&ed->wd_cond, &ed->wd_lock, &ts);
		if (atomic_load(&ed->stopping) || atomic_load(&ed->quiet))
			break;
		close_overdue(ed);
		edge_guard_tick(ed);
		if (!probe_finished(ed))
			continue;
		for (int i = 0; i < ed->nlisteners; i++) {
			struct edge_listener *fl = &ed->listeners[i];
			int r;
			if (fl->kind == EL_OTHER || (r = probe(ed, fl)) == 0)
				continue;
			if (atomic_load(&ed->stopping))
				break;
			/* Out of descriptors, a listener cannot accept either (NNG retries every 100 ms): restarting it
			 * would remove the ipc socket file and fail to make it again. The guard frees descriptors. */
			if (r == PROBE_NO_FD || edge_guard_short(ed)) {
				log_warn("listener %s did not answer its probe while descriptors are short (%u open, "
					 "limit "
					 "%u): left as it is",
					 fl->url, atomic_load(&ed->guard.fds_open), atomic_load(&ed->guard.fd_limit));
				continue;
			}
			log_warn("listener %s stopped accepting (NNG 1.5.2 bug #1518); restarting it", fl->url);
			nng_listener_close(fl->l);
			if (fl->kind == EL_IPC)
				unlink(fl->url + 6);
			if (edge_listener_open(ed, fl) != 0)
				log_error("listener %s could not be restarted; clients cannot connect there", fl->url);
			ed->listener_restarts++;
		}
	}
	pthread_mutex_unlock(&ed->wd_lock);
	return NULL;
}

int
edge_watchdog_start(struct edge *ed)
{
	pthread_mutex_init(&ed->wd_lock, NULL);
	cua_cond_init(&ed->wd_cond);
	return pthread_create(&ed->watchdog, NULL, watchdog_main, ed) != 0 ? -1 : (ed->watchdog_started = true, 0);
}

void
edge_watchdog_stop(struct edge *ed)
{
	if (!ed->watchdog_started)
		return;
	pthread_mutex_lock(&ed->wd_lock);
	pthread_cond_broadcast(&ed->wd_cond);
	pthread_mutex_unlock(&ed->wd_lock);
	pthread_join(ed->watchdog, NULL);
	ed->watchdog_started = false;
}
