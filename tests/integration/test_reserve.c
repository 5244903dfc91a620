/* Limits under pipelining, closing sessions and unbounded costs (issue 22, points 1, 2 and 6): a hostile session
 * A sends many requests that each make a limited object (memory, streams, events, modules, host buffers,
 * handles, graphs) before it reads a single reply — raw NNG REQ contexts, ordered seq numbers, the first one sent
 * last so that all of them are validated before any completes — and no more of them than the limit allows may
 * succeed, for the session's limits and its tenant's, in both isolation modes (daemon/reserve.h). A session that
 * closes with long work running keeps its memory counted against its tenant until the work drained and the memory
 * was freed. Session workers are bounded per tenant and in total. Beside every attack a well-behaved client is
 * still served. */
#include "config.h"

#include "cua_fdchan.h"
#include "cua_proto.h"
#include "cua_wire.h"
#include "harness.h"

#include <check.h>
#include <fcntl.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MB (1024u * 1024u)
#define MAXQ 64

static const char *const iso_names[] = {"shared", "session"};

/* ---- raw requests: one REQ context each, so many are in flight on one connection ---- */

struct rawq {
	nng_ctx ctx;
	nng_aio *aio;
};

/* Sends (op, seq, body) on a context of its own and returns once NNG took it; rawq_reply collects the reply. */
static void
rawq_send(nng_socket s, struct rawq *q, uint32_t op, uint64_t seq, const void *body)
{
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), op, seq, body), 0);
	ck_assert_int_eq(nng_ctx_open(&q->ctx, s), 0);
	nng_ctx_set_ms(q->ctx, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	ck_assert_int_eq(nng_aio_alloc(&q->aio, NULL, NULL), 0);
	nng_aio_set_timeout(q->aio, 60000);
	nng_msg *m;
	ck_assert_int_eq(nng_msg_alloc(&m, 0), 0);
	ck_assert_int_eq(nng_msg_append(m, b.data, b.len), 0);
	cua_wbuf_free(&b);
	nng_aio_set_msg(q->aio, m);
	nng_ctx_send(q->ctx, q->aio);
	nng_aio_wait(q->aio);
	ck_assert_int_eq(nng_aio_result(q->aio), 0);
	nng_ctx_recv(q->ctx, q->aio);
}

/* Waits for q's reply: its status, the first u64 of its body in *value (when OK and value is not NULL), its
 * message in msg. */
static int
rawq_reply(struct rawq *q, uint32_t op, uint64_t *value, char *msg, size_t len)
{
	nng_aio_wait(q->aio);
	ck_assert_int_eq(nng_aio_result(q->aio), 0);
	nng_msg *m = nng_aio_get_msg(q->aio);
	cua_wire_reply rep;
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(nng_msg_body(m), nng_msg_len(m), &rep, &e), 0);
	ck_assert_uint_eq(rep.op, op);
	snprintf(msg, len, "%.*s", (int)rep.message.len, (const char *)rep.message.ptr);
	if (value != NULL && rep.status == CUA_OK)
		memcpy(value, &rep.body, sizeof(*value));
	int st = (int)rep.status;
	cua_wire_reply_free(&rep);
	nng_msg_free(m);
	nng_aio_free(q->aio);
	nng_ctx_close(q->ctx);
	return st;
}

/* ---- the hostile session: raw messages, its own seq numbers ---- */

struct peer {
	nng_socket s;
	uint64_t seq;                         /* the last ordered seq sent */
	uint64_t session;                     /* HELLO's reply */
	uint8_t fd_secret[CUA_FDCHAN_SECRET]; /* HELLO's reply: the fd channel's secret (PROTOCOL.md §9) */
	char url[320];
};

static void
peer_open(struct peer *p, const char *url)
{
	memset(p, 0, sizeof(*p));
	ck_assert_int_eq(nng_req0_open(&p->s), 0);
	nng_socket_set_ms(p->s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	ck_assert_int_eq(nng_dial(p->s, url, NULL, 0), 0);
	struct cua_req_hello h = {1, 1, {"hostile", 7}, (uint32_t)getpid()};
	struct rawq q;
	char msg[256];
	(void)msg;
	rawq_send(p->s, &q, CUA_OP_HELLO, 0, &h);
	nng_aio_wait(q.aio);
	ck_assert_int_eq(nng_aio_result(q.aio), 0);
	nng_msg *m = nng_aio_get_msg(q.aio);
	cua_wire_reply rep;
	cua_err e;
	ck_assert_int_eq(cua_wire_decode_reply(nng_msg_body(m), nng_msg_len(m), &rep, &e), 0);
	ck_assert_int_eq(rep.status, CUA_OK);
	p->session = rep.body.hello.session;
	if (rep.body.hello.fd_secret.len == CUA_FDCHAN_SECRET)
		memcpy(p->fd_secret, rep.body.hello.fd_secret.ptr, CUA_FDCHAN_SECRET);
	snprintf(p->url, sizeof(p->url), "%s", url);
	cua_wire_reply_free(&rep);
	nng_msg_free(m);
	nng_aio_free(q.aio);
	nng_ctx_close(q.ctx);
}

/* One ordered request, waited for: its status (value and msg as rawq_reply). */
static int
peer_call(struct peer *p, uint32_t op, const void *body, uint64_t *value, char *msg, size_t len)
{
	struct rawq q;
	rawq_send(p->s, &q, op, ++p->seq, body);
	return rawq_reply(&q, op, value, msg, len);
}

/* The same, asserting OK; returns the body's first u64 (a handle or a pointer). */
static uint64_t
peer_ok(struct peer *p, uint32_t op, const void *body)
{
	uint64_t v = 0;
	char msg[512];
	int st = peer_call(p, op, body, &v, msg, sizeof(msg));
	ck_assert_msg(st == CUA_OK, "op %u: %s: %s", op, cua_strerror_name(st), msg);
	return v;
}

/*
 * Pipelines n requests of op (bodies[k], or bodies[0] for all when one is NULL) on p without reading a reply: seq
 * s+2 … s+n first, which wait for their turn, then s+1, so that all of them are admitted at once, before the worker
 * completed any. Every one answered other than OK must be QUOTA whose message names `limit`. Returns how many
 * were answered OK.
 */
static unsigned
pipeline(struct peer *p, uint32_t op, const void *const *bodies, bool one_body, unsigned n, const char *limit)
{
	struct rawq q[MAXQ];
	ck_assert_uint_le(n, MAXQ);
	uint64_t first = p->seq + 1;
	for (unsigned k = 1; k < n; k++)
		rawq_send(p->s, &q[k], op, first + k, bodies[one_body ? 0 : k]);
	rawq_send(p->s, &q[0], op, first, bodies[0]);
	p->seq += n;
	unsigned ok = 0;
	for (unsigned k = 0; k < n; k++) {
		char msg[1024];
		int st = rawq_reply(&q[k], op, NULL, msg, sizeof(msg));
		if (st == CUA_OK) {
			ok++;
			continue;
		}
		ck_assert_msg(st == CUA_EQUOTA && strstr(msg, limit) != NULL,
			      "op %u #%u: %s: %s (want QUOTA naming %s)", op, k, cua_strerror_name(st), msg, limit);
	}
	return ok;
}

/* n copies of one body. */
static unsigned
pipeline_same(struct peer *p, uint32_t op, const void *body, unsigned n, const char *limit)
{
	const void *b[1] = {body};
	return pipeline(p, op, b, true, n, limit);
}

/* The test kernels' image for the emulated device, or the fatbin from the build. Caller frees *img. */
static struct cua_req_module_load
kernels(char **img, const char *emu)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/tests/kernels/%s", builddir(),
		 strstr(emu, "big_param_copy") ? "feature_kernels.fatbin" : "test_kernels.fatbin");
	size_t len = 0;
	*img = NULL;
	FILE *f = on_gpu() ? fopen(path, "rb") : NULL;
	if (f != NULL) {
		ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
		len = (size_t)ftell(f);
		rewind(f);
		*img = malloc(len);
		ck_assert_uint_eq(fread(*img, 1, len, f), len);
		fclose(f);
	}
	return (struct cua_req_module_load){0, 0, {*img ? *img : emu, *img ? (uint32_t)len : (uint32_t)strlen(emu)}};
}

static const char emu_test[] = "cuasync-emu-module\nfill_u32\nspin\n";
static const char emu_big[] = "cuasync-emu-module\nbig_param_copy\n";

/* A sealed memfd of n bytes for HOST_REGISTER. */
static int
sealed_memfd(size_t n)
{
	int fd = memfd_create("reserve-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)n), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

/* ---- the well-behaved client: libcuasync ---- */

/* c is served: a PING, an allocation of `bytes`, a copy to it and back. */
static void
served(cua_client *c, size_t bytes)
{
	uint32_t in[256], out[256];
	for (unsigned i = 0; i < 256; i++)
		in[i] = 0x5eed0000u ^ i;
	cua_deviceptr p;
	CK(cua_ping(c));
	CK(cua_mem_alloc(c, 0, bytes, &p));
	CK(cua_memcpy_htod(c, p, in, sizeof(in)));
	CK(cua_memcpy_dtoh(c, out, p, sizeof(out)));
	ck_assert_int_eq(memcmp(in, out, sizeof(in)), 0);
	CK(cua_mem_free(c, p));
}

/* How many requests of session id daemon d received (its operator's SESSIONS). */
static uint64_t
session_requests(const struct daemon *d, uint64_t id)
{
	cua_client *op = connect_operator(d);
	cua_session_info *ss = NULL;
	uint32_t n = 0;
	uint64_t requests = UINT64_MAX;
	CK(cua_sessions(op, &ss, &n));
	for (uint32_t i = 0; i < n; i++)
		if (ss[i].id == id)
			requests = ss[i].requests;
	free(ss);
	cua_disconnect(op);
	ck_assert_msg(requests != UINT64_MAX, "session %llu is not listed", (unsigned long long)id);
	return requests;
}

/* Waits until session id received at least n requests (each counted once it was admitted, its bytes with it). */
static void
wait_session_requests(const struct daemon *d, uint64_t id, uint64_t n)
{
	uint64_t got;
	for (int i = 0; (got = session_requests(d, id)) < n && i < 60000; i++)
		nng_msleep(1);
	ck_assert_msg(got >= n, "session %llu: %llu requests received, %llu sent", (unsigned long long)id,
		      (unsigned long long)got, (unsigned long long)n);
}

static void
start_mode(struct daemon *d, int mode, const char *const *extra)
{
	const char *args[40];
	int n = 0;
	args[n++] = "--isolation";
	args[n++] = iso_names[mode];
	args[n++] = "--isolation-pool";
	args[n++] = "2";
	for (int i = 0; extra != NULL && extra[i] != NULL && n < 38; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	daemon_start(d, args);
}

/* A configuration file in d's directory (tenant `me` = this uid) with %u replaced by our uid; its path in path. */
static void
tenant_conf(char *path, size_t len, const char *text)
{
	char body[1024], uid[16];
	snprintf(uid, sizeof(uid), "%u", (unsigned)getuid());
	size_t o = 0;
	for (const char *t = text; *t && o < sizeof(body) - 16; t++) {
		if (t[0] == '%' && t[1] == 'u') {
			o += (size_t)snprintf(body + o, sizeof(body) - o, "%s", uid);
			t++;
		} else {
			body[o++] = *t;
		}
	}
	body[o] = '\0';
	snprintf(path, len, "/tmp/cuasync-reserve.%d.conf", (int)getpid());
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fputs(body, f), 0);
	ck_assert_int_eq(fclose(f), 0);
}

/* ------------------------------------------------------------------ point 1: the session's limits */

START_TEST(pipelined_requests_stay_within_the_sessions_limits)
{
	const int mode = _i;
	struct daemon d;
	start_mode(&d, mode,
		   (const char *const[]){"--session-mem", "32M", "--session-streams", "8", "--session-events", "8",
					 "--session-modules", "3", "--session-host-bytes", "1M", "--session-handles",
					 "32", NULL});
	cua_client *good = connect_to(&d);
	struct peer a;
	peer_open(&a, d.url);

	struct cua_req_mem_alloc ma = {0, 8 * MB};
	unsigned n = pipeline_same(&a, CUA_OP_MEM_ALLOC, &ma, 12, "--session-mem");
	ck_assert_msg(n == 4, "%s: %u of 12 pipelined 8 MiB allocations granted under --session-mem 32M, want 4",
		      iso_names[mode], n);
	served(good, 8 * MB);

	struct cua_req_stream_create sc = {0, 0, 0};
	n = pipeline_same(&a, CUA_OP_STREAM_CREATE, &sc, 16, "--session-streams");
	ck_assert_msg(n == 8, "%s: %u of 16 pipelined streams under --session-streams 8", iso_names[mode], n);

	struct cua_req_event_create ec = {0, 0};
	n = pipeline_same(&a, CUA_OP_EVENT_CREATE, &ec, 16, "--session-events");
	ck_assert_msg(n == 8, "%s: %u of 16 pipelined events under --session-events 8", iso_names[mode], n);

	char *img;
	struct cua_req_module_load ml = kernels(&img, emu_test);
	uint64_t mod = peer_ok(&a, CUA_OP_MODULE_LOAD, &ml); /* one held, then 8 pipelined: 2 more */
	n = pipeline_same(&a, CUA_OP_MODULE_LOAD, &ml, 8, "--session-modules");
	ck_assert_msg(n == 2, "%s: %u of 8 pipelined modules beside one held under --session-modules 3",
		      iso_names[mode], n);
	free(img);
	served(good, 8 * MB);

	/* 8 buffers of 256 KiB under 1 MiB of page-locked host memory */
	int fds[8];
	struct cua_req_host_register hr[8];
	const void *hb[8];
	for (int k = 0; k < 8; k++) {
		fds[k] = sealed_memfd(256u << 10);
		hr[k] = (struct cua_req_host_register){0, fdchan_pass_one(a.url, a.session, a.fd_secret, fds[k]),
						       256u << 10};
		hb[k] = &hr[k];
	}
	n = pipeline(&a, CUA_OP_HOST_REGISTER, hb, false, 8, "--session-host-bytes");
	ck_assert_msg(n == 4, "%s: %u of 8 pipelined 256 KiB host buffers under --session-host-bytes 1M",
		      iso_names[mode], n);
	for (int k = 0; k < 8; k++)
		close(fds[k]);

	/* handles: 8 streams + 8 events + 3 modules + 4 host buffers = 23 of 32; 9 functions more */
	struct cua_req_function_get fg = {mod, {"fill_u32", 8}};
	n = pipeline_same(&a, CUA_OP_FUNCTION_GET, &fg, 16, "--session-handles");
	ck_assert_msg(n == 9, "%s: %u of 16 pipelined functions with 23 of 32 handles held", iso_names[mode], n);

	served(good, 8 * MB);
	nng_close(a.s);
	cua_disconnect(good);
	daemon_stop(&d);
}
END_TEST

/* ------------------------------------------------------------------ point 1: the tenant's limits */

START_TEST(pipelined_requests_stay_within_the_tenants_limits)
{
	const int mode = _i;
	char conf[128];
	tenant_conf(conf, sizeof(conf),
		    "[tenant me]\nuid = %u\nmem = 32M\nstreams = 8\nmodules = 3\nhost-bytes = 1M\n");
	struct daemon d;
	start_mode(&d, mode,
		   (const char *const[]){"--config", conf, "--session-mem", "0", "--session-host-bytes", "16M", NULL});
	cua_client *good = connect_operator(&d); /* belongs to no tenant */
	struct peer a1, a2;
	peer_open(&a1, d.url);
	peer_open(&a2, d.url);

	struct cua_req_mem_alloc ma = {0, 8 * MB};
	unsigned n1 = pipeline_same(&a1, CUA_OP_MEM_ALLOC, &ma, 12, "tenant 'me'");
	unsigned n2 = pipeline_same(&a2, CUA_OP_MEM_ALLOC, &ma, 12, "tenant 'me'");
	ck_assert_msg(n1 + n2 == 4, "%s: %u + %u pipelined 8 MiB allocations granted under the tenant's mem = 32M",
		      iso_names[mode], n1, n2);
	served(good, 8 * MB);

	struct cua_req_stream_create sc = {0, 0, 0};
	n1 = pipeline_same(&a1, CUA_OP_STREAM_CREATE, &sc, 12, "`streams` in [tenant me]");
	n2 = pipeline_same(&a2, CUA_OP_STREAM_CREATE, &sc, 12, "`streams` in [tenant me]");
	ck_assert_msg(n1 + n2 == 8, "%s: %u + %u pipelined streams under the tenant's streams = 8", iso_names[mode], n1,
		      n2);

	char *img;
	struct cua_req_module_load ml = kernels(&img, emu_test);
	n1 = pipeline_same(&a1, CUA_OP_MODULE_LOAD, &ml, 8, "`modules` in [tenant me]");
	n2 = pipeline_same(&a2, CUA_OP_MODULE_LOAD, &ml, 8, "`modules` in [tenant me]");
	ck_assert_msg(n1 + n2 == 3, "%s: %u + %u pipelined modules under the tenant's modules = 3", iso_names[mode], n1,
		      n2);
	free(img);

	int fds[8];
	struct cua_req_host_register hr[8];
	const void *hb[8];
	for (int k = 0; k < 8; k++) {
		fds[k] = sealed_memfd(256u << 10);
		hr[k] = (struct cua_req_host_register){0, fdchan_pass_one(a1.url, a1.session, a1.fd_secret, fds[k]),
						       256u << 10};
		hb[k] = &hr[k];
	}
	n1 = pipeline(&a1, CUA_OP_HOST_REGISTER, hb, false, 8, "`host-bytes` in [tenant me]");
	ck_assert_msg(n1 == 4, "%s: %u of 8 pipelined 256 KiB host buffers under the tenant's host-bytes = 1M",
		      iso_names[mode], n1);
	for (int k = 0; k < 8; k++)
		close(fds[k]);

	served(good, 8 * MB);
	nng_close(a1.s);
	nng_close(a2.s);
	cua_disconnect(good);
	daemon_stop(&d);
	unlink(conf);
}
END_TEST

/* ------------------------------------------------------------------ point 2: a closing session's memory */

static bool
work_in_flight(const cua_daemon_status *s, void *ud)
{
	(void)ud;
	return s->ndevices > 0 && s->devices[0].in_flight >= 1;
}

static bool
sessions_at_most(const cua_daemon_status *s, void *ud)
{
	return s->sessions <= *(const uint32_t *)ud;
}

static bool
device_memory_freed(const cua_daemon_status *s, void *ud)
{
	(void)ud;
	return s->ndevices > 0 && s->devices[0].alloc_bytes == 0;
}

/* A session of a 64 MiB tenant holds 48 MiB and closes with a long kernel running: until the kernel completed and
 * the memory was freed, its 48 MiB still count, so the tenant's next 32 MiB are refused; a small allocation beside
 * it is served, and so is a client of no tenant; once the work drained the 32 MiB are granted. */
START_TEST(closing_session_counts_until_its_memory_is_freed)
{
	const int mode = _i;
	char conf[128];
	tenant_conf(conf, sizeof(conf), "[tenant me]\nuid = %u\nmem = 64M\n");
	struct daemon d;
	start_mode(&d, mode, (const char *const[]){"--config", conf, "--session-mem", "0", NULL});
	cua_client *op = connect_operator(&d);
	cua_daemon_status st;

	struct peer a;
	peer_open(&a, d.url);
	struct cua_req_mem_alloc ma = {0, 48 * MB};
	peer_ok(&a, CUA_OP_MEM_ALLOC, &ma);
	char *img;
	struct cua_req_module_load ml = kernels(&img, emu_test);
	uint64_t mod = peer_ok(&a, CUA_OP_MODULE_LOAD, &ml);
	free(img);
	struct cua_req_function_get fg = {mod, {"spin", 4}};
	uint64_t spin = peer_ok(&a, CUA_OP_FUNCTION_GET, &fg);
	int64_t cycles = spin_cycles(6000);
	cua_wire_arg arg[1] = {{CUA_ARG_BYTES, 0, {&cycles, 8}}};
	struct cua_req_launch l = {spin, {1, 1, 1}, {1, 1, 1}, 0, 0, CUA_FLAG_NO_WAIT, arg, 1};
	peer_ok(&a, CUA_OP_LAUNCH, &l); /* answered when accepted: nothing of A's is left unread */
	ck_assert_msg(wait_status(op, work_in_flight, NULL, &st), "A's kernel never ran");
	uint32_t live = st.sessions;
	nng_close(a.s);
	live--;
	ck_assert_msg(wait_status(op, sessions_at_most, &live, &st), "A's session never closed");
	ck_assert_msg(st.devices[0].in_flight >= 1, "A's kernel no longer runs: the test cannot tell anything");

	cua_client *b = connect_to(&d); /* tenant me too */
	cua_deviceptr p;
	int rc = cua_mem_alloc(b, 0, 32 * MB, &p);
	ck_assert_msg(rc == CUA_EQUOTA, "%s: 32 MiB for tenant me while its closing session's 48 MiB are not freed: %s",
		      iso_names[mode], cua_strerror_name(rc));
	ck_assert_msg(strstr(cua_last_error(), "closing") != NULL && strstr(cua_last_error(), "tenant 'me'") != NULL,
		      "%s", cua_last_error());
	served(b, 8 * MB); /* within the tenant's limit beside the closing session's memory */
	served(op, 8 * MB);

	ck_assert_msg(wait_status(op, device_memory_freed, NULL, &st), "A's memory was never freed");
	CK(cua_mem_alloc(b, 0, 32 * MB, &p));
	CK(cua_mem_free(b, p));
	cua_disconnect(b);
	cua_disconnect(op);
	daemon_stop(&d);
	unlink(conf);
}
END_TEST

/* ------------------------------------------------------------------ point 6: graphs are weighed */

/* GRAPH_CREATE of nodes launches of big_param_copy(out, 32000 bytes by value). */
static struct cua_req_graph_create
big_graph(uint64_t f, uint64_t out, uint32_t nodes, cua_batch_item *items, cua_wire_arg *args, const void *blob)
{
	args[0] = (cua_wire_arg){CUA_ARG_DEVPTR, out, {0}};
	args[1] = (cua_wire_arg){CUA_ARG_BYTES, 0, {blob, 32000}};
	for (uint32_t k = 0; k < nodes; k++) {
		memset(&items[k], 0, sizeof(items[k]));
		items[k].kind = CUA_OP_LAUNCH;
		items[k].u.launch = (struct cua_req_launch){f, {1, 1, 1}, {32, 1, 1}, 0, 0, 0, args, 2};
	}
	return (struct cua_req_graph_create){0, items, nodes};
}

START_TEST(graph_arguments_are_weighed)
{
	const int mode = _i;
	struct daemon d;
	start_mode(&d, mode, (const char *const[]){"--session-graph-bytes", "1M", NULL});
	cua_client *good = connect_to(&d);
	struct peer a;
	peer_open(&a, d.url);
	char *img;
	struct cua_req_module_load ml = kernels(&img, emu_big);
	uint64_t mod = peer_ok(&a, CUA_OP_MODULE_LOAD, &ml);
	free(img);
	struct cua_req_function_get fg = {mod, {"big_param_copy", 14}};
	uint64_t f = peer_ok(&a, CUA_OP_FUNCTION_GET, &fg);
	struct cua_req_mem_alloc ma = {0, 32000};
	uint64_t out = peer_ok(&a, CUA_OP_MEM_ALLOC, &ma);
	static char blob[32000];
	static cua_batch_item items[40];
	cua_wire_arg args[2];

	/* 40 nodes of 32000 bytes of arguments: 1.28 MB, past 1 MiB alone */
	struct cua_req_graph_create g = big_graph(f, out, 40, items, args, blob);
	char msg[1024];
	int st = peer_call(&a, CUA_OP_GRAPH_CREATE, &g, NULL, msg, sizeof(msg));
	ck_assert_msg(st == CUA_EQUOTA && strstr(msg, "--session-graph-bytes") != NULL, "%s: a 1.28 MB graph: %s: %s",
		      iso_names[mode], cua_strerror_name(st), msg);
	/* 6 graphs of 10 nodes (320 kB each) pipelined: 3 fit in 1 MiB */
	g = big_graph(f, out, 10, items, args, blob);
	unsigned n = pipeline_same(&a, CUA_OP_GRAPH_CREATE, &g, 6, "--session-graph-bytes");
	ck_assert_msg(n == 3, "%s: %u of 6 pipelined 320 kB graphs under --session-graph-bytes 1M", iso_names[mode], n);
	served(good, MB);
	nng_close(a.s);
	cua_disconnect(good);
	daemon_stop(&d);
}
END_TEST

/* ------------------------------------------------------------------ point 6: requests' bytes are weighed */

/* A request's message stays in the daemon's memory until the request is finished: requests waiting for their
 * turn (parked behind a missing seq, queued behind long work) once held up to 2 × --session-pending messages of
 * --max-message each per connection (8 GiB with the defaults). Now weighed per session and in total. */
START_TEST(requests_bytes_are_weighed)
{
	const int mode = _i;
	struct daemon d;
	/* the parked copies below must stay parked however slow the machine: a long sequence-gap timeout (a full
	 * run on 2 busy cores once took over the default 5 s between parking them and sending the missing one) */
	start_mode(&d, mode,
		   (const char *const[]){"--session-request-bytes", "32M", "--request-bytes", "48M",
					 "--seq-gap-timeout", "120000", NULL});
	cua_client *good = connect_to(&d);
	struct peer a, b;
	peer_open(&a, d.url);
	peer_open(&b, d.url);
	const size_t sz = 10 * MB;
	char *blob = calloc(1, sz);
	ck_assert_ptr_nonnull(blob);
	struct cua_req_mem_alloc ma = {0, sz};
	struct cua_req_memcpy_htod ha = {peer_ok(&a, CUA_OP_MEM_ALLOC, &ma), 0, {blob, (uint32_t)sz}};
	struct cua_req_memcpy_htod hb = {peer_ok(&b, CUA_OP_MEM_ALLOC, &ma), 0, {blob, (uint32_t)sz}};

	/* per session: 8 copies of 10 MiB pipelined, 3 fit in 32 MiB */
	unsigned n = pipeline_same(&a, CUA_OP_MEMCPY_HTOD, &ha, 8, "--session-request-bytes");
	ck_assert_msg(n == 3, "%s: %u of 8 pipelined 10 MiB copies under --session-request-bytes 32M", iso_names[mode],
		      n);
	served(good, MB);

	/* in total: a holds 30 MiB parked (seq +2..+4 wait for +1), b gets one 10 MiB copy in, not a second. NNG
	 * took a's copies when rawq_send returns, not the daemon: b's are sent once the daemon counted a's (else b's
	 * second could come in before a's third, and wait for its turn instead of being refused) */
	struct rawq qa[4], qb[3];
	uint64_t fa = a.seq + 1, fb = b.seq + 1;
	uint64_t before = session_requests(&d, a.session);
	for (unsigned k = 1; k < 4; k++)
		rawq_send(a.s, &qa[k], CUA_OP_MEMCPY_HTOD, fa + k, &ha);
	wait_session_requests(&d, a.session, before + 3);
	for (unsigned k = 1; k < 3; k++)
		rawq_send(b.s, &qb[k], CUA_OP_MEMCPY_HTOD, fb + k, &hb);
	char msg[1024];
	int st = rawq_reply(&qb[2], CUA_OP_MEMCPY_HTOD, NULL, msg, sizeof(msg)); /* refused at once */
	ck_assert_msg(st == CUA_EQUOTA && strstr(msg, "--request-bytes") != NULL && strstr(msg, "--session") == NULL,
		      "%s: b's second parked copy with 40 MiB held: %s: %s", iso_names[mode], cua_strerror_name(st),
		      msg);
	/* a well-behaved client's small requests still fit */
	CK(cua_ping(good));
	/* then the missing seqs: a's parked copies run, its +1 no longer fits beside them (QUOTA); b's +1 fits or not,
	 * as a's finish before or after it arrives */
	rawq_send(a.s, &qa[0], CUA_OP_MEMCPY_HTOD, fa, &ha);
	rawq_send(b.s, &qb[0], CUA_OP_MEMCPY_HTOD, fb, &hb);
	a.seq += 4;
	b.seq += 3;
	unsigned oka = 0, okb = 0;
	for (unsigned k = 0; k < 4; k++)
		oka += rawq_reply(&qa[k], CUA_OP_MEMCPY_HTOD, NULL, msg, sizeof(msg)) == CUA_OK;
	for (unsigned k = 0; k < 2; k++)
		okb += rawq_reply(&qb[k], CUA_OP_MEMCPY_HTOD, NULL, msg, sizeof(msg)) == CUA_OK;
	ck_assert_msg(oka == 3 && okb >= 1, "%s: a %u of 4, b %u of 2", iso_names[mode], oka, okb);
	/* everything finished: the bytes are back, a fresh pipeline fits as before */
	n = pipeline_same(&a, CUA_OP_MEMCPY_HTOD, &ha, 8, "--session-request-bytes");
	ck_assert_msg(n == 3, "%s: %u of 8 after the others finished", iso_names[mode], n);
	served(good, 8 * MB);
	free(blob);
	nng_close(a.s);
	nng_close(b.s);
	cua_disconnect(good);
	daemon_stop(&d);
}
END_TEST

/* ------------------------------------------------------------------ point 6: session workers are bounded */

/* c's first request on device 0 (an allocation): its status. */
static int
first_work(cua_client *c)
{
	cua_deviceptr p;
	int rc = cua_mem_alloc(c, 0, 4096, &p);
	if (rc == CUA_OK)
		CK(cua_mem_free(c, p));
	return rc;
}

START_TEST(session_workers_are_bounded)
{
	/* per tenant: everyone here is the default tenant */
	struct daemon d;
	daemon_start(&d, (const char *const[]){"--isolation", "session", "--isolation-pool", "1", "--session-workers",
					       "8", "--tenant-session-workers", "2", NULL});
	cua_client *c[3];
	for (int k = 0; k < 3; k++)
		c[k] = connect_to(&d);
	CK(first_work(c[0]));
	CK(first_work(c[1]));
	int rc = first_work(c[2]);
	ck_assert_msg(rc == CUA_EQUOTA && strstr(cua_last_error(), "--tenant-session-workers") != NULL,
		      "a third session's worker with --tenant-session-workers 2: %s: %s", cua_strerror_name(rc),
		      cua_last_error());
	served(c[0], MB); /* the sessions that have their workers are served */
	served(c[1], MB);
	CK(cua_ping(c[2]));
	/* a session gone gives its worker back: the third one gets one (bounded: the close is seen, the session
	 * freed and its worker retired by the dispatcher, each asynchronously) */
	cua_disconnect(c[0]);
	int k = 0;
	while (k++ < 2000 && (rc = first_work(c[2])) == CUA_EQUOTA)
		CK(cua_ping(c[1]));
	ck_assert_msg(rc == CUA_OK, "after a session ended: %s: %s", cua_strerror_name(rc), cua_last_error());
	cua_disconnect(c[1]);
	cua_disconnect(c[2]);
	daemon_stop(&d);

	/* in total */
	daemon_start(&d, (const char *const[]){"--isolation", "session", "--isolation-pool", "1", "--session-workers",
					       "2", "--tenant-session-workers", "0", NULL});
	for (int j = 0; j < 3; j++)
		c[j] = connect_to(&d);
	CK(first_work(c[0]));
	CK(first_work(c[1]));
	rc = first_work(c[2]);
	ck_assert_msg(rc == CUA_EBUSY && strstr(cua_last_error(), "--session-workers") != NULL,
		      "a third session's worker with --session-workers 2: %s: %s", cua_strerror_name(rc),
		      cua_last_error());
	served(c[0], MB);
	for (int j = 0; j < 3; j++)
		cua_disconnect(c[j]);
	daemon_stop(&d);
}
END_TEST

static Suite *
reserve_suite(void)
{
	Suite *s = suite_create("reserve");
	TCase *tc = tcase_create("limits");
	tcase_set_timeout(tc, 240);
	tcase_add_loop_test(tc, pipelined_requests_stay_within_the_sessions_limits, 0, 2);
	tcase_add_loop_test(tc, pipelined_requests_stay_within_the_tenants_limits, 0, 2);
	tcase_add_loop_test(tc, closing_session_counts_until_its_memory_is_freed, 0, 2);
	tcase_add_loop_test(tc, graph_arguments_are_weighed, 0, 2);
	tcase_add_loop_test(tc, requests_bytes_are_weighed, 0, 2);
	tcase_add_test(tc, session_workers_are_bounded);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(reserve_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
