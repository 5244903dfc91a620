/* Flow control that cannot be starved (issue 10): hostile and naive peers, speaking SP over a raw unix socket
 * (libcuasync would refuse to misbehave), while a well-behaved client measures PING and a 64-byte HTOD+DTOH
 * round in a loop. Each test asserts that the well-behaved client is served throughout (no timeout, no
 * refusal, new connections included) and that the daemon's memory returns near its baseline; latencies and
 * RSS are printed, not asserted. */
#include "config.h"

#include "cua_proto.h"
#include "cua_wire.h"
#include "harness.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SEND_TIMEOUT_MS 3000
#define GAP_TIMEOUT_MS 2000

static struct daemon D;

static void
up(void)
{
	static const char *const args[] = {"--send-timeout", "3000", "--seq-gap-timeout", "2000", NULL};
	daemon_start(&D, args);
}

static void
down(void)
{
	daemon_stop(&D);
}

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The daemon front-end's resident set, in KiB. */
static long
rss_kib(void)
{
	char path[64], line[256];
	long kib = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)D.pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* ------------------------------------------------------------------ a raw SP (req0) peer over ipc */

struct raw {
	int fd;
	uint32_t next_id;
};

static void
raw_connect(struct raw *r)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n = strlen(D.url + 6);
	ck_assert_uint_lt(n, sizeof(sa.sun_path));
	memcpy(sa.sun_path, D.url + 6, n);
	r->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(r->fd, 0);
	ck_assert_int_eq(connect(r->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	static const unsigned char hdr[8] = {0x00, 'S', 'P', 0x00, 0x00, 0x30, 0x00, 0x00}; /* req0 */
	unsigned char got[8];
	ck_assert_int_eq(write(r->fd, hdr, 8), 8);
	ck_assert_int_eq(recv(r->fd, got, 8, MSG_WAITALL), 8);
	ck_assert(got[1] == 'S' && got[2] == 'P');
	r->next_id = 1;
}

/* Writes one request frame (type 1, 64-bit length, request id, body). Returns 0, or -1 when the socket did
 * not take it within timeout_ms (the daemon stopped reading) or failed. */
static int
raw_write(struct raw *r, uint32_t op, uint64_t seq, const void *body, int timeout_ms)
{
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), op, seq, body), 0);
	unsigned char frame[4096];
	uint64_t len = b.len + 4;
	ck_assert_uint_le(b.len + 13, sizeof(frame));
	frame[0] = 1;
	for (int i = 0; i < 8; i++)
		frame[1 + i] = (unsigned char)(len >> (56 - 8 * i));
	uint32_t id = 0x80000000u | r->next_id++;
	for (int i = 0; i < 4; i++)
		frame[9 + i] = (unsigned char)(id >> (24 - 8 * i));
	memcpy(frame + 13, b.data, b.len);
	size_t n = b.len + 13, off = 0;
	cua_wbuf_free(&b);
	while (off < n) {
		struct pollfd p = {r->fd, POLLOUT, 0};
		if (poll(&p, 1, timeout_ms) != 1)
			return -1;
		ssize_t w = send(r->fd, frame + off, n - off, MSG_NOSIGNAL);
		if (w <= 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

/* Reads one reply frame: its status and message (and its first body value in *v when v), or -1 (nothing
 * within timeout_ms, or the connection closed). */
static int
raw_read(struct raw *r, int timeout_ms, char *msg, size_t msglen, uint64_t *v)
{
	unsigned char h[9];
	struct pollfd p = {r->fd, POLLIN, 0};
	if (poll(&p, 1, timeout_ms) != 1 || recv(r->fd, h, 9, MSG_WAITALL) != 9)
		return -1;
	uint64_t len = 0;
	for (int i = 1; i < 9; i++)
		len = len << 8 | h[i];
	ck_assert_uint_ge(len, 4);
	char *buf = malloc(len);
	ck_assert_ptr_nonnull(buf);
	if (recv(r->fd, buf, len, MSG_WAITALL) != (ssize_t)len) {
		free(buf);
		return -1;
	}
	cua_wire_reply rep;
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(buf + 4, len - 4, &rep, &e), 0);
	int st = (int)rep.status;
	if (msg)
		snprintf(msg, msglen, "%.*s", (int)rep.message.len, (const char *)rep.message.ptr);
	if (v)
		memcpy(v, &rep.body, sizeof(*v));
	cua_wire_reply_free(&rep);
	free(buf);
	return st;
}

/* A raw request answered OK: its first body value. */
static uint64_t
raw_call(struct raw *r, uint32_t op, uint64_t seq, const void *body)
{
	char msg[512];
	uint64_t v = 0;
	ck_assert_int_eq(raw_write(r, op, seq, body, 5000), 0);
	int st = raw_read(r, 5000, msg, sizeof(msg), &v);
	ck_assert_msg(st == CUA_OK, "raw op %u: status %d: %s", op, st, msg);
	return v;
}

static void
raw_hello(struct raw *r)
{
	raw_connect(r);
	struct cua_req_hello h = {1, 1, {"raw", 3}, 1};
	raw_call(r, CUA_OP_HELLO, 0, &h);
}

/* true when the daemon closed the connection within timeout_ms. Reads nothing: reading would make the peer
 * well-behaved. */
static bool
raw_closed(struct raw *r, int timeout_ms)
{
	struct pollfd p = {r->fd, POLLRDHUP, 0};
	return poll(&p, 1, timeout_ms) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* ------------------------------------------------------------------ the well-behaved client */

#define MAX_SAMPLES 200000

struct probe {
	pthread_t thread;
	atomic_int stop;
	unsigned n, failures, connects;
	char first_failure[512];
	double *ping_ms, *round_ms;
	double max_connect_ms;
};

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void
probe_fail(struct probe *p, const char *what, int rc)
{
	if (p->failures++ == 0)
		snprintf(p->first_failure, sizeof(p->first_failure), "%s: %s: %s", what, cua_strerror_name(rc),
			 cua_last_error());
}

/* A fresh connection every 100 rounds (HELLO must be answered too); PING, then 64 bytes there and back. */
static void *
probe_main(void *arg)
{
	struct probe *p = arg;
	cua_client *c = NULL;
	cua_deviceptr dp = 0;
	unsigned char out[64], in[64];
	for (unsigned i = 0; !atomic_load(&p->stop) && p->n < MAX_SAMPLES; i++) {
		if (c == NULL || i % 100 == 0) {
			if (c)
				cua_disconnect(c);
			double t0 = now_s();
			int rc = cua_connect(D.url, &c);
			if (rc == CUA_OK) {
				cua_set_timeout(c, 5000); /* the attack made HELLO time out after 5 s */
				rc = cua_mem_alloc(c, 0, 64, &dp);
			}
			if (rc != CUA_OK) {
				probe_fail(p, "connect", rc);
				c = NULL;
				continue;
			}
			double ms = (now_s() - t0) * 1000;
			p->max_connect_ms = ms > p->max_connect_ms ? ms : p->max_connect_ms;
			p->connects++;
		}
		memset(out, (int)i, sizeof(out));
		double t0 = now_s();
		int rc = cua_ping(c);
		double t1 = now_s();
		if (rc == CUA_OK)
			rc = cua_memcpy_htod(c, dp, out, sizeof(out));
		if (rc == CUA_OK)
			rc = cua_memcpy_dtoh(c, in, dp, sizeof(in));
		double t2 = now_s();
		if (rc != CUA_OK || memcmp(in, out, sizeof(in)) != 0) {
			probe_fail(p, "round", rc);
			continue;
		}
		p->ping_ms[p->n] = (t1 - t0) * 1000;
		p->round_ms[p->n] = (t2 - t1) * 1000;
		p->n++;
	}
	if (c)
		cua_disconnect(c);
	return NULL;
}

static void
probe_start(struct probe *p)
{
	memset(p, 0, sizeof(*p));
	p->ping_ms = calloc(MAX_SAMPLES, sizeof(double));
	p->round_ms = calloc(MAX_SAMPLES, sizeof(double));
	ck_assert(p->ping_ms && p->round_ms);
	ck_assert_int_eq(pthread_create(&p->thread, NULL, probe_main, p), 0);
}

/* Stops p, prints its figures under the name of the attack, asserts it was served throughout. */
static void
probe_stop(struct probe *p, const char *attack)
{
	atomic_store(&p->stop, 1);
	pthread_join(p->thread, NULL);
	unsigned n = p->n;
	double pp[3] = {0}, rp[3] = {0};
	if (n > 0) {
		qsort(p->ping_ms, n, sizeof(double), cmp_double);
		qsort(p->round_ms, n, sizeof(double), cmp_double);
		const double q[3] = {0.5, 0.99, 1.0};
		for (int k = 0; k < 3; k++) {
			pp[k] = p->ping_ms[(unsigned)(q[k] * (n - 1))];
			rp[k] = p->round_ms[(unsigned)(q[k] * (n - 1))];
		}
	}
	printf("%-28s rounds %6u  PING p50 %.3f p99 %.3f max %.1f ms  HTOD+DTOH p50 %.3f p99 %.3f max %.1f ms  "
	       "connects %u (slowest %.1f ms)\n",
	       attack, n, pp[0], pp[1], pp[2], rp[0], rp[1], rp[2], p->connects, p->max_connect_ms);
	fflush(stdout);
	free(p->ping_ms);
	free(p->round_ms);
	ck_assert_msg(p->failures == 0, "%s: the well-behaved client failed %u times; first: %s", attack, p->failures,
		      p->first_failure);
	ck_assert_uint_gt(n, 10);
}

static bool
sessions_le_1(const cua_daemon_status *s, void *ud)
{
	(void)ud;
	return s->sessions <= 1;
}

/* Waits until only the operator's session is left, then prints the RSS and asserts a generous bound. */
static void
check_rss(const char *attack, long base_kib, long peak_kib)
{
	cua_client *op = connect_operator(&D);
	cua_daemon_status st;
	ck_assert(wait_status(op, sessions_le_1, NULL, &st));
	cua_disconnect(op);
	usleep(200 * 1000);
	long after = rss_kib();
	printf("%-28s RSS baseline %ld MiB, during %ld MiB, after %ld MiB\n", attack, base_kib / 1024, peak_kib / 1024,
	       after / 1024);
#if defined(__SANITIZE_ADDRESS__)
	(void)base_kib; /* AddressSanitizer keeps freed memory in quarantine: the RSS says nothing then */
#else
	ck_assert_msg(after < base_kib + 96 * 1024, "%s: RSS %ld KiB after, baseline %ld KiB", attack, after, base_kib);
#endif
}

/* A baseline after a warm-up round of the well-behaved client. */
static long
baseline(void)
{
	struct probe p;
	probe_start(&p);
	usleep(300 * 1000);
	probe_stop(&p, "undisturbed");
	return rss_kib();
}

/* ------------------------------------------------------------------ the attacks */

/* (a) One connection pipelines 3000 × 1 MiB DTOH requests and never reads its replies. Its replies queue up to
 * --session-reply-bytes (then QUOTA, then its requests are dropped), nothing of it holds anyone else's
 * receive capacity, and --send-timeout closes it. */
START_TEST(unread_dtoh_replies)
{
	long base = baseline();
	struct raw a;
	raw_hello(&a);
	struct cua_req_mem_alloc ma = {0, 1u << 20};
	uint64_t p = raw_call(&a, CUA_OP_MEM_ALLOC, 0, &ma);
	struct probe pr;
	probe_start(&pr);
	double t0 = now_s();
	unsigned sent = 0;
	struct cua_req_memcpy_dtoh d = {p, 1u << 20, 0};
	for (; sent < 3000; sent++)
		if (raw_write(&a, CUA_OP_MEMCPY_DTOH, 0, &d, 2000) != 0)
			break;
	double wrote = now_s() - t0;
	long peak = 0;
	bool closed = false;
	for (double until = now_s() + (SEND_TIMEOUT_MS + 5000) / 1000.0; !closed && now_s() < until;) {
		long kib = rss_kib(); /* the peak, sampled every 100 ms */
		peak = kib > peak ? kib : peak;
		closed = raw_closed(&a, 100);
	}
	printf("attack a: %u of 3000 DTOH requests written in %.2f s; connection closed by the daemon after %.1f s\n",
	       sent, wrote, now_s() - t0);
	probe_stop(&pr, "a: 3000 x 1 MiB DTOH unread");
	ck_assert_msg(closed, "the daemon did not close a connection that does not read");
	close(a.fd);
	check_rss("a: 3000 x 1 MiB DTOH unread", base, peak);
}
END_TEST

/* (b) A naive client sends 5000 PINGs before reading any reply. The daemon keeps reading (it answers QUOTA
 * past --session-pending and drops requests past twice that), so the client is never blocked for long, and
 * nobody else waits. */
START_TEST(naive_pipeline_of_pings)
{
	long base = baseline();
	struct raw b;
	raw_hello(&b);
	struct probe pr;
	probe_start(&pr);
	double t0 = now_s();
	unsigned sent = 0;
	struct cua_req_ping pg = {7};
	for (; sent < 5000; sent++)
		if (raw_write(&b, CUA_OP_PING, 0, &pg, 5000) != 0)
			break;
	double wrote = now_s() - t0;
	long peak = rss_kib();
	unsigned ok = 0, quota = 0, other = 0;
	int st;
	while ((st = raw_read(&b, 1000, NULL, 0, NULL)) >= 0)
		ok += st == CUA_OK, quota += st == CUA_EQUOTA, other += st != CUA_OK && st != CUA_EQUOTA;
	printf("attack b: 5000 PINGs written in %.2f s, then read: %u OK, %u QUOTA, %u other, %u dropped\n", wrote, ok,
	       quota, other, 5000 - ok - quota - other);
	probe_stop(&pr, "b: 5000 PINGs before reading");
	ck_assert_uint_eq(sent, 5000);
	ck_assert_uint_gt(ok, 0);
	ck_assert_uint_eq(other, 0);
	close(b.fd);
	check_rss("b: 5000 PINGs before reading", base, peak);
}
END_TEST

/* (c) 9 connections × 63 requests whose seq 1 is never sent (9 × 63 > the 512 contexts the daemon starts
 * with): the contexts grow, and after --seq-gap-timeout every waiting request is answered PROTOCOL naming seq
 * 1; seq 1 is then used up ("already used") and the next number is served. 63, not 64: with HELLO's reply
 * counted until the daemon saw it sent (which may be just after the client read it), 64 can touch the
 * --session-pending limit of 64. */
START_TEST(sequence_gaps_expire)
{
	enum { NCONN = 9, NREQ = 63 };
	long base = baseline();
	static struct raw c[NCONN];
	struct probe pr;
	probe_start(&pr);
	struct cua_req_ping pg = {9};
	for (int i = 0; i < NCONN; i++) {
		raw_hello(&c[i]);
		for (int k = 0; k < NREQ; k++)
			ck_assert_int_eq(raw_write(&c[i], CUA_OP_PING, (uint64_t)(2 + k), &pg, 5000), 0);
	}
	double t0 = now_s();
	long peak = rss_kib();
	char msg[512];
	for (int i = 0; i < NCONN; i++)
		for (int k = 0; k < NREQ; k++) {
			int st = raw_read(&c[i], GAP_TIMEOUT_MS + 5000, msg, sizeof(msg), NULL);
			ck_assert_msg(st == CUA_EPROTOCOL, "connection %d request %d: status %d: %s", i, k, st, msg);
			ck_assert_msg(strstr(msg, "sequence number 1 did not arrive within --seq-gap-timeout"), "%s",
				      msg);
		}
	printf("attack c: %d x %d requests behind a missing seq 1 answered PROTOCOL after %.2f s\n", NCONN, NREQ,
	       now_s() - t0);
	probe_stop(&pr, "c: 9 x 63 behind a missing seq");
	ck_assert_int_eq(raw_write(&c[0], CUA_OP_PING, 1, &pg, 5000), 0);
	ck_assert_int_eq(raw_read(&c[0], 5000, msg, sizeof(msg), NULL), CUA_EPROTOCOL);
	ck_assert_msg(strstr(msg, "already used"), "%s", msg);
	ck_assert_int_eq(raw_write(&c[0], CUA_OP_PING, 2 + NREQ, &pg, 5000), 0);
	ck_assert_int_eq(raw_read(&c[0], 5000, msg, sizeof(msg), NULL), CUA_OK);
	for (int i = 0; i < NCONN; i++)
		close(c[i].fd);
	check_rss("c: 9 x 63 behind a missing seq", base, peak);
}
END_TEST

static Suite *
flow_suite(void)
{
	Suite *s = suite_create("flow");
	TCase *tc = tcase_create("attacks");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, unread_dtoh_replies);
	tcase_add_test(tc, naive_pipeline_of_pings);
	tcase_add_test(tc, sequence_gaps_expire);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(flow_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
