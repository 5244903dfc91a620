/* Unit tests of the id map (common/cua_idmap.h): allocation as a table of cases (fill a range, remove and
 * reuse, wrap), then growth past 1e5 entries, shrinking, walking, replacing and the edges. */
#include "config.h"

#include "cua_error.h"
#include "cua_idmap.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#define MAXSTEPS 8

/* One allocation scenario: alloc `fill` ids of [lo, hi] (they must come out lo, lo+1, ... in order), set the
 * ids of `set` (outside the range or not), remove the ids of `drop`, then each further alloc must give the
 * next id of `want` (CUA_EQUOTA where want_quota says so, after them). */
struct alloc_case {
	const char *name;
	uint64_t lo, hi;
	uint64_t fill;
	uint64_t set[MAXSTEPS];
	size_t nset;
	uint64_t drop[MAXSTEPS];
	size_t ndrop;
	uint64_t want[MAXSTEPS];
	size_t nwant;
	bool want_quota; /* after want: the range is full */
};

static const struct alloc_case alloc_cases[] = {
	{"fills a range, then refuses", 5, 104, 100, {0}, 0, {0}, 0, {0}, 0, true},
	{"a removed id is the only one left", 5, 104, 100, {0}, 0, {50}, 1, {50}, 1, true},
	{"freed ids come back only after wrapping", 1, 10, 6, {0}, 0, {2, 3}, 2, {7, 8, 9, 10, 2, 3}, 6, true},
	{"wraps from hi to lo skipping used ids", 1, 10, 10, {0}, 0, {1, 7}, 2, {1, 7}, 2, true},
	{"one-id range", 9, 9, 1, {0}, 0, {9}, 1, {9}, 1, true},
	{"ids set inside the range are skipped", 0, 7, 2, {3, 4}, 2, {0}, 0, {2, 5, 6, 7}, 4, true},
	{"ids set outside the range do not fill it", 100, 101, 0, {0, 1, 99, 102}, 4, {0}, 0, {100, 101}, 2, true},
	{"the top of the 64-bit space",
	 UINT64_MAX - 2,
	 UINT64_MAX,
	 3,
	 {0},
	 0,
	 {UINT64_MAX - 1},
	 1,
	 {UINT64_MAX - 1},
	 1,
	 true},
	{"pool streams set, the rest allocated", 4, 4095, 0, {0, 1, 2, 3}, 4, {0}, 0, {4, 5, 6}, 3, false},
};

static int marker; /* a non-NULL value */

START_TEST(alloc_table)
{
	const struct alloc_case *c = &alloc_cases[_i];
	cua_idmap m;
	cua_idmap_init(&m, c->lo, c->hi);
	for (uint64_t k = 0; k < c->fill; k++) {
		uint64_t id = 0;
		ck_assert_msg(cua_idmap_alloc(&m, &id, &marker) == 0, "%s: alloc %llu", c->name, (unsigned long long)k);
		ck_assert_msg(id == c->lo + k, "%s: alloc %llu gave %llu", c->name, (unsigned long long)k,
			      (unsigned long long)id);
	}
	for (size_t k = 0; k < c->nset; k++)
		ck_assert_int_eq(cua_idmap_set(&m, c->set[k], &marker), 0);
	for (size_t k = 0; k < c->ndrop; k++)
		ck_assert_ptr_eq(cua_idmap_remove(&m, c->drop[k]), &marker);
	size_t before = cua_idmap_count(&m);
	for (size_t k = 0; k < c->nwant; k++) {
		uint64_t id = 0;
		ck_assert_msg(cua_idmap_alloc(&m, &id, &marker) == 0, "%s: want %zu", c->name, k);
		ck_assert_msg(id == c->want[k], "%s: want %llu, got %llu", c->name, (unsigned long long)c->want[k],
			      (unsigned long long)id);
		ck_assert_ptr_eq(cua_idmap_find(&m, id), &marker);
	}
	ck_assert_uint_eq(cua_idmap_count(&m), before + c->nwant);
	if (c->want_quota) {
		uint64_t id = 12345;
		ck_assert_int_eq(cua_idmap_alloc(&m, &id, &marker), CUA_EQUOTA);
		ck_assert_uint_eq(id, 12345); /* untouched */
		ck_assert_uint_eq(cua_idmap_count(&m), before + c->nwant);
	}
	cua_idmap_fini(&m);
}
END_TEST

/* Values that tell entries apart: the id's own cell in an array. */
#define BIG 150000u
#define ADDR(i) (0x7f0000000000ull + (uint64_t)(i)*256u) /* device-address-like: equal low bits */

START_TEST(grows_past_1e5_entries_and_shrinks_back)
{
	static char vals[BIG];
	cua_idmap m;
	cua_idmap_init(&m, 1, UINT32_MAX);
	for (uint32_t i = 0; i < BIG; i++)
		ck_assert_int_eq(cua_idmap_set(&m, ADDR(i), &vals[i]), 0);
	ck_assert_uint_eq(cua_idmap_count(&m), BIG);
	ck_assert_uint_ge(m.cap, BIG);             /* grown on demand */
	ck_assert_uint_eq(m.cap & (m.cap - 1), 0); /* a power of two */
	ck_assert_uint_lt(m.load, m.cap);          /* never full */
	for (uint32_t i = 0; i < BIG; i++)
		ck_assert_ptr_eq(cua_idmap_find(&m, ADDR(i)), &vals[i]);
	ck_assert_ptr_null(cua_idmap_find(&m, ADDR(BIG)));
	ck_assert_ptr_null(cua_idmap_find(&m, ADDR(0) + 1));
	size_t grown = m.cap;
	for (uint32_t i = 10; i < BIG; i++) /* all but the first ten */
		ck_assert_ptr_eq(cua_idmap_remove(&m, ADDR(i)), &vals[i]);
	ck_assert_uint_eq(cua_idmap_count(&m), 10);
	ck_assert_uint_le(m.cap, 64); /* shrunk on demand */
	ck_assert_uint_lt(m.cap, grown);
	ck_assert_uint_ge(m.load, 10);
	for (uint32_t i = 0; i < 10; i++)
		ck_assert_ptr_eq(cua_idmap_find(&m, ADDR(i)), &vals[i]);
	ck_assert_ptr_null(cua_idmap_find(&m, ADDR(10)));
	for (uint32_t i = 0; i < 10; i++)
		ck_assert_ptr_eq(cua_idmap_remove(&m, ADDR(i)), &vals[i]);
	ck_assert_uint_eq(cua_idmap_count(&m), 0);
	ck_assert_uint_eq(m.load, 0); /* every skip went with its entry */
	cua_idmap_fini(&m);
}
END_TEST

START_TEST(allocates_past_1e5_ids_in_order)
{
	cua_idmap m;
	cua_idmap_init(&m, 1, UINT32_MAX);
	for (uint64_t i = 1; i <= BIG; i++) {
		uint64_t id = 0;
		ck_assert_int_eq(cua_idmap_alloc(&m, &id, &marker), 0);
		ck_assert_uint_eq(id, i);
	}
	for (uint64_t i = 1; i <= BIG; i += 2) /* every odd one */
		ck_assert_ptr_eq(cua_idmap_remove(&m, i), &marker);
	ck_assert_uint_eq(cua_idmap_count(&m), BIG / 2);
	for (uint64_t i = 2; i <= BIG; i += 2)
		ck_assert_ptr_eq(cua_idmap_find(&m, i), &marker);
	uint64_t id = 0;
	ck_assert_int_eq(cua_idmap_alloc(&m, &id, &marker), 0);
	ck_assert_uint_eq(id, BIG + 1); /* dynamic: not a freed one */
	cua_idmap_fini(&m);
}
END_TEST

START_TEST(walk_visits_each_entry_once)
{
	enum { N = 1000 };
	static unsigned char seen[N];
	static int vals[N];
	cua_idmap m;
	cua_idmap_init(&m, 0, N - 1);
	for (int i = 0; i < N; i++) {
		uint64_t id;
		vals[i] = i;
		ck_assert_int_eq(cua_idmap_alloc(&m, &id, &vals[i]), 0);
		ck_assert_uint_eq(id, (uint64_t)i);
	}
	for (int i = 0; i < N; i += 3)
		cua_idmap_remove(&m, (uint64_t)i);
	size_t cursor = 0, n = 0;
	uint64_t id;
	void *val;
	while (cua_idmap_next(&m, &cursor, &id, &val)) {
		ck_assert_uint_lt(id, N);
		ck_assert_uint_ne(id % 3, 0);
		ck_assert_ptr_eq(val, &vals[id]);
		ck_assert_int_eq(seen[id]++, 0);
		n++;
	}
	ck_assert_uint_eq(n, cua_idmap_count(&m));
	ck_assert(!cua_idmap_next(&m, &cursor, NULL, NULL)); /* stays at the end */
	cua_idmap_fini(&m);
}
END_TEST

START_TEST(set_replaces_and_edges)
{
	int a, b;
	cua_idmap m;
	cua_idmap_init(&m, 1, 100);
	ck_assert_ptr_null(cua_idmap_find(&m, 0)); /* empty: no table at all */
	ck_assert_ptr_null(cua_idmap_remove(&m, 7));
	size_t cursor = 0;
	ck_assert(!cua_idmap_next(&m, &cursor, NULL, NULL));
	ck_assert_int_eq(cua_idmap_set(&m, 0, &a), 0); /* id 0 is an id like any other */
	ck_assert_int_eq(cua_idmap_set(&m, 0, &b), 0); /* replaced, not added */
	ck_assert_uint_eq(cua_idmap_count(&m), 1);
	ck_assert_ptr_eq(cua_idmap_find(&m, 0), &b);
	ck_assert_ptr_null(cua_idmap_remove(&m, 1)); /* absent */
	ck_assert_ptr_eq(cua_idmap_remove(&m, 0), &b);
	ck_assert_ptr_null(cua_idmap_remove(&m, 0)); /* twice */
	ck_assert_uint_eq(cua_idmap_count(&m), 0);
	uint64_t id;
	ck_assert_int_eq(cua_idmap_alloc(&m, &id, &a), 0);
	ck_assert_uint_eq(id, 1);
	cua_idmap_fini(&m);
	cua_idmap_fini(&m); /* twice */
	ck_assert_uint_eq(cua_idmap_count(&m), 0);
	ck_assert_ptr_null(cua_idmap_find(&m, 1));
	ck_assert_int_eq(cua_idmap_alloc(&m, &id, &a), 0); /* usable again, the range kept */
	ck_assert_uint_eq(id, 1);
	cua_idmap_fini(&m);
}
END_TEST

/* Random operations against a plain array: the map must agree with it after each step. */
START_TEST(agrees_with_an_array_under_churn)
{
	enum { N = 4096, STEPS = 200000 };
	static void *ref[N];
	static int vals[N];
	cua_idmap m;
	cua_idmap_init(&m, 0, N - 1);
	unsigned seed = 18;
	size_t live = 0;
	for (int s = 0; s < STEPS; s++) {
		unsigned op = (unsigned)rand_r(&seed) % 3, k = (unsigned)rand_r(&seed) % N;
		if (op == 0) {
			ck_assert_int_eq(cua_idmap_set(&m, k, &vals[k]), 0);
			live += ref[k] == NULL;
			ref[k] = &vals[k];
		} else if (op == 1) {
			ck_assert_ptr_eq(cua_idmap_remove(&m, k), ref[k]);
			live -= ref[k] != NULL;
			ref[k] = NULL;
		} else {
			uint64_t id;
			int r = cua_idmap_alloc(&m, &id, &vals[0]);
			if (live == N) {
				ck_assert_int_eq(r, CUA_EQUOTA);
				continue;
			}
			ck_assert_int_eq(r, 0);
			ck_assert_ptr_null(ref[id]);
			ref[id] = &vals[0];
			live++;
		}
		ck_assert_ptr_eq(cua_idmap_find(&m, k), ref[k]);
		ck_assert_uint_eq(cua_idmap_count(&m), live);
	}
	for (unsigned k = 0; k < N; k++)
		ck_assert_ptr_eq(cua_idmap_find(&m, k), ref[k]);
	cua_idmap_fini(&m);
}
END_TEST

static Suite *
idmap_suite(void)
{
	Suite *s = suite_create("idmap");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, alloc_table, 0, (int)(sizeof(alloc_cases) / sizeof(alloc_cases[0])));
	tcase_add_test(tc, grows_past_1e5_entries_and_shrinks_back);
	tcase_add_test(tc, allocates_past_1e5_ids_in_order);
	tcase_add_test(tc, walk_visits_each_entry_once);
	tcase_add_test(tc, set_replaces_and_edges);
	tcase_add_test(tc, agrees_with_an_array_under_churn);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(idmap_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
