/* Log and terminal injection (issue 21, point 4): a client names itself in HELLO with a newline and a forged
 * log line, or with terminal escape sequences. The daemon's log must keep one line per record with no raw
 * control byte, and `cuasyncctl sessions` one row per session, its table and its JSON free of raw control
 * bytes. The HELLO goes out raw (libcuasync always says "libcuasync"); the session stays open on its socket
 * while cuasyncctl lists it through the operator endpoint. */
#include "config.h"

#include "cua_proto.h"
#include "cua_wire.h"
#include "harness.h"

#include <check.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct daemon D;

static void
up(void)
{
	daemon_start(&D, NULL);
}

static void
down(void)
{
	daemon_stop(&D);
}

/* A connection that said HELLO with name (len bytes); the session lives while the socket is open. */
static nng_socket
hello_as(const char *name, size_t len)
{
	nng_socket s;
	ck_assert_int_eq(nng_req0_open(&s), 0);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 5000);
	ck_assert_int_eq(nng_dial(s, D.url, NULL, 0), 0);
	struct cua_req_hello h = {CUA_PROTO_VERSION_MIN, CUA_PROTO_VERSION, {name, (uint32_t)len}, 4242, {"", 0}};
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
	ck_assert_msg(r.status == CUA_OK, "HELLO: %s: %.*s", cua_strerror_name((int)r.status), (int)r.message.len,
		      (const char *)r.message.ptr);
	cua_wire_reply_free(&r);
	nng_free(rep, rlen);
	return s;
}

/* The whole output of cmd (at most cap - 1 bytes), its exit status checked. Returns its length. */
static size_t
run_capture(const char *cmd, char *out, size_t cap)
{
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = '\0';
	ck_assert_int_eq(pclose(f), 0);
	return n;
}

/* The first byte of buf[0..n) that a terminal or a line-based reader would act on (a control byte other than the
 * line ends given in keep, DEL), or -1. */
static long
raw_control(const char *buf, size_t n, const char *keep)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		if ((c < 0x20 || c == 0x7f) && strchr(keep, c) == NULL)
			return (long)i;
	}
	return -1;
}

/* How many lines of text start with prefix. */
static int
lines_starting(const char *text, const char *prefix)
{
	int k = 0;
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, prefix, strlen(prefix)) == 0)
			k++;
	return k;
}

static const char forged[] = "evil\ncuasyncd: error: FAKE forged line";
static const char ansi[] = "evil\x1b[2J\x1b[31mFAKE\x07\r\x7f\x9b"
			   "2J\xc2\x9b"
			   "2J\xff";

START_TEST(hostile_hello_names_are_escaped)
{
	nng_socket a = hello_as(forged, sizeof(forged) - 1);
	nng_socket b = hello_as(ansi, sizeof(ansi) - 1);
	static char out[1 << 16];
	char cmd[1024];

	/* the table: a header and one row per session (these two and cuasyncctl's own), nothing raw */
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s sessions", builddir(), D.op_url);
	size_t n = run_capture(cmd, out, sizeof(out));
	ck_assert_msg(raw_control(out, n, "\n") < 0, "raw control byte at %ld in:\n%s", raw_control(out, n, "\n"), out);
	int rows = 0;
	for (size_t i = 0; i < n; i++)
		rows += out[i] == '\n';
	ck_assert_msg(rows == 4, "%d lines, want a header and 3 rows:\n%s", rows, out);
	ck_assert_msg(lines_starting(out, "cuasyncd: error: FAKE") == 0, "%s", out);
	ck_assert_msg(strstr(out, "evil\\ncuasync") != NULL, "the newline is not shown escaped:\n%s", out);
	ck_assert_msg(strstr(out, "evil\\x1b[2J") != NULL, "ESC is not shown escaped:\n%s", out);
	ck_assert_msg(memchr(out, 0x9b, n) == NULL && memchr(out, 0xff, n) == NULL, "a raw 8-bit byte:\n%s", out);

	/* the JSON: the name whole, escaped per JSON, one document on one line */
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s --json sessions", builddir(), D.op_url);
	n = run_capture(cmd, out, sizeof(out));
	ck_assert_msg(raw_control(out, n, "\n") < 0, "raw control byte in JSON:\n%s", out);
	ck_assert_msg(strchr(out, '\n') == out + n - 1, "the JSON is not one line:\n%s", out);
	ck_assert_msg(strstr(out, "\"evil\\ncuasyncd: error: FAKE forged line\"") != NULL, "%s", out);
	ck_assert_msg(strcasestr(out, "\"evil\\u001b[2J\\u001b[31mFAKE\\u0007\\r\\u007f\\ufffd2J\\u009b2J\\ufffd\"") !=
			      NULL,
		      "%s", out);

	/* the daemon's log: one record per line, none forged, no raw control byte; the names escaped */
	nng_close(a);
	nng_close(b);
	static char log[1 << 20];
	FILE *f = fopen(D.log, "rb");
	ck_assert_ptr_nonnull(f);
	n = fread(log, 1, sizeof(log) - 1, f);
	log[n] = '\0';
	fclose(f);
	ck_assert_msg(lines_starting(log, "cuasyncd: error: FAKE") == 0, "a forged line in the log:\n%s", log);
	ck_assert_msg(raw_control(log, n, "\n") < 0, "raw control byte at %ld of the log:\n%s",
		      raw_control(log, n, "\n"), log);
	ck_assert_msg(memchr(log, 0x9b, n) == NULL && memchr(log, 0xff, n) == NULL, "a raw 8-bit byte in the log");
	ck_assert_msg(strstr(log, "hello from 'evil\\ncuasyncd: error: FAKE forged line'") != NULL, "%s", log);
	ck_assert_msg(strstr(log, "hello from 'evil\\x1b[2J\\x1b[31mFAKE\\x07\\r\\x7f\\x9b2J\\xc2\\x9b2J\\xff'") !=
			      NULL,
		      "%s", log);
}
END_TEST

/* A plain UTF-8 name is kept as it is, in the table and in the log. */
START_TEST(utf8_names_are_kept)
{
	static const char name[] = "r\xc3\xa9sum\xc3\xa9-\xe6\x97\xa5";
	nng_socket a = hello_as(name, sizeof(name) - 1);
	static char out[1 << 16];
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s sessions", builddir(), D.op_url);
	run_capture(cmd, out, sizeof(out));
	ck_assert_msg(strstr(out, name) != NULL, "%s", out);
	nng_close(a);
	ck_assert(file_has(D.log, name));
}
END_TEST

static Suite *
inject_suite(void)
{
	Suite *s = suite_create("log_inject");
	TCase *tc = tcase_create("names");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, hostile_hello_names_are_escaped);
	tcase_add_test(tc, utf8_names_are_kept);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(inject_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
