/* Launch attributes (issue 13): thread-block clusters, cooperative launches with a grid-wide barrier, a launch's
 * own priority, and the cluster function attributes, through libcuasync against the real daemon: on the
 * emulated device by default, on the GPU with CUA_TEST_BACKEND=cuda (tests/gpu/run.sh), where the kernels come
 * from tests/kernels/feature_kernels.fatbin (coop_reduce uses cooperative_groups' grid.sync(), cluster_rank
 * distributed shared memory). Results are checked against the host's; each refusal by its status and numbers. */
#include "config.h"

#include "harness.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static const char emu_image[] = "cuasync-emu-module\ncoop_reduce\ncluster_rank\ncopy_u32\n";

#define EXPECT_REFUSED(l, status, ...)                                                                                 \
	do {                                                                                                           \
		char msg_[1024];                                                                                       \
		int r_ = submit_status((l), msg_, sizeof(msg_));                                                       \
		ck_assert_msg(r_ == (status), "status %s, want %s: %s", cua_strerror_name(r_),                         \
			      cua_strerror_name(status), msg_);                                                        \
		const char *want_[] = {__VA_ARGS__, NULL};                                                             \
		for (int i_ = 0; want_[i_]; i_++)                                                                      \
			ck_assert_msg(strstr(msg_, want_[i_]) != NULL, "'%s' not in: %s", want_[i_], msg_);            \
	} while (0)

/* ------------------------------------------------------------------ cooperative */

#define RED_N 100003u
#define RED_BLOCK 256u

struct reduce {
	cua_client *c;
	cua_function f;
	cua_deviceptr in, partial, out;
	uint32_t host[RED_N];
};

static void
reduce_setup(struct reduce *R, cua_client *c, unsigned max_blocks)
{
	R->c = c;
	R->f = get_fn(c, load_features(c, emu_image), "coop_reduce");
	for (uint32_t i = 0; i < RED_N; i++)
		R->host[i] = i * 2654435761u ^ 0x9e3779b9u;
	CK(cua_mem_alloc(c, 0, sizeof(R->host), &R->in));
	CK(cua_mem_alloc(c, 0, (size_t)max_blocks * 8, &R->partial));
	CK(cua_mem_alloc(c, 0, 8, &R->out));
	CK(cua_memcpy_htod(c, R->in, R->host, sizeof(R->host)));
}

static cua_launch *
reduce_launch(struct reduce *R, unsigned blocks, bool cooperative)
{
	cua_launch *l = launch_1d(R->c, R->f, blocks, RED_BLOCK);
	cua_launch_cooperative(l, cooperative);
	cua_launch_push_device_ptr(l, R->in);
	cua_launch_push_u64(l, RED_N);
	cua_launch_push_device_ptr(l, R->partial);
	cua_launch_push_device_ptr(l, R->out);
	return l;
}

/* The sum and each block's partial sum, as the kernel's grid-stride loop splits the input. */
static void
reduce_check(struct reduce *R, unsigned blocks)
{
	uint64_t T = (uint64_t)blocks * RED_BLOCK, total = 0, got = 0;
	uint64_t *want = calloc(blocks, 8), *part = calloc(blocks, 8);
	ck_assert_ptr_nonnull(want);
	ck_assert_ptr_nonnull(part);
	for (uint64_t i = 0; i < RED_N; i++) {
		want[(i % T) / RED_BLOCK] += R->host[i];
		total += R->host[i];
	}
	CK(cua_memcpy_dtoh(R->c, &got, R->out, 8));
	CK(cua_memcpy_dtoh(R->c, part, R->partial, (size_t)blocks * 8));
	ck_assert_uint_eq(got, total);
	ck_assert_mem_eq(part, want, (size_t)blocks * 8);
	free(want);
	free(part);
}

START_TEST(cooperative_reduce_synchronises_the_grid)
{
	cua_client *c = connect_to(&D);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_int_eq(info.cooperative_launch, 1);
	static struct reduce R;
	reduce_setup(&R, c, 8);
	launch_and_wait(reduce_launch(&R, 8, true));
	reduce_check(&R, 8);
	cua_disconnect(c);
}
END_TEST

/* A grid one block larger than can be co-resident is refused with the numbers; exactly that many runs. */
START_TEST(cooperative_grid_too_large_is_refused_with_the_numbers)
{
	cua_client *c = connect_to(&D), *other = connect_to(&D);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	static struct reduce R;
	cua_function f = get_fn(c, load_features(c, emu_image), "coop_reduce");
	int per_sm = 0;
	CK(cua_occupancy_max_active_blocks(c, f, RED_BLOCK, 0, &per_sm));
	ck_assert_int_gt(per_sm, 0);
	unsigned max = (unsigned)per_sm * (unsigned)info.multiprocessors;
	reduce_setup(&R, c, max + 1);
	char want[256], want2[64];
	snprintf(want, sizeof(want), "cooperative launch of %u blocks cannot be co-resident: at most %d blocks",
		 max + 1, per_sm);
	snprintf(want2, sizeof(want2), "x %d multiprocessors = %u", info.multiprocessors, max);
	EXPECT_REFUSED(reduce_launch(&R, max + 1, true), CUA_EBAD_ARGUMENT, want, want2);
	/* a well-behaved client is served meanwhile, and so is this one */
	static struct reduce O;
	reduce_setup(&O, other, 4);
	launch_and_wait(reduce_launch(&O, 4, true));
	reduce_check(&O, 4);
	launch_and_wait(reduce_launch(&R, max, true));
	reduce_check(&R, max);
	cua_disconnect(other);
	cua_disconnect(c);
}
END_TEST

/* A grid of 2^22 x 2^21 x 2^21 blocks is 2^64 blocks: counted in 64 bits it wraps to 0, which "fits" any
 * device; it must be refused as too large, and the worker must survive to run the next cooperative launch. */
START_TEST(cooperative_grid_whose_block_count_wraps_is_refused)
{
	cua_client *c = connect_to(&D);
	static struct reduce R;
	reduce_setup(&R, c, 8);
	cua_launch *l = reduce_launch(&R, 1, true);
	CK(cua_launch_set_config(l, (cua_launch_config){{1u << 22, 1u << 21, 1u << 21}, {RED_BLOCK, 1, 1}, 0}));
	EXPECT_REFUSED(l, CUA_EBAD_ARGUMENT, "cannot be co-resident", "more than 2^64 blocks");
	launch_and_wait(reduce_launch(&R, 8, true));
	reduce_check(&R, 8);
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ clusters */

static cua_launch *
rank_launch(cua_client *c, cua_function f, cua_deviceptr out, unsigned gx, unsigned gy, const unsigned cl[3])
{
	cua_launch *l = cua_launch_new(c, f);
	cua_launch_set_config(l, (cua_launch_config){{gx, gy, 1}, {32, 1, 1}, 0});
	if (cl)
		cua_launch_set_cluster_dims(l, cl[0], cl[1], cl[2]);
	cua_launch_push_device_ptr(l, out);
	return l;
}

/* Every block's (rank, cluster size, next block's rank) against a cluster of cx × cy (1 × 1: none). */
static void
rank_check(cua_client *c, cua_deviceptr out, unsigned gx, unsigned gy, unsigned cx, unsigned cy)
{
	uint32_t got[3 * 64];
	ck_assert_uint_le(gx * gy, 64);
	CK(cua_memcpy_dtoh(c, got, out, (size_t)gx * gy * 12));
	for (unsigned y = 0; y < gy; y++)
		for (unsigned x = 0; x < gx; x++) {
			unsigned b = x + y * gx, rank = x % cx + (y % cy) * cx, n = cx * cy;
			ck_assert_msg(got[3 * b] == rank && got[3 * b + 1] == n && got[3 * b + 2] == (rank + 1) % n,
				      "block (%u, %u): rank %u of %u, peer %u; want %u of %u, peer %u", x, y,
				      got[3 * b], got[3 * b + 1], got[3 * b + 2], rank, n, (rank + 1) % n);
		}
}

START_TEST(cluster_ranks_follow_the_cluster_dims)
{
	cua_client *c = connect_to(&D);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_int_eq(info.cluster_launch, 1);
	cua_function f = get_fn(c, load_features(c, emu_image), "cluster_rank");
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, 64 * 12, &out));
	launch_and_wait(rank_launch(c, f, out, 8, 2, (const unsigned[3]){2, 2, 1}));
	rank_check(c, out, 8, 2, 2, 2);
	launch_and_wait(rank_launch(c, f, out, 8, 2, NULL)); /* no cluster: clusters of one */
	rank_check(c, out, 8, 2, 1, 1);
	launch_and_wait(rank_launch(c, f, out, 8, 1, (const unsigned[3]){8, 1, 1})); /* the portable maximum */
	rank_check(c, out, 8, 1, 8, 1);
	int v = -1;
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, &v));
	ck_assert_int_eq(v, 0);
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, &v));
	ck_assert_int_eq(v, 0);
	cua_disconnect(c);
}
END_TEST

/* Over 8 blocks needs NON_PORTABLE_CLUSTER_SIZE_ALLOWED; then 16 run. */
START_TEST(non_portable_cluster_needs_the_attribute)
{
	cua_client *c = connect_to(&D);
	cua_function f = get_fn(c, load_features(c, emu_image), "cluster_rank");
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, 64 * 12, &out));
	int v = -1;
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, &v));
	ck_assert_int_eq(v, 0);
	EXPECT_REFUSED(rank_launch(c, f, out, 16, 1, (const unsigned[3]){16, 1, 1}), CUA_EBAD_ARGUMENT,
		       "cluster 16x1x1 has 16 blocks, more than the portable 8", "NON_PORTABLE_CLUSTER_SIZE_ALLOWED");
	CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1));
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, &v));
	ck_assert_int_eq(v, 1);
	launch_and_wait(rank_launch(c, f, out, 16, 1, (const unsigned[3]){16, 1, 1}));
	rank_check(c, out, 16, 1, 16, 1);
	cua_disconnect(c);
}
END_TEST

/* REQUIRED_CLUSTER_*: a launch's other cluster is refused, the same one runs, partly set is refused. */
START_TEST(required_cluster_dims_are_enforced)
{
	cua_client *c = connect_to(&D);
	cua_function f = get_fn(c, load_features(c, emu_image), "cluster_rank");
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, 64 * 12, &out));
	CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 2));
	EXPECT_REFUSED(rank_launch(c, f, out, 8, 1, (const unsigned[3]){2, 1, 1}), CUA_EBAD_ARGUMENT,
		       "REQUIRED_CLUSTER_WIDTH/HEIGHT/DEPTH are 2x0x0: set all three or none");
	CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, 1));
	CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, 1));
	int v = -1;
	CK(cua_func_get_attribute(c, f, CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, &v));
	ck_assert_int_eq(v, 2);
	EXPECT_REFUSED(rank_launch(c, f, out, 8, 1, (const unsigned[3]){4, 1, 1}), CUA_EBAD_ARGUMENT,
		       "cluster 4x1x1 differs from the kernel's required cluster 2x1x1");
	launch_and_wait(rank_launch(c, f, out, 8, 1, (const unsigned[3]){2, 1, 1}));
	rank_check(c, out, 8, 1, 2, 1);
	if (!on_gpu()) { /* emulated: without a cluster the required one holds (CUDA's rule for compiled dims) */
		launch_and_wait(rank_launch(c, f, out, 8, 1, NULL));
		rank_check(c, out, 8, 1, 2, 1);
		/* each dimension within 16, the product not: 16 x 16 x 16 = 4096 blocks in one cluster */
		CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 16));
		CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, 16));
		CK(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, 16));
		cua_launch *l = rank_launch(c, f, out, 16, 16, NULL);
		CK(cua_launch_set_config(l, (cua_launch_config){{16, 16, 16}, {32, 1, 1}, 0}));
		EXPECT_REFUSED(l, CUA_EBAD_ARGUMENT, "required cluster 16x16x16 has 4096 blocks, more than 8");
	}
	cua_disconnect(c);
}
END_TEST

/* Hostile and careless clusters, each refused with its numbers; the session and another one keep working. */
START_TEST(bad_clusters_are_refused_with_the_numbers)
{
	cua_client *c = connect_to(&D), *other = connect_to(&D);
	cua_function f = get_fn(c, load_features(c, emu_image), "cluster_rank");
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, 64 * 12, &out));
	EXPECT_REFUSED(rank_launch(c, f, out, 8, 2, (const unsigned[3]){2, 0, 1}), CUA_EBAD_ARGUMENT,
		       "cluster 2x0x1: every cluster dimension must be at least 1");
	EXPECT_REFUSED(rank_launch(c, f, out, 6, 1, (const unsigned[3]){4, 1, 1}), CUA_EBAD_ARGUMENT,
		       "grid 6x1x1 is not a multiple of cluster 4x1x1 (dimension x: 6 % 4 = 2)");
	EXPECT_REFUSED(rank_launch(c, f, out, 17, 1, (const unsigned[3]){17, 1, 1}), CUA_EBAD_ARGUMENT,
		       "cluster 17x1x1 has 17 blocks; a cluster has at most 16");
	EXPECT_REFUSED(rank_launch(c, f, out, 1, 1, (const unsigned[3]){4294967295u, 4294967295u, 4294967295u}),
		       CUA_EBAD_ARGUMENT, "has more than 16 blocks; a cluster has at most 16");
	/* 2^31 x 2^31 x 4 blocks is 0 in 64-bit arithmetic: still refused (the worker would divide by it) */
	cua_launch *l = cua_launch_new(c, f);
	cua_launch_set_config(l, (cua_launch_config){{1u << 31, 1u << 31, 4}, {32, 1, 1}, 0});
	cua_launch_set_cluster_dims(l, 1u << 31, 1u << 31, 4);
	cua_launch_push_device_ptr(l, out);
	EXPECT_REFUSED(l, CUA_EBAD_ARGUMENT, "cluster 2147483648x2147483648x4 has more than 16 blocks");
	int bad[][2] = {{CUA_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 2},
			{CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 17},
			{CUA_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, -1}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(cua_func_set_attribute(c, f, (cua_func_attribute)bad[i][0], bad[i][1]),
				 CUA_EBAD_ARGUMENT);
		ck_assert_ptr_nonnull(strstr(cua_last_error(), "out of range"));
	}
	ck_assert_int_eq(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, 1),
			 CUA_EBAD_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(cua_last_error(), "cannot be set"));
	cua_function of = get_fn(other, load_features(other, emu_image), "cluster_rank");
	cua_deviceptr oout;
	CK(cua_mem_alloc(other, 0, 64 * 12, &oout));
	launch_and_wait(rank_launch(other, of, oout, 4, 1, (const unsigned[3]){4, 1, 1}));
	rank_check(other, oout, 4, 1, 4, 1);
	launch_and_wait(rank_launch(c, f, out, 4, 1, (const unsigned[3]){2, 1, 1}));
	rank_check(c, out, 4, 1, 2, 1);
	cua_disconnect(other);
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ priority */

START_TEST(launch_priority_is_range_checked)
{
	cua_client *c = connect_to(&D);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_int_le(info.priority_greatest, info.priority_least);
	cua_function f = get_fn(c, load_features(c, emu_image), "cluster_rank");
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, 64 * 12, &out));
	int ok[] = {info.priority_greatest, info.priority_least};
	for (int i = 0; i < 2; i++) {
		cua_launch *l = rank_launch(c, f, out, 4, 1, NULL);
		cua_launch_set_priority(l, ok[i]);
		launch_and_wait(l);
	}
	int bad[] = {info.priority_greatest - 1, info.priority_least + 1, -2147483647 - 1, 2147483647};
	for (int i = 0; i < 4; i++) {
		char want[128];
		snprintf(want, sizeof(want), "launch priority %d is out of range: device 0 allows %d (highest) .. %d",
			 bad[i], info.priority_greatest, info.priority_least);
		cua_launch *l = rank_launch(c, f, out, 4, 1, NULL);
		cua_launch_set_priority(l, bad[i]);
		EXPECT_REFUSED(l, CUA_EBAD_ARGUMENT, want);
	}
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ batches */

/* Attributes travel in batch items too; a refused item does not stop the others. */
START_TEST(batch_items_carry_attributes)
{
	cua_client *c = connect_to(&D);
	static struct reduce R;
	reduce_setup(&R, c, 4);
	cua_function f = get_fn(c, load_features(c, emu_image), "cluster_rank");
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, 64 * 12, &out));
	cua_batch *b = cua_batch_new(c);
	CK(cua_batch_add_launch(b, reduce_launch(&R, 4, true)));
	CK(cua_batch_add_launch(b, rank_launch(c, f, out, 6, 1, (const unsigned[3]){4, 1, 1})));
	cua_launch *l = rank_launch(c, f, out, 8, 2, (const unsigned[3]){2, 2, 1});
	cua_launch_set_priority(l, 1);
	CK(cua_batch_add_launch(b, l));
	CK(cua_batch_add_launch(b, rank_launch(c, f, out, 8, 2, (const unsigned[3]){4, 2, 1})));
	cua_future *fut;
	CK(cua_batch_submit(b, &fut));
	cua_future_wait(fut, -1);
	ck_assert_uint_eq(cua_future_items(fut), 4);
	const char *m = NULL;
	ck_assert_int_eq(cua_future_item(fut, 0, &m), CUA_OK);
	ck_assert_int_eq(cua_future_item(fut, 1, &m), CUA_EBAD_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(m, "not a multiple of cluster 4x1x1"));
	ck_assert_int_eq(cua_future_item(fut, 2, &m), CUA_EBAD_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(m, "launch priority 1 is out of range"));
	ck_assert_int_eq(cua_future_item(fut, 3, &m), CUA_OK);
	cua_future_free(fut);
	reduce_check(&R, 4);
	rank_check(c, out, 8, 2, 4, 2);
	cua_disconnect(c);
}
END_TEST

/* ------------------------------------------------------------------ older devices (emulated) */

START_TEST(sm80_has_no_clusters_sm50_no_cooperative_launch)
{
	if (on_gpu())
		return; /* the H200 is sm_90 */
	struct daemon old;
	const char *const args[] = {"--emu-sm", "80", NULL};
	daemon_start(&old, args);
	cua_client *c = connect_to(&old);
	cua_device_info info;
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_int_eq(info.cluster_launch, 0);
	ck_assert_int_eq(info.cooperative_launch, 1);
	cua_function f = get_fn(c, load_features(c, emu_image), "cluster_rank");
	cua_deviceptr out;
	CK(cua_mem_alloc(c, 0, 64 * 12, &out));
	EXPECT_REFUSED(rank_launch(c, f, out, 4, 1, (const unsigned[3]){2, 1, 1}), CUA_EUNSUPPORTED,
		       "thread block clusters require sm_90 or newer; target sm_80");
	ck_assert_int_eq(cua_func_set_attribute(c, f, CUA_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
			 CUA_EUNSUPPORTED);
	launch_and_wait(rank_launch(c, f, out, 4, 1, NULL)); /* without a cluster it runs */
	rank_check(c, out, 4, 1, 1, 1);
	cua_disconnect(c);
	daemon_stop(&old);

	const char *const args50[] = {"--emu-sm", "50", NULL};
	daemon_start(&old, args50);
	c = connect_to(&old);
	CK(cua_device_get_info(c, 0, &info));
	ck_assert_int_eq(info.cooperative_launch, 0);
	static struct reduce R;
	reduce_setup(&R, c, 4);
	EXPECT_REFUSED(reduce_launch(&R, 4, true), CUA_EUNSUPPORTED,
		       "cooperative launch requires sm_60 or newer; target sm_50");
	cua_disconnect(c);
	daemon_stop(&old);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("launch_attrs");
	TCase *tc = tcase_create("launch_attrs");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, up, down);
	tcase_add_test(tc, cooperative_reduce_synchronises_the_grid);
	tcase_add_test(tc, cooperative_grid_too_large_is_refused_with_the_numbers);
	tcase_add_test(tc, cooperative_grid_whose_block_count_wraps_is_refused);
	tcase_add_test(tc, cluster_ranks_follow_the_cluster_dims);
	tcase_add_test(tc, non_portable_cluster_needs_the_attribute);
	tcase_add_test(tc, required_cluster_dims_are_enforced);
	tcase_add_test(tc, bad_clusters_are_refused_with_the_numbers);
	tcase_add_test(tc, launch_priority_is_range_checked);
	tcase_add_test(tc, batch_items_carry_attributes);
	tcase_add_test(tc, sm80_has_no_clusters_sm50_no_cooperative_launch);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
