/* Unit tests of the shared-memory ring and the extent allocator (daemon internals, no processes needed). */
#include "config.h"

#include "extent.h"
#include "ring.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define RING 4096

static struct ring *
ring_new(void)
{
	struct ring *r = aligned_alloc(64, (ring_footprint(RING) + 63) & ~(size_t)63);
	ring_init(r, RING);
	return r;
}

/* Records come out as they went in, across the ring's end; ring_has_next says whether one follows. */
START_TEST(records_keep_order_and_content_across_wraps)
{
	struct ring *r = ring_new();
	uint32_t next_in = 0, next_out = 0;
	/* sizes chosen so that records straddle the end of the ring many times */
	for (int round = 0; round < 2000; round++) {
		for (int k = 0; k < 3; k++) {
			size_t len = 1 + (next_in * 37) % 700;
			unsigned char *p = ring_reserve(r, len);
			if (p == NULL)
				break;
			for (size_t i = 0; i < len; i++)
				p[i] = (unsigned char)(next_in + i);
			ring_commit(r, len);
			next_in++;
		}
		size_t len;
		const unsigned char *p;
		while ((p = ring_peek(r, &len)) != NULL && (next_out % 2 == 0 || next_in - next_out > 2)) {
			ck_assert_uint_eq(len, 1 + (next_out * 37) % 700);
			/* the worker issues a lone record's work itself only when nothing follows it */
			ck_assert_int_eq(ring_has_next(r), next_in - next_out > 1);
			for (size_t i = 0; i < len; i++)
				ck_assert_uint_eq(p[i], (unsigned char)(next_out + i));
			ring_release(r);
			next_out++;
		}
	}
	ck_assert_uint_gt(next_out, 3000);
	free(r);
}
END_TEST

START_TEST(full_ring_refuses_and_oversized_records_never_fit)
{
	struct ring *r = ring_new();
	ck_assert_ptr_null(ring_reserve(r, ring_max_record(r) + 1));
	int n = 0;
	while (ring_reserve(r, 1000) != NULL) {
		ring_commit(r, 1000);
		n++;
	}
	ck_assert_int_gt(n, 0);
	ck_assert_int_le(n * 1008, RING);
	ck_assert_int_eq(ring_wait_space(r, 1000, 1), 0); /* times out, full */
	size_t len;
	ck_assert_ptr_nonnull(ring_peek(r, &len));
	ring_release(r);
	ck_assert_ptr_nonnull(ring_reserve(r, 1000));
	free(r);
}
END_TEST

struct pc {
	struct ring *r;
	uint32_t count;
};

static void *
producer(void *arg)
{
	struct pc *pc = arg;
	for (uint32_t i = 0; i < pc->count; i++) {
		size_t len = 8 + (i % 300);
		unsigned char *p;
		while ((p = ring_reserve(pc->r, len)) == NULL)
			ring_wait_space(pc->r, len, 100);
		memcpy(p, &i, sizeof(i));
		memset(p + 4, (int)(i & 0xff), len - 4);
		ring_commit(pc->r, len);
	}
	return NULL;
}

/* A producer and a consumer thread, sleeping on the futexes when there is nothing to do. */
START_TEST(producer_and_consumer_threads)
{
	struct pc pc = {ring_new(), 5000};
	pthread_t t;
	pthread_create(&t, NULL, producer, &pc);
	for (uint32_t i = 0; i < pc.count; i++) {
		size_t len;
		const unsigned char *p;
		while ((p = ring_peek(pc.r, &len)) == NULL)
			ring_wait_data(pc.r, 100);
		uint32_t got;
		memcpy(&got, p, sizeof(got));
		ck_assert_uint_eq(got, i);
		ck_assert_uint_eq(len, 8 + (i % 300));
		ck_assert_uint_eq(p[len - 1], i & 0xff);
		ring_release(pc.r);
	}
	pthread_join(t, NULL);
	free(pc.r);
}
END_TEST

START_TEST(extents_coalesce_and_refuse_what_does_not_fit)
{
	struct extent_alloc a;
	ck_assert_int_eq(extent_init(&a, 1 << 20, 256), 0);
	uint64_t off[64];
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(extent_get(&a, 16384, &off[i]), 0);
	uint64_t x;
	ck_assert_int_eq(extent_get(&a, 1, &x), -1); /* full */
	for (int i = 0; i < 64; i += 2)              /* free every other one: 32 holes of 16 KiB */
		extent_put(&a, off[i], 16384);
	ck_assert_int_eq(extent_get(&a, 32768, &x), -1); /* fragmented */
	for (int i = 1; i < 64; i += 2)
		extent_put(&a, off[i], 16384);
	ck_assert_uint_eq(a.nfree, 1); /* all coalesced */
	ck_assert_uint_eq(a.used, 0);
	ck_assert_int_eq(extent_get(&a, 1 << 20, &x), 0);
	ck_assert_uint_eq(x, 0);
	extent_put(&a, x, 1 << 20);
	ck_assert_int_eq(extent_get(&a, 100, &x), 0); /* rounded to the alignment */
	ck_assert_uint_eq(a.used, 256);
	ck_assert_int_eq(extent_get(&a, 0, &x), -1);
	ck_assert_int_eq(extent_get(&a, (1 << 20) + 1, &x), -1);
	extent_fini(&a);
}
END_TEST

static Suite *
ring_suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("ring");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, records_keep_order_and_content_across_wraps);
	tcase_add_test(tc, full_ring_refuses_and_oversized_records_never_fit);
	tcase_add_test(tc, producer_and_consumer_threads);
	tcase_add_test(tc, extents_coalesce_and_refuse_what_does_not_fit);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(ring_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
