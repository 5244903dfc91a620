/* End-to-end tests of every request kind against the real daemon (emulated device on CI, the GPU on the
 * H200 with CUA_TEST_BACKEND=cuda). */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct daemon D;

static void
up(void)
{
	daemon_start(&D, NULL);
}

static void
down(void)
{
	daemon_stop(&D);
}

START_TEST(every_request_kind)
{
	cua_client *c = connect_to(&D);
	CK(cua_ping(c));
	int n;
	CK(cua_device_count(c, &n));
	ck_assert_int_ge(n, 1);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_str_eq(info.backend, test_backend());
	ck_assert_int_ge(info.sm_major, 1);
	ck_assert_int_le(info.priority_greatest, info.priority_least);

	cua_module m = load_kernels(c);
	cua_function axpy = get_fn(c, m, "axpy"), fill = get_fn(c, m, "fill_u32");
	uint32_t np, offs[8], sizes[8];
	CK(cua_function_get_params(c, axpy, &np, offs, sizes));
	ck_assert_uint_eq(np, 4);
	ck_assert_uint_eq(sizes[0], 4);
	ck_assert_uint_eq(sizes[1], 8);
	ck_assert_uint_eq(offs[3], 24);
	cua_function nope;
	ck_assert_int_eq(cua_module_get_function(c, m, "no_such_kernel", &nope), CUA_ENOT_FOUND);

	const size_t N = 4096;
	cua_deviceptr a, b;
	CK(cua_mem_alloc(c, 0, N * 4, &a));
	CK(cua_mem_alloc(c, 0, N * 4, &b));
	uint32_t *host = malloc(N * 4), *back = malloc(N * 4);
	for (size_t i = 0; i < N; i++)
		host[i] = (uint32_t)(i * 2654435761u);
	CK(cua_memcpy_htod(c, a, host, N * 4));
	CK(cua_memcpy_dtod(c, b, a, N * 4));
	CK(cua_memcpy_dtoh(c, back, b, N * 4));
	ck_assert_mem_eq(back, host, N * 4);
	CK(cua_memset(c, b + 16, 0xab, 1, 8));
	CK(cua_memset(c, b + 64, 0xdeadbeef, 4, 4));
	CK(cua_memcpy_dtoh(c, back, b, 128));
	ck_assert_uint_eq(back[4], 0xabababab);
	ck_assert_uint_eq(back[5], 0xabababab);
	ck_assert_uint_eq(back[6], host[6]);
	ck_assert_uint_eq(back[16], 0xdeadbeef);
	ck_assert_uint_eq(back[19], 0xdeadbeef);
	ck_assert_int_eq(cua_memset(c, b, 0x1ff, 1, 1), CUA_EBAD_ARGUMENT);

	cua_stream s;
	CK(cua_stream_create(c, 0, -1000, &s)); /* clamped to the device's range */
	cua_launch *l = launch_1d(c, fill, 16, 256);
	cua_launch_push_device_ptr(l, a);
	cua_launch_push_u32(l, 77);
	cua_launch_push_u64(l, N);
	cua_launch_set_stream(l, s);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	CK(cua_future_wait(f, -1));
	ck_assert(cua_future_poll(f));
	cua_future_free(f);
	CK(cua_stream_synchronize(c, s));
	CK(cua_memcpy_dtoh(c, back, a, N * 4));
	for (size_t i = 0; i < N; i++)
		ck_assert_uint_eq(back[i], 77);

	/* fire-and-forget then synchronize */
	l = launch_1d(c, fill, 1, 64);
	cua_launch_push_device_ptr(l, a);
	cua_launch_push_u32(l, 5);
	cua_launch_push_u64(l, 1);
	CK(cua_launch_submit(l, NULL));
	CK(cua_synchronize(c));
	CK(cua_memcpy_dtoh(c, back, a, 8));
	ck_assert_uint_eq(back[0], 5);
	ck_assert_uint_eq(back[1], 77);

	/* an explicit batch: launch, htod, dtoh, memset, dtod */
	cua_batch *bt = cua_batch_new(c);
	l = launch_1d(c, fill, 4, 64);
	cua_launch_push_device_ptr(l, b);
	cua_launch_push_u32(l, 9);
	cua_launch_push_u64(l, 256);
	cua_launch_set_stream(l, s); /* one stream: the items run in order */
	CK(cua_batch_add_launch(bt, l));
	uint32_t word = 0x12345678, got[4] = {0};
	CK(cua_batch_add_memcpy_htod(bt, b + 4, &word, 4, s));
	CK(cua_batch_add_memcpy_dtoh(bt, got, b, 16, s));
	ck_assert_uint_eq(cua_batch_count(bt), 3);
	CK(cua_batch_submit(bt, &f));
	CK(cua_future_wait(f, -1));
	ck_assert_uint_eq(cua_future_items(f), 3);
	cua_future_free(f);
	ck_assert_uint_eq(got[0], 9);
	ck_assert_uint_eq(got[1], 0x12345678);
	ck_assert_uint_eq(got[2], 9);

	cua_daemon_status st;
	CK(cua_status(c, &st));
	ck_assert_uint_eq(st.sessions, 1);
	ck_assert_uint_eq(st.session.allocations, 2);
	ck_assert_uint_eq(st.session.alloc_bytes, 2 * N * 4);
	ck_assert_uint_eq(st.session.modules, 1);
	ck_assert_uint_eq(st.session.functions, 2);
	ck_assert_uint_eq(st.session.streams, 1);
	ck_assert_uint_eq(st.ndevices, (uint32_t)n);
	ck_assert_uint_eq(st.devices[0].generation, 1);

	CK(cua_stream_destroy(c, s));
	ck_assert_int_eq(cua_stream_destroy(c, s), CUA_ENOT_FOUND);
	CK(cua_mem_free(c, a));
	ck_assert_int_eq(cua_mem_free(c, a), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_mem_free(c, b + 4), CUA_EBAD_ARGUMENT);
	CK(cua_mem_free(c, b));
	CK(cua_module_unload(c, m));
	/* the module's functions went with it */
	l = launch_1d(c, fill, 1, 1);
	cua_launch_push_device_ptr(l, 0);
	cua_launch_push_u32(l, 0);
	cua_launch_push_u64(l, 0);
	ck_assert_int_eq(cua_launch_submit(l, &f), CUA_OK);
	ck_assert_int_eq(cua_future_wait(f, -1), CUA_ENOT_FOUND);
	cua_future_free(f);
	CK(cua_status(c, &st));
	ck_assert_uint_eq(st.session.allocations, 0);
	ck_assert_uint_eq(st.session.modules, 0);
	ck_assert_uint_eq(st.session.functions, 0);
	free(host);
	free(back);
	cua_disconnect(c);
}
END_TEST

START_TEST(axpy_matches_host)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function axpy = get_fn(c, m, "axpy");
	const size_t N = 1 << 18;
	float *x = malloc(N * 4), *y = malloc(N * 4), *out = malloc(N * 4);
	for (size_t i = 0; i < N; i++) {
		x[i] = (float)(rand() % 1000) / 7.0f;
		y[i] = (float)(rand() % 1000) / 3.0f;
	}
	cua_deviceptr dx, dy;
	CK(cua_mem_alloc(c, 0, N * 4, &dx));
	CK(cua_mem_alloc(c, 0, N * 4, &dy));
	CK(cua_memcpy_htod(c, dx, x, N * 4));
	CK(cua_memcpy_htod(c, dy, y, N * 4));
	cua_launch *l = launch_1d(c, axpy, 1024, 256);
	cua_launch_push_f32(l, 1.5f);
	cua_launch_push_device_ptr(l, dx);
	cua_launch_push_device_ptr(l, dy);
	cua_launch_push_u64(l, N);
	launch_and_wait(l);
	CK(cua_memcpy_dtoh(c, out, dy, N * 4));
	for (size_t i = 0; i < N; i++) {
		float want = fmaf(1.5f, x[i], y[i]); /* the kernel's a * x + y is one FMA */
		ck_assert_msg(out[i] == want, "element %zu: %f != %f", i, out[i], want);
	}
	free(x);
	free(y);
	free(out);
	cua_disconnect(c);
}
END_TEST

/* Futures complete in the order the GPU finishes, not the order of submission. */
START_TEST(futures_complete_out_of_order)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin"), fill = get_fn(c, m, "fill_u32");
	cua_stream s1, s2;
	CK(cua_stream_create(c, 0, 0, &s1));
	CK(cua_stream_create(c, 0, 0, &s2));
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 64, &p));
	cua_launch *l = launch_1d(c, spin, 1, 1);
	cua_launch_push_i64(l, spin_cycles(3000));
	cua_launch_set_stream(l, s1);
	cua_future *slow, *fast;
	CK(cua_launch_submit(l, &slow));
	l = launch_1d(c, fill, 1, 32);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, 1);
	cua_launch_push_u64(l, 16);
	cua_launch_set_stream(l, s2);
	CK(cua_launch_submit(l, &fast));
	CK(cua_future_wait(fast, -1));
	ck_assert_msg(!cua_future_poll(slow), "the 3 s kernel completed before the short one");
	CK(cua_future_wait(slow, -1));
	cua_future_free(slow);
	cua_future_free(fast);
	cua_disconnect(c);
}
END_TEST

/* Work on one client stream runs in order: a fill queued behind a long kernel on stream S lands after a fill
 * submitted later on another stream T. (Were S unordered, S's fill would run at once and T's last.) */
START_TEST(client_stream_is_ordered)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function spin = get_fn(c, m, "spin"), fill = get_fn(c, m, "fill_u32");
	cua_stream s, t;
	CK(cua_stream_create(c, 0, 0, &s));
	CK(cua_stream_create(c, 0, 0, &t));
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 4096, &p));
	cua_future *fs[9];
	cua_launch *l = launch_1d(c, spin, 1, 1);
	cua_launch_push_i64(l, spin_cycles(500));
	cua_launch_set_stream(l, s);
	CK(cua_launch_submit(l, &fs[0]));
	for (uint32_t i = 1; i <= 7; i++) { /* in order on S: the last value written is 7 */
		l = launch_1d(c, fill, 1, 64);
		cua_launch_push_device_ptr(l, p);
		cua_launch_push_u32(l, i);
		cua_launch_push_u64(l, 1024);
		cua_launch_set_stream(l, s);
		CK(cua_launch_submit(l, &fs[i]));
	}
	CK(cua_future_wait(fs[7], -1)); /* wait for nothing on T until S's work is queued */
	for (int i = 0; i < 8; i++) {
		CK(cua_future_wait(fs[i], -1));
		cua_future_free(fs[i]);
	}
	uint32_t v[1024];
	CK(cua_memcpy_dtoh_on(c, v, p, sizeof(v), s));
	for (int i = 0; i < 1024; i++)
		ck_assert_uint_eq(v[i], 7);

	/* many messages in flight at once (launches are coalesced into several concurrent batches): the daemon
	 * must still run them in submission order on S, whichever of its contexts receives each first */
	for (uint32_t i = 1; i <= 3000; i++) {
		l = launch_1d(c, fill, 1, 64);
		cua_launch_push_device_ptr(l, p);
		cua_launch_push_u32(l, i);
		cua_launch_push_u64(l, 1024);
		cua_launch_set_stream(l, s);
		CK(cua_launch_submit(l, NULL));
	}
	CK(cua_synchronize(c));
	CK(cua_memcpy_dtoh_on(c, v, p, sizeof(v), s));
	for (int i = 0; i < 1024; i++)
		ck_assert_uint_eq(v[i], 3000);

	/* now the race between streams: S = spin, fill 1; T (submitted after) = fill 2 */
	l = launch_1d(c, spin, 1, 1);
	cua_launch_push_i64(l, spin_cycles(1000));
	cua_launch_set_stream(l, s);
	CK(cua_launch_submit(l, &fs[0]));
	l = launch_1d(c, fill, 1, 64);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, 1);
	cua_launch_push_u64(l, 1024);
	cua_launch_set_stream(l, s);
	CK(cua_launch_submit(l, &fs[1]));
	l = launch_1d(c, fill, 1, 64);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, 2);
	cua_launch_push_u64(l, 1024);
	cua_launch_set_stream(l, t);
	CK(cua_launch_submit(l, &fs[2]));
	for (int i = 0; i < 3; i++) {
		CK(cua_future_wait(fs[i], -1));
		cua_future_free(fs[i]);
	}
	CK(cua_synchronize(c));
	CK(cua_memcpy_dtoh(c, v, p, sizeof(v)));
	for (int i = 0; i < 1024; i++)
		ck_assert_uint_eq(v[i], 1);
	cua_disconnect(c);
}
END_TEST

START_TEST(batch_with_one_bad_item)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function fill = get_fn(c, m, "fill_u32");
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 1024, &p));
	cua_stream s;
	CK(cua_stream_create(c, 0, 0, &s));
	cua_batch *b = cua_batch_new(c);
	cua_launch *l = launch_1d(c, fill, 1, 64);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, 3);
	cua_launch_push_u64(l, 128);
	cua_launch_set_stream(l, s);
	CK(cua_batch_add_launch(b, l));
	l = launch_1d(c, fill, 1, 64); /* bad: two arguments for three parameters */
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, 4);
	cua_launch_set_stream(l, s);
	CK(cua_batch_add_launch(b, l));
	CK(cua_batch_add_memset(b, p + 512, 0x11, 1, 512, s));
	uint32_t out[256];
	CK(cua_batch_add_memcpy_dtoh(b, out, p, sizeof(out), s));
	cua_future *f;
	CK(cua_batch_submit(b, &f));
	ck_assert_int_eq(cua_future_wait(f, -1), CUA_EBAD_ARGUMENT);
	ck_assert_uint_eq(cua_future_items(f), 4);
	const char *msg;
	ck_assert_int_eq(cua_future_item(f, 0, &msg), CUA_OK);
	ck_assert_int_eq(cua_future_item(f, 1, &msg), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(msg, "takes 3 arguments, the launch has 2") != NULL, "message: %s", msg);
	ck_assert_int_eq(cua_future_item(f, 2, NULL), CUA_OK);
	ck_assert_int_eq(cua_future_item(f, 3, NULL), CUA_OK);
	for (int i = 0; i < 128; i++)
		ck_assert_uint_eq(out[i], 3);
	for (int i = 128; i < 256; i++)
		ck_assert_uint_eq(out[i], 0x11111111);
	cua_future_free(f);
	cua_disconnect(c);
}
END_TEST

START_TEST(argument_mismatches_are_refused)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_kernels(c);
	cua_function axpy = get_fn(c, m, "axpy");
	cua_deviceptr x;
	CK(cua_mem_alloc(c, 0, 4096, &x));
	struct {
		int nargs;
		int wrong_size_at;
		const char *msg;
	} cases[] = {
		{3, -1, "the kernel takes 4 arguments, the launch has 3"},
		{5, -1, "the kernel takes 4 arguments, the launch has 5"},
		{4, 0, "argument 0 is 8 bytes, the kernel's parameter 0 is 4 bytes"},
		{4, 3, "argument 3 is 4 bytes, the kernel's parameter 3 is 8 bytes"},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		cua_launch *l = launch_1d(c, axpy, 1, 32);
		for (int i = 0; i < cases[k].nargs; i++) {
			if (i == cases[k].wrong_size_at)
				i == 0 ? cua_launch_push_f64(l, 1.0) : cua_launch_push_u32(l, 16);
			else if (i == 0)
				cua_launch_push_f32(l, 1.0f);
			else if (i == 3 || i == 4)
				cua_launch_push_u64(l, 16);
			else
				cua_launch_push_device_ptr(l, x);
		}
		cua_future *f;
		CK(cua_launch_submit(l, &f));
		ck_assert_int_eq(cua_future_wait(f, -1), CUA_EBAD_ARGUMENT);
		ck_assert_msg(strstr(cua_future_error(f), cases[k].msg), "case %zu: %s", k, cua_future_error(f));
		cua_future_free(f);
	}
	/* zero grid */
	cua_launch *l = cua_launch_new(c, axpy);
	cua_launch_set_config(l, (cua_launch_config){{0, 1, 1}, {1, 1, 1}, 0});
	cua_launch_push_f32(l, 1);
	cua_launch_push_device_ptr(l, x);
	cua_launch_push_device_ptr(l, x);
	cua_launch_push_u64(l, 1);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	ck_assert_int_eq(cua_future_wait(f, -1), CUA_EBAD_ARGUMENT);
	cua_future_free(f);
	/* no configuration */
	l = cua_launch_new(c, axpy);
	ck_assert_int_eq(cua_launch_submit(l, &f), CUA_EBAD_ARGUMENT);
	cua_disconnect(c);
}
END_TEST

/* A device pointer must be inside one of this session's allocations. */
START_TEST(foreign_and_outside_pointers_are_refused)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_module ma = load_kernels(a), mb = load_kernels(b);
	cua_function fa = get_fn(a, ma, "fill_u32"), fb = get_fn(b, mb, "fill_u32");
	cua_deviceptr pa, pb;
	CK(cua_mem_alloc(a, 0, 4096, &pa));
	CK(cua_mem_alloc(b, 0, 4096, &pb));
	/* b launches on a's memory */
	cua_launch *l = launch_1d(b, fb, 1, 32);
	cua_launch_push_device_ptr(l, pa);
	cua_launch_push_u32(l, 1);
	cua_launch_push_u64(l, 1);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	ck_assert_int_eq(cua_future_wait(f, -1), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_future_error(f), "not inside an allocation of this session"), "%s",
		      cua_future_error(f));
	cua_future_free(f);
	/* copies outside, past the end, and into the other session's memory */
	char buf[64] = {0};
	ck_assert_int_eq(cua_memcpy_htod(b, pa, buf, 8), CUA_EBAD_ARGUMENT);
	ck_assert_int_eq(cua_memcpy_htod(b, pb + 4090, buf, 8), CUA_EBAD_ARGUMENT);
	ck_assert_int_eq(cua_memcpy_dtoh(b, buf, 0x1234, 8), CUA_EBAD_ARGUMENT);
	ck_assert_int_eq(cua_mem_free(b, pa), CUA_ENOT_FOUND);
	/* a's own use still works, and a's data is untouched */
	l = launch_1d(a, fa, 1, 32);
	cua_launch_push_device_ptr(l, pa);
	cua_launch_push_u32(l, 42);
	cua_launch_push_u64(l, 4);
	launch_and_wait(l);
	uint32_t v[4];
	CK(cua_memcpy_dtoh(a, v, pa, sizeof(v)));
	ck_assert_uint_eq(v[3], 42);
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

START_TEST(unknown_and_foreign_handles)
{
	cua_client *a = connect_to(&D), *b = connect_to(&D);
	cua_module ma = load_kernels(a);
	cua_function fa = get_fn(a, ma, "empty_kernel");
	cua_stream sa;
	CK(cua_stream_create(a, 0, 0, &sa));
	/* b uses a's handles */
	cua_launch *l = launch_1d(b, fa, 1, 1);
	cua_future *f;
	CK(cua_launch_submit(l, &f));
	ck_assert_int_eq(cua_future_wait(f, -1), CUA_ENOT_FOUND);
	cua_future_free(f);
	cua_function x;
	ck_assert_int_eq(cua_module_get_function(b, ma, "empty_kernel", &x), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_stream_synchronize(b, sa), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_module_unload(b, ma), CUA_ENOT_FOUND);
	/* made-up handles, and a module handle used as a stream */
	ck_assert_int_eq(cua_stream_synchronize(b, (cua_stream){0x3000000000000001ull}), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_stream_synchronize(a, (cua_stream){ma.id}), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_module_unload(a, (cua_module){~0ull}), CUA_ENOT_FOUND);
	/* a freed handle is not reused silently */
	CK(cua_stream_destroy(a, sa));
	cua_stream sa2;
	CK(cua_stream_create(a, 0, 0, &sa2));
	ck_assert_uint_ne(sa2.id, sa.id);
	ck_assert_int_eq(cua_stream_synchronize(a, sa), CUA_ENOT_FOUND);
	CK(cua_stream_synchronize(a, sa2));
	cua_disconnect(a);
	cua_disconnect(b);
}
END_TEST

START_TEST(session_quota)
{
	cua_client *c = connect_to(&D);
	cua_deviceptr p, q;
	CK(cua_mem_alloc(c, 0, 3 << 20, &p));
	ck_assert_int_eq(cua_mem_alloc(c, 0, 2 << 20, &q), CUA_EQUOTA);
	ck_assert_msg(strstr(cua_last_error(), "quota"), "%s", cua_last_error());
	CK(cua_mem_alloc(c, 0, 1 << 20, &q));
	CK(cua_mem_free(c, p));
	CK(cua_mem_alloc(c, 0, 2 << 20, &p));
	cua_disconnect(c);
}
END_TEST

static void
up_quota(void)
{
	static const char *const args[] = {"--session-mem", "4M", NULL};
	daemon_start(&D, args);
}

/* 16 client processes × 1000 launches each, every result checked. */
START_TEST(sixteen_clients_thousand_launches_each)
{
	enum { CLIENTS = 16, LAUNCHES = 1000 };
	pid_t pids[CLIENTS];
	for (int k = 0; k < CLIENTS; k++) {
		pids[k] = fork();
		ck_assert_int_ge(pids[k], 0);
		if (pids[k] != 0)
			continue;
		/* child: a fresh process, NNG not yet initialised in it */
		cua_client *c;
		if (cua_connect(D.url, &c) != 0)
			_exit(10);
		cua_module m;
		char fatbin[512];
		snprintf(fatbin, sizeof(fatbin), "%s/tests/kernels/test_kernels.fatbin", builddir());
		static const char img[] = "cuasync-emu-module\nfill_u32\n";
		if ((access(fatbin, R_OK) == 0 ? cua_module_load_file(c, 0, fatbin, &m)
					       : cua_module_load(c, 0, img, sizeof(img) - 1, &m)) != 0)
			_exit(11);
		cua_function fill;
		cua_deviceptr p;
		if (cua_module_get_function(c, m, "fill_u32", &fill) || cua_mem_alloc(c, 0, LAUNCHES * 4, &p))
			_exit(12);
		static cua_future *fs[LAUNCHES];
		for (uint32_t i = 0; i < LAUNCHES; i++) {
			cua_launch *l = cua_launch_new(c, fill);
			cua_launch_set_config(l, (cua_launch_config){{1, 1, 1}, {32, 1, 1}, 0});
			cua_launch_push_device_ptr(l, p + 4 * i);
			cua_launch_push_u32(l, i * 31u + (uint32_t)k);
			cua_launch_push_u64(l, 1);
			if (cua_launch_submit(l, &fs[i]) != 0)
				_exit(13);
		}
		for (uint32_t i = 0; i < LAUNCHES; i++) {
			if (cua_future_wait(fs[i], -1) != 0)
				_exit(14);
			cua_future_free(fs[i]);
		}
		static uint32_t v[LAUNCHES];
		if (cua_memcpy_dtoh(c, v, p, sizeof(v)) != 0)
			_exit(15);
		for (uint32_t i = 0; i < LAUNCHES; i++)
			if (v[i] != i * 31u + (uint32_t)k)
				_exit(16);
		cua_disconnect(c);
		_exit(0);
	}
	for (int k = 0; k < CLIENTS; k++) {
		int st;
		ck_assert_int_eq(waitpid(pids[k], &st, 0), pids[k]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d failed with status 0x%x", k, st);
	}
}
END_TEST

static bool
no_sessions_left(const cua_daemon_status *s, void *ud)
{
	return s->sessions == 1 && s->total.allocations == 0 && s->total.modules == 0 && s->devices[0].allocations == 0;
}

/* A client killed mid-flight: everything it held is freed, visibly in STATUS. */
START_TEST(killed_client_is_cleaned_up)
{
	int sync[2];
	ck_assert_int_eq(pipe(sync), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(sync[0]);
		cua_client *c;
		if (cua_connect(D.url, &c) != 0)
			_exit(1);
		cua_module m;
		static const char img[] = "cuasync-emu-module\nspin\nfill_u32\n";
		char fatbin[512];
		snprintf(fatbin, sizeof(fatbin), "%s/tests/kernels/test_kernels.fatbin", builddir());
		if ((access(fatbin, R_OK) == 0 ? cua_module_load_file(c, 0, fatbin, &m)
					       : cua_module_load(c, 0, img, sizeof(img) - 1, &m)) != 0)
			_exit(2);
		cua_function spin;
		cua_deviceptr p;
		cua_stream s;
		for (int i = 0; i < 3; i++)
			if (cua_mem_alloc(c, 0, 1 << 20, &p) != 0)
				_exit(3);
		if (cua_module_get_function(c, m, "spin", &spin) || cua_stream_create(c, 0, 0, &s))
			_exit(4);
		cua_launch *l = cua_launch_new(c, spin);
		cua_launch_set_config(l, (cua_launch_config){{1, 1, 1}, {1, 1, 1}, 0});
		cua_launch_push_i64(l, spin_cycles(1000));
		cua_launch_set_stream(l, s);
		cua_future *f;
		if (cua_launch_submit(l, &f) != 0)
			_exit(5);
		cua_daemon_status st;
		if (cua_status(c, &st) != 0 || st.session.allocations != 3)
			_exit(6);
		if (write(sync[1], "x", 1) != 1)
			_exit(7);
		pause(); /* killed here, with the spin in flight */
		_exit(8);
	}
	close(sync[1]);
	char x;
	ck_assert_int_eq(read(sync[0], &x, 1), 1);
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	ck_assert(WIFSIGNALED(st));
	cua_client *c = connect_operator(&D); /* sees every session */
	cua_daemon_status s;
	ck_assert_msg(wait_status(c, no_sessions_left, NULL, &s),
		      "after the kill: %u sessions, %llu allocations, %llu modules", s.sessions,
		      (unsigned long long)s.total.allocations, (unsigned long long)s.total.modules);
	cua_disconnect(c);
}
END_TEST

/* Shared host memory: copies go through the client's memfd, not the socket, and land intact both ways. */
START_TEST(host_buffer_copies)
{
	cua_client *c = connect_to(&D);
	const size_t N = 8u << 20;
	unsigned char *h;
	CK(cua_host_alloc(c, 0, N, (void **)&h));
	for (size_t i = 0; i < N; i++)
		h[i] = (unsigned char)(i * 7 + 3);
	cua_deviceptr d;
	CK(cua_mem_alloc(c, 0, N, &d));
	CK(cua_memcpy_htod(c, d, h, N));
	cua_daemon_status st;
	CK(cua_status(c, &st));
	memset(h, 0, N);
	CK(cua_memcpy_dtoh(c, h + 4096, d, N - 8192)); /* into the middle of the buffer */
	for (size_t i = 0; i < N - 8192; i++)
		ck_assert_uint_eq(h[4096 + i], (unsigned char)(i * 7 + 3));
	ck_assert_uint_eq(h[0], 0);
	/* the same data through the socket path agrees */
	unsigned char *plain = malloc(4096);
	CK(cua_memcpy_dtoh(c, plain, d + 100, 4096));
	for (size_t i = 0; i < 4096; i++)
		ck_assert_uint_eq(plain[i], (unsigned char)((i + 100) * 7 + 3));
	free(plain);
	CK(cua_host_free(c, h));
	ck_assert_int_eq(cua_host_free(c, h), CUA_ENOT_FOUND);
	/* a buffer left registered is released with the session */
	CK(cua_host_alloc(c, 0, 1 << 20, (void **)&h));
	cua_disconnect(c);
}
END_TEST

/* Batched copies between the device and a host buffer run in stream order without their bytes in the message
 * (issue 19): the device reads the host source when the copy's turn comes, as CUDA's asynchronous copies from
 * page-locked memory do, and writes the host target then, fire-and-forget copies too. Proven by changing the
 * source while a kernel ahead of the copy on its stream still runs: the device gets the new bytes. */
START_TEST(host_buffer_batch_copies_run_in_stream_order)
{
	cua_client *c = connect_to(&D);
	const size_t N = 1u << 20;
	unsigned char *h;
	CK(cua_host_alloc(c, 0, 2 * N, (void **)&h));
	cua_deviceptr d;
	CK(cua_mem_alloc(c, 0, N, &d));
	cua_stream s;
	CK(cua_stream_create(c, 0, 0, &s));
	cua_function spin = get_fn(c, load_kernels(c), "spin");
	bool proven = false;
	for (int attempt = 0; attempt < 3 && !proven; attempt++) {
		memset(h, 0xa1, N);
		memset(h + N, 0, N);
		cua_future *k = submit_spin(c, spin, 1500, s);
		cua_batch *b = cua_batch_new(c);
		CK(cua_batch_add_memcpy_htod(b, d, h, N, s));
		CK(cua_batch_submit(b, NULL)); /* fire-and-forget */
		b = cua_batch_new(c);
		CK(cua_batch_add_memcpy_dtoh(b, h + N, d, N, s));
		CK(cua_batch_submit(b, NULL));
		memset(h, 0x5e, N); /* after the submit, before the copy's turn */
		/* the kernel ahead of both copies still runs: neither has run, the device must get 0x5e. (Else the
		 * machine stalled longer than the kernel: try again.) */
		proven = cua_future_poll(k) == 0;
		CK(cua_future_wait(k, -1));
		cua_future_free(k);
		CK(cua_stream_synchronize(c, s));
		if (!proven)
			continue;
		for (size_t i = 0; i < N; i += 4093)
			ck_assert_msg(h[N + i] == 0x5e,
				      "byte %zu: %#x: the copy read the host bytes at submit, not in "
				      "stream order",
				      i, h[N + i]);
		ck_assert_uint_eq(h[2 * N - 1], 0x5e);
	}
	ck_assert_msg(proven, "the kernel ahead of the copies never outlasted their submission");
	/* a future's batch: its DTOH lands in the buffer before the future completes */
	memset(h + N, 0, N);
	cua_batch *b = cua_batch_new(c);
	CK(cua_batch_add_memcpy_dtoh(b, h + N + 8, d + 8, 4096, s));
	cua_future *f;
	CK(cua_batch_submit(b, &f));
	CK(cua_future_wait(f, -1));
	cua_future_free(f);
	ck_assert_uint_eq(h[N + 8], 0x5e);
	ck_assert_uint_eq(h[N + 8 + 4095], 0x5e);
	ck_assert_uint_eq(h[N + 8 + 4096], 0);
	CK(cua_host_free(c, h));
	cua_disconnect(c);
}
END_TEST

/* cuasyncctl, the operator's view, against the same daemon (a real process reading STATUS and DEVICES). */
START_TEST(cuasyncctl_reports_the_daemon)
{
	cua_client *c = connect_to(&D);
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, 3 << 20, &p));
	char cmd[1024], out[8192];
	const char *verbs[] = {"status", "devices", "ping"};
	for (int v = 0; v < 3; v++) {
		snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url %s %s", builddir(), D.op_url, verbs[v]);
		FILE *f = popen(cmd, "r");
		ck_assert_ptr_nonnull(f);
		size_t n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = '\0';
		ck_assert_int_eq(pclose(f), 0);
		if (v == 0) {
			ck_assert_msg(strstr(out, "sessions  2"), "%s", out); /* this test's and cuasyncctl's own */
			ck_assert_msg(strstr(out, "1 allocations (3.0 MiB)"), "%s", out);
		} else if (v == 1) {
			ck_assert_msg(strstr(out, "device 0") && strstr(out, test_backend()), "%s", out);
		} else {
			ck_assert_msg(strstr(out, "pong in"), "%s", out);
		}
	}
	snprintf(cmd, sizeof(cmd), "%s/tools/cuasyncctl --url ipc:///nonexistent/socket status 2>/dev/null",
		 builddir());
	ck_assert_int_ne(system(cmd), 0);
	cua_disconnect(c);
}
END_TEST

/* Synchronous copies from and to ordinary (pageable) host memory are staged through the client's shared
 * memory (issue 19): the bytes never travel in a message. The daemon here takes messages of 1 MiB at most, so a
 * 20 MiB copy that carried its bytes could not be sent (before: it went as one 20 MiB message and failed). Odd
 * sizes and offsets; the small copy below the staging threshold still travels in its message. */
START_TEST(pageable_copies_are_staged_through_shared_memory)
{
	cua_client *c = connect_to(&D);
	const size_t N = (20u << 20) + 13, SMALL = (64u << 10) - 1;
	unsigned char *src = malloc(N), *back = malloc(N + 3);
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(back);
	for (size_t i = 0; i < N; i++)
		src[i] = (unsigned char)(i * 13 + 5);
	cua_deviceptr d;
	CK(cua_mem_alloc(c, 0, N + 64, &d));
	CK(cua_memcpy_htod(c, d + 7, src, N));
	memset(back, 0xee, N + 3);
	CK(cua_memcpy_dtoh(c, back + 3, d + 7, N));
	ck_assert_uint_eq(back[0], 0xee);
	ck_assert_msg(memcmp(back + 3, src, N) == 0, "the 20 MiB copy came back changed");
	/* below the threshold: in the message */
	CK(cua_memcpy_htod(c, d, src + 1, SMALL));
	CK(cua_memcpy_dtoh(c, back, d, SMALL));
	ck_assert_msg(memcmp(back, src + 1, SMALL) == 0, "the small copy came back changed");
	CK(cua_mem_free(c, d));
	free(src);
	free(back);
	cua_disconnect(c);
}
END_TEST

struct stager {
	cua_client *c;
	unsigned char seed;
	int failures;
};

/* 40 round trips of 768 KiB through one client, checked: staged, or in their messages while the other thread
 * holds the staging buffer. */
static void *
stager_main(void *arg)
{
	struct stager *t = arg;
	const size_t N = 768u << 10;
	unsigned char *src = malloc(N), *back = malloc(N);
	cua_deviceptr d;
	if (src == NULL || back == NULL || cua_mem_alloc(t->c, 0, N, &d) != CUA_OK) {
		t->failures++;
		free(src);
		free(back);
		return NULL;
	}
	for (int k = 0; k < 40; k++) {
		for (size_t i = 0; i < N; i++)
			src[i] = (unsigned char)(i * 5 + (size_t)k + t->seed);
		memset(back, 0, N);
		if (cua_memcpy_htod(t->c, d, src, N) != CUA_OK || cua_memcpy_dtoh(t->c, back, d, N) != CUA_OK ||
		    memcmp(src, back, N) != 0)
			t->failures++;
	}
	cua_mem_free(t->c, d);
	free(src);
	free(back);
	return NULL;
}

START_TEST(two_threads_copy_through_one_staging_buffer)
{
	cua_client *c = connect_to(&D);
	struct stager t[2] = {{c, 1, 0}, {c, 101, 0}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, stager_main, &t[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	ck_assert_int_eq(t[0].failures + t[1].failures, 0);
	cua_disconnect(c);
}
END_TEST

/* The staging buffer counts in the session's host memory (--session-host-bytes 12M here); the application's own
 * host buffers come first: a cua_host_alloc that would pass the limit with it frees it, and copies go on. */
START_TEST(host_buffers_come_before_the_staging_buffer)
{
	cua_client *c = connect_to(&D);
	const size_t N = 1u << 20;
	unsigned char *src = malloc(N), *back = malloc(N), *h;
	for (size_t i = 0; i < N; i++)
		src[i] = (unsigned char)(i * 3 + 1);
	cua_deviceptr d;
	CK(cua_mem_alloc(c, 0, N, &d));
	CK(cua_memcpy_htod(c, d, src, N)); /* makes the 8 MiB staging buffer */
	CK(cua_host_alloc(c, 0, 8u << 20, (void **)&h));
	memset(back, 0, N);
	CK(cua_memcpy_dtoh(c, back, d, N / 2)); /* 512 KiB: in its message now */
	ck_assert_msg(memcmp(back, src, N / 2) == 0, "the copy after the staging buffer went came back changed");
	CK(cua_memcpy_dtoh(c, h, d, N)); /* the application's buffer works */
	ck_assert_msg(memcmp(h, src, N) == 0, "the copy into the host buffer came back changed");
	CK(cua_host_free(c, h));
	CK(cua_mem_free(c, d));
	free(src);
	free(back);
	cua_disconnect(c);
}
END_TEST

/* A staged copy that timed out may still run: its staging buffer must never serve another copy. Stream a's
 * device-to-host copy waits behind a 1.5 s kernel and times out at 300 ms; stream b's host-to-device copy is
 * staged next and waits behind a 3 s kernel. a's copy lands in its buffer at 1.5 s; had b's bytes been staged in
 * the same buffer, the device would get a's bytes at 3 s. */
START_TEST(a_timed_out_copy_never_writes_another_copys_staging)
{
	cua_client *c = connect_to(&D);
	cua_function spin = get_fn(c, load_kernels(c), "spin");
	const size_t N = 1u << 20;
	unsigned char *a_src = malloc(N), *b_src = malloc(N), *back = malloc(N);
	for (size_t i = 0; i < N; i++) {
		a_src[i] = 0xaa;
		b_src[i] = (unsigned char)(i * 11 + 7);
	}
	cua_deviceptr da, db;
	CK(cua_mem_alloc(c, 0, N, &da));
	CK(cua_mem_alloc(c, 0, N, &db));
	CK(cua_memcpy_htod(c, da, a_src, N));
	cua_stream a, b;
	CK(cua_stream_create(c, 0, 0, &a));
	CK(cua_stream_create(c, 0, 0, &b));
	cua_future *fa = submit_spin(c, spin, 1500, a), *fb = submit_spin(c, spin, 3000, b);
	cua_set_timeout(c, 300);
	ck_assert_int_eq(cua_memcpy_dtoh_on(c, back, da, N, a), CUA_ETIMEOUT);
	cua_set_timeout(c, 60000);
	CK(cua_memcpy_htod_on(c, db, b_src, N, b));
	CK(cua_future_wait(fa, -1));
	CK(cua_future_wait(fb, -1));
	CK(cua_synchronize(c));
	memset(back, 0, N);
	CK(cua_memcpy_dtoh(c, back, db, N));
	ck_assert_msg(memcmp(back, b_src, N) == 0, "stream b's copy got other bytes (byte 0: %#x)", back[0]);
	cua_future_free(fa);
	cua_future_free(fb);
	free(a_src);
	free(b_src);
	free(back);
	cua_disconnect(c);
}
END_TEST

static void
up_staging(void)
{
	static const char *const args[] = {"--max-message", "1M", "--session-host-bytes", "12M", NULL};
	daemon_start(&D, args);
}

static Suite *
requests_suite(void)
{
	Suite *s = suite_create("requests");
	TCase *tc = tcase_create("requests");
	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, every_request_kind);
	tcase_add_test(tc, axpy_matches_host);
	tcase_add_test(tc, futures_complete_out_of_order);
	tcase_add_test(tc, client_stream_is_ordered);
	tcase_add_test(tc, batch_with_one_bad_item);
	tcase_add_test(tc, argument_mismatches_are_refused);
	tcase_add_test(tc, foreign_and_outside_pointers_are_refused);
	tcase_add_test(tc, unknown_and_foreign_handles);
	tcase_add_test(tc, sixteen_clients_thousand_launches_each);
	tcase_add_test(tc, killed_client_is_cleaned_up);
	tcase_add_test(tc, host_buffer_copies);
	tcase_add_test(tc, host_buffer_batch_copies_run_in_stream_order);
	tcase_add_test(tc, cuasyncctl_reports_the_daemon);
	tcase_add_test(tc, a_timed_out_copy_never_writes_another_copys_staging);
	suite_add_tcase(s, tc);
	tc = tcase_create("quota");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_quota, down);
	tcase_add_test(tc, session_quota);
	suite_add_tcase(s, tc);
	tc = tcase_create("staging");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up_staging, down);
	tcase_add_test(tc, pageable_copies_are_staged_through_shared_memory);
	tcase_add_test(tc, host_buffers_come_before_the_staging_buffer);
	tcase_add_test(tc, two_threads_copy_through_one_staging_buffer);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(requests_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
