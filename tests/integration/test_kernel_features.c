/* Module globals, large kernel parameters and function attributes (issue 13), through libcuasync against the
 * real daemon: on the emulated device by default, on the GPU with CUA_TEST_BACKEND=cuda (tests/gpu/run.sh), where
 * the module is tests/kernels/feature_kernels.fatbin (the emulated device gets an image declaring the same
 * kernels and global). Every result is checked against the host's. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define CONST_WORDS 256u
#define BIG_WORDS 8000u
#define SHARED_WORDS 16384u /* 64 KiB of dynamic shared memory */

static const char emu_image[] = "cuasync-emu-module\ncopy_u32\nconst_copy\nbig_param_copy\ndyn_shared_copy\n"
				"global const_data 1024\n";

static cua_launch *
copy_launch(cua_client *c, cua_function f, cua_deviceptr dst, cua_deviceptr src, uint64_t n)
{
	cua_launch *l = launch_1d(c, f, 4, 256);
	cua_launch_push_device_ptr(l, dst);
	cua_launch_push_device_ptr(l, src);
	cua_launch_push_u64(l, n);
	return l;
}

START_TEST(global_written_by_htod_is_read_by_kernels)
{
	cua_client *c = connect_to(&D);
	cua_module m = load_features(c, emu_image);
	cua_function cc = get_fn(c, m, "const_copy"), cp = get_fn(c, m, "copy_u32");
	cua_deviceptr g, out;
	size_t bytes = 0;
	CK(cua_module_get_global(c, m, "const_data", &g, &bytes));
	ck_assert_uint_eq(bytes, CONST_WORDS * 4);
	uint32_t want[CONST_WORDS], got[CONST_WORDS];
	for (uint32_t i = 0; i < CONST_WORDS; i++)
		want[i] = i * 2654435761u + 17;
	CK(cua_memcpy_htod(c, g, want, sizeof(want)));
	CK(cua_mem_alloc(c, 0, sizeof(want), &out));
	cua_launch *l = launch_1d(c, cc, 2, 128); /* the kernel reads the global by its name */
	cua_launch_push_device_ptr(l, out);
	cua_launch_push_u64(l, CONST_WORDS);
	launch_and_wait(l);
	CK(cua_memcpy_dtoh(c, got, out, sizeof(got)));
	ck_assert_mem_eq(got, want, sizeof(want));
	CK(cua_memset(c, out, 0, 4, CONST_WORDS));
	launch_and_wait(copy_launch(c, cp, out, g, CONST_WORDS)); /* ... or as a pointer argument */
	CK(cua_memcpy_dtoh(c, got, out, sizeof(got)));
	ck_assert_mem_eq(got, want, sizeof(want));
	CK(cua_memcpy_dtoh(c, got, g + 16, 64)); /* a range inside it */
	ck_assert_mem_eq(got, want + 4, 64);
	ck_assert_int_eq(cua_memcpy_dtoh(c, got, g + 1000, 64), CUA_EBAD_ARGUMENT); /* runs past its end */
	ck_assert_int_eq(cua_module_get_global(c, m, "no_such_global", &g, NULL), CUA_ENOT_FOUND);
	ck_assert_int_eq(cua_module_get_global(c, m, "", &g, NULL), CUA_EBAD_ARGUMENT);
	cua_disconnect(c);
}
END_TEST

START_TEST(global_is_refused_after_unload_and_to_others)
{
	cua_client *c = connect_to(&D), *other = connect_to(&D);
	cua_module m = load_features(c, emu_image), keep = load_features(c, emu_image);
	cua_function cp = get_fn(c, keep, "copy_u32");
	cua_deviceptr g, out;
	uint32_t w[16] = {1, 2, 3};
	CK(cua_module_get_global(c, m, "const_data", &g, NULL));
	CK(cua_mem_alloc(c, 0, sizeof(w), &out));
	/* another session: not its memory */
	ck_assert_int_eq(cua_memcpy_htod(other, g, w, sizeof(w)), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_last_error(), "not inside an allocation of this session"), "%s", cua_last_error());
	/* never freed on its own */
	ck_assert_int_eq(cua_mem_free(c, g), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_last_error(), "module global"), "%s", cua_last_error());
	CK(cua_memcpy_htod(c, g, w, sizeof(w)));
	CK(cua_module_unload(c, m));
	/* gone with its module: copies and launch arguments are refused before anything runs */
	ck_assert_int_eq(cua_memcpy_htod(c, g, w, sizeof(w)), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_last_error(), "is not inside an allocation"), "%s", cua_last_error());
	char msg[512];
	ck_assert_int_eq(submit_status(copy_launch(c, cp, out, g, 16), msg, sizeof(msg)), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(msg, "argument 1"), "%s", msg);
	/* the other module's global is a different one, and the session still works */
	cua_deviceptr g2;
	CK(cua_module_get_global(c, keep, "const_data", &g2, NULL));
	CK(cua_memcpy_htod(c, g2, w, sizeof(w)));
	launch_and_wait(copy_launch(c, cp, out, g2, 16));
	uint32_t got[16];
	CK(cua_memcpy_dtoh(c, got, out, sizeof(got)));
	ck_assert_mem_eq(got, w, sizeof(w));
	cua_disconnect(other);
	cua_disconnect(c);
}
END_TEST

START_TEST(struct_of_32000_bytes_reaches_the_kernel)
{
	cua_client *c = connect_to(&D);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_uint_eq(info.max_param_bytes, 32764);
	cua_module m = load_features(c, emu_image);
	cua_function f = get_fn(c, m, "big_param_copy");
	uint32_t sizes[2], offs[2], n = 2;
	CK(cua_function_get_params(c, f, &n, offs, sizes));
	ck_assert_uint_eq(sizes[1], BIG_WORDS * 4);
	static uint32_t s[BIG_WORDS], got[BIG_WORDS];
	for (uint32_t i = 0; i < BIG_WORDS; i++)
		s[i] = i ^ 0xa5a5a5a5u;
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, sizeof(got), &out));
	cua_launch *l = launch_1d(c, f, 8, 256);
	CK(cua_launch_push_device_ptr(l, out));
	CK(cua_launch_push_arg(l, s, sizeof(s)));
	launch_and_wait(l);
	CK(cua_memcpy_dtoh(c, got, out, sizeof(got)));
	ck_assert_mem_eq(got, s, sizeof(s));
	/* 8 + 32757 = 32765 bytes: one more than a launch may pass, refused with the numbers */
	static uint8_t over[32765];
	char msg[512];
	l = launch_1d(c, f, 8, 256);
	CK(cua_launch_push_device_ptr(l, out));
	CK(cua_launch_push_arg(l, over, 32757));
	ck_assert_int_eq(submit_status(l, msg, sizeof(msg)), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(msg, "32765 bytes") && strstr(msg, "32764 bytes"), "%s", msg);
	/* one argument over the protocol's bound never leaves the client */
	l = launch_1d(c, f, 8, 256);
	ck_assert_int_eq(cua_launch_push_arg(l, over, 32765), CUA_EBAD_ARGUMENT);
	cua_launch_free(l);
	cua_disconnect(c);
}
END_TEST

/* Thousands of 32000-byte launches submitted back to back, fire-and-forget: libcuasync coalesces the queued ones
 * into BATCH messages, which must stay within the daemon's --max-message and its worker's ring (before, 4096 of
 * them went as one 131 MB message: the connection was closed, or the batch refused TOO_LARGE at synchronize). */
START_TEST(pipelined_32000_byte_launches_are_served)
{
	cua_client *c = connect_to(&D);
	cua_function f = get_fn(c, load_features(c, emu_image), "big_param_copy");
	static uint32_t s[BIG_WORDS], got[BIG_WORDS];
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, sizeof(got), &out));
	cua_stream st;
	CK(cua_stream_create(c, 0, 0, &st));
	enum { LAUNCHES = 3000 };
	for (uint32_t k = 0; k < LAUNCHES; k++) {
		for (uint32_t i = 0; i < BIG_WORDS; i += 997)
			s[i] = k * 131u + i;
		cua_launch *l = launch_1d(c, f, 8, 256);
		cua_launch_set_stream(l, st);
		CK(cua_launch_push_device_ptr(l, out));
		CK(cua_launch_push_arg(l, s, sizeof(s)));
		CK(cua_launch_submit(l, NULL));
	}
	CK(cua_synchronize(c));
	CK(cua_memcpy_dtoh(c, got, out, sizeof(got)));
	ck_assert_mem_eq(got, s, sizeof(s)); /* the last launch's argument: every one ran, in order */
	CK(cua_ping(c));
	cua_disconnect(c);
}
END_TEST

/* Below sm_70 (or before CUDA 12.1) a launch passes at most 4096 bytes. */
START_TEST(old_device_refuses_more_than_4096_bytes)
{
	if (on_gpu())
		return; /* the H200 is sm_90 */
	struct daemon old;
	const char *const args[] = {"--emu-sm", "60", NULL};
	daemon_start(&old, args);
	cua_client *c = connect_to(&old);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_uint_eq(info.max_param_bytes, 4096);
	cua_function f = get_fn(c, load_features(c, emu_image), "big_param_copy");
	static uint32_t s[BIG_WORDS];
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, sizeof(s), &out));
	cua_launch *l = launch_1d(c, f, 1, 32);
	cua_launch_push_device_ptr(l, out);
	cua_launch_push_arg(l, s, sizeof(s));
	char msg[512];
	ck_assert_int_eq(submit_status(l, msg, sizeof(msg)), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(msg, "32008 bytes, more than the 4096 bytes") && strstr(msg, "sm_60"), "%s", msg);
	cua_disconnect(c);
	daemon_stop(&old);
}
END_TEST

static cua_launch *
shared_launch(cua_client *c, cua_function f, cua_deviceptr out, cua_deviceptr in)
{
	cua_launch *l = cua_launch_new(c, f);
	cua_launch_set_config(l, (cua_launch_config){{1, 1, 1}, {1024, 1, 1}, SHARED_WORDS * 4});
	cua_launch_push_device_ptr(l, out);
	cua_launch_push_device_ptr(l, in);
	cua_launch_push_u64(l, SHARED_WORDS);
	return l;
}

START_TEST(dynamic_shared_memory_needs_the_attribute)
{
	cua_client *c = connect_to(&D);
	cua_function f = get_fn(c, load_features(c, emu_image), "dyn_shared_copy");
	static uint32_t in[SHARED_WORDS], got[SHARED_WORDS];
	for (uint32_t i = 0; i < SHARED_WORDS; i++)
		in[i] = i * 7 + 1;
	cua_deviceptr din, dout;
	CK(cua_mem_alloc(c, 0, sizeof(in), &din));
	CK(cua_mem_alloc(c, 0, sizeof(in), &dout));
	CK(cua_memcpy_htod(c, din, in, sizeof(in)));
	int v = 0;
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &v));
	ck_assert_int_le(v, 48 << 10);
	char msg[512];
	ck_assert_int_eq(submit_status(shared_launch(c, f, dout, din), msg, sizeof(msg)), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strncmp(msg, "CUDA_ERROR_INVALID_VALUE", 24) == 0, "%s", msg);
	CK(cua_ping(c)); /* a refused launch is no fault: the session and its context work on */
	CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, SHARED_WORDS * 4));
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &v));
	ck_assert_int_eq(v, SHARED_WORDS * 4);
	launch_and_wait(shared_launch(c, f, dout, din));
	CK(cua_memcpy_dtoh(c, got, dout, sizeof(got)));
	for (uint32_t i = 0; i < SHARED_WORDS; i++)
		ck_assert_uint_eq(got[i], in[SHARED_WORDS - 1 - i]);
	/* another session's handle of the same kernel keeps the default */
	cua_client *o = connect_to(&D);
	cua_function of = get_fn(o, load_features(o, emu_image), "dyn_shared_copy");
	CK(cua_func_get_attribute(o, of, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &v));
	ck_assert_int_le(v, 48 << 10);
	cua_disconnect(o);
	cua_disconnect(c);
}
END_TEST

START_TEST(attributes_are_read_set_and_range_checked)
{
	cua_client *c = connect_to(&D);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	cua_function f = get_fn(c, load_features(c, emu_image), "copy_u32");
	int v = 0;
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_NUM_REGS, &v));
	ck_assert_int_gt(v, 0);
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &v));
	ck_assert_int_gt(v, 0);
	ck_assert_int_le(v, 1024);
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_BINARY_VERSION, &v));
	ck_assert_int_eq(v, info.sm_major * 10 + info.sm_minor);
	CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 50));
	ck_assert_int_eq(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 101),
			 CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_last_error(), "0..100"), "%s", cua_last_error());
	ck_assert_int_eq(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
						(int)info.max_shared_optin + 1),
			 CUA_EBAD_ARGUMENT);
	char want[64];
	snprintf(want, sizeof(want), "0..%u bytes", info.max_shared_optin);
	ck_assert_msg(strstr(cua_last_error(), want), "%s", cua_last_error());
	ck_assert_int_eq(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, -1),
			 CUA_EBAD_ARGUMENT);
	ck_assert_int_eq(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_NUM_REGS, 16), CUA_EBAD_ARGUMENT);
	ck_assert_msg(strstr(cua_last_error(), "cannot be set"), "%s", cua_last_error());
	int blocks = 0, fewer = 0;
	CK(cua_occupancy_max_active_blocks(c, f, 256, 0, &blocks));
	ck_assert_int_gt(blocks, 0);
	CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 96 << 10));
	CK(cua_occupancy_max_active_blocks(c, f, 256, 96 << 10, &fewer));
	ck_assert_int_lt(fewer, blocks);
	ck_assert_int_eq(cua_occupancy_max_active_blocks(c, f, 0, 0, &blocks), CUA_EBAD_ARGUMENT);
	ck_assert_int_eq(cua_occupancy_max_active_blocks(c, f, 1025, 0, &blocks), CUA_EBAD_ARGUMENT);
	cua_disconnect(c);
}
END_TEST

/* fill_u32(p, v, n) with the client's default stream (nothing set on the launch). */
static void
fill_default(cua_client *c, cua_function f, cua_deviceptr p, uint32_t v, uint64_t n)
{
	cua_launch *l = launch_1d(c, f, 1, 64);
	cua_launch_push_device_ptr(l, p);
	cua_launch_push_u32(l, v);
	cua_launch_push_u64(l, n);
	CK(cua_launch_submit(l, NULL));
}

#define ORDERED_N 512

/* A port from the runtime API: launches and copies with no stream named, the ordered stream as the client's
 * default. Launch i fills words i..N-1 with i, so word j ends as j only when every launch ran after those
 * before it; and a plain copy after a launch sees what the launch wrote, every time. On the pool neither holds. */
START_TEST(ordered_default_stream_keeps_a_ports_order)
{
	cua_client *c;
	setenv("CUASYNC_DEFAULT_STREAM", "ordered", 1);
	int rc = cua_connect(D.url, &c);
	unsetenv("CUASYNC_DEFAULT_STREAM");
	CK(rc);
	cua_function f = get_fn(c, load_kernels(c), "fill_u32");
	cua_deviceptr p;
	CK(cua_mem_alloc(c, 0, ORDERED_N * 4, &p));
	for (uint32_t i = 0; i < ORDERED_N; i++) {
		cua_launch *l = launch_1d(c, f, 1, 64);
		cua_launch_push_device_ptr(l, p + (uint64_t)i * 4);
		cua_launch_push_u32(l, i);
		cua_launch_push_u64(l, ORDERED_N - i);
		CK(cua_launch_submit(l, NULL)); /* fire and forget, pipelined: nothing waits between them */
	}
	uint32_t *v = malloc(ORDERED_N * 4);
	ck_assert_ptr_nonnull(v);
	CK(cua_memcpy_dtoh(c, v, p, ORDERED_N * 4)); /* no synchronize: the stream orders it after them */
	for (uint32_t j = 0; j < ORDERED_N; j++)
		ck_assert_msg(v[j] == j, "word %u is %u: a launch ran out of order", j, v[j]);
	for (uint32_t k = 1; k <= 100; k++) {
		fill_default(c, f, p, k, ORDERED_N);
		uint32_t w;
		CK(cua_memcpy_dtoh(c, &w, p + (ORDERED_N - 1) * 4, 4));
		ck_assert_msg(w == k, "round %u: a copy after the launch read %u", k, w);
	}
	CK(cua_synchronize(c)); /* and none of the fire-and-forget launches failed */
	CK(cua_stream_synchronize(c, CUA_STREAM_ORDERED));
	ck_assert_int_eq(cua_stream_destroy(c, CUA_STREAM_ORDERED), CUA_EBAD_ARGUMENT);
	CK(cua_set_default_stream(c, CUA_STREAM_POOL)); /* back to the pool: still works, unordered */
	fill_default(c, f, p, 7, ORDERED_N);
	CK(cua_synchronize(c));
	ck_assert_int_eq(cua_set_default_stream(c, CUA_STREAM_DEFAULT), CUA_EBAD_ARGUMENT);
	free(v);
	cua_disconnect(c);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("kernel_features");
	TCase *tc = tcase_create("kernel_features");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, global_written_by_htod_is_read_by_kernels);
	tcase_add_test(tc, global_is_refused_after_unload_and_to_others);
	tcase_add_test(tc, struct_of_32000_bytes_reaches_the_kernel);
	tcase_add_test(tc, pipelined_32000_byte_launches_are_served);
	tcase_add_test(tc, old_device_refuses_more_than_4096_bytes);
	tcase_add_test(tc, dynamic_shared_memory_needs_the_attribute);
	tcase_add_test(tc, attributes_are_read_set_and_range_checked);
	tcase_add_test(tc, ordered_default_stream_keeps_a_ports_order);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
