/* CUDA events through the daemon (issue 13): cross-stream dependencies (the seed's `then` and `zip`), GPU timing,
 * and a hostile or careless tenant's misuse. On the emulated device by default, on the GPU with
 * CUA_TEST_BACKEND=cuda (tests/gpu/run.sh). Every dependency is checked through data: a kernel that ran before
 * what it waits for would compute another value. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct daemon D;
static void
up(void)
{
	daemon_start(&D, NULL);
}

/* The same with four submit threads: records, waits and synchronizes of one event issued by different threads
 * (the default on a small machine is one thread, which issues everything in order). */
static void
up_threads(void)
{
	static const char *const extra[] = {"--submit-threads", "4", NULL};
	daemon_start(&D, extra);
}

/* The shared worker, whatever $CUA_TEST_ISOLATION says: its restart is what the lost-context case waits for. */
static void
up_shared(void)
{
	static const char *const extra[] = {"--isolation", "shared", NULL};
	daemon_start(&D, extra);
}

static void
down(void)
{
	daemon_stop(&D);
}

#define N 4096u

struct fixture {
	cua_client *c;
	cua_module m;
	cua_function spin, fill, axpy;
};

static struct fixture
fixture(void)
{
	struct fixture f;
	f.c = connect_to(&D);
	f.m = load_kernels(f.c);
	f.spin = get_fn(f.c, f.m, "spin");
	f.fill = get_fn(f.c, f.m, "fill_u32");
	f.axpy = get_fn(f.c, f.m, "axpy");
	return f;
}

/* Device memory of N floats, zeroed (the GPU does not clear fresh memory). */
static cua_deviceptr
zeroed(cua_client *c)
{
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, N * 4, &p));
	CK(cua_memset(c, p, 0, 4, N));
	return p;
}

/* Queues fill_u32(p, bits of v, N) on s (fire and forget: the stream orders it). */
static void
fill_on(struct fixture *f, cua_deviceptr p, float v, cua_stream s)
{
	uint32_t bits;
	memcpy(&bits, &v, 4);
	cua_launch *l = launch_1d(f->c, f->fill, 16, 256);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, bits);
	cua_launch_push_u64(l, N);
	cua_launch_set_stream(l, s);
	CK(cua_launch_submit(l, NULL));
}

/* Queues y = a * x + y on s. */
static void
axpy_on(struct fixture *f, float a, cua_deviceptr x, cua_deviceptr y, cua_stream s)
{
	cua_launch *l = launch_1d(f->c, f->axpy, 16, 256);
	cua_launch_push_f32(l, a);
	cua_launch_push_device_ptr(l, x);
	cua_launch_push_device_ptr(l, y);
	cua_launch_push_u64(l, N);
	cua_launch_set_stream(l, s);
	CK(cua_launch_submit(l, NULL));
}

static void
spin_on(struct fixture *f, unsigned ms, cua_stream s)
{
	cua_future *fu = submit_spin(f->c, f->spin, ms, s);
	cua_future_free(fu);
}

/* Every float of p equals want. */
static void
expect_all(cua_client *c, cua_deviceptr p, float want, cua_stream s)
{
	float *h = malloc(N * 4);
	CK(cua_memcpy_dtoh_on(c, h, p, N * 4, s));
	for (unsigned i = 0; i < N; i++)
		ck_assert_msg(h[i] == want, "element %u: %f, want %f", i, (double)h[i], (double)want);
	free(h);
}

/* zip: two kernels on two own streams, a third on a stream that waits for both streams' events. */
START_TEST(zip_waits_for_both_streams)
{
	struct fixture f = fixture();
	cua_deviceptr x = zeroed(f.c), y = zeroed(f.c);
	cua_stream a, b, z;
	CK(cua_stream_create(f.c, 0, 0, &a));
	CK(cua_stream_create(f.c, 0, 0, &b));
	CK(cua_stream_create(f.c, 0, 0, &z));
	CK(cua_synchronize(f.c)); /* the memsets are done */
	cua_event ea, eb;
	CK(cua_event_create(f.c, CUA_EVENT_DISABLE_TIMING, &ea));
	CK(cua_event_create(f.c, 0, &eb));
	spin_on(&f, 200, a); /* slow producers: without the waits z's kernel would run first */
	fill_on(&f, x, 2.0f, a);
	CK(cua_event_record(f.c, ea, a));
	spin_on(&f, 300, b);
	fill_on(&f, y, 1.0f, b);
	CK(cua_event_record(f.c, eb, b));
	CK(cua_stream_wait_event(f.c, z, ea));
	CK(cua_stream_wait_event(f.c, z, eb));
	axpy_on(&f, 1.0f, x, y, z); /* y = x + y = 3 only after both */
	CK(cua_stream_synchronize(f.c, z));
	expect_all(f.c, y, 3.0f, z);
	CK(cua_event_destroy(f.c, ea));
	CK(cua_event_destroy(f.c, eb));
	cua_disconnect(f.c);
}
END_TEST

/* then: stream B waits for an event recorded on A after A's kernel; B's kernel reads A's output. */
START_TEST(then_reads_the_producer_output)
{
	struct fixture f = fixture();
	cua_deviceptr x = zeroed(f.c), y = zeroed(f.c);
	cua_stream a, b;
	CK(cua_stream_create(f.c, 0, 0, &a));
	CK(cua_stream_create(f.c, 0, 0, &b));
	CK(cua_synchronize(f.c));
	cua_event e;
	CK(cua_event_create(f.c, 0, &e));
	spin_on(&f, 200, a);
	fill_on(&f, x, 7.0f, a);
	CK(cua_event_record(f.c, e, a));
	CK(cua_stream_wait_event(f.c, b, e));
	axpy_on(&f, 2.0f, x, y, b); /* y = 14 only after A's fill */
	CK(cua_event_synchronize(f.c, e));
	int ready = 0;
	CK(cua_event_query(f.c, e, &ready));
	ck_assert_int_eq(ready, 1);
	CK(cua_stream_synchronize(f.c, b));
	expect_all(f.c, y, 14.0f, b);
	/* the ordered stream works as a stream of the session too */
	CK(cua_event_record(f.c, e, CUA_STREAM_ORDERED));
	CK(cua_event_synchronize(f.c, e));
	cua_disconnect(f.c);
}
END_TEST

/* EVENT_SYNC answers when the record is reached, not before; EVENT_QUERY says not yet meanwhile. */
START_TEST(sync_waits_for_the_record)
{
	struct fixture f = fixture();
	cua_stream s;
	CK(cua_stream_create(f.c, 0, 0, &s));
	cua_event e, t0, t1;
	CK(cua_event_create(f.c, CUA_EVENT_DISABLE_TIMING, &e));
	CK(cua_event_create(f.c, 0, &t0));
	CK(cua_event_create(f.c, 0, &t1));
	cua_deviceptr p = zeroed(f.c);
	CK(cua_event_record(f.c, t0, s));
	cua_future *fu = submit_spin(f.c, f.spin, 2000, s); /* long enough for a loaded machine */
	fill_on(&f, p, 7.0f, s);                            /* the marker: runs after the spin */
	CK(cua_event_record(f.c, e, s));
	CK(cua_event_record(f.c, t1, s));
	int ready = 1;
	CK(cua_event_query(f.c, e, &ready));
	ck_assert_int_eq(ready, 0);
	float ms = 0;
	ck_assert_int_eq(cua_event_elapsed_ms(f.c, t0, t1, &ms), CUA_EBUSY); /* CUDA_ERROR_NOT_READY */
	ck_assert_ptr_nonnull(strstr(cua_last_error(), "NOT_READY"));
	CK(cua_event_synchronize(f.c, e));
	/* the work before the record has run: the marker is in memory, read on the pool (not ordered after s). The
	 * spin's own reply may still be on its way: replies of different requests are not ordered. */
	float v[N];
	CK(cua_memcpy_dtoh_on(f.c, v, p, sizeof(v), CUA_STREAM_POOL));
	ck_assert_msg(v[0] == 7.0f && v[N - 1] == 7.0f, "event synchronized before the work it follows ran: %f",
		      (double)v[0]);
	CK(cua_future_wait(fu, -1));
	cua_future_free(fu);
	CK(cua_event_synchronize(f.c, t1));
	CK(cua_event_elapsed_ms(f.c, t0, t1, &ms));
	ck_assert_msg(ms >= 1000.0f && ms < 60000.0f, "elapsed %f ms around a 2 s spin", (double)ms);
	cua_disconnect(f.c);
}
END_TEST

/* GPU timing: the elapsed time of a spin kernel is positive and near its length. */
START_TEST(elapsed_times_a_spin_kernel)
{
	struct fixture f = fixture();
	cua_event start, end;
	CK(cua_event_create(f.c, 0, &start));
	CK(cua_event_create(f.c, 0, &end));
	CK(cua_event_record(f.c, start, CUA_STREAM_ORDERED));
	spin_on(&f, 50, CUA_STREAM_ORDERED);
	CK(cua_event_record(f.c, end, CUA_STREAM_ORDERED));
	CK(cua_event_synchronize(f.c, end));
	float ms = -1;
	CK(cua_event_elapsed_ms(f.c, start, end, &ms));
	ck_assert_msg(ms >= 25.0f && ms < 5000.0f, "elapsed %f ms for a 50 ms spin", (double)ms);
	float back = 0;
	CK(cua_event_elapsed_ms(f.c, end, start, &back));
	ck_assert_msg(back <= 0.0f, "end to start: %f ms", (double)back);
	cua_disconnect(f.c);
}
END_TEST

/* Misuse by the session itself: each a clear status, and the daemon keeps serving it. */
START_TEST(misuse_is_refused)
{
	struct fixture f = fixture();
	cua_stream s;
	CK(cua_stream_create(f.c, 0, 0, &s));
	cua_event e, nt, never;
	CK(cua_event_create(f.c, 0, &e));
	CK(cua_event_create(f.c, CUA_EVENT_DISABLE_TIMING, &nt));
	CK(cua_event_create(f.c, 0, &never));
	ck_assert_int_eq(cua_event_create(f.c, 0x4, &e), CUA_EPROTOCOL); /* an unknown flag */
	/* the pool is not ordered: refused, saying what to use */
	ck_assert_int_eq(cua_event_record(f.c, e, CUA_STREAM_POOL), CUA_EBAD_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cua_last_error(), "ordered stream"));
	/* a wait for, or a synchronize of, an event never recorded completes at once (CUDA) */
	CK(cua_stream_wait_event(f.c, s, never));
	CK(cua_event_synchronize(f.c, never));
	int ready = 0;
	CK(cua_event_query(f.c, never, &ready));
	ck_assert_int_eq(ready, 1);
	spin_on(&f, 1, s);
	CK(cua_stream_synchronize(f.c, s)); /* the stream was not blocked */
	/* elapsed: never recorded, timing disabled */
	float ms;
	CK(cua_event_record(f.c, e, s));
	CK(cua_event_record(f.c, nt, s));
	CK(cua_event_synchronize(f.c, nt));
	ck_assert_int_eq(cua_event_elapsed_ms(f.c, e, never, &ms), CUA_EBAD_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cua_last_error(), "never recorded"));
	ck_assert_int_eq(cua_event_elapsed_ms(f.c, e, nt, &ms), CUA_EBAD_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cua_last_error(), "timing disabled"));
	/* wrong kinds: a stream where an event is wanted and the reverse */
	ck_assert_int_eq(cua_event_synchronize(f.c, (cua_event){s.id}), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_record(f.c, e, (cua_stream){e.id}), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_destroy(f.c, (cua_event){0}), CUA_ENOT_FOUND);
	/* destroy twice, use after destroy */
	CK(cua_event_destroy(f.c, e));
	ck_assert_int_eq(cua_event_destroy(f.c, e), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_record(f.c, e, s), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_stream_wait_event(f.c, s, e), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_synchronize(f.c, e), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_query(f.c, e, &ready), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_elapsed_ms(f.c, e, nt, &ms), CUA_ENOT_FOUND);
	/* a destroyed stream cannot be recorded on */
	CK(cua_stream_destroy(f.c, s));
	ck_assert_int_eq(cua_event_record(f.c, nt, s), CUA_ENOT_FOUND);
	CK(cua_ping(f.c));
	cua_disconnect(f.c);
}
END_TEST

/* Destroying an event whose record and waits are still queued is safe: the waiting stream still waits. */
START_TEST(destroy_in_flight_is_deferred)
{
	struct fixture f = fixture();
	cua_deviceptr x = zeroed(f.c), y = zeroed(f.c);
	cua_stream a, b;
	CK(cua_stream_create(f.c, 0, 0, &a));
	CK(cua_stream_create(f.c, 0, 0, &b));
	CK(cua_synchronize(f.c));
	cua_event e;
	CK(cua_event_create(f.c, 0, &e));
	spin_on(&f, 300, a);
	fill_on(&f, x, 5.0f, a);
	CK(cua_event_record(f.c, e, a));
	CK(cua_stream_wait_event(f.c, b, e));
	CK(cua_event_destroy(f.c, e)); /* record and wait still queued */
	axpy_on(&f, 1.0f, x, y, b);
	CK(cua_stream_synchronize(f.c, b));
	expect_all(f.c, y, 5.0f, b);
	cua_disconnect(f.c);
}
END_TEST

/* Events never cross sessions: another session's event and stream are unknown here. */
START_TEST(other_sessions_events_are_refused)
{
	struct fixture f = fixture();
	cua_client *o = connect_to(&D);
	cua_stream s, os;
	CK(cua_stream_create(f.c, 0, 0, &s));
	CK(cua_stream_create(o, 0, 0, &os));
	cua_event e, oe;
	CK(cua_event_create(f.c, 0, &e));
	CK(cua_event_create(o, 0, &oe));
	CK(cua_event_record(o, oe, os));
	ck_assert_int_eq(cua_event_record(f.c, oe, s), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_stream_wait_event(f.c, s, oe), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_synchronize(f.c, oe), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_destroy(f.c, oe), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_record(f.c, e, os), CUA_ENOT_FOUND); /* on another session's stream */
	ck_assert_int_eq(cua_stream_wait_event(f.c, os, e), CUA_ENOT_FOUND);
	CK(cua_event_synchronize(o, oe)); /* still the owner's */
	CK(cua_event_destroy(o, oe));
	cua_disconnect(o);
	cua_disconnect(f.c);
}
END_TEST

struct pinger {
	const struct daemon *d;
	int ok, failed;
	volatile int stop;
};

static void *
ping_loop(void *arg)
{
	struct pinger *p = arg;
	cua_client *c = connect_to(p->d);
	while (!p->stop) {
		if (cua_ping(c) == CUA_OK)
			p->ok++;
		else
			p->failed++;
	}
	cua_disconnect(c);
	return NULL;
}

/* 10,000 events: the session's limit answers QUOTA while another client is still served. */
START_TEST(many_events_hit_the_quota)
{
	struct pinger p = {&D, 0, 0, 0};
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, ping_loop, &p), 0);
	cua_client *c = connect_to(&D);
	unsigned made = 0;
	int r = CUA_OK;
	for (unsigned i = 0; i < 10000 && r == CUA_OK; i++) {
		cua_event e;
		r = cua_event_create(c, i % 2 ? CUA_EVENT_DISABLE_TIMING : 0, &e);
		made += r == CUA_OK;
	}
	ck_assert_int_eq(r, CUA_EQUOTA);
	ck_assert_ptr_nonnull(strstr(cua_last_error(), "--session-events"));
	ck_assert_uint_eq(made, 4096); /* the default */
	p.stop = 1;
	pthread_join(t, NULL);
	ck_assert_int_gt(p.ok, 0);
	ck_assert_int_eq(p.failed, 0);
	cua_disconnect(c); /* its 4096 events are destroyed with the session (ASan: no leak at the daemon's exit) */
}
END_TEST

/* An event of a worker that was restarted answers CONTEXT_LOST, as other handles do. */
START_TEST(events_of_a_lost_context)
{
	struct fixture f = fixture();
	cua_event e;
	CK(cua_event_create(f.c, 0, &e));
	CK(cua_event_record(f.c, e, CUA_STREAM_ORDERED));
	CK(cua_event_synchronize(f.c, e));
	pid_t w = daemon_worker_pid(&D, 0);
	ck_assert_int_gt(w, 0);
	ck_assert_int_eq(kill(w, SIGKILL), 0);
	uint32_t one = 1;
	cua_daemon_status st;
	ck_assert(wait_status(f.c, status_restarted, &one, &st));
	ck_assert_int_eq(cua_event_record(f.c, e, CUA_STREAM_ORDERED), CUA_ECONTEXT_LOST);
	ck_assert_int_eq(cua_event_synchronize(f.c, e), CUA_ECONTEXT_LOST);
	ck_assert_int_eq(cua_event_destroy(f.c, e), CUA_ECONTEXT_LOST);
	ck_assert_int_eq(cua_event_destroy(f.c, e), CUA_ENOT_FOUND); /* forgotten */
	cua_event n;
	CK(cua_event_create(f.c, 0, &n)); /* a fresh one works */
	CK(cua_event_record(f.c, n, CUA_STREAM_ORDERED));
	CK(cua_event_synchronize(f.c, n));
	cua_disconnect(f.c);
}
END_TEST

/* ------------------------------------------------------------------ a careless or hostile tenant (attack-eg) */

/* EVENT_SYNC of an event whose stream was destroyed after the record (behind a spin): it is answered once the
 * record's work is done. Destroyed, its handle stays refused after a new event took its slot, which works. */
START_TEST(sync_after_its_stream_is_gone_and_slot_reuse)
{
	struct fixture f = fixture();
	cua_deviceptr x = zeroed(f.c);
	cua_stream s;
	CK(cua_stream_create(f.c, 0, 0, &s));
	cua_event e, n;
	CK(cua_event_create(f.c, 0, &e));
	spin_on(&f, 300, s);
	fill_on(&f, x, 3.0f, s);
	CK(cua_event_record(f.c, e, s));
	CK(cua_stream_destroy(f.c, s));
	CK(cua_event_synchronize(f.c, e));
	int ready = 0;
	CK(cua_event_query(f.c, e, &ready));
	ck_assert_int_eq(ready, 1);
	expect_all(f.c, x, 3.0f, CUA_STREAM_ORDERED);
	ck_assert_int_eq(cua_event_record(f.c, e, s), CUA_ENOT_FOUND); /* the stream is gone */
	CK(cua_event_destroy(f.c, e));
	CK(cua_event_create(f.c, 0, &n));
	ck_assert_uint_ne(n.id, e.id);
	ck_assert_int_eq(cua_event_record(f.c, e, CUA_STREAM_ORDERED), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_stream_wait_event(f.c, CUA_STREAM_ORDERED, e), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_synchronize(f.c, e), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_query(f.c, e, &ready), CUA_ENOT_FOUND);
	float ms;
	ck_assert_int_eq(cua_event_elapsed_ms(f.c, e, n, &ms), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_event_destroy(f.c, e), CUA_ENOT_FOUND);
	CK(cua_event_record(f.c, n, CUA_STREAM_ORDERED));
	CK(cua_event_synchronize(f.c, n));
	cua_disconnect(f.c);
}
END_TEST

#define RACERS 4

struct ev_racer {
	struct fixture *f;
	cua_event *ev; /* RACERS events, shared */
	cua_stream s;  /* this racer's */
	int id, failed;
	char why[256];
};

/* Records its event on its stream, makes its stream wait for the next racer's, synchronizes and queries the
 * others', and makes and destroys events of its own; every call must succeed. */
static void *
ev_race(void *arg)
{
	struct ev_racer *r = arg;
	for (int i = 0; i < 150 && !r->failed; i++) {
		int ready, rc;
		cua_event mine;
		if ((rc = cua_event_record(r->f->c, r->ev[r->id], r->s)) != CUA_OK ||
		    (rc = cua_stream_wait_event(r->f->c, r->s, r->ev[(r->id + 1) % RACERS])) != CUA_OK ||
		    (rc = cua_event_synchronize(r->f->c, r->ev[(r->id + 2) % RACERS])) != CUA_OK ||
		    (rc = cua_event_query(r->f->c, r->ev[(r->id + 3) % RACERS], &ready)) != CUA_OK ||
		    (rc = cua_event_create(r->f->c, 0, &mine)) != CUA_OK ||
		    (rc = cua_event_record(r->f->c, mine, r->s)) != CUA_OK ||
		    (rc = cua_event_destroy(r->f->c, mine)) != CUA_OK) {
			r->failed = rc;
			snprintf(r->why, sizeof(r->why), "%s", cua_last_error());
		}
		if (i % 50 == 0)
			spin_on(r->f, 5, r->s);
	}
	return NULL;
}

/* Four threads of one session record, wait for, synchronize and query each other's events (four submit threads
 * issue them): no call fails, nothing hangs, and the session's work still completes. */
START_TEST(records_waits_and_syncs_race)
{
	struct fixture f = fixture();
	cua_event ev[RACERS];
	struct ev_racer r[RACERS];
	pthread_t t[RACERS];
	for (int i = 0; i < RACERS; i++) {
		CK(cua_event_create(f.c, 0, &ev[i]));
		r[i] = (struct ev_racer){&f, ev, {0}, i, 0, ""};
		CK(cua_stream_create(f.c, 0, 0, &r[i].s));
	}
	for (int i = 0; i < RACERS; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, ev_race, &r[i]), 0);
	for (int i = 0; i < RACERS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < RACERS; i++)
		ck_assert_msg(r[i].failed == 0, "racer %d: %d %s", i, r[i].failed, r[i].why);
	CK(cua_synchronize(f.c));
	for (int i = 0; i < RACERS; i++) {
		CK(cua_event_synchronize(f.c, ev[i]));
		CK(cua_event_destroy(f.c, ev[i]));
	}
	cua_disconnect(f.c);
}
END_TEST

struct syncer {
	cua_client *c;
	cua_event e;
	int rc;
};

static void *
sync_one(void *arg)
{
	struct syncer *y = arg;
	y->rc = cua_event_synchronize(y->c, y->e);
	return NULL;
}

/* EVENT_DESTROY while another thread's EVENT_SYNC of it waits (behind a spin): the synchronize is answered (OK
 * when it was sent first, NOT_FOUND when the destroy was), then the slot is reused; a session that closes with
 * an event's record and a wait queued leaves nothing behind (ASan at the daemon's exit). */
START_TEST(destroy_while_synchronizing)
{
	struct fixture f = fixture();
	cua_stream s, w;
	CK(cua_stream_create(f.c, 0, 0, &s));
	CK(cua_stream_create(f.c, 0, 0, &w));
	for (int round = 0; round < 5; round++) {
		cua_event e;
		CK(cua_event_create(f.c, 0, &e));
		spin_on(&f, 100, s);
		CK(cua_event_record(f.c, e, s));
		CK(cua_stream_wait_event(f.c, w, e));
		struct syncer y = {f.c, e, -1};
		pthread_t t;
		ck_assert_int_eq(pthread_create(&t, NULL, sync_one, &y), 0);
		CK(cua_event_destroy(f.c, e));
		pthread_join(t, NULL);
		ck_assert_msg(y.rc == CUA_OK || y.rc == CUA_ENOT_FOUND, "sync: %d", y.rc);
	}
	CK(cua_synchronize(f.c));
	/* and a session closing with an event's record and a wait still queued */
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin");
	cua_stream a, b;
	CK(cua_stream_create(c, 0, 0, &a));
	CK(cua_stream_create(c, 0, 0, &b));
	cua_event e;
	CK(cua_event_create(c, 0, &e));
	cua_future_free(submit_spin(c, spin, 300, a));
	CK(cua_event_record(c, e, a));
	CK(cua_stream_wait_event(c, b, e));
	cua_future_free(submit_spin(c, spin, 1, b));
	cua_disconnect(c);
	CK(cua_ping(f.c));
	cua_disconnect(f.c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("events");
	TCase *tc = tcase_create("events");
	tcase_add_checked_fixture(tc, up, down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, zip_waits_for_both_streams);
	tcase_add_test(tc, then_reads_the_producer_output);
	tcase_add_test(tc, sync_waits_for_the_record);
	tcase_add_test(tc, elapsed_times_a_spin_kernel);
	tcase_add_test(tc, misuse_is_refused);
	tcase_add_test(tc, destroy_in_flight_is_deferred);
	tcase_add_test(tc, other_sessions_events_are_refused);
	tcase_add_test(tc, many_events_hit_the_quota);
	tcase_add_test(tc, sync_after_its_stream_is_gone_and_slot_reuse);
	tcase_add_test(tc, records_waits_and_syncs_race);
	tcase_add_test(tc, destroy_while_synchronizing);
	suite_add_tcase(s, tc);
	TCase *tl = tcase_create("events, lost context");
	tcase_add_checked_fixture(tl, up_shared, down);
	tcase_set_timeout(tl, 120);
	tcase_add_test(tl, events_of_a_lost_context);
	suite_add_tcase(s, tl);
	TCase *tt = tcase_create("events, 4 submit threads");
	tcase_add_checked_fixture(tt, up_threads, down);
	tcase_set_timeout(tt, 120);
	tcase_add_test(tt, zip_waits_for_both_streams);
	tcase_add_test(tt, then_reads_the_producer_output);
	tcase_add_test(tt, sync_waits_for_the_record);
	tcase_add_test(tt, destroy_in_flight_is_deferred);
	tcase_add_test(tt, sync_after_its_stream_is_gone_and_slot_reuse);
	tcase_add_test(tt, records_waits_and_syncs_race);
	tcase_add_test(tt, destroy_while_synchronizing);
	suite_add_tcase(s, tt);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
