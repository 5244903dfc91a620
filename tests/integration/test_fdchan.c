/*
 * test_fdchan.c — host buffers through the fd channel (issue 22, point 3; PROTOCOL.md §9) with hostile peers
 * beside a well-behaved client. The well-behaved one (libcuasync) registers host buffers, copies through them
 * both ways and unregisters, round after round, while hostile threads attack the channel and HOST_REGISTER at
 * the same time:
 *   - AUTH with wrong secrets and with sessions that do not exist;
 *   - a session of its own passing 1000 descriptors, 4 per record, again and again, and one record of 253;
 *   - connections of another user (nobody, when run as root) that never authenticate, past the per-user limit;
 *   - HOST_REGISTER naming descriptor numbers and guessed tickets (the client's own among them).
 * Every well-behaved round must succeed with the right bytes, every attack be refused, and when the attackers
 * are done the daemon holds no more descriptors than before they started.
 */
#include "config.h"

#include "cua_fdchan.h"
#include "cua_proto.h"
#include "cua_wire.h"
#include "harness.h"

#include <check.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
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

#define ROUND_BYTES (64u * 1024u)
#define ATTACK_ROUNDS 20

static struct daemon D;
static char chan_path[108]; /* the fd channel beside D's ipc:// socket */
static atomic_int attackers_left;
static atomic_uint refusals, accepted_wrongly;

/* Counts one attack: refused as it must be, or not (said on stderr: which and what it got). */
static void
tally(bool refused, const char *what, int status)
{
	atomic_fetch_add(refused ? &refusals : &accepted_wrongly, 1);
	if (!refused)
		fprintf(stderr, "  NOT REFUSED: %s: %s\n", what, status < 0 ? "closed" : cua_strerror_name(status));
}

static void
up(void)
{
	daemon_start(&D, NULL);
	ck_assert_uint_lt(strlen(D.url + 6) + strlen(CUA_FDCHAN_SUFFIX), sizeof(chan_path));
	memcpy(chan_path, D.url + 6, strlen(D.url + 6));
	memcpy(chan_path + strlen(D.url + 6), CUA_FDCHAN_SUFFIX, sizeof(CUA_FDCHAN_SUFFIX));
}

static void
down(void)
{
	daemon_stop(&D);
}

static unsigned
daemon_fds(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)D.pid);
	DIR *dir = opendir(path);
	ck_assert_ptr_nonnull(dir);
	unsigned n = 0;
	for (struct dirent *e; (e = readdir(dir)) != NULL;)
		n += e->d_name[0] != '.';
	closedir(dir);
	return n;
}

/* ---- a raw session (the hostile ones speak the wire themselves) */

static nng_socket
raw_session(uint64_t *sid, uint8_t *secret)
{
	nng_socket s;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 20000);
	ck_assert_int_eq(nng_dial(s, D.url, NULL, 0), 0);
	struct cua_req_hello h = {1, 1, {"hostile", 7}, (uint32_t)getpid(), {"", 0}};
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), CUA_OP_HELLO, 0, &h), 0);
	ck_assert_int_eq(nng_send(s, b.data, b.len, 0), 0);
	cua_wbuf_free(&b);
	char *rep = NULL;
	size_t rlen = 0;
	ck_assert_int_eq(nng_recv(s, &rep, &rlen, NNG_FLAG_ALLOC), 0);
	cua_wire_reply r;
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(rep, rlen, &r, &e), 0);
	ck_assert_uint_eq(r.status, CUA_OK);
	ck_assert_uint_eq(r.body.hello.fd_secret.len, CUA_FDCHAN_SECRET);
	*sid = r.body.hello.session;
	memcpy(secret, r.body.hello.fd_secret.ptr, CUA_FDCHAN_SECRET);
	cua_wire_reply_free(&r);
	nng_free(rep, rlen);
	return s;
}

/* One HOST_REGISTER on the raw session; its status. */
static int
raw_host_register(nng_socket s, uint64_t ticket)
{
	struct cua_req_host_register hr = {0, ticket, 4096};
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), CUA_OP_HOST_REGISTER, 0, &hr), 0);
	ck_assert_int_eq(nng_send(s, b.data, b.len, 0), 0);
	cua_wbuf_free(&b);
	char *rep = NULL;
	size_t rlen = 0;
	ck_assert_int_eq(nng_recv(s, &rep, &rlen, NNG_FLAG_ALLOC), 0);
	cua_wire_reply r;
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(rep, rlen, &r, &e), 0);
	int st = (int)r.status;
	cua_wire_reply_free(&r);
	nng_free(rep, rlen);
	return st;
}

/* ---- the channel, raw */

static int
chan_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, chan_path, sizeof(chan_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(s, 0);
	struct timeval tv = {20, 0}; /* a bound on the daemon's answer, not a timing assertion */
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return s;
}

static ssize_t
chan_send(int s, const void *rec, size_t n, const int *fds, unsigned nfds)
{
	unsigned char ctl[CMSG_SPACE(253 * sizeof(int))];
	memset(ctl, 0, sizeof(ctl));
	struct iovec iov = {(void *)rec, n};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
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

/* The status of the next REPLY, or -1 when the daemon closed the connection instead. */
static int
chan_status(int s)
{
	unsigned char b[sizeof(struct cua_fdchan_reply) + CUA_FDCHAN_MAX_TEXT];
	ssize_t n = recv(s, b, sizeof(b), 0);
	if (n < 0 && errno == ECONNRESET) /* closed with our records unread: the REPLY is still queued behind it */
		n = recv(s, b, sizeof(b), 0);
	ck_assert_msg(n != -1 || errno != EAGAIN, "the fd channel did not answer within 20 s");
	if (n < (ssize_t)sizeof(struct cua_fdchan_reply))
		return -1;
	struct cua_fdchan_reply r;
	memcpy(&r, b, sizeof(r));
	return (int)le32toh(r.status);
}

/* Reads until the daemon closes s (bounded by SO_RCVTIMEO per read and by the count), then closes it. */
static void
chan_drain_closed(int s)
{
	unsigned char b[512];
	int k = 0;
	ssize_t n;
	while (k++ < 1000 && ((n = recv(s, b, sizeof(b), 0)) > 0 || (n < 0 && errno == ECONNRESET)))
		;
	ck_assert_msg(k < 1000, "the daemon did not close a refused connection");
	close(s);
}

static int
chan_auth(uint64_t sid, const uint8_t *secret)
{
	int s = chan_connect();
	struct cua_fdchan_auth a = {htole32(CUA_FDCHAN_AUTH), htole32(CUA_FDCHAN_VERSION), htole64(sid), {0}};
	memcpy(a.secret, secret, CUA_FDCHAN_SECRET);
	chan_send(s, &a, sizeof(a), NULL, 0);
	return s;
}

/* An authenticated connection of sid. The attackers share one uid, so one's connection may be refused (QUOTA)
 * while another's silent ones wait for their AUTH: the per-user limit hurts only that user. Bounded retries. */
static int
chan_auth_ok(uint64_t sid, const uint8_t *secret)
{
	for (int k = 0; k < 1000; k++) {
		int s = chan_auth(sid, secret), st = chan_status(s);
		if (st == CUA_OK)
			return s;
		ck_assert_msg(st == CUA_EQUOTA, "AUTH: %s", cua_strerror_name(st));
		chan_drain_closed(s);
	}
	ck_abort_msg("AUTH refused 1000 times");
	return -1;
}

/* ---- the attackers */

static void *
wrong_secrets(void *arg)
{
	(void)arg;
	uint64_t sid;
	uint8_t secret[CUA_FDCHAN_SECRET];
	nng_socket own = raw_session(&sid, secret);
	for (int k = 0; k < ATTACK_ROUNDS * 5; k++) {
		secret[k % CUA_FDCHAN_SECRET] ^= 0x5a; /* never the right one: the first byte changes first */
		int s = chan_auth(k % 2 ? sid : sid + 100000 + (uint64_t)k, secret);
		int st = chan_status(s); /* QUOTA: refused at the door, another attacker's silent ones waiting */
		tally(st == CUA_EUNAUTHENTICATED || st == CUA_EQUOTA, "AUTH with a wrong secret", st);
		chan_drain_closed(s);
		secret[k % CUA_FDCHAN_SECRET] ^= 0x5a;
	}
	nng_close(own);
	atomic_fetch_sub(&attackers_left, 1);
	return NULL;
}

static void *
descriptor_flood(void *arg)
{
	(void)arg;
	uint64_t sid;
	uint8_t secret[CUA_FDCHAN_SECRET];
	nng_socket own = raw_session(&sid, secret);
	int fd = memfd_create("flood", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	int many[253];
	for (int i = 0; i < 253; i++)
		many[i] = fd;
	for (int round = 0; round < ATTACK_ROUNDS / 4; round++) {
		/* 1000 descriptors, 4 per PASS: the session may hold 16 unclaimed */
		int s = chan_auth_ok(sid, secret);
		int st = CUA_OK, sent = 0;
		for (; sent < 1000 && st == CUA_OK; sent += 4) {
			struct cua_fdchan_pass p = {htole32(CUA_FDCHAN_PASS), htole32(4)};
			st = chan_send(s, &p, sizeof(p), many, 4) == (ssize_t)sizeof(p) ? chan_status(s) : -1;
		}
		tally(st == CUA_EQUOTA && sent <= 4 * 5, "1000 descriptors", st);
		chan_drain_closed(s);
		/* 253 in one record */
		s = chan_auth_ok(sid, secret);
		struct cua_fdchan_pass p = {htole32(CUA_FDCHAN_PASS), htole32(253)};
		chan_send(s, &p, sizeof(p), many, 253);
		st = chan_status(s);
		tally(st == CUA_EPROTOCOL, "253 descriptors in one PASS", st);
		chan_drain_closed(s);
		/* the 16 it holds are named by nothing: tickets it was never given are refused too */
		st = raw_host_register(own, (uint64_t)fd);
		tally(st == CUA_ENOT_FOUND, "HOST_REGISTER naming a descriptor number", st);
	}
	close(fd);
	nng_close(own); /* its session ends: the daemon closes the 16 */
	atomic_fetch_add(&attackers_left, -1);
	return NULL;
}

/* Connections that never send AUTH, from another user (nobody: a user's own silent connections only crowd out
 * that user's, PROTOCOL.md §9). Six at a time: at most 4 of one user wait, the others are refused at once, the 4
 * after 2 s. The child reports through its exit status how many were not refused. Root only (setuid); else
 * skipped. */
static void *
silent_connections(void *arg)
{
	(void)arg;
	struct passwd *pw = getpwnam("nobody");
	if (geteuid() != 0 || pw == NULL) {
		fprintf(stderr, "  (not root: the silent connections of another user are not tried)\n");
		atomic_fetch_add(&attackers_left, -1);
		return NULL;
	}
	pid_t pid = fork();
	/* Raw system calls only in the child, and no Check assertion: each takes Check's mutex, which another thread
	 * (the well-behaved client's, an attacker's) may hold at the fork, and then holds forever in this copy, where
	 * that thread does not exist. An assertion here hung the child before its setuid, and its parent in waitpid,
	 * in full runs on a loaded machine (about half the runs, while good_round asserted once a word). */
	if (pid == 0) {
		int wrong = 0;
		if (setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
			_exit(100);
		for (int round = 0; round < ATTACK_ROUNDS / 5; round++) {
			int cs[6];
			for (int i = 0; i < 6; i++) {
				struct sockaddr_un sa = {.sun_family = AF_UNIX};
				memcpy(sa.sun_path, chan_path, strlen(chan_path) + 1);
				cs[i] = socket(AF_UNIX, SOCK_SEQPACKET, 0);
				struct timeval tv = {5, 0}; /* the daemon answers within its 2 s AUTH deadline */
				setsockopt(cs[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
				if (connect(cs[i], (struct sockaddr *)&sa, sizeof(sa)) != 0)
					_exit(101);
			}
			for (int i = 0; i < 6; i++) {
				unsigned char b[sizeof(struct cua_fdchan_reply) + CUA_FDCHAN_MAX_TEXT];
				ssize_t n = recv(cs[i], b, sizeof(b), 0);
				uint32_t st = 0;
				if (n >= (ssize_t)sizeof(struct cua_fdchan_reply))
					memcpy(&st, b + 4, 4);
				st = le32toh(st);
				bool bad = n < (ssize_t)sizeof(struct cua_fdchan_reply) ||
					   (st != CUA_EQUOTA && st != CUA_ETIMEOUT);
				if (bad) { /* what the daemon did instead, for the log (raw write: a forked child) */
					char line[128];
					int len = snprintf(line, sizeof(line),
							   "  silent connection %d of round %d: recv %zd (errno %d), "
							   "status %u\n",
							   i, round, n, n < 0 ? errno : 0, st);
					if (write(2, line, (size_t)len) < 0)
						wrong++;
				}
				wrong += bad;
				close(cs[i]);
			}
		}
		_exit(wrong > 99 ? 99 : wrong);
	}
	ck_assert_int_gt(pid, 0);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nobody's silent connections: status %d", st);
	for (int i = 0; i < (ATTACK_ROUNDS / 5) * 6; i++)
		tally(true, "a silent connection of another user", 0);
	atomic_fetch_add(&attackers_left, -1);
	return NULL;
}

static void *
ticket_guesses(void *arg)
{
	(void)arg;
	uint64_t sid;
	uint8_t secret[CUA_FDCHAN_SECRET];
	nng_socket own = raw_session(&sid, secret);
	for (uint64_t t = 1; t <= ATTACK_ROUNDS * 10; t++) /* descriptor numbers and tickets of others alike */
	{
		int st = raw_host_register(own, t);
		tally(st == CUA_ENOT_FOUND, "HOST_REGISTER naming a guessed ticket", st);
	}
	nng_close(own);
	atomic_fetch_add(&attackers_left, -1);
	return NULL;
}

/* ---- the well-behaved client */

/* One round: two host buffers, a copy in through one and out through the other, checked, all freed. */
static void
good_round(cua_client *c, uint32_t v)
{
	void *in, *out;
	cua_deviceptr d;
	CK(cua_host_alloc(c, 0, ROUND_BYTES, &in));
	CK(cua_host_alloc(c, 0, ROUND_BYTES, &out));
	CK(cua_mem_alloc(c, 0, ROUND_BYTES, &d));
	uint32_t *w = in, *r = out;
	for (uint32_t i = 0; i < ROUND_BYTES / 4; i++)
		w[i] = v ^ i;
	CK(cua_memcpy_htod(c, d, in, ROUND_BYTES));
	CK(cua_memcpy_dtoh(c, out, d, ROUND_BYTES));
	uint32_t i = 0;
	while (i < ROUND_BYTES / 4 && r[i] == (v ^ i))
		i++;
	/* one assertion, not one a word: each passing one writes its place under Check's mutex (silent_connections) */
	ck_assert_msg(i == ROUND_BYTES / 4, "round %#x: word %u came back as %#x", v, i, r[i]);
	CK(cua_mem_free(c, d));
	CK(cua_host_free(c, in));
	CK(cua_host_free(c, out));
}

START_TEST(well_behaved_client_served_while_hostile_ones_attack)
{
	cua_client *good = connect_to(&D);
	good_round(good, 0x600d0000u); /* its channel connection is made and kept */
	if (geteuid() == 0) {          /* nobody may reach the channel (and must still be refused) */
		ck_assert_int_eq(chmod(D.dir, 0711), 0);
		ck_assert_int_eq(chmod(chan_path, 0666), 0);
	}
	unsigned base = daemon_fds();
	void *(*const attackers[])(void *) = {wrong_secrets, descriptor_flood, silent_connections, ticket_guesses};
	enum { NA = sizeof(attackers) / sizeof(attackers[0]) };
	pthread_t th[NA];
	atomic_store(&attackers_left, NA);
	for (int i = 0; i < NA; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, attackers[i], NULL), 0);
	unsigned rounds = 0;
	while (atomic_load(&attackers_left) > 0 && rounds < 100000)
		good_round(good, 0x600d0000u + ++rounds);
	for (int i = 0; i < NA; i++)
		pthread_join(th[i], NULL);
	good_round(good, 0x600dffffu);
	fprintf(stderr, "  well-behaved rounds during the attacks: %u; refusals: %u\n", rounds, atomic_load(&refusals));
	ck_assert_uint_eq(atomic_load(&accepted_wrongly), 0);
	ck_assert_uint_gt(rounds, 0);
	/* the attackers' descriptors and connections are gone (their sessions' are closed when the daemon frees
	 * them, which no reply announces: looked at every 10 ms, for 20 s at most) */
	unsigned n = 0;
	for (int i = 0; i < 2000 && (n = daemon_fds()) > base; i++)
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	ck_assert_msg(n <= base, "the daemon holds %u descriptors, %u before the attacks", n, base);
	ck_assert(file_has(D.log, "fd channel"));
	ck_assert(file_has(D.log, "HOST_REGISTER refused"));
	cua_disconnect(good);
}
END_TEST

static Suite *
fdchan_suite(void)
{
	Suite *s = suite_create("fdchan");
	TCase *tc = tcase_create("attacks");
	tcase_add_unchecked_fixture(tc, up, down);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, well_behaved_client_served_while_hostile_ones_attack);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(fdchan_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
