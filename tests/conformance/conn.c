#include "config.h"

#include "conn.h"

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REPLY_MS 20000 /* the longest any reply may take in this suite */

static const char *const st_names[] = {
	"OK",           "INTERNAL",    "PROTOCOL",      "VERSION",         "UNKNOWN_OP",
	"BAD_ARGUMENT", "NOT_FOUND",   "CONTEXT_LOST",  "QUOTA",           "PDL_UNSUPPORTED",
	"NO_MEMORY",    "DEVICE",      "TOO_LARGE",     "TIMEOUT",         "TRANSPORT",
	"CLOSED",       "NO_SESSION",  "BUSY",          "NO_DEVICE",       "UNSUPPORTED",
	"MODULE",       "DEVICE_HUNG", "SHUTTING_DOWN", "UNAUTHENTICATED", "PERMISSION_DENIED",
};

const char *
st_name(uint64_t st)
{
	return st < sizeof(st_names) / sizeof(st_names[0]) ? st_names[st] : "?";
}

static const char *
builddir(void)
{
	const char *b = getenv("CUA_TEST_BUILDDIR");
	return b && *b ? b : CUA_BUILDDIR;
}

/* The child side of dmn_start: stderr to the log, then exec. Never returns. */
static void
dmn_exec(const struct dmn *d, const char **argv)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed test exits without its teardown */
	int log = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (log >= 0) {
		dup2(log, STDERR_FILENO);
		close(log);
	}
	setenv("LSAN_OPTIONS", "suppressions=" CUA_SRCDIR "/tests/lsan.supp:print_suppressions=0", 1);
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

void
dmn_start(struct dmn *d, const char *const *extra)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/cuasync-conf.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(d->dir));
	snprintf(d->url, sizeof(d->url), "ipc://%s/d.sock", d->dir);
	snprintf(d->op_url, sizeof(d->op_url), "ipc://%s/op.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	char fdarg[16], exe[512];
	snprintf(fdarg, sizeof(fdarg), "%d", ready[1]);
	snprintf(exe, sizeof(exe), "%s/daemon/cuasyncd", builddir());
	const char *argv[64] = {exe,         "--listen", d->url,      "--ready-fd",     fdarg,
				"--backend", "emu",      "--emu-mem", "256M",           "--staging",
				"96M",       "--ring",   "4M",        "--operator-url", d->op_url};
	int n = 15;
	for (int i = 0; extra && extra[i] && n < 62; i++)
		argv[n++] = extra[i];
	d->pid = fork();
	ck_assert_int_ge(d->pid, 0);
	if (d->pid == 0) {
		close(ready[0]);
		dmn_exec(d, argv);
	}
	close(ready[1]);
	/* one read: "ready URL\n", or end-of-file when the daemon exits */
	char buf[512] = "";
	ssize_t got = read(ready[0], buf, sizeof(buf) - 1);
	close(ready[0]);
	ck_assert_msg(got > 0 && strncmp(buf, "ready ", 6) == 0, "cuasyncd did not start; see %s", d->log);
}

void
dmn_stop(struct dmn *d)
{
	if (d->pid <= 0)
		return;
	kill(d->pid, SIGTERM);
	int st;
	ck_assert_int_eq(waitpid(d->pid, &st, 0), d->pid);
	d->pid = 0;
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cuasyncd exited uncleanly (0x%x); see %s", st, d->log);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", d->dir);
}

void
conn_open(struct conn *c, const char *url)
{
	ck_assert_int_eq(nng_req0_open(&c->s), 0);
	ck_assert_int_eq(nng_socket_set_ms(c->s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE), 0);
	ck_assert_int_eq(nng_socket_set_ms(c->s, NNG_OPT_RECVTIMEO, REPLY_MS), 0);
	ck_assert_int_eq(nng_socket_set_size(c->s, NNG_OPT_RECVMAXSZ, 0), 0);
	int rv = nng_dial(c->s, url, &c->d, 0);
	ck_assert_msg(rv == 0, "dial %s: %s", url, nng_strerror(rv));
}

void
conn_close(struct conn *c)
{
	nng_dialer_close(c->d);
	nng_close(c->s);
}

void
reply_free(struct reply *r)
{
	mpv_free(&r->root);
	free(r->raw);
	r->raw = NULL;
	r->body = NULL;
}

static void
copy_str(char *dst, size_t cap, const struct mpv *v)
{
	size_t n = v->len < cap - 1 ? v->len : cap - 1;
	memcpy(dst, v->p, n);
	dst[n] = '\0';
}

/* Decodes a reply and asserts [R:reply-shape] and [R:reply-body] on it. */
static void
reply_parse(const void *buf, size_t n, struct reply *r)
{
	memset(r, 0, sizeof(*r));
	r->raw = malloc(n ? n : 1);
	ck_assert_ptr_nonnull(r->raw);
	memcpy(r->raw, buf, n);
	ck_assert_msg(mp_decode(r->raw, n, &r->root) == 0, "the reply is not one msgpack value (%zu bytes)", n);
	const struct mpv *a = r->root.a;
	ck_assert_msg(r->root.t == MP_ARR && r->root.len == 6, "reply: not an array of 6");
	ck_assert_msg(a[0].t == MP_UINT && a[1].t == MP_UINT && a[2].t == MP_UINT, "reply: version/op/status not uint");
	ck_assert_msg(a[3].t == MP_STR && a[4].t == MP_STR && a[5].t == MP_ARR, "reply: name/message/body types");
	ck_assert_msg(a[3].len <= 128 && a[4].len <= 65536, "reply: name or message too long");
	r->version = a[0].u;
	r->op = a[1].u;
	r->status = a[2].u;
	copy_str(r->name, sizeof(r->name), &a[3]);
	copy_str(r->msg, sizeof(r->msg), &a[4]);
	r->body = &a[5];
	ck_assert_str_eq(r->name, st_name(r->status));
	ck_assert_msg(r->status == 0 || r->body->len == 0, "%s reply with a non-empty body", r->name);
}

void
conn_raw(struct conn *c, const void *msg, size_t n, struct reply *out)
{
	struct flight f;
	flight_send(c, &f, msg, n);
	ck_assert_msg(flight_wait(&f, REPLY_MS), "no reply within %d ms", REPLY_MS);
	flight_reply(&f, out);
}

static void
msg_vbuild(struct mpb *b, uint64_t version, uint64_t op, uint64_t seq, const char *fmt, va_list *ap)
{
	b->n = 0;
	mpb_arr(b, 4);
	mpb_uint(b, version);
	mpb_uint(b, op);
	mpb_uint(b, seq);
	mpb_vfmt(b, fmt, ap);
}

void
msg_build(struct mpb *b, uint64_t version, uint64_t op, uint64_t seq, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	msg_vbuild(b, version, op, seq, fmt, &ap);
	va_end(ap);
}

void
conn_req(struct conn *c, uint64_t version, uint64_t op, uint64_t seq, struct reply *out, const char *fmt, ...)
{
	struct mpb b = {0};
	va_list ap;
	va_start(ap, fmt);
	msg_vbuild(&b, version, op, seq, fmt, &ap);
	va_end(ap);
	conn_raw(c, b.p, b.n, out);
	mpb_free(&b);
}

void
expect(struct conn *c, uint64_t op, uint64_t seq, uint64_t status, struct reply *out, const char *fmt, ...)
{
	struct mpb b = {0};
	struct reply r;
	va_list ap;
	va_start(ap, fmt);
	msg_vbuild(&b, PV, op, seq, fmt, &ap);
	va_end(ap);
	conn_raw(c, b.p, b.n, &r);
	mpb_free(&b);
	ck_assert_msg(r.status == status, "op %llu: %s (%s), expected %s", (unsigned long long)op, r.name, r.msg,
		      st_name(status));
	ck_assert_uint_eq(r.op, op);
	if (out)
		*out = r;
	else
		reply_free(&r);
}

void
conn_hello(struct conn *c, uint64_t *max_message)
{
	struct reply r;
	expect(c, OP_HELLO, 0, ST_OK, &r, "[uusus]", (uint64_t)1, (uint64_t)1, "conformance", (uint64_t)getpid(), "");
	ck_assert_uint_eq(r.body->len, 8);
	ck_assert_uint_eq(r.body->a[0].u, 1);
	if (max_message)
		*max_message = r.body->a[3].u;
	reply_free(&r);
}

void
conn_hello_secret(struct conn *c, uint64_t *session, uint8_t *secret, size_t *len)
{
	struct reply r;
	expect(c, OP_HELLO, 0, ST_OK, &r, "[uusus]", (uint64_t)1, (uint64_t)1, "conformance", (uint64_t)getpid(), "");
	ck_assert_uint_eq(r.body->len, 8);
	ck_assert_int_eq(r.body->a[7].t, MP_BIN);
	ck_assert_uint_le(r.body->a[7].len, 32);
	*session = r.body->a[1].u;
	*len = r.body->a[7].len;
	memcpy(secret, r.body->a[7].p, r.body->a[7].len);
	reply_free(&r);
}

static void
flight_cb(void *arg)
{
	struct flight *f = arg;
	nng_mtx_lock(f->mtx);
	f->done = true;
	nng_cv_wake(f->cv);
	nng_mtx_unlock(f->mtx);
}

void
flight_send(struct conn *c, struct flight *f, const void *msg, size_t n)
{
	memset(f, 0, sizeof(*f));
	nng_msg *m;
	ck_assert_int_eq(nng_ctx_open(&f->ctx, c->s), 0);
	ck_assert_int_eq(nng_msg_alloc(&m, 0), 0);
	ck_assert_int_eq(nng_msg_append(m, msg, n), 0);
	nng_aio *send;
	ck_assert_int_eq(nng_aio_alloc(&send, NULL, NULL), 0);
	nng_aio_set_msg(send, m);
	nng_aio_set_timeout(send, REPLY_MS);
	nng_ctx_send(f->ctx, send);
	nng_aio_wait(send);
	int rv = nng_aio_result(send);
	nng_aio_free(send);
	if (rv != 0)
		nng_msg_free(m);
	ck_assert_msg(rv == 0, "send: %s", nng_strerror(rv));
	ck_assert_int_eq(nng_mtx_alloc(&f->mtx), 0);
	ck_assert_int_eq(nng_cv_alloc(&f->cv, f->mtx), 0);
	ck_assert_int_eq(nng_aio_alloc(&f->aio, flight_cb, f), 0);
	nng_ctx_recv(f->ctx, f->aio);
}

bool
flight_wait(struct flight *f, int ms)
{
	nng_time until = nng_clock() + (nng_time)ms;
	nng_mtx_lock(f->mtx);
	while (!f->done && nng_cv_until(f->cv, until) == 0)
		;
	bool done = f->done;
	nng_mtx_unlock(f->mtx);
	return done;
}

static void
flight_fini(struct flight *f)
{
	nng_aio_free(f->aio); /* cancels a receive still running, and waits for its callback */
	nng_ctx_close(f->ctx);
	nng_cv_free(f->cv);
	nng_mtx_free(f->mtx);
}

void
flight_reply(struct flight *f, struct reply *out)
{
	ck_assert_msg(flight_wait(f, REPLY_MS), "no reply within %d ms", REPLY_MS);
	int rv = nng_aio_result(f->aio);
	ck_assert_msg(rv == 0, "receive: %s", nng_strerror(rv));
	nng_msg *m = nng_aio_get_msg(f->aio);
	reply_parse(nng_msg_body(m), nng_msg_len(m), out);
	nng_msg_free(m);
	flight_fini(f);
}

void
flight_drop(struct flight *f)
{
	nng_msg *m = NULL;
	nng_aio_cancel(f->aio);
	nng_aio_wait(f->aio);
	if (nng_aio_result(f->aio) == 0)
		m = nng_aio_get_msg(f->aio);
	if (m)
		nng_msg_free(m);
	flight_fini(f);
}

void *
kernels_image(size_t *len)
{
	static const char emu_image[] =
		"cuasync-emu-module\naxpy\nfill_u32\nempty_kernel\nspin\npdl_count\nbad_write\n";
	char path[512];
	snprintf(path, sizeof(path), "%s/tests/kernels/test_kernels.fatbin", builddir());
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		*len = sizeof(emu_image) - 1;
		void *p = malloc(*len);
		ck_assert_ptr_nonnull(p);
		memcpy(p, emu_image, *len);
		return p;
	}
	struct stat st;
	ck_assert_int_eq(fstat(fileno(f), &st), 0);
	void *p = malloc((size_t)st.st_size);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(fread(p, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	*len = (size_t)st.st_size;
	return p;
}
