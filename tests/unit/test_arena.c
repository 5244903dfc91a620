/* Unit tests of the argument arena: the five cases of cuda-async's KernelArgStorage tests, plus edges. */
#include "config.h"

#include "cua_arena.h"
#include "cua_error.h"

#include <check.h>
#include <stdint.h>
#include <string.h>

/* Copies the parameter pointer array out so the assertions can run outside the callback. */
struct params {
	size_t n;
	void *p[256];
};

static int
grab(void **params, size_t n, void *ud)
{
	struct params *out = ud;
	out->n = n;
	for (size_t i = 0; i < n && i < 256; i++)
		out->p[i] = params[i];
	return 0;
}

#define PARAM(T, ptr) (*(const T *)(ptr))

START_TEST(values_roundtrip_and_survive_growth)
{
	cua_arena a;
	cua_arena_init(&a);
	uint8_t u8 = 7;
	uint64_t u64 = 0x1122334455667788ull;
	int32_t i32 = -5;
	ck_assert_int_eq(cua_arena_push(&a, &u8, sizeof(u8)), 0);
	ck_assert_int_eq(cua_arena_push(&a, &u64, sizeof(u64)), 0);
	ck_assert_int_eq(cua_arena_push(&a, &i32, sizeof(i32)), 0);
	ck_assert(!cua_arena_on_heap(&a));
	for (uint64_t i = 0; i < 64; i++)
		ck_assert_int_eq(cua_arena_push(&a, &i, sizeof(i)), 0);
	ck_assert(cua_arena_on_heap(&a));
	struct params p;
	ck_assert_int_eq(cua_arena_with_params(&a, grab, &p), 0);
	ck_assert_uint_eq(p.n, 3 + 64);
	ck_assert_uint_eq(PARAM(uint8_t, p.p[0]), 7);
	ck_assert_uint_eq(PARAM(uint64_t, p.p[1]), 0x1122334455667788ull);
	ck_assert_int_eq(PARAM(int32_t, p.p[2]), -5);
	for (size_t i = 0; i < 64; i++)
		ck_assert_uint_eq(PARAM(uint64_t, p.p[3 + i]), i);
	cua_arena_fini(&a);
}
END_TEST

START_TEST(common_parameter_counts_stay_inline)
{
	cua_arena a;
	cua_arena_init(&a);
	for (uint32_t i = 0; i < CUA_ARENA_INLINE; i++)
		ck_assert_int_eq(cua_arena_push(&a, &i, sizeof(i)), 0);
	ck_assert(!cua_arena_on_heap(&a));
	struct params p;
	cua_arena_with_params(&a, grab, &p);
	ck_assert_uint_eq(p.n, CUA_ARENA_INLINE);
	for (uint32_t i = 0; i < CUA_ARENA_INLINE; i++) {
		ck_assert_uint_eq(PARAM(uint32_t, p.p[i]), i);
		/* inline: the pointers point into the struct itself */
		ck_assert((char *)p.p[i] >= (char *)&a && (char *)p.p[i] < (char *)(&a + 1));
	}
	uint8_t one = 1;
	ck_assert_int_eq(cua_arena_push(&a, &one, 1), 0);
	ck_assert(cua_arena_on_heap(&a));
	cua_arena_with_params(&a, grab, &p);
	ck_assert_uint_eq(p.n, CUA_ARENA_INLINE + 1);
	for (uint32_t i = 0; i < CUA_ARENA_INLINE; i++)
		ck_assert_uint_eq(PARAM(uint32_t, p.p[i]), i);
	ck_assert_uint_eq(PARAM(uint8_t, p.p[CUA_ARENA_INLINE]), 1);
	cua_arena_fini(&a);
}
END_TEST

struct padded {
	uint8_t a;
	uint32_t b;
};

START_TEST(padded_values_survive_the_spill)
{
	cua_arena a;
	cua_arena_init(&a);
	for (uint32_t i = 0; i < CUA_ARENA_INLINE + 4; i++) {
		struct padded v; /* padding bytes deliberately left uninitialised */
		v.a = (uint8_t)i;
		v.b = i * 3;
		ck_assert_int_eq(cua_arena_push(&a, &v, sizeof(v)), 0);
	}
	ck_assert(cua_arena_on_heap(&a));
	struct params p;
	cua_arena_with_params(&a, grab, &p);
	ck_assert_uint_eq(p.n, CUA_ARENA_INLINE + 4);
	for (uint32_t i = 0; i < p.n; i++) {
		const struct padded *v = p.p[i];
		ck_assert_uint_eq(v->a, (uint8_t)i);
		ck_assert_uint_eq(v->b, i * 3);
	}
	cua_arena_fini(&a);
}
END_TEST

START_TEST(multi_slot_values_inline_and_on_heap)
{
	const uint64_t wide[3] = {11, 22, 33};
	cua_arena a;
	cua_arena_init(&a);
	uint8_t seven = 7;
	ck_assert_int_eq(cua_arena_push(&a, wide, sizeof(wide)), 0);
	ck_assert_int_eq(cua_arena_push(&a, &seven, 1), 0);
	ck_assert(!cua_arena_on_heap(&a));
	ck_assert_uint_eq(a.nslots, 3); /* 24 bytes take 2 slots, the u8 one */
	struct params p;
	cua_arena_with_params(&a, grab, &p);
	ck_assert_mem_eq(p.p[0], wide, sizeof(wide));
	ck_assert_uint_eq(PARAM(uint8_t, p.p[1]), 7);
	/* the span's tail padding reads as zero */
	ck_assert_uint_eq(PARAM(uint64_t, (const char *)p.p[0] + 24), 0);
	for (int i = 0; i < CUA_ARENA_INLINE; i++)
		ck_assert_int_eq(cua_arena_push(&a, wide, sizeof(wide)), 0);
	ck_assert(cua_arena_on_heap(&a));
	cua_arena_with_params(&a, grab, &p);
	ck_assert_uint_eq(p.n, 2 + CUA_ARENA_INLINE);
	ck_assert_mem_eq(p.p[0], wide, sizeof(wide));
	ck_assert_uint_eq(PARAM(uint8_t, p.p[1]), 7);
	for (size_t i = 2; i < p.n; i++)
		ck_assert_mem_eq(p.p[i], wide, sizeof(wide));
	cua_arena_fini(&a);
}
END_TEST

START_TEST(slots_are_sixteen_byte_aligned)
{
	cua_arena a;
	cua_arena_init(&a);
	uint8_t one = 1;
	unsigned __int128 two = 2;
	cua_arena_push(&a, &one, 1);
	cua_arena_push(&a, &two, sizeof(two));
	struct params p;
	cua_arena_with_params(&a, grab, &p);
	for (size_t i = 0; i < p.n; i++)
		ck_assert_uint_eq((uintptr_t)p.p[i] % 16, 0);
	ck_assert(PARAM(unsigned __int128, p.p[1]) == 2);
	for (int i = 0; i < 100; i++)
		cua_arena_push(&a, &one, 1);
	cua_arena_with_params(&a, grab, &p);
	for (size_t i = 0; i < p.n; i++)
		ck_assert_uint_eq((uintptr_t)p.p[i] % 16, 0);
	cua_arena_fini(&a);
}
END_TEST

/* A value bigger than the whole inline area goes straight to the heap with what came before. */
START_TEST(oversized_value_spills_with_previous)
{
	cua_arena a;
	cua_arena_init(&a);
	uint16_t first = 0xbeef;
	unsigned char big[CUA_ARENA_INLINE * 16 + 1];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (unsigned char)(i * 7);
	cua_arena_push(&a, &first, sizeof(first));
	ck_assert_int_eq(cua_arena_push(&a, big, sizeof(big)), 0);
	ck_assert(cua_arena_on_heap(&a));
	struct params p;
	cua_arena_with_params(&a, grab, &p);
	ck_assert_uint_eq(PARAM(uint16_t, p.p[0]), 0xbeef);
	ck_assert_mem_eq(p.p[1], big, sizeof(big));
	cua_arena_fini(&a);
}
END_TEST

/* A launch's largest by-value argument (a 32000-byte struct, CUDA 12.1+ on sm_70+) between two scalars: each
 * value intact, 16-byte aligned, its padding zero. */
START_TEST(struct_of_32000_bytes_between_scalars)
{
	cua_arena a;
	cua_arena_init(&a);
	static uint8_t big[32000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 31 + 7);
	uint64_t p = 0x7f0000001000ull;
	uint32_t n = 8000;
	ck_assert_int_eq(cua_arena_push(&a, &p, sizeof(p)), 0);
	ck_assert_int_eq(cua_arena_push(&a, big, sizeof(big)), 0);
	ck_assert_int_eq(cua_arena_push(&a, &n, sizeof(n)), 0);
	ck_assert(cua_arena_on_heap(&a));
	struct params got = {0};
	ck_assert_int_eq(cua_arena_with_params(&a, grab, &got), 0);
	ck_assert_uint_eq(got.n, 3);
	ck_assert_uint_eq(PARAM(uint64_t, got.p[0]), p);
	ck_assert_mem_eq(got.p[1], big, sizeof(big));
	ck_assert_uint_eq(PARAM(uint32_t, got.p[2]), n);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq((uintptr_t)got.p[i] % 16, 0);
	ck_assert_uint_eq((const uint8_t *)got.p[2] - (const uint8_t *)got.p[1], 32000); /* 2000 whole slots */
	cua_arena_fini(&a);
}
END_TEST

START_TEST(bad_pushes_leave_arena_unchanged)
{
	cua_arena a;
	cua_arena_init(&a);
	uint32_t v = 1;
	ck_assert_int_eq(cua_arena_push(&a, NULL, 4), CUA_EBAD_ARGUMENT);
	ck_assert_int_eq(cua_arena_push(&a, &v, 0), CUA_EBAD_ARGUMENT);
	ck_assert_uint_eq(cua_arena_count(&a), 0);
	struct params p;
	ck_assert_int_eq(cua_arena_with_params(&a, grab, &p), 0);
	ck_assert_uint_eq(p.n, 0);
	cua_arena_fini(&a);
	cua_arena_fini(&a); /* idempotent */
}
END_TEST

static Suite *
arena_suite(void)
{
	Suite *s = suite_create("arena");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, values_roundtrip_and_survive_growth);
	tcase_add_test(tc, common_parameter_counts_stay_inline);
	tcase_add_test(tc, padded_values_survive_the_spill);
	tcase_add_test(tc, multi_slot_values_inline_and_on_heap);
	tcase_add_test(tc, slots_are_sixteen_byte_aligned);
	tcase_add_test(tc, oversized_value_spills_with_previous);
	tcase_add_test(tc, bad_pushes_leave_arena_unchanged);
	tcase_add_test(tc, struct_of_32000_bytes_between_scalars);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(arena_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
