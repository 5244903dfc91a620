/*
 * fdchan.c — the client side of the fd channel (PROTOCOL.md §9, records in common/cua_fdchan.h): descriptors
 * passed into the session with SCM_RIGHTS over a unix socket beside the ipc:// one, each answered with a ticket
 * that requests name (hostbuf.c's HOST_REGISTER). One connection per client, made on first use, authenticated
 * with the session's id and HELLO's secret; exchanges are one record and its REPLY, under c->fdc_lock.
 */
#include "config.h"

#include "cuac_error.h"
#include "cuac_transport.h"
#include "internal.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Sends the record (with the n descriptors of fds as SCM_RIGHTS) and reads its REPLY into *rep and msg (a
 * string). 0, or a status with the last error set (the connection is then unusable). */
static int
exchange(cua_client *c, const void *rec, size_t len, const int *fds, unsigned n, struct cua_fdchan_reply *rep,
	 char *msg, size_t msglen)
{
	union {
		struct cmsghdr h;
		unsigned char b[CMSG_SPACE(CUA_FDCHAN_MAX_FDS * sizeof(int))];
	} ctl;
	memset(&ctl, 0, sizeof(ctl));
	struct iovec iov = {(void *)rec, len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n > 0) {
		m.msg_control = ctl.b;
		m.msg_controllen = CMSG_SPACE(n * sizeof(int));
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(h), fds, n * sizeof(int));
	}
	if (sendmsg(c->fdc_fd, &m, MSG_NOSIGNAL) != (ssize_t)len)
		return cuac_fail(CUA_ETRANSPORT, "fd channel: send: %s", strerror(errno));
	struct pollfd p = {c->fdc_fd, POLLIN, 0};
	int rv = poll(&p, 1, cuac_transport_timeout_ms(c));
	if (rv == 0)
		return cuac_fail(CUA_ETIMEOUT, "fd channel: no reply from cuasyncd");
	unsigned char buf[sizeof(*rep) + CUA_FDCHAN_MAX_TEXT];
	ssize_t got = rv > 0 ? recv(c->fdc_fd, buf, sizeof(buf), 0) : -1;
	/* The daemon closed after its REPLY with records of ours unread (a refusal): the kernel reports that reset
	 * before the REPLY still queued, so read once more for the daemon's reason. */
	if (got < 0 && errno == ECONNRESET)
		got = recv(c->fdc_fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (got < (ssize_t)sizeof(*rep))
		return cuac_fail(CUA_ETRANSPORT, "fd channel: %s",
				 got < 0 ? strerror(errno) : "the daemon closed the connection");
	memcpy(rep, buf, sizeof(*rep));
	rep->kind = le32toh(rep->kind);
	rep->status = le32toh(rep->status);
	for (unsigned i = 0; i < CUA_FDCHAN_MAX_FDS; i++)
		rep->tickets[i] = le64toh(rep->tickets[i]);
	snprintf(msg, msglen, "%.*s", (int)((size_t)got - sizeof(*rep)), (const char *)buf + sizeof(*rep));
	return 0;
}

/* Connects and authenticates. 0 or a status (last error set; c->fdc_fd stays -1). */
static int
open_channel(cua_client *c)
{
	const char *ipc = cuac_transport_ipc_path(c);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct cua_fdchan_reply rep;
	char msg[CUA_FDCHAN_MAX_TEXT + 1];
	int r;
	if (ipc == NULL || !c->has_fd_secret)
		return cuac_fail(CUA_EUNSUPPORTED, "shared host memory needs a local ipc:// connection to cuasyncd");
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s%s", ipc, CUA_FDCHAN_SUFFIX) >= sizeof(sa.sun_path))
		return cuac_fail(CUA_EUNSUPPORTED, "the fd channel's path %s%s is too long for a unix socket", ipc,
				 CUA_FDCHAN_SUFFIX);
	if ((c->fdc_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(c->fdc_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		r = cuac_fail(CUA_ETRANSPORT, "cannot connect to cuasyncd's fd channel %s: %s", sa.sun_path,
			      strerror(errno));
		goto fail;
	}
	struct cua_fdchan_auth a = {htole32(CUA_FDCHAN_AUTH), htole32(CUA_FDCHAN_VERSION), htole64(c->session), {0}};
	memcpy(a.secret, c->fd_secret, sizeof(a.secret));
	r = exchange(c, &a, sizeof(a), NULL, 0, &rep, msg, sizeof(msg));
	explicit_bzero(&a, sizeof(a));
	if (r != 0)
		goto fail;
	if (rep.status != CUA_OK) {
		r = cuac_fail(cua_status_valid((int)rep.status) ? (int)rep.status : CUA_EPROTOCOL, "fd channel: %s",
			      msg);
		goto fail;
	}
	return 0;
fail:
	if (c->fdc_fd >= 0)
		close(c->fdc_fd);
	c->fdc_fd = -1;
	return r;
}

/* One record of kind (PASS or SHM) with the n descriptors of fds; PASS's tickets into tickets. */
static int
send_fds(cua_client *c, uint32_t kind, const int *fds, unsigned n, uint64_t *tickets)
{
	struct cua_fdchan_pass p = {htole32(kind), htole32(n)};
	struct cua_fdchan_reply rep;
	char msg[CUA_FDCHAN_MAX_TEXT + 1];
	int r = 0;
	if (n == 0 || n > CUA_FDCHAN_MAX_FDS)
		return cuac_fail(CUA_EBAD_ARGUMENT, "1..%u descriptors at a time", CUA_FDCHAN_MAX_FDS);
	pthread_mutex_lock(&c->fdc_lock);
	/* a kept connection the daemon closed meanwhile (its timeouts, a restart of the channel) is made again */
	for (int attempt = 0; attempt < 2; attempt++) {
		bool fresh = c->fdc_fd < 0;
		if (fresh && (r = open_channel(c)) != 0)
			break;
		r = exchange(c, &p, sizeof(p), fds, n, &rep, msg, sizeof(msg));
		if (r == 0 || !(r == CUA_ETRANSPORT && !fresh)) {
			if (r != 0) {
				close(c->fdc_fd);
				c->fdc_fd = -1;
			}
			break;
		}
		close(c->fdc_fd);
		c->fdc_fd = -1;
	}
	if (r == 0 && rep.status != CUA_OK) {
		r = cuac_fail(cua_status_valid((int)rep.status) ? (int)rep.status : CUA_EPROTOCOL, "fd channel: %s",
			      msg);
		close(c->fdc_fd); /* the daemon closes it after a refusal */
		c->fdc_fd = -1;
	}
	if (r == 0 && tickets != NULL)
		memcpy(tickets, rep.tickets, n * sizeof(*tickets));
	pthread_mutex_unlock(&c->fdc_lock);
	return r;
}

int
cuac_fdchan_pass(cua_client *c, const int *fds, unsigned n, uint64_t *tickets)
{
	return send_fds(c, CUA_FDCHAN_PASS, fds, n, tickets);
}

int
cuac_fdchan_shm(cua_client *c, int memfd, int efd)
{
	int fds[2] = {memfd, efd};
	return send_fds(c, CUA_FDCHAN_SHM, fds, 2, NULL);
}

void
cuac_fdchan_close(cua_client *c)
{
	if (c->fdc_fd >= 0)
		close(c->fdc_fd);
	c->fdc_fd = -1;
	explicit_bzero(c->fd_secret, sizeof(c->fd_secret));
}
