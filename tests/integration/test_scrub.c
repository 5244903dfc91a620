/* Scrub on free (--scrub on|off): memory one session freed reads as zeros when another session is handed it,
 * and freeing a block never touches a neighbour's bytes. Two sessions of the real daemon on the emulated device
 * (the same on the GPU with CUA_TEST_BACKEND=cuda, where the allocator's addresses are the driver's). */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct daemon D;

static void
up(void)
{
	static const char *const args[] = {"--session-mem", "0", NULL}; /* a 64 MiB block on a 256 MiB device */
	daemon_start(&D, args);                                         /* --scrub on is the default */
}

static void
up_noscrub(void)
{
	static const char *const args[] = {"--scrub", "off", "--session-mem", "0", NULL};
	daemon_start(&D, args);
}

static void
down(void)
{
	daemon_stop(&D);
}

static bool
on_emu(void)
{
	return strcmp(test_backend(), "emu") == 0;
}

/* A pattern no fresh or cleared memory holds: byte i of a block tagged t. */
static unsigned char
pat(unsigned t, size_t i)
{
	return (unsigned char)(t * 37u + i * 11u + 1u) | 0x80u;
}

static void
write_pattern(cua_client *c, cua_deviceptr p, size_t n, unsigned t)
{
	unsigned char *h = malloc(n);
	for (size_t i = 0; i < n; i++)
		h[i] = pat(t, i);
	CK(cua_memcpy_htod(c, p, h, n));
	free(h);
}

static void
assert_pattern(cua_client *c, cua_deviceptr p, size_t n, unsigned t)
{
	unsigned char *h = malloc(n);
	CK(cua_memcpy_dtoh(c, h, p, n));
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(h[i] == pat(t, i), "block %u, byte %zu: 0x%02x, expected 0x%02x", t, i, h[i], pat(t, i));
	free(h);
}

/* Whether the n bytes at p all read zero. */
static bool
reads_zeros(cua_client *c, cua_deviceptr p, size_t n)
{
	unsigned char *h = malloc(n), *z = calloc(1, n);
	CK(cua_memcpy_dtoh(c, h, p, n));
	bool zero = memcmp(h, z, n) == 0;
	free(h);
	free(z);
	return zero;
}

/* B allocates n bytes and is handed `want` (what A freed). False when the device chose another address: then
 * the test cannot say anything (the GPU's allocator may do so; the emulated one is first-fit and must not). */
static bool
realloc_same(cua_client *b, size_t n, cua_deviceptr want, cua_deviceptr *got)
{
	CK(cua_mem_alloc(b, 0, n, got));
	if (on_emu())
		ck_assert_msg(*got == want, "the emulated allocator handed 0x%llx, not the freed 0x%llx",
			      (unsigned long long)*got, (unsigned long long)want);
	return *got == want;
}

/* Session A fills two small blocks, the first page-aligned, and frees them; session B is handed each again and
 * reads zeros. With control set (--scrub off), B reads A's data instead. */
static void
small_blocks_handed_on(bool control)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_deviceptr p, q, got;
	CK(cua_mem_alloc(a, 0, 256, &p));
	CK(cua_mem_alloc(a, 0, 256, &q));
	if (on_emu())
		ck_assert_msg(p % 4096 == 0 && q == p + 256, "p 0x%llx q 0x%llx", (unsigned long long)p,
			      (unsigned long long)q);
	write_pattern(a, p, 256, 1);
	write_pattern(a, q, 256, 2);
	CK(cua_mem_free(a, q)); /* not page-aligned: shares its page with p */
	if (realloc_same(b, 256, q, &got)) {
		if (control)
			assert_pattern(b, got, 256, 2);
		else
			ck_assert_msg(reads_zeros(b, got, 256), "B read A's freed 256-byte block");
	}
	CK(cua_mem_free(a, p)); /* page-aligned */
	if (realloc_same(b, 256, p, &got)) {
		if (control)
			assert_pattern(b, got, 256, 1);
		else
			ck_assert_msg(reads_zeros(b, got, 256), "B read A's freed page-aligned block");
	}
	cua_disconnect(a);
	cua_disconnect(b);
}

START_TEST(freed_small_block_reads_zeros)
{
	small_blocks_handed_on(false);
}
END_TEST

/* The control: without the scrub the same steps show A's data to B, so the test above can see a missing scrub.
 * It documents what --scrub off means; it is no promise (the emulated device only). */
START_TEST(without_scrub_the_next_session_reads_the_data)
{
	if (!on_emu())
		return;
	small_blocks_handed_on(true);
}
END_TEST

/* Three adjacent 256-byte blocks, the first page-aligned: freeing the middle one, then the first, leaves the
 * others' bytes as they were (scrub on or off). */
START_TEST(free_leaves_neighbours_intact)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_deviceptr x, y, z;
	CK(cua_mem_alloc(a, 0, 256, &x));
	CK(cua_mem_alloc(b, 0, 256, &y));
	CK(cua_mem_alloc(a, 0, 256, &z));
	if (on_emu())
		ck_assert_msg(x % 4096 == 0 && y == x + 256 && z == y + 256, "x 0x%llx y 0x%llx z 0x%llx",
			      (unsigned long long)x, (unsigned long long)y, (unsigned long long)z);
	write_pattern(a, x, 256, 3);
	write_pattern(b, y, 256, 4);
	write_pattern(a, z, 256, 5);
	CK(cua_mem_free(b, y));
	assert_pattern(a, x, 256, 3);
	assert_pattern(a, z, 256, 5);
	CK(cua_mem_free(a, x));
	assert_pattern(a, z, 256, 5);
	CK(cua_mem_free(a, z));
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

/* A 64 MiB block (plus a partial page, with a small neighbour in that page): freed by A, handed to B, it reads
 * zeros, and the neighbour is intact. */
START_TEST(freed_big_block_reads_zeros)
{
	const size_t big = (64u << 20) + 256;
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_deviceptr p, n, got;
	CK(cua_mem_alloc(a, 0, big, &p));
	CK(cua_mem_alloc(a, 0, 256, &n));
	if (on_emu())
		ck_assert_msg(n == p + big, "p 0x%llx n 0x%llx", (unsigned long long)p, (unsigned long long)n);
	CK(cua_memset(a, p, 0xab, 1, big));
	write_pattern(a, n, 256, 6);
	ck_assert(!reads_zeros(a, p + big - 256, 256));
	CK(cua_mem_free(a, p));
	assert_pattern(a, n, 256, 6);
	if (realloc_same(b, big, p, &got))
		ck_assert_msg(reads_zeros(b, got, big), "B read A's freed 64 MiB block");
	assert_pattern(a, n, 256, 6);
	CK(cua_mem_free(b, got));
	CK(cua_mem_free(a, n));
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

static Suite *
scrub_suite(void)
{
	Suite *s = suite_create("scrub");
	TCase *tc = tcase_create("on");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, freed_small_block_reads_zeros);
	tcase_add_test(tc, free_leaves_neighbours_intact);
	tcase_add_test(tc, freed_big_block_reads_zeros);
	suite_add_tcase(s, tc);
	tc = tcase_create("off");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_noscrub, down);
	tcase_add_test(tc, without_scrub_the_next_session_reads_the_data);
	tcase_add_test(tc, free_leaves_neighbours_intact);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(scrub_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
