/* Isolation between tenants in the shared mode (issue 9): a hostile session A pipelines, without waiting,
 * requests that name an object after the request that frees it (a long kernel, the release, another long
 * kernel, the use), on raw NNG REQ contexts with ordered seq numbers, while a well-behaved session B works.
 * Every such use is refused NOT_FOUND naming the releasing request (proto/PROTOCOL.md §3, daemon/session.h
 * "Release in sequence order"), B's data and host memory stay its own, and B is served meanwhile. */
#include "config.h"

#include "cua_fdchan.h"
#include "cua_proto.h"
#include "cua_wire.h"
#include "harness.h"

#include <check.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* How long A's kernels run: the window in which A's queued requests wait while B works. */
#define LONG_MS 300
#define NBYTES 4096u

static struct daemon D;

static void
up(void)
{
	daemon_start(&D, NULL); /* the shared isolation mode is the default */
}

static void
down(void)
{
	daemon_stop(&D);
}

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- raw requests: one REQ context each, so many are in flight on one connection ---- */

struct rawq {
	nng_ctx ctx;
	nng_aio *aio;
	atomic_bool receiving, replied; /* replied: the reply arrived (set by the aio's callback) */
};

static void
rawq_cb(void *arg)
{
	struct rawq *q = arg;
	if (atomic_load(&q->receiving))
		atomic_store(&q->replied, true);
}

/* Sends (op, seq, body) on a context of its own and returns once NNG took it; the reply is collected by
 * rawq_reply, rawq_expect or rawq_abandon (one of them must be called). */
static void
rawq_send(nng_socket s, struct rawq *q, uint32_t op, uint64_t seq, const void *body)
{
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), op, seq, body), 0);
	ck_assert_int_eq(nng_ctx_open(&q->ctx, s), 0);
	nng_ctx_set_ms(q->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	atomic_store(&q->receiving, false);
	atomic_store(&q->replied, false);
	ck_assert_int_eq(nng_aio_alloc(&q->aio, rawq_cb, q), 0);
	nng_aio_set_timeout(q->aio, 60000);
	nng_msg *m;
	ck_assert_int_eq(nng_msg_alloc(&m, 0), 0);
	ck_assert_int_eq(nng_msg_append(m, b.data, b.len), 0);
	cua_wbuf_free(&b);
	nng_aio_set_msg(q->aio, m);
	nng_ctx_send(q->ctx, q->aio);
	nng_aio_wait(q->aio);
	ck_assert_int_eq(nng_aio_result(q->aio), 0);
	atomic_store(&q->receiving, true);
	nng_ctx_recv(q->ctx, q->aio);
}

/* Waits for q's reply and decodes it into rep (its bytes live in *m: free both). Returns its status. */
static int
rawq_reply(struct rawq *q, cua_wire_reply *rep, nng_msg **m)
{
	nng_aio_wait(q->aio);
	ck_assert_int_eq(nng_aio_result(q->aio), 0);
	*m = nng_aio_get_msg(q->aio);
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(nng_msg_body(*m), nng_msg_len(*m), rep, &e), 0);
	nng_aio_free(q->aio);
	nng_ctx_close(q->ctx);
	return (int)rep->status;
}

/* Waits for q's reply and checks its op, status and (when msg is not NULL) a substring of its message. */
static void
rawq_expect(struct rawq *q, uint32_t op, int status, const char *msg)
{
	cua_wire_reply rep;
	nng_msg *m;
	int st = rawq_reply(q, &rep, &m);
	ck_assert_msg(st == status, "op %u: status %s (%.*s), want %s", op, cua_strerror_name(st), (int)rep.message.len,
		      (const char *)rep.message.ptr, cua_strerror_name(status));
	ck_assert_uint_eq(rep.op, op);
	if (msg != NULL)
		ck_assert_msg(memmem(rep.message.ptr, rep.message.len, msg, strlen(msg)) != NULL,
			      "op %u: message \"%.*s\" lacks \"%s\"", op, (int)rep.message.len,
			      (const char *)rep.message.ptr, msg);
	if (status != CUA_OK && op == CUA_OP_MEMCPY_DTOH)
		ck_assert_uint_eq(rep.body.memcpy_dtoh.data.len, 0); /* a refused DTOH carries no data */
	cua_wire_reply_free(&rep);
	nng_msg_free(m);
}

/* For a request whose connection was closed: waits for the aio to end, whatever it ended with. */
static void
rawq_abandon(struct rawq *q)
{
	nng_aio_wait(q->aio);
	nng_msg *m = nng_aio_result(q->aio) == 0 ? nng_aio_get_msg(q->aio) : NULL;
	if (m != NULL)
		nng_msg_free(m);
	nng_aio_free(q->aio);
	nng_ctx_close(q->ctx);
}

/* ---- the hostile session A: raw messages, its own seq numbers ---- */

struct peer {
	nng_socket s;
	uint64_t seq; /* the last ordered seq sent */
	uint64_t module, spin, fill, stream;
	uint64_t session;                     /* HELLO's reply */
	uint8_t fd_secret[CUA_FDCHAN_SECRET]; /* HELLO's reply: the fd channel's secret (PROTOCOL.md §9) */
};

static uint64_t
peer_send(struct peer *p, struct rawq *q, uint32_t op, const void *body)
{
	rawq_send(p->s, q, op, ++p->seq, body);
	return p->seq;
}

/* An ordered request answered OK; returns the first u64 of its reply body (handle, pointer), or 0. */
static uint64_t
peer_u64(struct peer *p, uint32_t op, const void *body)
{
	struct rawq q;
	peer_send(p, &q, op, body);
	cua_wire_reply rep;
	nng_msg *m;
	int st = rawq_reply(&q, &rep, &m);
	ck_assert_msg(st == CUA_OK, "op %u: %s: %.*s", op, cua_strerror_name(st), (int)rep.message.len,
		      (const char *)rep.message.ptr);
	uint64_t v = 0;
	if (op == CUA_OP_MEM_ALLOC || op == CUA_OP_MODULE_LOAD || op == CUA_OP_FUNCTION_GET ||
	    op == CUA_OP_STREAM_CREATE || op == CUA_OP_HOST_REGISTER)
		memcpy(&v, &rep.body, sizeof(v));
	cua_wire_reply_free(&rep);
	nng_msg_free(m);
	return v;
}

/* The test kernels: the fatbin from the build, or the emulated device's image. */
static uint64_t
peer_load(struct peer *p)
{
	static const char emu[] = "cuasync-emu-module\nfill_u32\nspin\n";
	char path[512];
	snprintf(path, sizeof(path), "%s/tests/kernels/test_kernels.fatbin", builddir());
	char *img = NULL;
	size_t len = 0;
	FILE *f = fopen(path, "rb");
	if (f != NULL) {
		ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
		len = (size_t)ftell(f);
		rewind(f);
		img = malloc(len);
		ck_assert_uint_eq(fread(img, 1, len, f), len);
		fclose(f);
	}
	struct cua_req_module_load ml = {0, 0, {img ? img : emu, img ? (uint32_t)len : sizeof(emu) - 1}};
	uint64_t mod = peer_u64(p, CUA_OP_MODULE_LOAD, &ml);
	free(img);
	return mod;
}

static uint64_t
peer_function(struct peer *p, uint64_t module, const char *name)
{
	struct cua_req_function_get fg = {module, {name, (uint32_t)strlen(name)}};
	return peer_u64(p, CUA_OP_FUNCTION_GET, &fg);
}

/* Connects, says HELLO, loads the kernels and creates a stream of its own. */
static void
peer_open(struct peer *p)
{
	memset(p, 0, sizeof(*p));
	ck_assert_int_eq(nng_req0_open(&p->s), 0);
	nng_socket_set_ms(p->s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	ck_assert_int_eq(nng_dial(p->s, D.url, NULL, 0), 0);
	struct cua_req_hello h = {1, 1, {"attacker", 8}, (uint32_t)getpid()};
	struct rawq q;
	rawq_send(p->s, &q, CUA_OP_HELLO, 0, &h);
	cua_wire_reply rep;
	nng_msg *m;
	ck_assert_int_eq(rawq_reply(&q, &rep, &m), CUA_OK);
	ck_assert_uint_eq(rep.body.hello.fd_secret.len, CUA_FDCHAN_SECRET);
	p->session = rep.body.hello.session;
	memcpy(p->fd_secret, rep.body.hello.fd_secret.ptr, CUA_FDCHAN_SECRET);
	cua_wire_reply_free(&rep);
	nng_msg_free(m);
	p->module = peer_load(p);
	p->spin = peer_function(p, p->module, "spin");
	p->fill = peer_function(p, p->module, "fill_u32");
	struct cua_req_stream_create sc = {0, 0, 0};
	p->stream = peer_u64(p, CUA_OP_STREAM_CREATE, &sc);
}

static uint64_t
peer_alloc(struct peer *p, uint64_t bytes)
{
	struct cua_req_mem_alloc ma = {0, bytes};
	return peer_u64(p, CUA_OP_MEM_ALLOC, &ma);
}

/* Fills [x, x + NBYTES) with the 32-bit words seed ^ i, waiting for it. */
static void
peer_write(struct peer *p, uint64_t x, uint32_t seed)
{
	uint32_t v[NBYTES / 4];
	for (uint32_t i = 0; i < NBYTES / 4; i++)
		v[i] = seed ^ i;
	struct cua_req_memcpy_htod c = {x, 0, {v, NBYTES}};
	peer_u64(p, CUA_OP_MEMCPY_HTOD, &c);
}

/* Reads [x, x + NBYTES) back (DTOH on the pool) and checks the words seed ^ i. */
static void
peer_check(struct peer *p, uint64_t x, uint32_t seed)
{
	struct rawq q;
	struct cua_req_memcpy_dtoh d = {x, NBYTES, 0};
	peer_send(p, &q, CUA_OP_MEMCPY_DTOH, &d);
	cua_wire_reply rep;
	nng_msg *m;
	ck_assert_int_eq(rawq_reply(&q, &rep, &m), CUA_OK);
	ck_assert_uint_eq(rep.body.memcpy_dtoh.data.len, NBYTES);
	uint32_t v[NBYTES / 4];
	memcpy(v, rep.body.memcpy_dtoh.data.ptr, NBYTES);
	cua_wire_reply_free(&rep);
	nng_msg_free(m);
	for (uint32_t i = 0; i < NBYTES / 4; i++)
		ck_assert_msg(v[i] == (seed ^ i), "A's word %u of 0x%llx: 0x%08x, want 0x%08x", i,
			      (unsigned long long)x, v[i], seed ^ i);
}

/* Sends a spin of LONG_MS on stream s (not waiting). */
static uint64_t
peer_spin(struct peer *p, struct rawq *q, uint64_t s)
{
	int64_t cycles = spin_cycles(LONG_MS);
	cua_wire_arg a[1] = {{CUA_ARG_BYTES, 0, {&cycles, 8}}};
	struct cua_req_launch l = {p->spin, {1, 1, 1}, {1, 1, 1}, 0, s, 0, a, 1};
	return peer_send(p, q, CUA_OP_LAUNCH, &l);
}

/* Sends fill_u32(x, v, NBYTES / 4) of function f on stream s (not waiting). */
static uint64_t
peer_fill(struct peer *p, struct rawq *q, uint64_t f, uint64_t x, uint32_t v, uint64_t s)
{
	uint64_t n = NBYTES / 4;
	cua_wire_arg a[3] = {{CUA_ARG_DEVPTR, x, {0}}, {CUA_ARG_BYTES, 0, {&v, 4}}, {CUA_ARG_BYTES, 0, {&n, 8}}};
	struct cua_req_launch l = {f, {1, 1, 1}, {32, 1, 1}, 0, s, 0, a, 3};
	return peer_send(p, q, CUA_OP_LAUNCH, &l);
}

static void
peer_close(struct peer *p)
{
	nng_close(p->s);
}

/* "freed by request seq N" / "released by request seq N" */
static const char *
by_seq(char *buf, size_t len, const char *verb, uint64_t seq)
{
	snprintf(buf, len, "%s by request seq %llu", verb, (unsigned long long)seq);
	return buf;
}

/* ---- the well-behaved session B: libcuasync ---- */

static void
b_write(cua_client *c, cua_deviceptr p, uint32_t seed)
{
	uint32_t v[NBYTES / 4];
	for (uint32_t i = 0; i < NBYTES / 4; i++)
		v[i] = seed ^ i;
	CK(cua_memcpy_htod(c, p, v, NBYTES));
}

static void
b_check(cua_client *c, cua_deviceptr p, uint32_t seed)
{
	uint32_t v[NBYTES / 4];
	CK(cua_memcpy_dtoh(c, v, p, NBYTES));
	for (uint32_t i = 0; i < NBYTES / 4; i++)
		ck_assert_msg(v[i] == (seed ^ i), "word %u of 0x%llx: 0x%08x, want 0x%08x", i, (unsigned long long)p,
			      v[i], seed ^ i);
}

/* B allocates NBYTES and writes seed, timed. On the emulated device, whose allocator is first fit, B is
 * handed the address A just freed (want): the attack's target. Fails unless B was served while A's second
 * long kernel (pending) still ran, i.e. while A's queued request still waited. */
static cua_deviceptr
b_take(cua_client *c, cua_deviceptr want, uint32_t seed, struct rawq *pending)
{
	double t0 = now_ms();
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, NBYTES, &p));
	b_write(c, p, seed);
	double t = now_ms() - t0;
	bool in_window = !atomic_load(&pending->replied);
	fprintf(stderr, "  B: alloc+write %.1f ms (A's %d ms kernel still running: %s), got 0x%llx%s\n", t, LONG_MS,
		in_window ? "yes" : "no", (unsigned long long)p, p == want ? " = A's freed address" : "");
	if (strcmp(test_backend(), "emu") == 0)
		ck_assert_msg(p == want, "B got 0x%llx, not A's freed 0x%llx", (unsigned long long)p,
			      (unsigned long long)want);
	ck_assert_msg(in_window, "B was not served while A's kernel ran (%.1f ms)", t);
	return p;
}

static bool
ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* ---- 1, 2: a copy, or a second free, queued after MEM_FREE ---- */

/* Sends A's copy of op (MEMCPY_HTOD writing bytes that are not B's, MEMCPY_DTOH reading) naming x. */
static void
send_copy(struct peer *a, struct rawq *q, uint32_t op, uint64_t x)
{
	uint32_t evil[NBYTES / 4];
	memset(evil, 0xee, sizeof(evil));
	struct cua_req_memcpy_htod h = {x, a->stream, {evil, NBYTES}};
	struct cua_req_memcpy_dtoh d = {x, NBYTES, a->stream};
	if (op == CUA_OP_MEMCPY_HTOD)
		peer_send(a, q, op, &h);
	else
		peer_send(a, q, op, &d);
}

/* A: a long kernel, MEM_FREE(X), a long kernel, then HTOD(X) / DTOH(X), all sent before any reply. Once the
 * free ran, B is handed X and writes its data. A's copy is refused NOT_FOUND naming the free; B's data stays. */
static void
copy_after_free(uint32_t op)
{
	struct peer a;
	peer_open(&a);
	uint64_t x = peer_alloc(&a, NBYTES);
	peer_write(&a, x, 0xa0a00000u);
	cua_client *b = connect_to(&D);
	struct rawq q[4];
	struct cua_req_mem_free fr = {x};
	peer_spin(&a, &q[0], a.stream);
	uint64_t fseq = peer_send(&a, &q[1], CUA_OP_MEM_FREE, &fr);
	peer_spin(&a, &q[2], a.stream);
	send_copy(&a, &q[3], op, x);
	rawq_expect(&q[0], CUA_OP_LAUNCH, CUA_OK, NULL);
	rawq_expect(&q[1], CUA_OP_MEM_FREE, CUA_OK, NULL);
	cua_deviceptr y = b_take(b, x, 0xb0b00000u, &q[2]);
	char msg[64];
	rawq_expect(&q[3], op, CUA_ENOT_FOUND, by_seq(msg, sizeof(msg), "freed", fseq));
	rawq_expect(&q[2], CUA_OP_LAUNCH, CUA_OK, NULL);
	b_check(b, y, 0xb0b00000u);
	CK(cua_mem_free(b, y));
	peer_close(&a);
	cua_disconnect(b);
}

START_TEST(htod_after_free_is_refused)
{
	copy_after_free(CUA_OP_MEMCPY_HTOD);
}
END_TEST

START_TEST(dtoh_after_free_is_refused)
{
	copy_after_free(CUA_OP_MEMCPY_DTOH);
}
END_TEST

/* A: a long kernel, MEM_FREE(X), a long kernel, MEM_FREE(X). B is handed X; A's second free is refused, B's
 * allocation stays usable, and a third session C is not handed B's live address. */
START_TEST(second_free_is_refused)
{
	struct peer a;
	peer_open(&a);
	uint64_t x = peer_alloc(&a, NBYTES);
	cua_client *b = connect_to(&D);
	struct rawq q[4];
	struct cua_req_mem_free fr = {x};
	peer_spin(&a, &q[0], a.stream);
	uint64_t fseq = peer_send(&a, &q[1], CUA_OP_MEM_FREE, &fr);
	peer_spin(&a, &q[2], a.stream);
	peer_send(&a, &q[3], CUA_OP_MEM_FREE, &fr);
	rawq_expect(&q[0], CUA_OP_LAUNCH, CUA_OK, NULL);
	rawq_expect(&q[1], CUA_OP_MEM_FREE, CUA_OK, NULL);
	cua_deviceptr y = b_take(b, x, 0xb0b00000u, &q[2]);
	char msg[64];
	rawq_expect(&q[3], CUA_OP_MEM_FREE, CUA_ENOT_FOUND, by_seq(msg, sizeof(msg), "freed", fseq));
	rawq_expect(&q[2], CUA_OP_LAUNCH, CUA_OK, NULL);
	cua_client *c = connect_to(&D);
	cua_deviceptr z;
	CK(cua_mem_alloc(c, 0, NBYTES, &z));
	ck_assert_msg(!ranges_overlap(y, NBYTES, z, NBYTES), "C was handed 0x%llx inside B's live 0x%llx",
		      (unsigned long long)z, (unsigned long long)y);
	b_write(c, z, 0xc0c00000u);
	b_check(b, y, 0xb0b00000u);
	b_write(b, y, 0xb1b10000u); /* still usable */
	b_check(b, y, 0xb1b10000u);
	b_check(c, z, 0xc0c00000u);
	CK(cua_mem_free(b, y));
	CK(cua_mem_free(c, z));
	peer_close(&a);
	cua_disconnect(b);
	cua_disconnect(c);
}
END_TEST

/* ---- 3: a host copy queued after HOST_UNREGISTER ---- */

/* A sealed memfd of NBYTES filled with byte v, registered by A; *fd and *map are the caller's to release. */
static uint64_t
peer_host_register(struct peer *a, int *fd, void **map, int v)
{
	*fd = memfd_create("attacker", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(*fd, 0);
	ck_assert_int_eq(ftruncate(*fd, NBYTES), 0);
	ck_assert_int_eq(fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	*map = mmap(NULL, NBYTES, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	ck_assert_ptr_ne(*map, MAP_FAILED);
	memset(*map, v, NBYTES);
	struct cua_req_host_register hr = {0, fdchan_pass_one(D.url, a->session, a->fd_secret, *fd), NBYTES};
	return peer_u64(a, CUA_OP_HOST_REGISTER, &hr);
}

/* B registers its own host buffer (after A's unregister ran), fills it and copies it to its device memory
 * through it, while A's queued host copy waits behind A's kernel. Returns the buffer; *y B's allocation. */
static uint32_t *
b_host_take(cua_client *b, cua_deviceptr *y, struct rawq *pending)
{
	double t0 = now_ms();
	void *hb;
	CK(cua_host_alloc(b, 0, NBYTES, &hb));
	uint32_t *w = hb;
	for (uint32_t i = 0; i < NBYTES / 4; i++)
		w[i] = 0xb0570000u ^ i;
	CK(cua_mem_alloc(b, 0, NBYTES, y));
	CK(cua_memcpy_htod(b, *y, hb, NBYTES)); /* through the shared buffer */
	double t = now_ms() - t0;
	bool in_window = !atomic_load(&pending->replied);
	fprintf(stderr, "  B: host buffer + alloc + copy %.1f ms (A's kernel still running: %s)\n", t,
		in_window ? "yes" : "no");
	ck_assert_msg(in_window, "B was not served while A's kernel ran (%.1f ms)", t);
	return w;
}

/* A: a long kernel, HOST_UNREGISTER(H), a long kernel, MEMCPY_HTOD_HOST / MEMCPY_DTOH_HOST naming H. */
static void
host_copy_after_unregister(uint32_t op)
{
	struct peer a;
	peer_open(&a);
	uint64_t x = peer_alloc(&a, NBYTES);
	peer_write(&a, x, 0xa0a00000u);
	int fd;
	void *map;
	uint64_t h = peer_host_register(&a, &fd, &map, 0xa5);
	cua_client *b = connect_to(&D);
	struct rawq q[4];
	struct cua_req_host_unregister hu = {h};
	struct cua_req_memcpy_host hc = {x, a.stream, h, 0, NBYTES};
	peer_spin(&a, &q[0], a.stream);
	uint64_t useq = peer_send(&a, &q[1], CUA_OP_HOST_UNREGISTER, &hu);
	peer_spin(&a, &q[2], a.stream);
	peer_send(&a, &q[3], op, &hc);
	rawq_expect(&q[0], CUA_OP_LAUNCH, CUA_OK, NULL);
	rawq_expect(&q[1], CUA_OP_HOST_UNREGISTER, CUA_OK, NULL);
	cua_deviceptr y;
	uint32_t *w = b_host_take(b, &y, &q[2]);
	char msg[64];
	rawq_expect(&q[3], op, CUA_ENOT_FOUND, by_seq(msg, sizeof(msg), "released", useq));
	rawq_expect(&q[2], CUA_OP_LAUNCH, CUA_OK, NULL);
	for (uint32_t i = 0; i < NBYTES / 4; i++) /* B's host memory was not written */
		ck_assert_msg(w[i] == (0xb0570000u ^ i), "B's host word %u: 0x%08x", i, w[i]);
	b_check(b, y, 0xb0570000u);
	peer_check(&a, x, 0xa0a00000u); /* nor read into A's device memory: X holds A's own data */
	CK(cua_host_free(b, w));
	munmap(map, NBYTES);
	close(fd);
	peer_close(&a);
	cua_disconnect(b);
}

START_TEST(htod_host_after_unregister_is_refused)
{
	host_copy_after_unregister(CUA_OP_MEMCPY_HTOD_HOST);
}
END_TEST

START_TEST(dtoh_host_after_unregister_is_refused)
{
	host_copy_after_unregister(CUA_OP_MEMCPY_DTOH_HOST);
}
END_TEST

/* ---- 4: a launch after MODULE_UNLOAD, work on a stream after STREAM_DESTROY ---- */

/* B's ordinary work while A's requests wait: a stream, memory, a launch of its module m (loaded beforehand),
 * a read-back. The module is loaded before A's long kernels start: on a GPU, loading a module into a context
 * waits for the kernels running in it (measured on the H200: a MODULE_LOAD served 300 ms late behind another
 * session's 300 ms kernel in the shared mode) — a limitation of one shared context, documented in README.md.
 * The workers load modules eagerly (CUDA_MODULE_LOADING=EAGER), so that launches never wait that way: with
 * CUDA's default lazy loading B's first launch here waited 300 ms. */
static void
b_work(cua_client *b, cua_module m, struct rawq *pending)
{
	double t0 = now_ms();
	cua_function fill = get_fn(b, m, "fill_u32");
	cua_stream s;
	CK(cua_stream_create(b, 0, 0, &s));
	double t_stream = now_ms() - t0;
	cua_deviceptr y;
	CK(cua_mem_alloc(b, 0, NBYTES, &y));
	cua_launch *l = launch_1d(b, fill, 1, 32);
	cua_launch_push_device_ptr(l, y);
	cua_launch_push_u32(l, 0xb0b0b0b0u);
	cua_launch_push_u64(l, NBYTES / 4);
	cua_launch_set_stream(l, s);
	launch_and_wait(l);
	uint32_t v[NBYTES / 4];
	CK(cua_memcpy_dtoh_on(b, v, y, NBYTES, s));
	double t = now_ms() - t0;
	bool in_window = !atomic_load(&pending->replied);
	fprintf(stderr, "  B: stream + alloc + launch + read %.1f ms (stream at %.1f; A's kernel still running: %s)\n",
		t, t_stream, in_window ? "yes" : "no");
	ck_assert_msg(in_window, "B was not served while A's kernel ran (%.1f ms)", t);
	for (uint32_t i = 0; i < NBYTES / 4; i++)
		ck_assert_uint_eq(v[i], 0xb0b0b0b0u);
	CK(cua_stream_destroy(b, s));
	CK(cua_mem_free(b, y));
}

/* A: a long kernel, MODULE_UNLOAD(M), a long kernel, a launch of M's fill_u32 and FUNCTION_GET on M. */
START_TEST(launch_after_module_unload_is_refused)
{
	struct peer a;
	peer_open(&a);
	uint64_t m2 = peer_load(&a);
	uint64_t f2 = peer_function(&a, m2, "fill_u32");
	uint64_t x = peer_alloc(&a, NBYTES);
	peer_write(&a, x, 0xa0a00000u);
	cua_client *b = connect_to(&D);
	cua_module mb = load_kernels(b);
	struct rawq q[5];
	struct cua_req_module_unload mu = {m2};
	struct cua_req_function_get fg = {m2, {"spin", 4}};
	peer_spin(&a, &q[0], a.stream);
	uint64_t useq = peer_send(&a, &q[1], CUA_OP_MODULE_UNLOAD, &mu);
	peer_spin(&a, &q[2], a.stream);
	peer_fill(&a, &q[3], f2, x, 7, a.stream);
	peer_send(&a, &q[4], CUA_OP_FUNCTION_GET, &fg);
	rawq_expect(&q[0], CUA_OP_LAUNCH, CUA_OK, NULL);
	rawq_expect(&q[1], CUA_OP_MODULE_UNLOAD, CUA_OK, NULL);
	b_work(b, mb, &q[2]);
	char msg[64];
	rawq_expect(&q[3], CUA_OP_LAUNCH, CUA_ENOT_FOUND, by_seq(msg, sizeof(msg), "released", useq));
	rawq_expect(&q[4], CUA_OP_FUNCTION_GET, CUA_ENOT_FOUND, by_seq(msg, sizeof(msg), "released", useq));
	rawq_expect(&q[2], CUA_OP_LAUNCH, CUA_OK, NULL);
	peer_check(&a, x, 0xa0a00000u); /* the refused fill did not run */
	peer_close(&a);
	cua_disconnect(b);
}
END_TEST

/* A: a long kernel on stream S, STREAM_DESTROY(S), a long kernel on another stream, then an HTOD, a launch
 * and a STREAM_SYNC on S. */
START_TEST(work_after_stream_destroy_is_refused)
{
	struct peer a;
	peer_open(&a);
	struct cua_req_stream_create sc = {0, 0, 0};
	uint64_t s2 = peer_u64(&a, CUA_OP_STREAM_CREATE, &sc);
	uint64_t x = peer_alloc(&a, NBYTES);
	peer_write(&a, x, 0xa0a00000u);
	cua_client *b = connect_to(&D);
	cua_module mb = load_kernels(b);
	struct rawq q[6];
	struct cua_req_stream sd = {s2};
	uint32_t evil[NBYTES / 4];
	memset(evil, 0xee, sizeof(evil));
	struct cua_req_memcpy_htod h = {x, s2, {evil, NBYTES}};
	peer_spin(&a, &q[0], s2);
	uint64_t dseq = peer_send(&a, &q[1], CUA_OP_STREAM_DESTROY, &sd);
	peer_spin(&a, &q[2], a.stream);
	peer_send(&a, &q[3], CUA_OP_MEMCPY_HTOD, &h);
	peer_fill(&a, &q[4], a.fill, x, 7, s2);
	peer_send(&a, &q[5], CUA_OP_STREAM_SYNC, &sd);
	rawq_expect(&q[0], CUA_OP_LAUNCH, CUA_OK, NULL);
	rawq_expect(&q[1], CUA_OP_STREAM_DESTROY, CUA_OK, NULL);
	b_work(b, mb, &q[2]);
	char msg[64];
	by_seq(msg, sizeof(msg), "released", dseq);
	rawq_expect(&q[3], CUA_OP_MEMCPY_HTOD, CUA_ENOT_FOUND, msg);
	rawq_expect(&q[4], CUA_OP_LAUNCH, CUA_ENOT_FOUND, msg);
	rawq_expect(&q[5], CUA_OP_STREAM_SYNC, CUA_ENOT_FOUND, msg);
	rawq_expect(&q[2], CUA_OP_LAUNCH, CUA_OK, NULL);
	peer_check(&a, x, 0xa0a00000u); /* neither the copy nor the fill ran */
	peer_close(&a);
	cua_disconnect(b);
}
END_TEST

/* ---- 5: a session closes with a MEM_FREE in flight ---- */

static bool
a_requests_arrived(const cua_daemon_status *s, void *ud)
{
	return s->total.in_flight >= *(uint64_t *)ud;
}

/* Only B (two allocations) and the operator are left, and nothing is in flight: A's cleanup ran. */
static bool
only_b_left(const cua_daemon_status *s, void *ud)
{
	(void)ud;
	return s->sessions == 2 && s->total.allocations == 2 && s->total.alloc_bytes == 2 * NBYTES &&
	       s->total.in_flight == 0 && s->devices[0].in_flight == 0 && s->devices[0].allocations == 2;
}

/* B allocates NBYTES until it is handed a (A's freed address; on the emulated device, first fit), bounded
 * by 10 s. A is gone, so no reply says when its free ran: asking the allocator is the only way to know. */
static cua_deviceptr
b_grab(cua_client *b, cua_deviceptr want)
{
	cua_deviceptr p = 0;
	for (int i = 0; i < 5000; i++) {
		CK(cua_mem_alloc(b, 0, NBYTES, &p));
		if (p == want || strcmp(test_backend(), "emu") != 0)
			return p;
		CK(cua_mem_free(b, p));
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	ck_abort_msg("B was never handed A's freed 0x%llx (last 0x%llx)", (unsigned long long)want,
		     (unsigned long long)p);
	return 0;
}

/* After A is gone: only B's two allocations are left and the daemon is healthy; C is not handed B's live
 * addresses; B's data is intact and its memory still usable. */
static void
after_a_left(cua_client *op, cua_client *b, cua_deviceptr yb, cua_deviceptr bx, pid_t worker)
{
	cua_daemon_status st;
	ck_assert_msg(wait_status(op, only_b_left, NULL, &st),
		      "A's memory was not released: %u sessions, %llu allocations, %llu in flight", st.sessions,
		      (unsigned long long)st.total.allocations, (unsigned long long)st.total.in_flight);
	ck_assert_uint_eq(st.devices[0].restarts, 0);
	ck_assert_int_eq(daemon_worker_pid(&D, 0), worker);
	cua_client *c = connect_to(&D);
	cua_deviceptr z[2];
	for (int i = 0; i < 2; i++) {
		CK(cua_mem_alloc(c, 0, NBYTES, &z[i]));
		ck_assert_msg(!ranges_overlap(z[i], NBYTES, bx, NBYTES) && !ranges_overlap(z[i], NBYTES, yb, NBYTES),
			      "C was handed 0x%llx, live in B (0x%llx, 0x%llx)", (unsigned long long)z[i],
			      (unsigned long long)bx, (unsigned long long)yb);
		b_write(c, z[i], 0xc0c00000u + (uint32_t)i);
	}
	b_check(b, yb, 0xb0b00000u);
	b_check(b, bx, 0xb1b10000u);
	b_write(b, bx, 0xb2b20000u);
	b_check(b, bx, 0xb2b20000u);
	CK(cua_mem_free(b, bx));
	CK(cua_mem_free(b, yb));
	cua_disconnect(c);
}

/* The brief's case: A sends a long kernel and MEM_FREE(X) (queued behind it: the free is a barrier), then
 * disconnects at once. The queued free is dropped with the connection; the cleanup releases X exactly once,
 * so B is handed X (on the emulated device) and no one else is. */
START_TEST(close_with_free_queued)
{
	cua_client *op = connect_operator(&D), *b = connect_to(&D);
	cua_deviceptr yb;
	CK(cua_mem_alloc(b, 0, NBYTES, &yb));
	b_write(b, yb, 0xb0b00000u);
	pid_t worker = daemon_worker_pid(&D, 0);
	struct peer a;
	peer_open(&a);
	uint64_t x = peer_alloc(&a, NBYTES);
	peer_alloc(&a, 3 * NBYTES); /* left to the cleanup */
	struct rawq q[2];
	struct cua_req_mem_free fr = {x};
	peer_spin(&a, &q[0], a.stream);
	peer_send(&a, &q[1], CUA_OP_MEM_FREE, &fr);
	uint64_t two = 2;
	cua_daemon_status st;
	ck_assert_msg(wait_status(op, a_requests_arrived, &two, &st), "A's requests never arrived");
	peer_close(&a);
	for (int i = 0; i < 2; i++)
		rawq_abandon(&q[i]);
	cua_deviceptr bx = b_grab(b, x);
	b_write(b, bx, 0xb1b10000u);
	after_a_left(op, b, yb, bx, worker);
	cua_disconnect(b);
	cua_disconnect(op);
}
END_TEST

/* A sends MEM_FREE(X) and a long kernel; once the free ran (its reply came) A disconnects with the kernel
 * in flight. B is handed X before A's cleanup, which runs after that kernel: the cleanup must not free X a
 * second time (it would free B's live allocation, and C would then be handed it). */
START_TEST(close_with_free_in_flight)
{
	cua_client *op = connect_operator(&D), *b = connect_to(&D);
	cua_deviceptr yb;
	CK(cua_mem_alloc(b, 0, NBYTES, &yb));
	b_write(b, yb, 0xb0b00000u);
	pid_t worker = daemon_worker_pid(&D, 0);
	struct peer a;
	peer_open(&a);
	uint64_t x = peer_alloc(&a, NBYTES);
	peer_alloc(&a, 3 * NBYTES); /* left to the cleanup */
	struct rawq q[2];
	struct cua_req_mem_free fr = {x};
	peer_send(&a, &q[0], CUA_OP_MEM_FREE, &fr);
	peer_spin(&a, &q[1], a.stream);
	rawq_expect(&q[0], CUA_OP_MEM_FREE, CUA_OK, NULL);
	uint64_t one = 1;
	cua_daemon_status st;
	ck_assert_msg(wait_status(op, a_requests_arrived, &one, &st), "A's kernel never arrived");
	peer_close(&a);
	rawq_abandon(&q[1]);
	cua_deviceptr bx = b_grab(b, x);
	b_write(b, bx, 0xb1b10000u);
	CK(cua_status(op, &st)); /* A's kernel, so its cleanup, still to come: B holds X in the window */
	fprintf(stderr, "  B holds A's freed 0x%llx with %u request(s) in flight on the device\n",
		(unsigned long long)bx, st.devices[0].in_flight);
	ck_assert_uint_ge(st.devices[0].in_flight, 1);
	after_a_left(op, b, yb, bx, worker);
	cua_disconnect(b);
	cua_disconnect(op);
}
END_TEST

/* ---- 6: STATUS is private ---- */

START_TEST(status_is_private)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D), *op = connect_operator(&D);
	cua_deviceptr pa[3], pb;
	for (int i = 0; i < 3; i++)
		CK(cua_mem_alloc(a, 0, NBYTES, &pa[i]));
	load_kernels(a);
	CK(cua_mem_alloc(b, 0, 1024, &pb));
	cua_daemon_status s;
	CK(cua_status(b, &s));
	ck_assert_uint_eq(s.sessions, 1);
	ck_assert_uint_eq(s.session.allocations, 1);
	ck_assert_uint_eq(s.session.alloc_bytes, 1024);
	ck_assert_uint_eq(s.session.modules, 0);
	ck_assert_mem_eq(&s.total, &s.session, sizeof(s.total));
	ck_assert_uint_eq(s.devices[0].allocations, 1);
	ck_assert_uint_eq(s.devices[0].alloc_bytes, 1024);
	CK(cua_status(op, &s));
	ck_assert_uint_eq(s.sessions, 3);
	ck_assert_uint_eq(s.total.allocations, 4);
	ck_assert_uint_eq(s.total.alloc_bytes, 3 * NBYTES + 1024);
	ck_assert_uint_eq(s.total.modules, 1);
	ck_assert_uint_eq(s.devices[0].allocations, 4);
	ck_assert_uint_eq(s.devices[0].alloc_bytes, 3 * NBYTES + 1024);
	ck_assert_uint_eq(s.session.allocations, 0);
	cua_disconnect(a);
	cua_disconnect(b);
	cua_disconnect(op);
}
END_TEST

/* ---- 7: no stream is shared between sessions ---- */

/* A pipelines 8 long kernels on stream 0 — twice a pool's streams, all of them busy; B's launch on stream 0
 * runs at once: pool streams are per session, so A's kernels never sit in front of B's on a stream (with one
 * pool for all sessions B's kernel would land behind one of A's). */
START_TEST(pool_streams_are_per_session)
{
	enum { N = 8 };
	struct peer a;
	struct rawq q[N];
	peer_open(&a);
	cua_client *b = connect_to(&D);
	cua_function fill = get_fn(b, load_kernels(b), "fill_u32");
	cua_deviceptr y;
	CK(cua_mem_alloc(b, 0, 64, &y));
	for (int i = 0; i < N; i++)
		peer_spin(&a, &q[i], 0);
	double t0 = now_ms();
	cua_launch *l = launch_1d(b, fill, 1, 32);
	cua_launch_push_device_ptr(l, y);
	cua_launch_push_u32(l, 7);
	cua_launch_push_u64(l, 16);
	launch_and_wait(l);
	double t = now_ms() - t0;
	bool in_window = !atomic_load(&q[0].replied);
	fprintf(stderr, "  B: a launch on stream 0 in %.1f ms while A's %d ms kernels filled A's pool: %s\n", t,
		LONG_MS, in_window ? "yes" : "no");
	ck_assert_msg(in_window, "B's launch took %.1f ms: it waited behind A's kernels", t);
	for (int i = 0; i < N; i++)
		rawq_expect(&q[i], CUA_OP_LAUNCH, CUA_OK, NULL);
	peer_close(&a);
	cua_disconnect(b);
}
END_TEST

static Suite *
isolation_suite(void)
{
	/* CUA_TEST_ISOLATION=session runs the attacks against per-session workers too (tests/integration/
	 * session-attacks.sh). Three cases watch the one shared allocator hand a freed address to the next session;
	 * with an address space per session the same address in two sessions is no sharing, so they are left out. */
	const char *iso = getenv("CUA_TEST_ISOLATION");
	bool shared = iso == NULL || strcmp(iso, "session") != 0;
	Suite *s = suite_create("isolation");
	TCase *tc = tcase_create(shared ? "shared" : "session");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, htod_after_free_is_refused);
	tcase_add_test(tc, dtoh_after_free_is_refused);
	if (shared)
		tcase_add_test(tc, second_free_is_refused);
	tcase_add_test(tc, htod_host_after_unregister_is_refused);
	tcase_add_test(tc, dtoh_host_after_unregister_is_refused);
	tcase_add_test(tc, launch_after_module_unload_is_refused);
	tcase_add_test(tc, work_after_stream_destroy_is_refused);
	if (shared) {
		tcase_add_test(tc, close_with_free_queued);
		tcase_add_test(tc, close_with_free_in_flight);
	}
	tcase_add_test(tc, status_is_private);
	tcase_add_test(tc, pool_streams_are_per_session);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(isolation_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
