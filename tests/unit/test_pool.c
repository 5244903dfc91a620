/* Unit tests of the region allocator (common/cua_pool.h): a table of cases, each run on a fresh pool that is
 * destroyed afterwards (under ASan/LSan, a leak or an overrun of any case fails the run). */
#include "config.h"

#include "cua_pool.h"

#include <check.h>
#include <stdint.h>
#include <string.h>

#define BLOCK 1024 /* large allocations: above BLOCK / 4 */

static int
aligned(const void *ptr)
{
	return ((uintptr_t)ptr % CUA_POOL_ALIGN) == 0;
}

/* Many small allocations over several blocks: aligned, distinct, and none overwrites another. */
static void
many_small(cua_pool *p)
{
	enum { N = 2000 };
	static unsigned char *ptrs[N];
	for (size_t i = 0; i < N; i++) {
		size_t n = i % 97; /* 0 included */
		ptrs[i] = cua_pool_alloc(p, n);
		ck_assert_ptr_nonnull(ptrs[i]);
		ck_assert(aligned(ptrs[i]));
		memset(ptrs[i], (int)(i & 0xff), n);
	}
	for (size_t i = 0; i < N; i++) {
		size_t n = i % 97;
		for (size_t k = 0; k < n; k++)
			ck_assert_uint_eq(ptrs[i][k], i & 0xff);
		if (i > 0)
			ck_assert_ptr_ne(ptrs[i], ptrs[i - 1]);
	}
}

/* A large allocation (above a quarter block, and above a whole one) between small ones. */
static void
large(cua_pool *p)
{
	unsigned char *a = cua_pool_alloc(p, 8);
	unsigned char *big = cua_pool_alloc(p, 1u << 20);
	unsigned char *mid = cua_pool_alloc(p, BLOCK / 4 + 1);
	unsigned char *b = cua_pool_alloc(p, 8);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(big);
	ck_assert_ptr_nonnull(mid);
	ck_assert_ptr_nonnull(b);
	ck_assert(aligned(big) && aligned(mid));
	memset(big, 0xab, 1u << 20);
	memset(mid, 0xcd, BLOCK / 4 + 1);
	memset(a, 1, 8);
	memset(b, 2, 8);
	ck_assert_uint_eq(big[(1u << 20) - 1], 0xab);
	ck_assert_uint_eq(mid[BLOCK / 4], 0xcd);
	ck_assert_uint_eq(a[7], 1);
	/* the large ones did not use the block: the small ones sit side by side */
	ck_assert_ptr_eq(b, a + CUA_POOL_ALIGN);
}

/* The last allocation grows in place; one that is not the last moves (its bytes kept); a buffer grown by
 * doubling from a block allocation into a large one keeps every byte on the way. */
static void
realloc_last_growth(cua_pool *p)
{
	unsigned char *a = cua_pool_alloc(p, 16);
	memset(a, 7, 16);
	unsigned char *a2 = cua_pool_realloc_last(p, a, 16, 64);
	ck_assert_ptr_eq(a2, a); /* the block's last: in place */
	memset(a2 + 16, 8, 48);
	unsigned char *other = cua_pool_alloc(p, 16);
	ck_assert_ptr_nonnull(other);
	unsigned char *a3 = cua_pool_realloc_last(p, a2, 64, 128);
	ck_assert_ptr_nonnull(a3);
	ck_assert_ptr_ne(a3, a2); /* not the last any more: moved */
	ck_assert_uint_eq(a3[15], 7);
	ck_assert_uint_eq(a3[63], 8);

	unsigned char *buf = NULL;
	size_t cap = 0, len = 0;
	for (uint32_t i = 0; i < 100000; i++) {
		if (len == cap) {
			size_t ncap = cap ? 2 * cap : 32;
			unsigned char *n = cua_pool_realloc_last(p, buf, len, ncap);
			ck_assert_ptr_nonnull(n);
			ck_assert(aligned(n));
			buf = n;
			cap = ncap;
		}
		buf[len++] = (unsigned char)(i * 31u);
	}
	for (uint32_t i = 0; i < 100000; i++)
		ck_assert_uint_eq(buf[i], (unsigned char)(i * 31u));
	/* NULL: a plain allocation */
	ck_assert_ptr_nonnull(cua_pool_realloc_last(p, NULL, 0, 40));
}

static void
strings(cua_pool *p)
{
	char *s = cua_pool_strdup(p, "daemon out of memory");
	ck_assert_ptr_nonnull(s);
	ck_assert_str_eq(s, "daemon out of memory");
	char *t = cua_pool_strndup(p, "request too large", 7);
	ck_assert_str_eq(t, "request");
	char *u = cua_pool_strndup(p, "ab", 100); /* n past the end: stops at the NUL */
	ck_assert_str_eq(u, "ab");
	char *e = cua_pool_strdup(p, "");
	ck_assert_str_eq(e, "");
	char longer[2000];
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	char *l = cua_pool_strdup(p, longer); /* a large one */
	ck_assert_str_eq(l, longer);
	ck_assert_str_eq(s, "daemon out of memory");
}

/* Allocations that fail leave the pool as it was and usable; destroy then frees everything. */
static void
partial_failure(cua_pool *p)
{
	unsigned char *a = cua_pool_alloc(p, 100);
	unsigned char *big = cua_pool_alloc(p, 5000);
	memset(a, 3, 100);
	memset(big, 4, 5000);
	ck_assert_ptr_null(cua_pool_alloc(p, CUA_POOL_MAX_ALLOC + 1));
	ck_assert_ptr_null(cua_pool_alloc(p, SIZE_MAX));
	ck_assert_ptr_null(cua_pool_calloc(p, SIZE_MAX / 2, 3)); /* overflows */
	ck_assert_ptr_null(cua_pool_realloc_last(p, a, 100, SIZE_MAX));
	ck_assert_ptr_null(cua_pool_realloc_last(p, big, 5000, SIZE_MAX));
	ck_assert_uint_eq(a[99], 3);
	ck_assert_uint_eq(big[4999], 4);
	unsigned char *c = cua_pool_calloc(p, 10, 10);
	ck_assert_ptr_nonnull(c);
	for (int i = 0; i < 100; i++)
		ck_assert_uint_eq(c[i], 0);
	/* growing the big one still works after its failed attempt */
	unsigned char *big2 = cua_pool_realloc_last(p, big, 5000, 50000);
	ck_assert_ptr_nonnull(big2);
	ck_assert_uint_eq(big2[4999], 4);
}

static void
empty(cua_pool *p)
{
	(void)p; /* created and destroyed with nothing in it */
}

static const struct pool_case {
	const char *name;
	void (*run)(cua_pool *p);
} cases[] = {
	{"many small allocations", many_small},
	{"a large allocation", large},
	{"realloc_last growth", realloc_last_growth},
	{"strdup and strndup", strings},
	{"destroy after partial failure", partial_failure},
	{"an empty pool", empty},
};

START_TEST(pool_case)
{
	const struct pool_case *c = &cases[_i];
	cua_pool *p = cua_pool_create(BLOCK);
	ck_assert_msg(p != NULL, "%s: cannot create the pool", c->name);
	c->run(p);
	cua_pool_destroy(p);
}
END_TEST

START_TEST(destroy_null_and_tiny_blocks)
{
	cua_pool_destroy(NULL);
	cua_pool *p = cua_pool_create(0); /* rounded up to the minimum */
	ck_assert_ptr_nonnull(p);
	for (int i = 0; i < 100; i++)
		ck_assert_ptr_nonnull(cua_pool_alloc(p, 64));
	cua_pool_destroy(p);
	ck_assert_ptr_null(cua_pool_create(SIZE_MAX));
}
END_TEST

static Suite *
pool_suite(void)
{
	Suite *s = suite_create("pool");
	TCase *tc = tcase_create("core");
	tcase_add_loop_test(tc, pool_case, 0, (int)(sizeof(cases) / sizeof(cases[0])));
	tcase_add_test(tc, destroy_null_and_tiny_blocks);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(pool_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
