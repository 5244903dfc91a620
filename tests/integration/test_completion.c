/*
 * test_completion.c — a request's reply comes only after all of its work ran, however many streams it spans.
 *
 * One batch spans 100 client streams; on each stream a spin kernel runs first and a fill then writes that
 * stream's marker, so a stream's marker exists only once its work has finished. The spins differ in length
 * by STEP_MS from stream to stream, and the batch's future is waited on; then the markers are read back through
 * the daemon's stream pool, which is not ordered after the 100 streams: a marker is missing exactly when the
 * reply came before that stream's work finished. The reply is also timed: it may not come before the longest
 * spin could have ended.
 *
 * A completion tracker that forgets some of the streams (backend_cuda.c tracked at most 64 per request) replies
 * when the streams it does track finish. The spins grow along the batch in one run and shrink in the other, so
 * whether the forgotten streams are the last to appear or the first, the forgotten ones include the longest
 * spin, which ends at least STEP_MS per forgotten stream after the reply: its marker is absent and the reply
 * came too early. No sleeping: the order comes from the streams and the future, the margins from the spins.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NSTREAMS 100
#define WORDS 16    /* 32-bit words of the result buffer written by each stream */
#define BASE_MS 20u /* the shortest spin */
#define STEP_MS 3u  /* the difference between neighbours' spins */
#define POISON 0xdeadbeefu

static struct daemon D;

static void
up(void)
{
	static const char *const args[] = {"--session-streams", "128", NULL}; /* 100 streams and the pool */
	daemon_start(&D, args);
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
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Stream i's marker in run `run`: distinct per stream and per run, never the poison. */
static uint32_t
marker(unsigned run, unsigned i)
{
	return 0x5eed0000u | run << 12 | i;
}

/*
 * One batch: for every stream i, spin for spin_ms(i), then fill stream i's WORDS words with its marker. Waits for
 * the batch's future, then checks every item's status, the time the reply took and every marker, read back on the
 * stream pool.
 */
static void
batch_over_streams(cua_client *c, unsigned run, int ascending)
{
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin"), fill = get_fn(c, m, "fill_u32");
	cua_stream s[NSTREAMS];
	for (unsigned i = 0; i < NSTREAMS; i++)
		CK(cua_stream_create(c, 0, 0, &s[i]));
	const size_t bytes = (size_t)NSTREAMS * WORDS * 4;
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, bytes, &p));
	CK(cua_memset(c, p, POISON, 4, (size_t)NSTREAMS * WORDS)); /* synchronous: done before the batch */

	cua_batch *b = cua_batch_new(c);
	ck_assert_ptr_nonnull(b);
	unsigned longest_ms = 0;
	for (unsigned i = 0; i < NSTREAMS; i++) {
		unsigned ms = BASE_MS + STEP_MS * (ascending ? i : NSTREAMS - 1 - i);
		longest_ms = ms > longest_ms ? ms : longest_ms;
		cua_launch *l = launch_1d(c, spin, 1, 1);
		cua_launch_push_i64(l, spin_cycles(ms));
		cua_launch_set_stream(l, s[i]);
		CK(cua_batch_add_launch(b, l));
		l = launch_1d(c, fill, 1, WORDS);
		cua_launch_push_device_ptr(l, p + (cua_deviceptr)i * WORDS * 4);
		cua_launch_push_u32(l, marker(run, i));
		cua_launch_push_u64(l, WORDS);
		cua_launch_set_stream(l, s[i]);
		CK(cua_batch_add_launch(b, l));
	}
	ck_assert_uint_eq(cua_batch_count(b), 2 * NSTREAMS);
	cua_future *f;
	double t0 = now_ms();
	CK(cua_batch_submit(b, &f));
	int rc = cua_future_wait(f, -1);
	double waited = now_ms() - t0;

	/* Read back first, before anything else can give the streams time to catch up. */
	uint32_t *v = malloc(bytes);
	ck_assert_ptr_nonnull(v);
	CK(cua_memcpy_dtoh(c, v, p, bytes)); /* the stream pool: not ordered after the 100 streams */
	ck_assert_msg(rc == CUA_OK, "batch: %s: %s", cua_strerror_name(rc), cua_future_error(f));
	ck_assert_uint_eq(cua_future_items(f), 2 * NSTREAMS);
	for (size_t k = 0; k < 2 * NSTREAMS; k++) {
		const char *msg;
		ck_assert_msg(cua_future_item(f, k, &msg) == CUA_OK, "item %zu: %s", k, msg);
	}
	unsigned missing = 0, first_missing = NSTREAMS;
	for (unsigned i = 0; i < NSTREAMS; i++)
		for (unsigned w = 0; w < WORDS; w++)
			if (v[i * WORDS + w] != marker(run, i)) {
				missing++;
				first_missing = i < first_missing ? i : first_missing;
			}
	ck_assert_msg(missing == 0,
		      "%s run: the batch's reply came before its work finished: %u of %u words lack their marker "
		      "(first on stream %u of %u; the reply took %.1f ms, the longest spin %u ms)",
		      ascending ? "ascending" : "descending", missing, NSTREAMS * WORDS, first_missing, NSTREAMS,
		      waited, longest_ms);
	/* On the GPU spin_cycles assumes the top clock: allow it 5%. */
	ck_assert_msg(waited >= 0.95 * longest_ms,
		      "%s run: the batch's reply came after %.1f ms, before its longest spin (%u ms) could end",
		      ascending ? "ascending" : "descending", waited, longest_ms);
	free(v);
	cua_future_free(f);
	CK(cua_mem_free(c, p));
	for (unsigned i = 0; i < NSTREAMS; i++)
		CK(cua_stream_destroy(c, s[i]));
	CK(cua_module_unload(c, m));
}

START_TEST(batch_over_100_streams_replies_after_all_work)
{
	cua_client *c = connect_to(&D);
	batch_over_streams(c, 1, 1); /* forgotten streams at the end of the batch are the slowest */
	batch_over_streams(c, 2, 0); /* forgotten streams at its start are the slowest */
	cua_disconnect(c);
}
END_TEST

static Suite *
completion_suite(void)
{
	Suite *s = suite_create("completion");
	TCase *tc = tcase_create("completion");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, batch_over_100_streams_replies_after_all_work);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(completion_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
