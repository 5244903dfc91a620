/* common/cua_log.c: cua_log_escape and cua_utf8_seq, table-driven; and a record whose values hold newlines and
 * escape sequences is written as one line with no raw control byte (issue 21, point 4). */
#include "config.h"

#include "cua_log.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S(lit) lit, sizeof(lit) - 1

static const struct {
	const char *in;
	size_t len;
	const char *out;
} escapes[] = {
	{S(""), ""},
	{S("libcuasync"), "libcuasync"},
	{S("a b~!\"'%s{}"), "a b~!\"'%s{}"},
	{S("back\\slash"), "back\\\\slash"},
	{S("x\ncuasyncd: error: FAKE"), "x\\ncuasyncd: error: FAKE"},
	{S("\r\t"), "\\r\\t"},
	{S("\x1b[2J\x1b[31mFAKE"), "\\x1b[2J\\x1b[31mFAKE"},
	{S("\x01\x07\x08\x1f\x7f"), "\\x01\\x07\\x08\\x1f\\x7f"},
	{S("nul\0inside"), "nul\\x00inside"},
	/* valid UTF-8 kept: 2, 3 and 4 bytes, the highest code point */
	{S("r\xc3\xa9sum\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"),
	 "r\xc3\xa9sum\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf"},
	/* C1 controls (CSI as U+009B, NEL), line separators and bidi overrides: escaped, byte by byte */
	{S("\xc2\x9b"
	   "2J"),
	 "\\xc2\\x9b2J"},
	{S("\xc2\x85"), "\\xc2\\x85"},
	{S("\xc2\xa0"), "\xc2\xa0"}, /* U+00A0, the first after C1: kept */
	{S("\xe2\x80\xa8\xe2\x80\xae\xe2\x81\xa6"), "\\xe2\\x80\\xa8\\xe2\\x80\\xae\\xe2\\x81\\xa6"},
	{S("\xe2\x80\xa7\xe2\x80\xaf"), "\xe2\x80\xa7\xe2\x80\xaf"}, /* their neighbours: kept */
	/* not UTF-8: a raw 8-bit CSI, continuation bytes alone, 0xff, overlong, surrogate, past U+10FFFF, cut */
	{S("\x9b"
	   "2J"),
	 "\\x9b2J"},
	{S("\x80\xbf\xff\xfe"), "\\x80\\xbf\\xff\\xfe"},
	{S("\xc0\xaf\xc1\xbf"), "\\xc0\\xaf\\xc1\\xbf"},
	{S("\xe0\x80\xaf"), "\\xe0\\x80\\xaf"},
	{S("\xed\xa0\x80"), "\\xed\\xa0\\x80"},
	{S("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80"},
	{S("\xf0\x9f\x98"), "\\xf0\\x9f\\x98"},
	{S("\xe6\x97"
	   "A"),
	 "\\xe6\\x97A"}, /* a cut sequence: the next byte is read again */
};

START_TEST(escape_table)
{
	char buf[CUA_LOG_ESCAPED(64)];
	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		ck_assert_uint_le(escapes[i].len, 64);
		char *r = cua_log_escape(buf, sizeof(buf), escapes[i].in, escapes[i].len);
		ck_assert_ptr_eq(r, buf);
		ck_assert_msg(strcmp(buf, escapes[i].out) == 0, "case %zu: got \"%s\", want \"%s\"", i, buf,
			      escapes[i].out);
	}
}
END_TEST

/* Bounded: never more than cap bytes, never a cut escape or character, "..." where text was left out. */
static const struct {
	const char *in;
	size_t len, cap;
	const char *out;
} bounds[] = {
	{S("abcdef"), 7, "abcdef"},  /* fits exactly */
	{S("abcdefg"), 7, "abc..."}, /* one too many */
	{S("\n\n\n\n"), 9, "\\n\\n\\n\\n"},
	{S("\n\n\n\n"), 8, "\\n\\n..."},
	{S("ab\x1b"), 6, "ab..."}, /* "\x1b" does not fit: not cut in half */
	{S("ab\x1b"), 7, "ab\\x1b"},
	{S("\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5"), 7, "\xe6\x97\xa5..."},
	{S("abcdef"), 3, "ab"}, /* no room for "...": cut */
	{S("abcdef"), 1, ""},
	{S("a"), 1, ""},
};

START_TEST(escape_bounds)
{
	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		char buf[64];
		memset(buf, 'Z', sizeof(buf));
		cua_log_escape(buf, bounds[i].cap, bounds[i].in, bounds[i].len);
		ck_assert_msg(strcmp(buf, bounds[i].out) == 0, "case %zu: got \"%s\", want \"%s\"", i, buf,
			      bounds[i].out);
		ck_assert_msg(buf[bounds[i].cap] == 'Z', "case %zu: wrote past cap", i);
	}
	char untouched[4] = "abc";
	cua_log_escape(untouched, 0, "x", 1);
	ck_assert_str_eq(untouched, "abc");
	/* the worst case, every byte escaped, fits CUA_LOG_ESCAPED */
	char all[256], out[CUA_LOG_ESCAPED(256)];
	for (int i = 0; i < 256; i++)
		all[i] = (char)(i < 128 ? i : 0xff);
	cua_log_escape(out, sizeof(out), all, sizeof(all));
	ck_assert_ptr_null(strstr(out, "..."));
	for (const unsigned char *p = (const unsigned char *)out; *p; p++)
		ck_assert_msg(*p >= 0x20 && *p < 0x7f, "raw byte 0x%02x", *p);
}
END_TEST

START_TEST(utf8_seq)
{
	ck_assert_uint_eq(cua_utf8_seq("a", 1), 1);
	ck_assert_uint_eq(cua_utf8_seq("", 0), 0);
	ck_assert_uint_eq(cua_utf8_seq("\xc3\xa9", 2), 2);
	ck_assert_uint_eq(cua_utf8_seq("\xc3\xa9", 1), 0);
	ck_assert_uint_eq(cua_utf8_seq("\xef\xbf\xbd", 3), 3);
	ck_assert_uint_eq(cua_utf8_seq("\xf0\x90\x80\x80", 4), 4);
	ck_assert_uint_eq(cua_utf8_seq("\xf5\x80\x80\x80", 4), 0);
	ck_assert_uint_eq(cua_utf8_seq("\xc3\x28", 2), 0);
}
END_TEST

/* A record's values cannot split it: stderr (a file here) gets one line, the newline and ESC escaped. */
START_TEST(record_is_one_line)
{
	char path[] = "/tmp/cua-test-log.XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unsetenv("CUASYNC_JOURNAL_SOCKET");
	unsetenv("JOURNAL_STREAM");
	fflush(stderr);
	int saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	cua_log_set_ident("cuasyncd");
	log_info("hello from '%s'", "x\ncuasyncd: error: FAKE\x1b[2J\xc2\x9b\x9b back\\slash");
	log_error("%s", "second\r\n");
	dup2(saved, STDERR_FILENO);
	close(saved);
	char buf[4096];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(path);
	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	ck_assert_msg(strncmp(buf,
			      "cuasyncd: info: hello from 'x\\ncuasyncd: error: FAKE\\x1b[2J\\xc2\\x9b\\x9b "
			      "back\\slash'\n"
			      "cuasyncd: error: ",
			      strlen("cuasyncd: info: hello from 'x\\ncuasyncd: error: FAKE\\x1b[2J\\xc2\\x9b\\x9b "
				     "back\\slash'\ncuasyncd: error: ")) == 0,
		      "%s", buf);
	ck_assert_msg(strstr(buf, "second\\r\\n\n") != NULL, "%s", buf);
	int lines = 0;
	for (ssize_t i = 0; i < n; i++) {
		lines += buf[i] == '\n';
		ck_assert_msg(buf[i] == '\n' || ((unsigned char)buf[i] >= 0x20 && buf[i] != 0x7f), "byte %zd", i);
	}
	ck_assert_int_eq(lines, 2);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("escape");
	tcase_add_test(tc, escape_table);
	tcase_add_test(tc, escape_bounds);
	tcase_add_test(tc, utf8_seq);
	tcase_add_test(tc, record_is_one_line);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
