/*
 * test_copy_engine.c — the emulated device's copy engines (issue 19): a copy runs on its own engine, as on a GPU,
 * so it never waits behind other streams' kernels, yet keeps its stream's order with that stream's kernels and
 * events. Real daemon, emulated device (its kernel threads bounded with --emu-threads so that a few spin kernels
 * fill them all), one shared worker so that the hostile sessions' kernels and the well-behaved session's copy meet
 * on one device. Nothing waits on time: the copy's completion is checked against the state of the hostile
 * kernels' events, which the daemon reports, and the ordering cases check data a wrong order would not produce.
 */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	KERNEL_THREADS = 2,  /* --emu-threads */
	HOSTILE = 2,         /* sessions */
	HOSTILE_STREAMS = 2, /* each: HOSTILE * HOSTILE_STREAMS spins fill the kernel threads twice over */
	SPIN_MS = 3000,      /* long enough that a copy behind two rounds of them is plain, short enough for CI */
	WORDS = 16,          /* the well-behaved client's 64 bytes */
};

static struct daemon D;

static void
up(void)
{
	static const char *const extra[] = {"--emu-threads", "2", "--isolation", "shared", NULL};
	daemon_start(&D, extra);
}

static void
down(void)
{
	daemon_stop(&D);
}

/* A session that keeps every kernel thread of the emulated device busy: a long spin on each of its streams, an
 * event recorded after each (reached only once that spin has run). */
struct hostile {
	cua_client *c;
	cua_stream s[HOSTILE_STREAMS];
	cua_event ev[HOSTILE_STREAMS];
	cua_future *f[HOSTILE_STREAMS];
};

static void
hostile_start(struct hostile *h)
{
	h->c = connect_to(&D);
	cua_function spin = get_fn(h->c, load_kernels(h->c), "spin");
	for (int i = 0; i < HOSTILE_STREAMS; i++) {
		CK(cua_stream_create(h->c, 0, 0, &h->s[i]));
		CK(cua_event_create(h->c, 0, &h->ev[i]));
		h->f[i] = submit_spin(h->c, spin, SPIN_MS, h->s[i]);
		CK(cua_event_record(h->c, h->ev[i], h->s[i]));
	}
	/* a round trip to the worker after the spins: they are queued on the device before the victim's copy */
	int ready = 1;
	CK(cua_event_query(h->c, h->ev[0], &ready));
	ck_assert_msg(!ready, "a %d ms spin ended before the next request was answered", SPIN_MS);
}

/* How many of h's spins have run (their events reached), as the daemon reports it. */
static int
hostile_done(struct hostile *h)
{
	int n = 0;
	for (int i = 0; i < HOSTILE_STREAMS; i++) {
		int ready = 0;
		CK(cua_event_query(h->c, h->ev[i], &ready));
		n += ready != 0;
	}
	return n;
}

static void
hostile_end(struct hostile *h)
{
	for (int i = 0; i < HOSTILE_STREAMS; i++) {
		CK(cua_future_wait(h->f[i], -1));
		cua_future_free(h->f[i]);
		CK(cua_event_destroy(h->c, h->ev[i]));
		CK(cua_stream_destroy(h->c, h->s[i]));
	}
	cua_disconnect(h->c);
}

/* Every kernel thread spins for other sessions (with more spins queued behind them); a 64-byte round trip of
 * copies (host to device, device to device, device to host) on the client's own stream completes while every one
 * of those spins is still running, and carries the right bytes. Before the copy engines the copies queued behind
 * two rounds of spins: the check below found spins finished. */
START_TEST(copy_does_not_wait_behind_other_streams_kernels)
{
	struct hostile h[HOSTILE];
	for (int i = 0; i < HOSTILE; i++)
		hostile_start(&h[i]);

	cua_client *c = connect_to(&D);
	cua_stream s;
	CK(cua_stream_create(c, 0, 0, &s));
	cua_deviceptr p, q;
	CK(cua_mem_alloc(c, 0, WORDS * 4, &p));
	CK(cua_mem_alloc(c, 0, WORDS * 4, &q));
	uint32_t src[WORDS], out[WORDS];
	for (unsigned i = 0; i < WORDS; i++)
		src[i] = 0xc0de0000u + i;
	memset(out, 0, sizeof(out));
	cua_batch *b = cua_batch_new(c);
	CK(cua_batch_add_memcpy_htod(b, p, src, sizeof(src), s));
	CK(cua_batch_add_memcpy_dtod(b, q, p, sizeof(src), s));
	CK(cua_batch_add_memcpy_dtoh(b, out, q, sizeof(out), s));
	cua_future *f;
	CK(cua_batch_submit(b, &f));
	CK(cua_future_wait(f, -1));
	cua_future_free(f);

	int done = 0;
	for (int i = 0; i < HOSTILE; i++)
		done += hostile_done(&h[i]);
	ck_assert_msg(done == 0,
		      "the 64-byte copies on their own stream completed only after %d of the other sessions' %d spin "
		      "kernels: they waited behind other streams' kernels",
		      done, HOSTILE * HOSTILE_STREAMS);
	for (unsigned i = 0; i < WORDS; i++)
		ck_assert_msg(out[i] == src[i], "word %u: %#x, want %#x", i, out[i], src[i]);
	/* the synchronous forms too, on the same stream */
	memset(out, 0, sizeof(out));
	CK(cua_memcpy_htod_on(c, q, src, sizeof(src), s));
	CK(cua_memcpy_dtoh_on(c, out, q, sizeof(out), s));
	ck_assert_mem_eq(out, src, sizeof(src));
	done = 0;
	for (int i = 0; i < HOSTILE; i++)
		done += hostile_done(&h[i]);
	ck_assert_msg(done == 0, "synchronous copies completed only after %d spin kernels", done);

	CK(cua_stream_destroy(c, s));
	cua_disconnect(c);
	for (int i = 0; i < HOSTILE; i++)
		hostile_end(&h[i]);
}
END_TEST

/* Queues fill_u32(p, v, WORDS) on s. */
static cua_launch *
fill_launch(cua_client *c, cua_function fill, cua_deviceptr p, uint32_t v, cua_stream s)
{
	cua_launch *l = launch_1d(c, fill, 1, WORDS);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, v);
	cua_launch_push_u64(l, WORDS);
	cua_launch_set_stream(l, s);
	return l;
}

static void
expect_words(const uint32_t *out, uint32_t want, const char *what)
{
	for (unsigned i = 0; i < WORDS; i++)
		ck_assert_msg(out[i] == want, "%s: word %u is %#x, want %#x", what, i, out[i], want);
}

/* Copies keep their stream's order with its kernels and its event waits, while the kernels they follow are slowed
 * by a spin ahead of them on the same stream (each copy is queued before the kernel it must wait for has run). */
START_TEST(copies_keep_stream_order_with_kernels_and_events)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin"), fill = get_fn(c, m, "fill_u32");
	cua_stream s, a, z;
	CK(cua_stream_create(c, 0, 0, &s));
	CK(cua_stream_create(c, 0, 0, &a));
	CK(cua_stream_create(c, 0, 0, &z));
	cua_deviceptr p, p2;
	CK(cua_mem_alloc(c, 0, WORDS * 4, &p));
	CK(cua_mem_alloc(c, 0, WORDS * 4, &p2));
	CK(cua_memset(c, p, 0, 4, WORDS));
	CK(cua_memset(c, p2, 0, 4, WORDS));
	uint32_t out[WORDS], pattern[WORDS];
	for (unsigned i = 0; i < WORDS; i++)
		pattern[i] = 0x7a770000u + i;

	/* kernel, then copy: the copy reads what the kernel wrote */
	cua_future_free(submit_spin(c, spin, 200, s));
	CK(cua_launch_submit(fill_launch(c, fill, p, 0x5eed0001u, s), NULL));
	CK(cua_memcpy_dtoh_on(c, out, p, sizeof(out), s));
	expect_words(out, 0x5eed0001u, "copy after a kernel");

	/* copy, kernel, copy in one batch behind a spin: the kernel overwrites the first copy's bytes, the last copy
	 * reads the kernel's */
	cua_future_free(submit_spin(c, spin, 200, s));
	cua_batch *b = cua_batch_new(c);
	CK(cua_batch_add_memcpy_htod(b, p, pattern, sizeof(pattern), s));
	CK(cua_batch_add_launch(b, fill_launch(c, fill, p, 0x5eed0002u, s)));
	memset(out, 0, sizeof(out));
	CK(cua_batch_add_memcpy_dtoh(b, out, p, sizeof(out), s));
	cua_future *f;
	CK(cua_batch_submit(b, &f));
	CK(cua_future_wait(f, -1));
	cua_future_free(f);
	expect_words(out, 0x5eed0002u, "copy, kernel, copy");

	/* a copy on another stream that waits for an event recorded after a kernel reads that kernel's result */
	cua_event ev;
	CK(cua_event_create(c, 0, &ev));
	cua_future_free(submit_spin(c, spin, 200, a));
	CK(cua_launch_submit(fill_launch(c, fill, p2, 0x5eed0003u, a), NULL));
	CK(cua_event_record(c, ev, a));
	CK(cua_stream_wait_event(c, z, ev));
	memset(out, 0, sizeof(out));
	CK(cua_memcpy_dtoh_on(c, out, p2, sizeof(out), z));
	expect_words(out, 0x5eed0003u, "copy after a stream wait");

	/* a copy that waits for an event recorded after another stream's copy (queued behind a spin) reads that
	 * copy's bytes */
	CK(cua_memcpy_htod_on(c, p2, pattern, sizeof(pattern), a)); /* resets p2 */
	cua_future_free(submit_spin(c, spin, 200, a));
	b = cua_batch_new(c);
	CK(cua_batch_add_memcpy_htod(b, p2, pattern + 1, sizeof(pattern) - 4, a)); /* behind the spin */
	CK(cua_batch_submit(b, NULL));
	CK(cua_event_record(c, ev, a));
	CK(cua_stream_wait_event(c, z, ev));
	CK(cua_memcpy_dtoh_on(c, out, p2, sizeof(out), z));
	for (unsigned i = 0; i + 1 < WORDS; i++)
		ck_assert_msg(out[i] == pattern[i + 1], "copy after a copy's event: word %u is %#x, want %#x", i,
			      out[i], pattern[i + 1]);
	CK(cua_event_destroy(c, ev));
	CK(cua_synchronize(c));
	cua_disconnect(c);
}
END_TEST

static Suite *
copy_engine_suite(void)
{
	Suite *s = suite_create("copy_engine");
	TCase *tc = tcase_create("copy_engine");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, copy_does_not_wait_behind_other_streams_kernels);
	tcase_add_test(tc, copies_keep_stream_order_with_kernels_and_events);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	if (on_gpu()) /* the emulated device's engines; a GPU has its own */
		return 77;
	SRunner *sr = srunner_create(copy_engine_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
