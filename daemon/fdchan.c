/*
 * fdchan.c — the fd channel (see fdchan.h; the records in common/cua_fdchan.h, the spec in PROTOCOL.md §9).
 */
#include "config.h"

#include "cua_fdchan.h"
#include "cua_log.h"
#include "fdchan.h"
#include "fdtab.h"
#include "session.h"
#include "shmchan.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define FDCHAN_TICK_MS 250 /* how often deadlines and departed sessions are looked at */

struct fdchan_conn {
	int fd;
	int chan;          /* index of the channel socket it came through */
	struct ucred cred; /* the kernel's, as of connect() */
	uint64_t deadline; /* cua_now_ms by which AUTH must have come (not authenticated yet) */
	uint64_t session;  /* 0 until AUTH succeeded */
};

/* ------------------------------------------------------------------ replies and refusals */

/* One REPLY (best effort: a peer whose socket is full loses it, and is closed by the caller or next time). */
static void
send_reply(int fd, uint32_t kind, int status, const uint64_t *tickets, unsigned n, const char *msg)
{
	unsigned char buf[sizeof(struct cua_fdchan_reply) + CUA_FDCHAN_MAX_TEXT];
	struct cua_fdchan_reply h = {htole32(kind), htole32((uint32_t)status), {0}};
	for (unsigned i = 0; i < n; i++)
		h.tickets[i] = htole64(tickets[i]);
	size_t len = msg ? strlen(msg) : 0;
	if (len > CUA_FDCHAN_MAX_TEXT)
		len = CUA_FDCHAN_MAX_TEXT;
	memcpy(buf, &h, sizeof(h));
	if (len > 0)
		memcpy(buf + sizeof(h), msg, len);
	(void)send(fd, buf, sizeof(h) + len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Removes connection i (closing it); the last one takes its slot. */
static void
conn_drop(struct fdchan *fc, unsigned i)
{
	close(fc->conns[i].fd);
	fc->conns[i] = fc->conns[--fc->nconns];
}

/* A violation or a refusal: logged with who the peer is, answered once with status and why, closed. */
static void __attribute__((format(printf, 5, 6)))
refuse(struct fdchan *fc, unsigned i, uint32_t kind, int status, const char *fmt, ...)
{
	struct fdchan_conn *c = &fc->conns[i];
	char why[CUA_FDCHAN_MAX_TEXT];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warn("fd channel %s: refused peer uid %u pid %d (session %llu): %s: %s; closing the connection",
		 fc->path[c->chan], (unsigned)c->cred.uid, (int)c->cred.pid, (unsigned long long)c->session,
		 cua_strerror_name(status), why);
	send_reply(c->fd, kind, status, NULL, 0, why);
	conn_drop(fc, i);
}

/* ------------------------------------------------------------------ records */

static bool
secret_equal(const uint8_t *a, const uint8_t *b)
{
	volatile uint8_t diff = 0; /* constant time: no early exit that would tell how much of a guess was right */
	for (unsigned i = 0; i < CUA_FDCHAN_SECRET; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

static unsigned
session_conns(const struct fdchan *fc, uint64_t id)
{
	unsigned n = 0;
	for (unsigned i = 0; i < fc->nconns; i++)
		n += fc->conns[i].session == id;
	return n;
}

/* AUTH on connection i: 0 (authenticated, answered OK) or -1 (refused and closed). */
static int
on_auth(struct fdchan *fc, unsigned i, const unsigned char *rec, size_t len, unsigned nfds) CUA_EXCLUDES(cuad_fe_lock)
{
	struct fdchan_conn *c = &fc->conns[i];
	struct cua_fdchan_auth a;
	if (c->session != 0)
		return refuse(fc, i, CUA_FDCHAN_AUTH, CUA_EPROTOCOL, "AUTH twice"), -1;
	if (len != sizeof(a) || nfds != 0)
		return refuse(fc, i, CUA_FDCHAN_AUTH, CUA_EPROTOCOL,
			      "AUTH is %zu bytes without descriptors, not %zu bytes with %u", sizeof(a), len, nfds),
		       -1;
	memcpy(&a, rec, sizeof(a));
	if (le32toh(a.version) != CUA_FDCHAN_VERSION)
		return refuse(fc, i, CUA_FDCHAN_AUTH, CUA_EVERSION, "fd channel version %u; this daemon speaks %u",
			      le32toh(a.version), CUA_FDCHAN_VERSION),
		       -1;
	uint64_t id = le64toh(a.session);
	int status = 0;
	struct fe *fe = fc->fe;
	fe_lock(fe);
	struct session *s = id != 0 ? do_session_by_id(fe, id) : NULL;
	/* An unknown session and a wrong secret answer alike: the channel tells no one which sessions exist. */
	bool ok = s != NULL && s->has_fd_secret && secret_equal(s->fd_secret, a.secret);
	if (!ok)
		status = CUA_EUNAUTHENTICATED;
	else if (s->ident.uid != c->cred.uid)
		status = CUA_EPERMISSION_DENIED;
	fe_unlock(fe);
	if (status == CUA_EUNAUTHENTICATED)
		return refuse(fc, i, CUA_FDCHAN_AUTH, status,
			      "no session %llu with that secret (say HELLO over ipc:// and use its reply's fd_secret)",
			      (unsigned long long)id),
		       -1;
	if (status == CUA_EPERMISSION_DENIED)
		return refuse(fc, i, CUA_FDCHAN_AUTH, status, "session %llu belongs to another user",
			      (unsigned long long)id),
		       -1;
	if (session_conns(fc, id) >= CUA_FDCHAN_CONNS_PER_SESSION)
		return refuse(fc, i, CUA_FDCHAN_AUTH, CUA_EQUOTA,
			      "session %llu already has %u fd channel connections; use one of them",
			      (unsigned long long)id, CUA_FDCHAN_CONNS_PER_SESSION),
		       -1;
	c->session = id;
	send_reply(c->fd, CUA_FDCHAN_AUTH, CUA_OK, NULL, 0, NULL);
	return 0;
}

/* PASS on connection i with the nfds descriptors in fds: they go to the session's table (answered with their
 * tickets), or are all closed and the connection refused. */
static void
on_pass(struct fdchan *fc, unsigned i, const unsigned char *rec, size_t len, int *fds, unsigned nfds)
	CUA_EXCLUDES(cuad_fe_lock)
{
	struct fdchan_conn *c = &fc->conns[i];
	struct cua_fdchan_pass p;
	uint64_t tickets[CUA_FDCHAN_MAX_FDS] = {0};
	const char *bad = c->session == 0 ? "PASS before AUTH" : len != sizeof(p) ? "PASS is not 8 bytes" : NULL;
	if (bad == NULL) {
		memcpy(&p, rec, sizeof(p));
		if (nfds == 0 || le32toh(p.nfds) != nfds)
			bad = "PASS's nfds is not the number of descriptors it carries (1..4, as SCM_RIGHTS)";
	}
	if (bad != NULL) {
		for (unsigned k = 0; k < nfds; k++)
			close(fds[k]);
		refuse(fc, i, CUA_FDCHAN_PASS, c->session == 0 ? CUA_EUNAUTHENTICATED : CUA_EPROTOCOL, "%s", bad);
		return;
	}
	int status = 0;
	unsigned pending = 0;
	struct fe *fe = fc->fe;
	fe_lock(fe);
	struct session *s = do_session_by_id(fe, c->session);
	if (s == NULL)
		status = CUA_ECLOSED;
	else if ((pending = s->fds.n) + nfds > CUA_FDCHAN_MAX_PENDING)
		status = CUA_EQUOTA;
	else
		for (unsigned k = 0; k < nfds; k++) {
			if (fdtab_put(&s->fds, fds[k], &tickets[k]) != 0) { /* closed it */
				status = CUA_ENOMEM;
				for (unsigned j = 0; j < k; j++) /* none of this record's stays */
					close(fdtab_take(&s->fds, tickets[j]));
				for (unsigned j = k + 1; j < nfds; j++)
					close(fds[j]);
				break;
			}
		}
	fe_unlock(fe);
	if (status == 0) {
		send_reply(c->fd, CUA_FDCHAN_PASS, CUA_OK, tickets, nfds, NULL);
		return;
	}
	if (status != CUA_ENOMEM)
		for (unsigned k = 0; k < nfds; k++)
			close(fds[k]);
	if (status == CUA_ECLOSED)
		refuse(fc, i, CUA_FDCHAN_PASS, status, "the session has ended");
	else if (status == CUA_EQUOTA)
		refuse(fc, i, CUA_FDCHAN_PASS, status,
		       "%u descriptors passed and not yet claimed, at most %u: name their tickets (HOST_REGISTER) "
		       "first",
		       pending, CUA_FDCHAN_MAX_PENDING);
	else
		refuse(fc, i, CUA_FDCHAN_PASS, status, "out of memory");
}

/* SHM on connection i with its memfd and eventfd: the session's shared-memory channel (shmchan.c), answered
 * OK or refused with why (the connection stays open: a client falls back to NNG and may pass more). */
static void
on_shm(struct fdchan *fc, unsigned i, const unsigned char *rec, size_t len, int *fds, unsigned nfds)
	CUA_EXCLUDES(cuad_fe_lock)
{
	struct fdchan_conn *c = &fc->conns[i];
	struct cua_fdchan_pass p = {0, 0};
	char why[CUA_FDCHAN_MAX_TEXT];
	if (len == sizeof(p))
		memcpy(&p, rec, sizeof(p));
	if (c->session == 0 || len != sizeof(p) || nfds != 2 || le32toh(p.nfds) != 2) {
		for (unsigned k = 0; k < nfds; k++)
			close(fds[k]);
		refuse(fc, i, CUA_FDCHAN_SHM, c->session == 0 ? CUA_EUNAUTHENTICATED : CUA_EPROTOCOL, "%s",
		       c->session == 0 ? "SHM before AUTH" : "SHM is 8 bytes with nfds 2 and 2 descriptors");
		return;
	}
	int status = shmchan_attach(fc->shm, c->session, fds[0], fds[1], why, sizeof(why));
	send_reply(c->fd, CUA_FDCHAN_SHM, status, NULL, 0, status == 0 ? NULL : why);
}

/* One record from connection i (it was readable). */
static void
on_readable(struct fdchan *fc, unsigned i)
{
	struct fdchan_conn *c = &fc->conns[i];
	unsigned char rec[64];
	union {
		struct cmsghdr h;
		unsigned char b[CMSG_SPACE(CUA_FDCHAN_MAX_FDS * sizeof(int))];
	} ctl;
	struct iovec iov = {rec, sizeof(rec)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
	/* MSG_CMSG_CLOEXEC: a worker spawned meanwhile must not inherit a client's descriptor. Descriptors past
	 * the buffer are never installed here (the kernel drops them and says MSG_CTRUNC). */
	ssize_t n = recvmsg(c->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	int fds[CUA_FDCHAN_MAX_FDS];
	unsigned nfds = 0;
	bool other_ctl = false;
	for (struct cmsghdr *h = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; h != NULL; h = CMSG_NXTHDR(&m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) {
			other_ctl = true;
			continue;
		}
		size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t j = 0; j < k; j++) {
			int fd;
			memcpy(&fd, CMSG_DATA(h) + j * sizeof(int), sizeof(int));
			if (nfds < CUA_FDCHAN_MAX_FDS)
				fds[nfds++] = fd;
			else
				close(fd);
		}
	}
	if (n <= 0) { /* the peer left, the socket failed, or an empty record (descriptors and all): dropped */
		for (unsigned k = 0; k < nfds; k++)
			close(fds[k]);
		conn_drop(fc, i);
		return;
	}
	uint32_t kind = 0;
	if ((size_t)n >= sizeof(kind))
		memcpy(&kind, rec, sizeof(kind));
	kind = le32toh(kind);
	const char *bad = (m.msg_flags & MSG_CTRUNC)  ? "more descriptors than one PASS may carry"
			  : (m.msg_flags & MSG_TRUNC) ? "a record longer than any the channel has"
			  : other_ctl                 ? "ancillary data other than SCM_RIGHTS"
			  : kind == CUA_FDCHAN_PASS || kind == CUA_FDCHAN_AUTH || kind == CUA_FDCHAN_SHM
				  ? NULL
				  : "an unknown record kind";
	if (bad != NULL) {
		for (unsigned k = 0; k < nfds; k++)
			close(fds[k]);
		refuse(fc, i, kind == CUA_FDCHAN_PASS || kind == CUA_FDCHAN_AUTH || kind == CUA_FDCHAN_SHM ? kind : 0,
		       CUA_EPROTOCOL, "%s (at most %u)", bad, CUA_FDCHAN_MAX_FDS);
		return;
	}
	if (kind == CUA_FDCHAN_AUTH) {
		for (unsigned k = 0; k < nfds; k++)
			close(fds[k]);
		on_auth(fc, i, rec, (size_t)n, nfds);
	} else if (kind == CUA_FDCHAN_SHM) {
		on_shm(fc, i, rec, (size_t)n, fds, nfds);
	} else {
		on_pass(fc, i, rec, (size_t)n, fds, nfds);
	}
}

/* A new connection on channel ch. */
static void
on_accept(struct fdchan *fc, int ch)
{
	int fd = accept4(fc->lfd[ch], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	struct ucred cred = {0, (uid_t)-1, (gid_t)-1};
	socklen_t len = sizeof(cred);
	unsigned unauth = 0, unauth_uid = 0;
	bool cred_ok = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
	for (unsigned i = 0; i < fc->nconns; i++) {
		unauth += fc->conns[i].session == 0;
		unauth_uid += fc->conns[i].session == 0 && fc->conns[i].cred.uid == cred.uid;
	}
	const char *why = !cred_ok ? "no peer credentials"
			  : unauth_uid >= FDCHAN_MAX_UNAUTH_UID
				  ? "too many connections of this user waiting to authenticate"
			  : unauth >= FDCHAN_MAX_UNAUTH    ? "too many connections waiting to authenticate"
			  : fc->nconns >= FDCHAN_MAX_CONNS ? "too many connections"
							   : NULL;
	if (why != NULL) {
		log_warn("fd channel %s: refused peer uid %u pid %d: %s (at most %u waiting, %u of one user, %u in "
			 "all); "
			 "closing",
			 fc->path[ch], (unsigned)cred.uid, (int)cred.pid, why, FDCHAN_MAX_UNAUTH, FDCHAN_MAX_UNAUTH_UID,
			 FDCHAN_MAX_CONNS);
		send_reply(fd, 0, CUA_EQUOTA, NULL, 0, why);
		close(fd);
		return;
	}
	fc->conns[fc->nconns++] = (struct fdchan_conn){fd, ch, cred, cua_now_ms() + CUA_FDCHAN_AUTH_MS, 0};
}

/* Connections past their AUTH deadline are refused; those whose session ended are closed. */
static void
sweep(struct fdchan *fc) CUA_EXCLUDES(cuad_fe_lock)
{
	uint64_t now = cua_now_ms();
	for (unsigned i = 0; i < fc->nconns;) {
		struct fdchan_conn *c = &fc->conns[i];
		if (c->session == 0 && now >= c->deadline) {
			refuse(fc, i, 0, CUA_ETIMEOUT, "no AUTH within %u ms of connecting", CUA_FDCHAN_AUTH_MS);
			continue;
		}
		if (c->session != 0) {
			fe_lock(fc->fe);
			bool gone = do_session_by_id(fc->fe, c->session) == NULL;
			fe_unlock(fc->fe);
			if (gone) {
				log_debug("fd channel: session %llu ended; its connection closed",
					  (unsigned long long)c->session);
				conn_drop(fc, i);
				continue;
			}
		}
		i++;
	}
}

static void *
fdchan_main(void *arg)
{
	struct fdchan *fc = arg;
	pthread_setname_np(pthread_self(), "cuad-fdchan");
	struct pollfd *p = calloc(1 + CUAD_MAX_LISTEN + FDCHAN_MAX_CONNS, sizeof(*p));
	if (p == NULL) {
		log_error("fd channel: out of memory; host buffers cannot be registered");
		return NULL;
	}
	uint64_t next_sweep = cua_now_ms() + FDCHAN_TICK_MS;
	for (;;) {
		unsigned np = 0, nconns = fc->nconns;
		p[np++] = (struct pollfd){fc->wake[0], POLLIN, 0};
		for (int i = 0; i < fc->nl; i++)
			p[np++] = (struct pollfd){fc->lfd[i], POLLIN, 0};
		for (unsigned i = 0; i < nconns; i++)
			p[np++] = (struct pollfd){fc->conns[i].fd, POLLIN, 0};
		int rv = poll(p, np, FDCHAN_TICK_MS);
		if (rv < 0 && errno != EINTR) {
			log_error("fd channel: poll: %s", strerror(errno));
			break;
		}
		if (p[0].revents)
			break;
		/* connections first, from the last (a dropped one's slot is taken by the last, already looked at) */
		for (unsigned i = nconns; i-- > 0;)
			if (p[1 + fc->nl + i].revents)
				on_readable(fc, i);
		for (int i = 0; i < fc->nl; i++)
			if (p[1 + i].revents & POLLIN)
				on_accept(fc, i);
		if (cua_now_ms() >= next_sweep) {
			sweep(fc);
			next_sweep = cua_now_ms() + FDCHAN_TICK_MS;
		}
	}
	free(p);
	return NULL;
}

/* ------------------------------------------------------------------ start and stop */

/* The channel beside the ipc:// socket at ipc: bound, with the ipc socket's mode and group, listening. */
static int
open_channel(struct fdchan *fc, const char *ipc)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char *path = fc->path[fc->nl];
	struct stat st;
	if ((size_t)snprintf(path, sizeof(fc->path[0]), "%s%s", ipc, CUA_FDCHAN_SUFFIX) >= sizeof(sa.sun_path)) {
		log_warn("fd channel beside %s: the path is too long for a unix socket; its sessions cannot register "
			 "host buffers",
			 ipc);
		return -1;
	}
	if (stat(ipc, &st) != 0) {
		log_warn("fd channel beside %s: %s; its sessions cannot register host buffers", ipc, strerror(errno));
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		goto fail;
	unlink(path); /* a stale one of an earlier daemon (the edge does the same for the ipc socket) */
	/* Between bind and chmod the file has the umask's mode; a peer that connects meanwhile must still prove a
	 * session (secret and uid), so nothing is open to it that the ipc socket's mode would have kept closed. */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, st.st_mode & 07777) != 0 ||
	    listen(fd, 64) != 0)
		goto fail;
	if (chown(path, (uid_t)-1, st.st_gid) != 0)
		log_warn("fd channel %s: cannot give it the group of %s (%u): %s", path, ipc, (unsigned)st.st_gid,
			 strerror(errno));
	fc->lfd[fc->nl++] = fd;
	log_info("fd channel on %s (mode %o)", path, (unsigned)(st.st_mode & 07777));
	return 0;
fail:
	log_warn("fd channel %s: %s; sessions of %s cannot register host buffers", path, strerror(errno), ipc);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	return -1;
}

int
fdchan_start(struct fdchan *fc, struct fe *fe)
{
	fc->fe = fe;
	fc->wake[0] = fc->wake[1] = -1;
	fdtab_seed();
	if ((fc->conns = calloc(FDCHAN_MAX_CONNS, sizeof(*fc->conns))) == NULL || pipe2(fc->wake, O_CLOEXEC) != 0) {
		log_error("fd channel: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < fe->cfg.nlisten; i++)
		if (strncmp(fe->cfg.listen[i], "ipc://", 6) == 0)
			open_channel(fc, fe->cfg.listen[i] + 6);
	if (pthread_create(&fc->thread, NULL, fdchan_main, fc) != 0) {
		log_error("fd channel: cannot start its thread");
		return -1;
	}
	fc->started = true;
	return 0;
}

void
fdchan_quiesce(struct fdchan *fc)
{
	for (int i = 0; i < fc->nl; i++)
		unlink(fc->path[i]);
}

void
fdchan_stop(struct fdchan *fc)
{
	if (fc->fe == NULL) /* fdchan_start never ran */
		return;
	if (fc->started) {
		(void)!write(fc->wake[1], "x", 1);
		pthread_join(fc->thread, NULL);
		fc->started = false;
	}
	while (fc->nconns > 0)
		conn_drop(fc, 0);
	for (int i = 0; i < fc->nl; i++) {
		close(fc->lfd[i]);
		unlink(fc->path[i]);
	}
	fc->nl = 0;
	for (int i = 0; i < 2; i++)
		if (fc->wake[i] >= 0)
			close(fc->wake[i]);
	fc->wake[0] = fc->wake[1] = -1;
	free(fc->conns);
	fc->conns = NULL;
}
