/*
 * fdchan.c — conformance cases of the fd channel (PROTOCOL.md §9: [R:fdchan-auth], [R:fdchan-pass],
 * [R:fdchan-limits]) and of HOST_REGISTER's ticket (§4 [R:hostbuf-ticket]). Written from the document: raw
 * SOCK_SEQPACKET records and raw SCM_RIGHTS, no libcuasync. Every wait is bounded (SO_RCVTIMEO on the channel;
 * the daemon answers or closes within its own limits, 2 s for a missing AUTH).
 *
 * The pid-reuse attack (issue 22 point 3): a connection outlives the process that made it, so a daemon that looks
 * descriptors up by the connecting pid (/proc/PID/fd) serves whoever holds the connection later. A test cannot
 * force a pid to be reused; it shows the surface is gone: a process that inherited a connection whose maker has
 * exited, and one whose maker still lives and holds a memfd, both name descriptors in HOST_REGISTER and are
 * refused and logged.
 */
#include "config.h"

#include "rules.h"

#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define D conf_dmn
#define SECRET 32
#define REC_AUTH 1u
#define REC_PASS 2u

/* True when the first MiB of file contains text. */
static bool
file_contains(const char *file, const char *text)
{
	static char buf[1 << 20];
	FILE *f = fopen(file, "r");
	if (f == NULL)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/* ------------------------------------------------------------------ the channel, from §9 */

static void
chan_path(const struct dmn *d, char *out, size_t len)
{
	snprintf(out, len, "%s.fd", d->url + strlen("ipc://"));
}

/* A connection to d's fd channel; replies are waited for at most 10 s. -1 when connect fails (errno). */
static int
chan_try(const struct dmn *d)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	chan_path(d, sa.sun_path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct timeval tv = {10, 0};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		close(s);
		errno = e;
		return -1;
	}
	return s;
}

static int
chan_open(const struct dmn *d)
{
	int s = chan_try(d);
	ck_assert_msg(s >= 0, "connect to the fd channel: %s", strerror(errno));
	return s;
}

/* Sends one record with nfds descriptors (SCM_RIGHTS). The sendmsg result. */
static ssize_t
chan_send(int s, const void *rec, size_t n, const int *fds, unsigned nfds)
{
	static unsigned char ctl[CMSG_SPACE(253 * sizeof(int))];
	struct iovec iov = {(void *)rec, n};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		memset(ctl, 0, sizeof(ctl));
		m.msg_control = ctl;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *h = CMSG_FIRSTHDR(&m);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(h), fds, nfds * sizeof(int));
	}
	return sendmsg(s, &m, MSG_NOSIGNAL);
}

struct creply {
	uint32_t kind, status;
	uint64_t tickets[4];
	char msg[300];
};

/* recv, past the ECONNRESET that a close with our records unread reports before the REPLY still queued (§9:
 * the daemon closes after a refusal whatever we sent meanwhile). */
static ssize_t
recv_rec(int s, void *b, size_t len)
{
	ssize_t n = recv(s, b, len, 0);
	if (n < 0 && errno == ECONNRESET)
		n = recv(s, b, len, 0);
	return n;
}

/* One REPLY (40 bytes + message): 0, or -1 when the connection was closed instead. */
static int
chan_reply(int s, struct creply *r)
{
	unsigned char b[40 + 257];
	ssize_t n = recv_rec(s, b, sizeof(b));
	ck_assert_msg(n != -1 || errno != EAGAIN, "no reply from the fd channel within 10 s");
	if (n <= 0)
		return -1;
	ck_assert_int_ge(n, 40);
	ck_assert_int_le(n, 40 + 256);
	uint32_t u32;
	memcpy(&u32, b, 4);
	r->kind = le32toh(u32);
	memcpy(&u32, b + 4, 4);
	r->status = le32toh(u32);
	for (int i = 0; i < 4; i++) {
		uint64_t t;
		memcpy(&t, b + 8 + 8 * i, 8);
		r->tickets[i] = le64toh(t);
	}
	snprintf(r->msg, sizeof(r->msg), "%.*s", (int)(n - 40), (const char *)b + 40);
	return 0;
}

/* Expects a REPLY answering kind with status, then (for a refusal) the connection closed. */
static void
chan_expect(int s, uint32_t kind, uint32_t status, struct creply *out)
{
	struct creply r;
	ck_assert_msg(chan_reply(s, &r) == 0, "the channel closed without a REPLY (expected %s)", st_name(status));
	ck_assert_msg(r.kind == kind && r.status == status, "REPLY kind %u %s (%s), expected kind %u %s", r.kind,
		      st_name(r.status), r.msg, kind, st_name(status));
	if (status != ST_OK) {
		ck_assert_msg(r.msg[0] != '\0', "a refusal says why");
		char b[8];
		ck_assert_msg(recv_rec(s, b, sizeof(b)) == 0, "the daemon closes the connection after %s",
			      st_name(status));
	}
	if (out)
		*out = r;
}

static void
auth_rec(unsigned char rec[48], uint64_t session, const uint8_t *secret)
{
	uint32_t k = htole32(REC_AUTH), v = htole32(1);
	uint64_t id = htole64(session);
	memcpy(rec, &k, 4);
	memcpy(rec + 4, &v, 4);
	memcpy(rec + 8, &id, 8);
	memcpy(rec + 16, secret, SECRET);
}

static void
pass_rec(unsigned char rec[8], uint32_t nfds)
{
	uint32_t k = htole32(REC_PASS), n = htole32(nfds);
	memcpy(rec, &k, 4);
	memcpy(rec + 4, &n, 4);
}

void
chan_sess(const struct dmn *d, struct conn *c, uint64_t *session, uint8_t *secret)
{
	size_t len;
	conn_open(c, d->url);
	conn_hello_secret(c, session, secret, &len);
	ck_assert_uint_eq(len, SECRET);
}

int
chan_auth(const struct dmn *d, uint64_t session, const uint8_t *secret)
{
	int s = chan_open(d);
	unsigned char rec[48];
	auth_rec(rec, session, secret);
	ck_assert_int_eq(chan_send(s, rec, sizeof(rec), NULL, 0), (ssize_t)sizeof(rec));
	chan_expect(s, REC_AUTH, ST_OK, NULL);
	return s;
}

void
pass_ok(int s, const int *fds, unsigned n, uint64_t *t)
{
	unsigned char rec[8];
	struct creply r;
	pass_rec(rec, n);
	ck_assert_int_eq(chan_send(s, rec, sizeof(rec), fds, n), (ssize_t)sizeof(rec));
	chan_expect(s, REC_PASS, ST_OK, &r);
	for (unsigned i = 0; i < n; i++) {
		ck_assert_uint_ne(r.tickets[i], 0);
		t[i] = r.tickets[i];
	}
}

/* A memfd of n bytes sealed against shrinking. */
static int
memfd(size_t n)
{
	int fd = memfd_create("conformance", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)n), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

/* The daemon's open descriptors. */
static unsigned
daemon_fds(const struct dmn *d)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)d->pid);
	DIR *dir = opendir(path);
	ck_assert_ptr_nonnull(dir);
	unsigned n = 0;
	for (struct dirent *e; (e = readdir(dir)) != NULL;)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/* Waits (bounded: 20 s, looking every 10 ms) until the daemon holds at most base descriptors: a session's
 * descriptors are closed when the daemon frees it, which no reply announces. */
static void
fds_back_to(const struct dmn *d, unsigned base)
{
	unsigned n = 0;
	for (int i = 0; i < 2000 && (n = daemon_fds(d)) > base; i++)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	ck_assert_msg(n <= base, "the daemon holds %u descriptors, %u before", n, base);
}

/* A well-behaved round: pass a memfd, register it by its ticket, copy through it both ways, unregister. */
static void
good_round(struct conn *c, int s, uint32_t v)
{
	int fd = memfd(4096);
	uint32_t *map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(map, MAP_FAILED);
	map[0] = v;
	uint64_t t;
	pass_ok(s, &fd, 1, &t);
	close(fd); /* the daemon holds its own */
	struct reply r;
	expect(c, OP_HOST_REGISTER, 0, ST_OK, &r, "[uuu]", U(0), t, U(4096));
	uint64_t h = r.body->a[0].u;
	reply_free(&r);
	uint64_t p = alloc(c, 4096);
	expect(c, OP_MEMCPY_HTOD_HOST, 0, ST_OK, NULL, "[uuuuu]", p, U(0), h, U(0), U(4));
	expect(c, OP_MEMCPY_DTOH_HOST, 0, ST_OK, NULL, "[uuuuu]", p, U(0), h, U(8), U(4));
	ck_assert_uint_eq(map[2], v);
	expect(c, OP_HOST_UNREGISTER, 0, ST_OK, NULL, "[u]", h);
	expect(c, OP_MEM_FREE, 0, ST_OK, NULL, "[u]", p);
	munmap(map, 4096);
}

/* ------------------------------------------------------------------ §9 authentication */

START_TEST(r_fdchan_auth)
{
	struct conn c;
	uint64_t sid;
	uint8_t secret[SECRET], wrong[SECRET];
	chan_sess(&D, &c, &sid, secret);
	unsigned base = daemon_fds(&D);
	unsigned char rec[48], prec[8];
	int fd = memfd(4096);
	/* another secret, and a session that does not exist, answer alike */
	memcpy(wrong, secret, SECRET);
	wrong[SECRET - 1] ^= 1;
	int s = chan_open(&D);
	auth_rec(rec, sid, wrong);
	ck_assert_int_eq(chan_send(s, rec, sizeof(rec), NULL, 0), 48);
	chan_expect(s, REC_AUTH, ST_UNAUTHENTICATED, NULL);
	close(s);
	s = chan_open(&D);
	auth_rec(rec, sid + 1000, secret);
	chan_send(s, rec, sizeof(rec), NULL, 0);
	chan_expect(s, REC_AUTH, ST_UNAUTHENTICATED, NULL);
	close(s);
	/* PASS before AUTH: refused, and its descriptor not kept */
	s = chan_open(&D);
	pass_rec(prec, 1);
	chan_send(s, prec, sizeof(prec), &fd, 1);
	chan_expect(s, REC_PASS, ST_UNAUTHENTICATED, NULL);
	close(s);
	/* descriptors on AUTH */
	s = chan_open(&D);
	auth_rec(rec, sid, secret);
	chan_send(s, rec, sizeof(rec), &fd, 1);
	chan_expect(s, REC_AUTH, ST_PROTOCOL, NULL);
	close(s);
	/* the right secret from another user: PERMISSION_DENIED (root only: the case needs a second uid) */
	if (geteuid() == 0) {
		struct passwd *pw = getpwnam("nobody");
		ck_assert_ptr_nonnull(pw);
		char path[128];
		chan_path(&D, path, sizeof(path));
		ck_assert_int_eq(chmod(D.dir, 0711), 0);
		ck_assert_int_eq(chmod(path, 0666), 0);
		int pfd[2];
		ck_assert_int_eq(pipe(pfd), 0);
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) { /* no Check calls in here: report through the pipe */
			close(pfd[0]);
			char out[400] = "setuid failed";
			if (setgid(pw->pw_gid) == 0 && setuid(pw->pw_uid) == 0) {
				struct sockaddr_un sa = {.sun_family = AF_UNIX};
				memcpy(sa.sun_path, path, strlen(path) + 1);
				int cs = socket(AF_UNIX, SOCK_SEQPACKET, 0);
				struct timeval tv = {10, 0};
				setsockopt(cs, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
				unsigned char b[300] = {0};
				if (connect(cs, (struct sockaddr *)&sa, sizeof(sa)) != 0)
					snprintf(out, sizeof(out), "connect: %s", strerror(errno));
				else if (send(cs, rec, 48, 0) != 48)
					snprintf(out, sizeof(out), "send: %s", strerror(errno));
				else {
					ssize_t n = recv(cs, b, sizeof(b) - 1, 0);
					uint32_t st;
					memcpy(&st, b + 4, 4);
					snprintf(out, sizeof(out), "%zd %u %s|%zd", n, le32toh(st), (char *)b + 40,
						 recv(cs, b, sizeof(b), 0));
				}
			}
			(void)!write(pfd[1], out, strlen(out));
			_exit(0);
		}
		close(pfd[1]);
		char got[400] = {0};
		ck_assert_int_gt(read(pfd[0], got, sizeof(got) - 1), 0);
		close(pfd[0]);
		waitpid(pid, NULL, 0);
		unsigned long n = 0, st = 99;
		ck_assert_msg(sscanf(got, "%lu %lu", &n, &st) == 2 && st == ST_PERMISSION_DENIED, "nobody's AUTH: %s",
			      got);
		ck_assert_msg(strstr(got, "|0") != NULL, "nobody's connection was not closed: %s", got);
	}
	/* the right one: OK once; AUTH again is a violation */
	s = chan_open(&D);
	auth_rec(rec, sid, secret);
	chan_send(s, rec, sizeof(rec), NULL, 0);
	chan_expect(s, REC_AUTH, ST_OK, NULL);
	chan_send(s, rec, sizeof(rec), NULL, 0);
	chan_expect(s, REC_AUTH, ST_PROTOCOL, NULL);
	close(s);
	close(fd);
	fds_back_to(&D, base);
	ck_assert(file_contains(D.log, "fd channel"));
	ck_assert(file_contains(D.log, "refused peer uid"));
	ping_ok(&c, 7);
	conn_close(&c);
}
END_TEST

/* ------------------------------------------------------------------ §9 passing */

START_TEST(r_fdchan_pass)
{
	struct conn c;
	uint64_t sid, t[4];
	uint8_t secret[SECRET];
	chan_sess(&D, &c, &sid, secret);
	unsigned base = daemon_fds(&D);
	int s = chan_auth(&D, sid, secret);
	int fds[4] = {memfd(4096), memfd(4096), memfd(4096), memfd(4096)};
	pass_ok(s, fds, 4, t);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(t[i], t[j]);
	ck_assert_uint_ge(daemon_fds(&D), base + 1 + 4); /* the connection and the four */
	struct reply r;
	expect(&c, OP_HOST_REGISTER, 0, ST_OK, &r, "[uuu]", U(0), t[2], U(4096));
	reply_free(&r);
	/* the session ends: the three unclaimed descriptors, the buffer's and the channel's connection go */
	conn_close(&c);
	char b[64];
	ck_assert_msg(recv_rec(s, b, sizeof(b)) == 0, "the session's channel connection is closed with it");
	close(s);
	for (int i = 0; i < 4; i++)
		close(fds[i]);
	fds_back_to(&D, base);
}
END_TEST

/* ------------------------------------------------------------------ §9 errors and limits */

START_TEST(r_fdchan_limits)
{
	struct conn good, c;
	uint64_t gsid, sid;
	uint8_t gsecret[SECRET], secret[SECRET];
	chan_sess(&D, &good, &gsid, gsecret);
	int gs = chan_auth(&D, gsid, gsecret); /* the well-behaved session keeps its connection */
	good_round(&good, gs, 1);
	chan_sess(&D, &c, &sid, secret);
	unsigned base = daemon_fds(&D);
	int fd = memfd(4096);
	unsigned char prec[8];
	/* 253 descriptors in one PASS (the kernel's most): refused, none kept */
	static int many[253];
	for (int i = 0; i < 253; i++)
		many[i] = fd;
	int s = chan_auth(&D, sid, secret);
	pass_rec(prec, 253);
	ck_assert_int_eq(chan_send(s, prec, sizeof(prec), many, 253), 8);
	chan_expect(s, REC_PASS, ST_PROTOCOL, NULL);
	close(s);
	fds_back_to(&D, base);
	good_round(&good, gs, 2);
	/* 1000 descriptors, 4 at a time: 16 are taken, then QUOTA and the connection closed */
	s = chan_auth(&D, sid, secret);
	unsigned ok = 0;
	struct creply r = {0};
	for (int k = 0; k < 250; k++) {
		int four[4] = {fd, fd, fd, fd};
		pass_rec(prec, 4);
		if (chan_send(s, prec, sizeof(prec), four, 4) != 8 || chan_reply(s, &r) != 0 || r.status != ST_OK)
			break;
		ok += 4;
	}
	ck_assert_uint_eq(ok, 16);
	ck_assert_msg(r.status == ST_QUOTA, "%s: %s", st_name(r.status), r.msg);
	close(s);
	good_round(&good, gs, 3);
	/* records of another size or kind */
	s = chan_auth(&D, sid, secret);
	ck_assert_int_eq(chan_send(s, "\x02\0\0\0\x01\0\0\0\0", 9, &fd, 1), 9);
	chan_expect(s, REC_PASS, ST_PROTOCOL, NULL);
	close(s);
	s = chan_auth(&D, sid, secret);
	chan_send(s, "\x07\0\0\0\x01\0\0\0", 8, NULL, 0);
	chan_expect(s, 0, ST_PROTOCOL, NULL);
	close(s);
	/* a third connection of one session */
	int s1 = chan_auth(&D, sid, secret), s2 = chan_auth(&D, sid, secret);
	s = chan_open(&D);
	unsigned char rec[48];
	auth_rec(rec, sid, secret);
	chan_send(s, rec, sizeof(rec), NULL, 0);
	chan_expect(s, REC_AUTH, ST_QUOTA, NULL);
	close(s);
	close(s1);
	close(s2);
	/* no AUTH: TIMEOUT within the daemon's 2 s; and at most 4 such connections of one user at once */
	int idle[5];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 5; i++)
		idle[i] = chan_open(&D);
	struct creply q;
	ck_assert_int_eq(chan_reply(idle[4], &q), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* The fifth is refused while the first four wait, unless this host was so slow that 2 s passed and the
	 * first were refused already (then the fifth was no longer the fifth). */
	if (t1.tv_sec - t0.tv_sec < 2)
		ck_assert_msg(q.kind == 0 && q.status == ST_QUOTA, "fifth waiting connection: %s", st_name(q.status));
	else
		ck_assert(q.status == ST_QUOTA || q.status == ST_TIMEOUT);
	for (int i = 0; i < 4; i++) {
		chan_expect(idle[i], 0, ST_TIMEOUT, NULL);
		close(idle[i]);
	}
	close(idle[4]);
	good_round(&good, gs, 4);
	/* the session ends: its 16 unclaimed descriptors are closed */
	conn_close(&c);
	close(fd);
	fds_back_to(&D, base - 1); /* less c's pipe */
	good_round(&good, gs, 5);
	close(gs);
	conn_close(&good);
	ck_assert(file_contains(D.log, "more descriptors than one PASS may carry"));
	ck_assert(file_contains(D.log, "no AUTH within"));
}
END_TEST

/* ------------------------------------------------------------------ §4 tickets, and the inherited connection */

/* Raw SP over the ipc:// socket, for a process that must not use NNG (forked): NNG's ipc framing is one byte 1,
 * a 64-bit big-endian length, then the message; a REQ message starts with its 32-bit request id, top bit set. */
static int
sp_connect(const char *url)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(url + strlen("ipc://")) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, url + strlen("ipc://"), strlen(url + strlen("ipc://")) + 1);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	static const unsigned char hdr[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};
	unsigned char got[8];
	struct timeval tv = {10, 0};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || write(s, hdr, 8) != 8 ||
	    recv(s, got, 8, MSG_WAITALL) != 8)
		return -1;
	return s;
}

/* Sends [1, op, 0, body] and returns the reply's status, or -1. */
static int
sp_call(int s, uint32_t id, uint64_t op, const char *fmt, ...)
{
	struct mpb b = {0}, body = {0};
	va_list ap;
	va_start(ap, fmt);
	mpb_vfmt(&body, fmt, &ap);
	va_end(ap);
	msg_build(&b, PV, op, 0, "r", body.p, body.n);
	unsigned char h[13];
	uint64_t len = htobe64(4 + b.n);
	uint32_t rid = htobe32(id | 0x80000000u);
	h[0] = 1;
	memcpy(h + 1, &len, 8);
	memcpy(h + 9, &rid, 4);
	int st = -1;
	if (write(s, h, 13) != 13 || write(s, b.p, b.n) != (ssize_t)b.n)
		goto out;
	unsigned char rh[9];
	if (recv(s, rh, 9, MSG_WAITALL) != 9)
		goto out;
	memcpy(&len, rh + 1, 8);
	len = be64toh(len);
	if (len < 4 || len > 65536)
		goto out;
	uint8_t *buf = malloc(len);
	struct mpv v;
	if (buf != NULL && recv(s, buf, len, MSG_WAITALL) == (ssize_t)len && mp_decode(buf + 4, len - 4, &v) == 0) {
		if (v.t == MP_ARR && v.len >= 3)
			st = (int)v.a[2].u;
		mpv_free(&v);
	}
	free(buf);
out:
	mpb_free(&b);
	mpb_free(&body);
	return st;
}

/* The inherited connection. P connects over ipc:// and says HELLO, forks Q, creates a memfd Q never held and
 * tells Q its number; Q names it in HOST_REGISTER while P lives (on a daemon that opens /proc/<P>/fd this
 * registers P's memory for Q). Then P exits, Q keeps the connection, and this process (the victim) creates a
 * memfd and tells Q its number; Q names it and 64 guessed tickets. Every one must be refused. No Check calls in
 * P and Q (they report through pipes and exit statuses); raw SP, not NNG, which is not fork-safe. */
static void
inherited_connection(void)
{
	int pq[2], qp[2], ctl[2], res[2];
	ck_assert(pipe(pq) == 0 && pipe(qp) == 0 && pipe(ctl) == 0 && pipe(res) == 0);
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		int s = sp_connect(D.url);
		if (s < 0 || sp_call(s, 1, OP_HELLO, "[uusus]", U(1), U(1), "inherit", U(getpid()), "") != ST_OK)
			_exit(2);
		pid_t q = fork();
		if (q < 0)
			_exit(3);
		if (q > 0) { /* P */
			close(s);
			int m = memfd_create("p-secret", MFD_ALLOW_SEALING);
			char c;
			if (m < 0 || ftruncate(m, 4096) != 0 || fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK) != 0 ||
			    write(pq[1], &m, sizeof(m)) != sizeof(m) || read(qp[0], &c, 1) != 1)
				_exit(4);
			_exit(0); /* Q keeps the connection */
		}
		int st[66], m, v;
		if (read(pq[0], &m, sizeof(m)) != sizeof(m))
			_exit(5);
		st[0] = sp_call(s, 2, OP_HOST_REGISTER, "[uuu]", U(0), U(m), U(4096));
		(void)!write(qp[1], "x", 1);
		if (read(ctl[0], &v, sizeof(v)) != sizeof(v))
			_exit(6);
		st[1] = sp_call(s, 3, OP_HOST_REGISTER, "[uuu]", U(0), U(v), U(4096));
		for (int k = 2; k < 66; k++)
			st[k] = sp_call(s, 2 + (uint32_t)k, OP_HOST_REGISTER, "[uuu]", U(0), U(k - 1), U(4096));
		(void)!write(res[1], st, sizeof(st));
		_exit(0);
	}
	int pst;
	ck_assert_int_eq(waitpid(p, &pst, 0), p);
	ck_assert_msg(WIFEXITED(pst) && WEXITSTATUS(pst) == 0, "P failed: %d", pst);
	int victim = memfd(4096);
	char *vm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, victim, 0);
	ck_assert_ptr_ne(vm, MAP_FAILED);
	memcpy(vm, "victim's secret", 16);
	(void)!write(ctl[1], &victim, sizeof(victim));
	int st[66];
	ck_assert_int_eq(read(res[0], st, sizeof(st)), (ssize_t)sizeof(st));
	ck_assert_msg(st[0] == ST_NOT_FOUND, "Q registered the memfd of P (alive, the connection's maker): %s",
		      st[0] < 0 ? "no reply" : st_name((uint64_t)st[0]));
	ck_assert_msg(st[1] == ST_NOT_FOUND, "Q named another process's memfd on P's connection: %s",
		      st[1] < 0 ? "no reply" : st_name((uint64_t)st[1]));
	for (int k = 2; k < 66; k++)
		ck_assert_msg(st[k] == ST_NOT_FOUND, "guessed ticket %d: %s", k - 1, st_name((uint64_t)st[k]));
	ck_assert_str_eq(vm, "victim's secret");
	ck_assert_msg(file_contains(D.log, "HOST_REGISTER refused"), "the refusals are not logged");
	munmap(vm, 4096);
	close(victim);
	for (int i = 0; i < 2; i++) {
		close(pq[i]);
		close(qp[i]);
		close(ctl[i]);
		close(res[i]);
	}
}

START_TEST(r_hostbuf_ticket)
{
	inherited_connection();
	struct conn a, b;
	uint64_t asid, bsid, t;
	uint8_t asec[SECRET], bsec[SECRET];
	chan_sess(&D, &a, &asid, asec);
	chan_sess(&D, &b, &bsid, bsec);
	int as = chan_auth(&D, asid, asec), bs = chan_auth(&D, bsid, bsec);
	int fd = memfd(4096);
	/* a descriptor number is no ticket, even of a live memfd of this very process */
	expect(&a, OP_HOST_REGISTER, 0, ST_NOT_FOUND, NULL, "[uuu]", U(0), U(fd), U(4096));
	/* A's ticket in B: refused, and A's still */
	pass_ok(as, &fd, 1, &t);
	expect(&b, OP_HOST_REGISTER, 0, ST_NOT_FOUND, NULL, "[uuu]", U(0), t, U(4096));
	struct reply r;
	expect(&a, OP_HOST_REGISTER, 0, ST_OK, &r, "[uuu]", U(0), t, U(4096));
	reply_free(&r);
	expect(&a, OP_HOST_REGISTER, 0, ST_NOT_FOUND, NULL, "[uuu]", U(0), t, U(4096)); /* used up */
	close(fd);
	close(as);
	close(bs);
	ping_ok(&a, 1);
	conn_close(&a);
	conn_close(&b);
}
END_TEST

size_t
fdchan_rules(struct rule *out)
{
	const struct rule rules[] = {
		{"fdchan-auth", r_fdchan_auth},
		{"fdchan-pass", r_fdchan_pass},
		{"fdchan-limits", r_fdchan_limits},
		{"hostbuf-ticket", r_hostbuf_ticket},
	};
	memcpy(out, rules, sizeof(rules));
	return sizeof(rules) / sizeof(rules[0]);
}
