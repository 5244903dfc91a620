/*
 * test_submit.c — parallel submission in the worker (--submit-threads 4): stream work is issued by four
 * threads, stream sid by thread sid % 4, while the command loop keeps decoding records.
 *
 * - A client stream keeps its order when its launches arrive in many requests (one launch each, and batches
 *   that also carry work for streams of the other threads): launch i fills words i..N-1 with i, so word j ends
 *   as j exactly when every launch ran after the ones before it; a launch run early leaves a smaller value.
 * - A batch spanning streams of every thread replies only after all of its items ran (as test_completion.c,
 *   on fewer streams): each stream spins, then writes its marker; the markers are read back on the pool.
 * - The same holds with four clients at once, each sending every launch as a message of its own without waiting:
 *   the front-end receives them on many NNG contexts, whose callbacks run on several of NNG's threads, so one
 *   stream's launches reach the request pipeline from several threads in any order of arrival; its sequence
 *   order (scheduler.c) must put them back in submission order. The clients submit their NLAUNCH messages
 *   without waiting, far past the daemon's --session-pending (64): libcuasync holds them back below it, so
 *   none is refused or dropped.
 * - A fault is still blamed on the command that faulted, with work of the same batch on other threads.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NLAUNCH 2000 /* launches on the stream under test */
#define PER_BATCH 50
#define NOTHER 7 /* other streams: with the one under test, two per thread */
#define NSPAN 16 /* streams of the spanning batch, four per thread */
#define WORDS 16

static struct daemon D;

static void
up(void)
{
	/* --emu-threads: more emulated-device threads than any case has streams, so its streams run concurrently */
	static const char *const args[] = {"--submit-threads", "4", "--emu-threads", "16", NULL};
	daemon_start(&D, args);
}

static void
down(void)
{
	daemon_stop(&D);
}

/* fill_u32 on stream s: `count` words from p with value. */
static cua_launch *
fill(cua_client *c, cua_function f, cua_stream s, cua_deviceptr p, uint32_t value, uint64_t count)
{
	cua_launch *l = launch_1d(c, f, 1, 32);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, value);
	cua_launch_push_u64(l, count);
	cua_launch_set_stream(l, s);
	return l;
}

/* Reads the NLAUNCH words at p on stream s and checks word j == j. */
static void
check_order(cua_client *c, cua_deviceptr p, cua_stream s, const char *how)
{
	uint32_t *v = malloc(NLAUNCH * 4);
	ck_assert_ptr_nonnull(v);
	CK(cua_memcpy_dtoh_on(c, v, p, NLAUNCH * 4, s));
	for (uint32_t j = 0; j < NLAUNCH; j++)
		ck_assert_msg(v[j] == j, "%s: word %u is %u: launch %u ran after launch %u on one stream", how, j, v[j],
			      v[j], j);
	free(v);
}

/* One request per launch, all in flight together. */
START_TEST(stream_order_over_single_requests)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function f = get_fn(c, m, "fill_u32");
	cua_stream s;
	CK(cua_stream_create(c, 0, 0, &s));
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, NLAUNCH * 4, &p));
	cua_future **fs = calloc(NLAUNCH, sizeof(*fs));
	ck_assert_ptr_nonnull(fs);
	for (uint32_t i = 0; i < NLAUNCH; i++)
		CK(cua_launch_submit(fill(c, f, s, p + 4 * i, i, NLAUNCH - i), &fs[i]));
	for (uint32_t i = 0; i < NLAUNCH; i++) {
		CK(cua_future_wait(fs[i], -1));
		cua_future_free(fs[i]);
	}
	free(fs);
	check_order(c, p, s, "single requests");
	CK(cua_mem_free(c, p));
	CK(cua_stream_destroy(c, s));
	cua_disconnect(c);
}
END_TEST

/* One client of stream_order_from_concurrent_clients: NLAUNCH one-launch batches (one message each) on a stream
 * of its own, all in flight, then the order check; the first failure's words in err. */
struct orderer {
	struct daemon *d;
	char err[256];
};

static void *
order_one_client(void *arg)
{
	struct orderer *o = arg;
	cua_client *c = connect_to(o->d);
	cua_function f = get_fn(c, load_kernels(c), "fill_u32");
	cua_stream s;
	cua_deviceptr p;
	cua_future **fs = calloc(NLAUNCH, sizeof(*fs));
	uint32_t *v = malloc(NLAUNCH * 4);
	if (fs == NULL || v == NULL || cua_stream_create(c, 0, 0, &s) != CUA_OK ||
	    cua_mem_alloc(c, 0, NLAUNCH * 4, &p) != CUA_OK) {
		snprintf(o->err, sizeof(o->err), "setup: %s", cua_last_error());
		goto out;
	}
	for (uint32_t i = 0; i < NLAUNCH && !o->err[0]; i++) {
		cua_batch *b = cua_batch_new(c);
		int rc = b ? cua_batch_add_launch(b, fill(c, f, s, p + 4 * i, i, NLAUNCH - i)) : CUA_ENOMEM;
		if (rc == CUA_OK)
			rc = cua_batch_submit(b, &fs[i]);
		if (rc != CUA_OK)
			snprintf(o->err, sizeof(o->err), "submit %u: %s: %s", i, cua_strerror_name(rc),
				 cua_last_error());
	}
	for (uint32_t i = 0; i < NLAUNCH && fs[i]; i++) {
		int rc = cua_future_wait(fs[i], -1);
		if (rc != CUA_OK && !o->err[0])
			snprintf(o->err, sizeof(o->err), "launch %u: %s: %s", i, cua_strerror_name(rc),
				 cua_future_error(fs[i]));
		cua_future_free(fs[i]);
	}
	if (!o->err[0] && cua_memcpy_dtoh_on(c, v, p, NLAUNCH * 4, s) != CUA_OK)
		snprintf(o->err, sizeof(o->err), "read back: %s", cua_last_error());
	for (uint32_t j = 0; j < NLAUNCH && !o->err[0]; j++)
		if (v[j] != j)
			snprintf(o->err, sizeof(o->err), "word %u is %u: launch %u ran after launch %u on one stream",
				 j, v[j], v[j], j);
out:
	free(fs);
	free(v);
	cua_disconnect(c);
	return NULL;
}

/* Four clients at once, every launch a message of its own: the front-end's threads see them interleaved. */
START_TEST(stream_order_from_concurrent_clients)
{
	enum { NCLIENTS = 4 };
	struct orderer o[NCLIENTS];
	pthread_t t[NCLIENTS];
	for (int i = 0; i < NCLIENTS; i++) {
		o[i] = (struct orderer){.d = &D};
		ck_assert_int_eq(pthread_create(&t[i], NULL, order_one_client, &o[i]), 0);
	}
	for (int i = 0; i < NCLIENTS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < NCLIENTS; i++)
		ck_assert_msg(!o[i].err[0], "client %d: %s", i, o[i].err);
}
END_TEST

/* A launch on a fifth stream is not held behind four long kernels in flight on other streams: libcuasync
 * coalesces launches while 4 messages are unanswered, but one its caller waits for goes out at once (before,
 * it waited in the client until one of the 3 s kernels completed). */
START_TEST(launch_not_held_behind_long_kernels_of_other_streams)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin"), f = get_fn(c, m, "fill_u32");
	cua_stream s[5];
	for (int i = 0; i < 5; i++)
		CK(cua_stream_create(c, 0, 0, &s[i]));
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 64, &p));
	cua_future *sp[4];
	for (int i = 0; i < 4; i++)
		sp[i] = submit_spin(c, spin, 3000, s[i]);
	cua_future *fu;
	CK(cua_launch_submit(fill(c, f, s[4], p, 9, 16), &fu));
	CK(cua_future_wait(fu, -1));
	cua_future_free(fu);
	for (int i = 0; i < 4; i++)
		ck_assert_msg(cua_future_poll(sp[i]) == 0,
			      "the launch on a fifth stream completed only after stream %d's 3 s kernel", i);
	for (int i = 0; i < 4; i++) {
		CK(cua_future_wait(sp[i], -1));
		cua_future_free(sp[i]);
	}
	uint32_t v[16];
	CK(cua_memcpy_dtoh(c, v, p, sizeof(v)));
	ck_assert_uint_eq(v[15], 9);
	cua_disconnect(c);
}
END_TEST

/* Batches of PER_BATCH launches on the stream under test, each with a launch on every other stream. */
START_TEST(stream_order_over_batches_spanning_threads)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function f = get_fn(c, m, "fill_u32");
	cua_stream s, o[NOTHER];
	CK(cua_stream_create(c, 0, 0, &s));
	for (int k = 0; k < NOTHER; k++)
		CK(cua_stream_create(c, 0, 0, &o[k]));
	cua_deviceptr p, q;
	CK(cua_mem_alloc(c, 0, NLAUNCH * 4, &p));
	CK(cua_mem_alloc(c, 0, NOTHER * WORDS * 4, &q));
	enum { NB = NLAUNCH / PER_BATCH };
	cua_future *fs[NB];
	for (uint32_t b = 0; b < NB; b++) {
		cua_batch *bt = cua_batch_new(c);
		ck_assert_ptr_nonnull(bt);
		for (uint32_t k = 0; k < PER_BATCH; k++) {
			uint32_t i = b * PER_BATCH + k;
			CK(cua_batch_add_launch(bt, fill(c, f, s, p + 4 * i, i, NLAUNCH - i)));
			if (k < NOTHER)
				CK(cua_batch_add_launch(bt, fill(c, f, o[k], q + 4 * WORDS * k, b, WORDS)));
		}
		CK(cua_batch_submit(bt, &fs[b]));
	}
	for (uint32_t b = 0; b < NB; b++) {
		CK(cua_future_wait(fs[b], -1));
		cua_future_free(fs[b]);
	}
	check_order(c, p, s, "batches");
	uint32_t w[NOTHER * WORDS];
	CK(cua_memcpy_dtoh(c, w, q, sizeof(w))); /* every batch completed: the last one's values are there */
	for (int k = 0; k < NOTHER * WORDS; k++)
		ck_assert_uint_eq(w[k], NB - 1);
	CK(cua_mem_free(c, p));
	CK(cua_mem_free(c, q));
	CK(cua_stream_destroy(c, s));
	for (int k = 0; k < NOTHER; k++)
		CK(cua_stream_destroy(c, o[k]));
	cua_disconnect(c);
}
END_TEST

/* One batch over NSPAN streams: stream i spins 10 + 2i ms, then writes its marker. The reply must come after
 * every marker was written, though the streams are issued by four threads. */
START_TEST(batch_spanning_threads_replies_after_all_items)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin"), f = get_fn(c, m, "fill_u32");
	cua_stream s[NSPAN];
	for (int i = 0; i < NSPAN; i++)
		CK(cua_stream_create(c, 0, 0, &s[i]));
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, NSPAN * WORDS * 4, &p));
	cua_batch *b = cua_batch_new(c);
	ck_assert_ptr_nonnull(b);
	for (int i = 0; i < NSPAN; i++) {
		cua_launch *l = launch_1d(c, spin, 1, 1);
		cua_launch_push_i64(l, spin_cycles(10 + 2 * (unsigned)i));
		cua_launch_set_stream(l, s[i]);
		CK(cua_batch_add_launch(b, l));
		CK(cua_batch_add_launch(b, fill(c, f, s[i], p + 4 * WORDS * (cua_deviceptr)i, 0x5eed0000u + i, WORDS)));
	}
	cua_future *fu;
	CK(cua_batch_submit(b, &fu));
	int rc = cua_future_wait(fu, -1);
	uint32_t v[NSPAN * WORDS];
	CK(cua_memcpy_dtoh(c, v, p, sizeof(v))); /* the pool: not ordered after the NSPAN streams */
	ck_assert_msg(rc == CUA_OK, "batch: %s: %s", cua_strerror_name(rc), cua_future_error(fu));
	for (int i = 0; i < NSPAN * WORDS; i++)
		ck_assert_msg(v[i] == 0x5eed0000u + (uint32_t)i / WORDS,
			      "the batch replied before stream %d's work ran (word %d is 0x%x)", i / WORDS, i, v[i]);
	cua_future_free(fu);
	CK(cua_mem_free(c, p));
	for (int i = 0; i < NSPAN; i++)
		CK(cua_stream_destroy(c, s[i]));
	cua_disconnect(c);
}
END_TEST

/* A batch over four threads' streams whose third item faults: that item gets the device error, the item after
 * it is lost; the worker restarts and a new session works. */
/* At the smallest --session-pending the daemon derives (16), a client that keeps the most batches in flight it
 * allows itself must still have room for a synchronous call: the cap leaves some of the daemon's limit free. */
START_TEST(batches_in_flight_leave_room_for_a_call)
{
	static const char *const args[] = {"--session-pending", "16", NULL};
	struct daemon d;
	daemon_start(&d, args);
	cua_client *c = connect_to(&d);
	cua_function spin = get_fn(c, load_kernels(c), "spin");
	cua_future *fu[24];
	for (int i = 0; i < 24; i++) {
		cua_batch *b = cua_batch_new(c);
		cua_launch *l = launch_1d(c, spin, 1, 1);
		cua_launch_push_i64(l, spin_cycles(100));
		CK(cua_batch_add_launch(b, l));
		CK(cua_batch_submit(b, &fu[i]));
	}
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 4096, &p)); /* while the batches are unanswered */
	for (int i = 0; i < 24; i++) {
		CK(cua_future_wait(fu[i], -1));
		cua_future_free(fu[i]);
	}
	cua_disconnect(c);
	daemon_stop(&d);
}
END_TEST

START_TEST(fault_blamed_on_its_item)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function f = get_fn(c, m, "fill_u32"), bad = get_fn(c, m, "bad_write"), spin = get_fn(c, m, "spin");
	cua_stream s[4];
	for (int i = 0; i < 4; i++)
		CK(cua_stream_create(c, 0, 0, &s[i]));
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 4 * WORDS * 4, &p));
	cua_batch *b = cua_batch_new(c);
	ck_assert_ptr_nonnull(b);
	CK(cua_batch_add_launch(b, fill(c, f, s[0], p, 1, WORDS)));
	CK(cua_batch_add_launch(b, fill(c, f, s[1], p + 4 * WORDS, 2, WORDS)));
	cua_launch *l = launch_1d(c, bad, 1, 1);
	cua_launch_push_device_ptr(l, p);
	cua_launch_set_stream(l, s[2]);
	CK(cua_batch_add_launch(b, l));
	l = launch_1d(c, spin, 1, 1);
	cua_launch_push_i64(l, spin_cycles(500));
	cua_launch_set_stream(l, s[3]);
	CK(cua_batch_add_launch(b, l));
	cua_future *fu;
	CK(cua_batch_submit(b, &fu));
	int rc = cua_future_wait(fu, -1);
	ck_assert_msg(rc != CUA_OK, "a batch with a fault succeeded");
	ck_assert_uint_eq(cua_future_items(fu), 4);
	const char *msg;
	ck_assert_int_eq(cua_future_item(fu, 2, &msg), CUA_EDEVICE);
	ck_assert_msg(strstr(msg, "CUDA_ERROR_"), "%s", msg);
	int st = cua_future_item(fu, 3, &msg);
	if (strcmp(test_backend(), "emu") == 0) /* the emulated device knows whose kernel faulted */
		ck_assert_msg(st == CUA_ECONTEXT_LOST, "item 3: %s: %s", cua_strerror_name(st), msg);
	cua_future_free(fu);
	cua_disconnect(c);

	cua_client *n = connect_to(&D);
	cua_module mn = load_kernels(n);
	cua_function fn = get_fn(n, mn, "fill_u32");
	cua_deviceptr pn;
	CK(cua_mem_alloc(n, 0, 64, &pn));
	cua_stream sn;
	CK(cua_stream_create(n, 0, 0, &sn));
	launch_and_wait(fill(n, fn, sn, pn, 3, 16));
	uint32_t v[16];
	CK(cua_memcpy_dtoh(n, v, pn, sizeof(v)));
	ck_assert_uint_eq(v[15], 3);
	cua_disconnect(n);
}
END_TEST

static Suite *
submit_suite(void)
{
	Suite *s = suite_create("submit");
	TCase *tc = tcase_create("submit");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, stream_order_over_single_requests);
	tcase_add_test(tc, stream_order_over_batches_spanning_threads);
	tcase_add_test(tc, stream_order_from_concurrent_clients);
	tcase_add_test(tc, launch_not_held_behind_long_kernels_of_other_streams);
	tcase_add_test(tc, batch_spanning_threads_replies_after_all_items);
	tcase_add_test(tc, fault_blamed_on_its_item);
	tcase_add_test(tc, batches_in_flight_leave_room_for_a_call);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(submit_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
