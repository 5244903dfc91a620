/*
 * test_shm_hostile.c — the shared-memory channel (issue 19; PROTOCOL.md §10, common/cua_shm.h).
 *
 *   channel_carries_calls: libcuasync with CUASYNC_SHM=1 attaches a channel, its calls go through it (the
 *     client's counter and the daemon's log say so) and give the right bytes; with CUASYNC_SHM=0 none does.
 *   hostile_rings_beside_good_clients: hostile raw sessions attach channels (some refused at attach: seals
 *     missing, wrong sizes, bad magic, a pipe for a doorbell, a malformed SHM record), serve a few honest PINGs
 *     through their rings, then scribble over them at random (random heads and tails, records of absurd lengths,
 *     garbage messages, flags, truncate attempts) until the daemon closes the channel; one fills its reply ring
 *     and never reads it. Meanwhile two well-behaved clients with the channel on run verified rounds. The daemon
 *     must survive, close every hostile channel (and log why), and the good clients must see every round right,
 *     on their one session: the daemon's listener watchdog must never have restarted the listener (NNG #1518).
 */
#include "config.h"

#include "cua_fdchan.h"
#include "cua_proto.h"
#include "cua_shm.h"
#include "cua_wire.h"
#include "harness.h"

#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define RING (64u * 1024u)
#define ROUND_BYTES (16u * 1024u)
#define HOSTILE_ROUNDS 12
#define NHOSTILE 3

static struct daemon D;
static char chan_path[108];
static atomic_int attackers_left;
static atomic_uint closed_seen, refused_seen, wrongly_accepted, honest_pings;

static void
up(void)
{
	static const char *const extra[] = {"--send-timeout", "2000", NULL};
	daemon_start(&D, extra);
	ck_assert_uint_lt(strlen(D.url + 6) + strlen(CUA_FDCHAN_SUFFIX), sizeof(chan_path));
	snprintf(chan_path, sizeof(chan_path), "%s%s", D.url + 6, CUA_FDCHAN_SUFFIX);
}

static void
down(void)
{
	daemon_stop(&D);
}

static void
pause_ms(unsigned ms)
{
	nanosleep(&(struct timespec){0, (long)ms * 1000000L}, NULL);
}

/* ---- a raw session and its fd channel */

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
	char *rep = NULL;
	size_t rlen = 0;
	ck_assert_int_eq(nng_send(s, b.data, b.len, 0), 0);
	int rv = nng_recv(s, &rep, &rlen, NNG_FLAG_ALLOC);
	cua_wbuf_free(&b);
	ck_assert_msg(rv == 0, "HELLO: %s", nng_strerror(rv));
	cua_wire_reply r;
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(rep, rlen, &r, &e), 0);
	ck_assert_uint_eq(r.status, CUA_OK);
	*sid = r.body.hello.session;
	memcpy(secret, r.body.hello.fd_secret.ptr, CUA_FDCHAN_SECRET);
	cua_wire_reply_free(&r);
	nng_free(rep, rlen);
	return s;
}

static int
chan_status(int s)
{
	unsigned char b[sizeof(struct cua_fdchan_reply) + CUA_FDCHAN_MAX_TEXT];
	ssize_t n = recv(s, b, sizeof(b), 0);
	if (n < 0 && errno == ECONNRESET)
		n = recv(s, b, sizeof(b), 0);
	ck_assert_msg(n != -1 || errno != EAGAIN, "the fd channel did not answer within 20 s");
	if (n < (ssize_t)sizeof(struct cua_fdchan_reply))
		return -1;
	struct cua_fdchan_reply r;
	memcpy(&r, b, sizeof(r));
	return (int)le32toh(r.status);
}

static int
chan_open(uint64_t sid, const uint8_t *secret)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, chan_path, sizeof(chan_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(s, 0);
	struct timeval tv = {20, 0}; /* a bound on the daemon's answer, not a timing assertion */
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(connect(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	struct cua_fdchan_auth a = {htole32(CUA_FDCHAN_AUTH), htole32(CUA_FDCHAN_VERSION), htole64(sid), {0}};
	memcpy(a.secret, secret, CUA_FDCHAN_SECRET);
	ck_assert_int_eq(send(s, &a, sizeof(a), 0), (ssize_t)sizeof(a));
	ck_assert_int_eq(chan_status(s), CUA_OK);
	return s;
}

/* Sends an SHM record (nfds_said in the record, the n descriptors of fds attached); the REPLY's status. */
static int
chan_shm(int s, uint32_t nfds_said, const int *fds, unsigned n)
{
	struct cua_fdchan_pass p = {htole32(CUA_FDCHAN_SHM), htole32(nfds_said)};
	unsigned char ctl[CMSG_SPACE(4 * sizeof(int))];
	memset(ctl, 0, sizeof(ctl));
	struct iovec iov = {&p, sizeof(p)};
	struct msghdr m = {.msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl,
			   .msg_controllen = CMSG_SPACE(n * sizeof(int))};
	struct cmsghdr *h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(h), fds, n * sizeof(int));
	ck_assert_int_eq(sendmsg(s, &m, MSG_NOSIGNAL), (ssize_t)sizeof(p));
	return chan_status(s);
}

/* ---- a hostile channel */

struct hch {
	int memfd, efd;
	unsigned char *map;
	size_t size;
	struct cua_shm_hdr *h;
	unsigned char *req, *rep;
	uint32_t tail, rhead;
	uint64_t seq;
};

enum { MK_GOOD, MK_NOSEAL, MK_SIZE, MK_MAGIC, MK_RING };

static void
hch_make(struct hch *c, int how)
{
	memset(c, 0, sizeof(*c));
	c->size = CUA_SHM_HDR_BYTES + 2u * RING + (how == MK_SIZE ? 4096u : 0u);
	c->memfd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(c->memfd, 0);
	ck_assert_int_eq(ftruncate(c->memfd, (off_t)c->size), 0);
	if (how != MK_NOSEAL)
		ck_assert_int_eq(fcntl(c->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	c->map = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd, 0);
	ck_assert(c->map != MAP_FAILED);
	c->h = (struct cua_shm_hdr *)c->map;
	c->h->magic = how == MK_MAGIC ? 0x12345678u : CUA_SHM_MAGIC;
	c->h->version = CUA_SHM_VERSION;
	c->h->ring_bytes = how == MK_RING ? RING + 16u : RING;
	c->req = c->map + CUA_SHM_HDR_BYTES;
	c->rep = c->req + RING;
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ck_assert_int_ge(c->efd, 0);
}

static void
hch_free(struct hch *c)
{
	munmap(c->map, c->size);
	close(c->memfd);
	close(c->efd);
}

static void
ring_put(struct hch *c, uint32_t len, uint32_t flags, uint64_t tag, const void *body, size_t blen)
{
	struct cua_shm_rec r = {len, flags, tag};
	memcpy(c->req + (c->tail & (RING - 1)), &r, sizeof(r));
	for (size_t i = 0; i < blen; i++)
		c->req[(c->tail + sizeof(r) + i) & (RING - 1)] = ((const unsigned char *)body)[i];
	c->tail += (uint32_t)(sizeof(r) + ((blen + 15) & ~(size_t)15));
	__atomic_store_n(&c->h->req_tail, c->tail, __ATOMIC_SEQ_CST);
	eventfd_write(c->efd, 1);
}

/* An honest PING through the ring, its reply read back from the reply ring (bounded wait) and checked. false
 * when the daemon closed the channel instead. */
static bool
honest_ping(struct hch *c)
{
	struct cua_req_ping p = {0xfeed0000u + c->seq};
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), CUA_OP_PING, ++c->seq, &p), 0);
	ring_put(c, (uint32_t)b.len, 0, c->seq, b.data, b.len);
	cua_wbuf_free(&b);
	struct cua_shm_rec r = {0, 0, 0};
	unsigned char msg[256];
	/* replies of the garbage records sent before may come first: skipped (bounded) */
	for (int skipped = 0; r.tag != c->seq; skipped++) {
		ck_assert_int_lt(skipped, 1000);
		int k = 0;
		while (__atomic_load_n(&c->h->rep_tail, __ATOMIC_SEQ_CST) == c->rhead &&
		       __atomic_load_n(&c->h->closed, __ATOMIC_SEQ_CST) == 0 && k++ < 20000)
			pause_ms(1);
		ck_assert_msg(k < 20000, "no reply in the reply ring within 20 s");
		if (__atomic_load_n(&c->h->rep_tail, __ATOMIC_SEQ_CST) == c->rhead)
			return false;
		memcpy(&r, c->rep + (c->rhead & (RING - 1)), sizeof(r));
		ck_assert_uint_eq(r.flags, 0);
		ck_assert_uint_le(r.len, sizeof(msg));
		for (uint32_t i = 0; i < r.len; i++)
			msg[i] = c->rep[(c->rhead + sizeof(r) + i) & (RING - 1)];
		c->rhead += (uint32_t)(sizeof(r) + ((r.len + 15) & ~15u));
		__atomic_store_n(&c->h->rep_head, c->rhead, __ATOMIC_SEQ_CST);
	}
	cua_wire_reply w;
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(msg, r.len, &w, &e), 0);
	ck_assert_uint_eq(w.status, CUA_OK);
	ck_assert_uint_eq(w.body.ping.nonce, p.nonce);
	cua_wire_reply_free(&w);
	atomic_fetch_add(&honest_pings, 1);
	return true;
}

/* One random scribble. */
static void
scribble(struct hch *c, unsigned *seed)
{
	uint32_t junk[64];
	for (unsigned i = 0; i < 64; i++)
		junk[i] = (uint32_t)rand_r(seed) * 2654435761u;
	switch (rand_r(seed) % 8) {
	case 0: /* garbage over the request ring, then a tail a random number of records on */
		for (unsigned i = 0; i < RING / sizeof(junk); i++)
			memcpy(c->req + i * sizeof(junk), junk, sizeof(junk));
		c->tail += 16u * ((uint32_t)rand_r(seed) % (RING / 16u));
		__atomic_store_n(&c->h->req_tail, c->tail, __ATOMIC_SEQ_CST);
		eventfd_write(c->efd, 1);
		break;
	case 1: /* a random tail */
		__atomic_store_n(&c->h->req_tail, junk[0], __ATOMIC_SEQ_CST);
		eventfd_write(c->efd, 1);
		break;
	case 2: /* a random reply head */
		__atomic_store_n(&c->h->rep_head, junk[1], __ATOMIC_SEQ_CST);
		(void)honest_ping(c); /* the daemon looks at the head as it answers: it closes the channel instead */
		break;
	case 3: /* a length past the ring */ ring_put(c, RING * 4u + junk[2] % 1000u, 0, 1, junk, 16); break;
	case 4: /* a zero length */ ring_put(c, 0, 0, 2, NULL, 0); break;
	case 5: /* flags where none belong */ ring_put(c, 16, CUA_SHM_MORE, 3, junk, 16); break;
	case 6: /* a well-framed record of garbage: answered with an error, not a violation */
		ring_put(c, 200, 0, 4, junk, 200);
		break;
	default: /* the memfd cannot shrink or grow under the daemon's mapping */
		ck_assert_int_ne(ftruncate(c->memfd, CUA_SHM_HDR_BYTES), 0);
		ck_assert_int_ne(ftruncate(c->memfd, (off_t)c->size * 2), 0);
		break;
	}
}

/* true when the daemon closed c (its status in the header) within 20 s. */
static bool
wait_closed(struct hch *c)
{
	for (int k = 0; k < 2000; k++) {
		if (__atomic_load_n(&c->h->closed, __ATOMIC_SEQ_CST) != 0)
			return true;
		pause_ms(10);
	}
	return false;
}

static void *
attacker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1u;
	for (int round = 0; round < HOSTILE_ROUNDS; round++) {
		uint64_t sid;
		uint8_t secret[CUA_FDCHAN_SECRET];
		nng_socket ns = raw_session(&sid, secret);
		int s = chan_open(sid, secret);
		struct hch c;
		/* refusals at attach: each is answered, nothing is mapped */
		static const int bad[] = {MK_NOSEAL, MK_SIZE, MK_MAGIC, MK_RING};
		int how = bad[(unsigned)round % 4u];
		hch_make(&c, how);
		int fds[2] = {c.memfd, c.efd}, st = chan_shm(s, 2, fds, 2);
		atomic_fetch_add(st != CUA_OK ? &refused_seen : &wrongly_accepted, 1);
		if (round % 3 == 0) { /* a pipe for a doorbell */
			int p[2];
			ck_assert_int_eq(pipe(p), 0);
			hch_free(&c);
			hch_make(&c, MK_GOOD);
			int pf[2] = {c.memfd, p[0]};
			st = chan_shm(s, 2, pf, 2);
			atomic_fetch_add(st != CUA_OK ? &refused_seen : &wrongly_accepted, 1);
			close(p[0]);
			close(p[1]);
		}
		hch_free(&c);
		/* a channel that works, then is scribbled over */
		hch_make(&c, MK_GOOD);
		int gf[2] = {c.memfd, c.efd};
		int ast = chan_shm(s, 2, gf, 2);
		ck_assert_msg(ast == CUA_OK, "attach: %s", cua_strerror_name(ast));
		ck_assert(honest_ping(&c) && honest_ping(&c));
		if (round == 1) {
			/* a client that never reads its replies: flooded with PINGs, the daemon queues, stops reading,
			 * and closes the channel after --send-timeout */
			struct cua_req_ping p = {1};
			for (int i = 0; i < 5000 && __atomic_load_n(&c.h->closed, __ATOMIC_SEQ_CST) == 0; i++) {
				while (c.tail - __atomic_load_n(&c.h->req_head, __ATOMIC_SEQ_CST) > RING - 256u &&
				       __atomic_load_n(&c.h->closed, __ATOMIC_SEQ_CST) == 0)
					pause_ms(1);
				cua_wbuf b = {0};
				ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), CUA_OP_PING, ++c.seq, &p), 0);
				ring_put(&c, (uint32_t)b.len, 0, c.seq, b.data, b.len);
				cua_wbuf_free(&b);
			}
		} else {
			for (int k = 0; k < 6 && __atomic_load_n(&c.h->closed, __ATOMIC_SEQ_CST) == 0; k++)
				scribble(&c, &seed);
			/* and a tail that is no record boundary, in case none of the above broke a rule */
			__atomic_store_n(&c.h->req_tail, c.tail + 8u, __ATOMIC_SEQ_CST);
			eventfd_write(c.efd, 1);
		}
		ck_assert_msg(wait_closed(&c), "the daemon did not close a scribbled channel within 20 s");
		/* why, as the daemon wrote it: a broken rule, or (the flood) replies the client never read */
		uint32_t why = __atomic_load_n(&c.h->closed, __ATOMIC_SEQ_CST);
		ck_assert_msg(why == (round == 1 ? (uint32_t)CUA_ETIMEOUT : (uint32_t)CUA_EPROTOCOL),
			      "round %d: closed with %s", round, cua_strerror_name((int)why));
		atomic_fetch_add(&closed_seen, 1);
		hch_free(&c);
		close(s);
		nng_close(ns);
	}
	atomic_fetch_sub(&attackers_left, 1);
	return NULL;
}

/* ---- the well-behaved */

#define GK(call)                                                                                                       \
	do {                                                                                                           \
		int rc_ = (call);                                                                                      \
		if (rc_ != CUA_OK)                                                                                     \
			return rc_;                                                                                    \
	} while (0)

/* One verified round; CUA_OK or the status of the call that failed. */
static int
good_round_rc(cua_client *c, uint32_t v)
{
	static _Thread_local uint32_t in[ROUND_BYTES / 4], out[ROUND_BYTES / 4];
	cua_deviceptr d;
	GK(cua_mem_alloc(c, 0, ROUND_BYTES, &d));
	for (uint32_t i = 0; i < ROUND_BYTES / 4; i++)
		in[i] = v ^ i;
	GK(cua_memcpy_htod(c, d, in, ROUND_BYTES));
	memset(out, 0, sizeof(out));
	GK(cua_memcpy_dtoh(c, out, d, ROUND_BYTES));
	for (uint32_t i = 0; i < ROUND_BYTES / 4; i++)
		ck_assert_uint_eq(out[i], v ^ i);
	GK(cua_ping(c));
	GK(cua_mem_free(c, d));
	return CUA_OK;
}

static void
good_round(cua_client *c, uint32_t v)
{
	int r = good_round_rc(c, v);
	ck_assert_msg(r == CUA_OK, "round %u: %s: %s", v, cua_strerror_name(r), cua_last_error());
}

/* Rounds until the attackers are done, every one served on the one session: nothing an attacker does to its own
 * rings may cost a well-behaved client its connection. */
static void *
good_client(void *arg)
{
	cua_client *c = connect_to(&D);
	unsigned rounds = 0;
	uint32_t base = (uint32_t)(uintptr_t)arg << 24;
	good_round(c, base);
	while (atomic_load(&attackers_left) > 0 && rounds < 100000)
		good_round(c, base + ++rounds);
	good_round(c, base + 0xffffffu);
	ck_assert_uint_gt(cua_shm_requests(c), rounds);
	cua_disconnect(c);
	return (void *)(uintptr_t)rounds;
}

START_TEST(channel_carries_calls)
{
	setenv("CUASYNC_SHM", "1", 1);
	cua_client *c = connect_to(&D);
	for (uint32_t v = 0; v < 20; v++)
		good_round(c, v);
	ck_assert_uint_ge(cua_shm_requests(c), 80);
	cua_disconnect(c);
	ck_assert(file_has(D.log, "shared-memory channel attached"));
	setenv("CUASYNC_SHM", "0", 1);
	c = connect_to(&D);
	good_round(c, 77);
	ck_assert_uint_eq(cua_shm_requests(c), 0);
	cua_disconnect(c);
}
END_TEST

START_TEST(hostile_rings_beside_good_clients)
{
	setenv("CUASYNC_SHM", "1", 1);
	atomic_store(&attackers_left, NHOSTILE);
	pthread_t good[2], bad[NHOSTILE];
	for (uintptr_t i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&good[i], NULL, good_client, (void *)(i + 1)), 0);
	for (uintptr_t i = 0; i < NHOSTILE; i++)
		ck_assert_int_eq(pthread_create(&bad[i], NULL, attacker, (void *)i), 0);
	for (int i = 0; i < NHOSTILE; i++)
		pthread_join(bad[i], NULL);
	unsigned rounds = 0;
	for (int i = 0; i < 2; i++) {
		void *r;
		pthread_join(good[i], &r);
		rounds += (unsigned)(uintptr_t)r;
	}
	fprintf(stderr, "  good rounds: %u; hostile channels closed: %u; attaches refused: %u; honest pings: %u\n",
		rounds, atomic_load(&closed_seen), atomic_load(&refused_seen), atomic_load(&honest_pings));
	ck_assert_uint_eq(atomic_load(&wrongly_accepted), 0);
	ck_assert_uint_eq(atomic_load(&closed_seen), NHOSTILE * HOSTILE_ROUNDS);
	ck_assert(file_has(D.log, "closing the channel and its connection"));
	ck_assert(file_has(D.log, "is not a record boundary within the ring"));
	ck_assert(file_has(D.log, "(--send-timeout); closing the channel"));
	/* The attackers' NNG dialers redial the connections the daemon closed and are closed mid-handshake: NNG
	 * 1.5.2 stopped its listener on that (#1518, daemon/nngfix.c) and the listener watchdog restarted it, closing
	 * every client's connection. It must not have had to. */
	ck_assert_msg(!file_has(D.log, "stopped accepting"), "the daemon restarted a listener during the attack");
	/* the daemon still serves a fresh client through a channel */
	cua_client *c = connect_to(&D);
	good_round(c, 0xabcdefu);
	ck_assert_uint_gt(cua_shm_requests(c), 0);
	cua_disconnect(c);
}
END_TEST

/* LeakSanitizer, in this test process only (the daemon's leaks are checked with tests/lsan.supp as everywhere):
 * NNG 1.5.2 keeps a few objects of raw sockets whose connections the daemon closed while their dialers were
 * busy (allocated on NNG's own threads, start_thread -> libnng). Nothing of libcuasync's channel is allocated
 * there. No effect without ASan. */
const char *__lsan_default_suppressions(void);
const char *
__lsan_default_suppressions(void)
{
	return "leak:libnng.so\n";
}

static Suite *
shm_suite(void)
{
	Suite *s = suite_create("shm");
	TCase *tc = tcase_create("channel");
	tcase_add_unchecked_fixture(tc, up, down);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, channel_carries_calls);
	tcase_add_test(tc, hostile_rings_beside_good_clients);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(shm_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
