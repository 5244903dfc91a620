/*
 * test_core_launch.c — unit tests of the daemon's core (libcuadcore): launches and launch attributes (clusters,
 * priority, cooperative launch). The stub edge, the session states and the table-driven request case are in
 * core_fixture.h.
 */
#include "config.h"

#include "core_fixture.h"

BODY(b_launch_nowait, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32;
     b->launch = LAUNCH(e->fn0, 8, CUA_FLAG_NO_WAIT, 2))

BODY(b_launch_1arg, e->args[0] = DEVPTR(ADDR_A); b->launch = LAUNCH(e->fn0, 8, 0, 1))

BODY(b_launch_size, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT64; b->launch = LAUNCH(e->fn0, 8, 0, 2))

BODY(b_launch_wild, e->args[0] = DEVPTR(0x1000); e->args[1] = INT32; b->launch = LAUNCH(e->fn0, 8, 0, 2))

BODY(b_launch_otherdev, e->args[0] = DEVPTR(ADDR_B); e->args[1] = INT32; b->launch = LAUNCH(e->fn0, 8, 0, 2))

BODY(b_launch_grid0, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32; b->launch = LAUNCH(e->fn0, 0, 0, 2))

BODY(b_launch_pdl80, e->args[0] = DEVPTR(ADDR_B); e->args[1] = INT32; b->launch = LAUNCH(e->fn1, 8, CUA_LAUNCH_PDL, 2))

BODY(b_launch_pdl90, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32; b->launch = LAUNCH(e->fn0, 8, CUA_LAUNCH_PDL, 2))

BODY(b_launch_stale, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32; b->launch = LAUNCH(e->fn_stale, 8, 0, 2))

BODY(b_launch_kind, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32; b->launch = LAUNCH(e->st0, 8, 0, 2))

BODY(b_lx_cluster_ok, ARGS2; b->launch = LAUNCHX(e->fn0, 8, 2, 1, 0, 2, 4, 2, 1, 0, CUA_LAUNCH_FIELDS_CLUSTER))

BODY(b_lx_cluster_none, ARGS2; b->launch = LAUNCHX(e->fn0, 7, 1, 1, 0, 2, 0, 0, 0, 0, CUA_LAUNCH_FIELDS_CLUSTER))

BODY(b_lx_cluster_sm80, ARGS2B; b->launch = LAUNCHX(e->fn1, 8, 1, 1, 0, 2, 2, 1, 1, 0, CUA_LAUNCH_FIELDS_CLUSTER))

BODY(b_lx_cluster_zero, ARGS2; b->launch = LAUNCHX(e->fn0, 8, 1, 1, 0, 2, 0, 1, 1, 0, CUA_LAUNCH_FIELDS_CLUSTER))

BODY(b_lx_cluster_div, ARGS2; b->launch = LAUNCHX(e->fn0, 8, 3, 1, 0, 2, 1, 2, 1, 0, CUA_LAUNCH_FIELDS_CLUSTER))

BODY(b_lx_cluster_wrap, ARGS2;
     b->launch = LAUNCHX(e->fn0, 1u << 31, 1u << 31, 4, 0, 2, 1u << 31, 1u << 31, 4, 0, CUA_LAUNCH_FIELDS_CLUSTER))

BODY(b_lx_cluster_tail7, ARGS2; b->launch = LAUNCHX(e->fn0, 8, 1, 1, 0, 2, 0, 1, 1, 0, CUA_LAUNCH_FIELDS))

BODY(b_lx_prio_ok, ARGS2; b->launch = LAUNCHX(e->fn0, 8, 1, 1, 0, 2, 0, 0, 0, -5, CUA_LAUNCH_FIELDS_PRIORITY))

BODY(b_lx_prio_hi, ARGS2; b->launch = LAUNCHX(e->fn0, 8, 1, 1, 0, 2, 0, 0, 0, 1, CUA_LAUNCH_FIELDS_PRIORITY))

BODY(b_lx_prio_tail8, ARGS2; b->launch = LAUNCHX(e->fn0, 8, 1, 1, 0, 2, 0, 0, 0, 99, CUA_LAUNCH_FIELDS_CLUSTER))

BODY(b_lx_coop, ARGS2; b->launch = LAUNCHX(e->fn0, 8, 1, 1, CUA_LAUNCH_COOPERATIVE, 2, 0, 0, 0, 0, CUA_LAUNCH_FIELDS))

BODY(b_setattr_np,
     b->func_attribute = (struct cua_req_func_attribute){e->fn0, CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1})

BODY(b_setattr_np2,
     b->func_attribute = (struct cua_req_func_attribute){e->fn0, CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 2})

BODY(b_setattr_np80,
     b->func_attribute = (struct cua_req_func_attribute){e->fn1, CUA_FATTR_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1})

BODY(b_setattr_req17, b->func_attribute = (struct cua_req_func_attribute){e->fn0, CUA_FATTR_REQUIRED_CLUSTER_DEPTH, 17})

BODY(b_setattr_sched,
     b->func_attribute = (struct cua_req_func_attribute){e->fn0, CUA_FATTR_CLUSTER_SCHEDULING_POLICY, 1})

static const char pdl_msg[] = "programmatic dependent launch requires sm_90 or newer; target sm_80";

/* ------------------------------------------------------------------ the cases */

static const struct ccase cases[] = {
	/* launch attributes (issue 13): what the front-end checks; the worker checks the rest (launch_attr.c) */
	{"launch in clusters of 4x2x1 queues", setup_std, CUA_OP_LAUNCH, 0, b_lx_cluster_ok, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1},
	{"cluster [0, 0, 0] is no cluster, whatever the grid", setup_std, CUA_OP_LAUNCH, 0, b_lx_cluster_none,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"a cluster field not sent counts for nothing", setup_std, CUA_OP_LAUNCH, 0, b_lx_cluster_tail7,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"cluster on sm_80", setup_std, CUA_OP_LAUNCH, 0, b_lx_cluster_sm80, .status = CUA_EUNSUPPORTED,
	 .msg = "thread block clusters require sm_90 or newer; target sm_80", .exact = true, .outcome = ANSWERED},
	{"cluster with a zero dimension", setup_std, CUA_OP_LAUNCH, 0, b_lx_cluster_zero, .status = CUA_EBAD_ARGUMENT,
	 .msg = "cluster 0x1x1: every cluster dimension must be at least 1", .outcome = ANSWERED},
	{"grid not a multiple of the cluster", setup_std, CUA_OP_LAUNCH, 0, b_lx_cluster_div,
	 .status = CUA_EBAD_ARGUMENT, .msg = "grid 8x3x1 is not a multiple of cluster 1x2x1 (dimension y: 3 % 2 = 1)",
	 .outcome = ANSWERED},
	{"a cluster whose 64-bit product wraps to 0", setup_std, CUA_OP_LAUNCH, 0, b_lx_cluster_wrap,
	 .status = CUA_EBAD_ARGUMENT, .msg = "cluster 2147483648x2147483648x4 has more than 16 blocks",
	 .outcome = ANSWERED},
	{"launch priority -5 queues", setup_std, CUA_OP_LAUNCH, 0, b_lx_prio_ok, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 1},
	{"launch priority above the least", setup_std, CUA_OP_LAUNCH, 0, b_lx_prio_hi, .status = CUA_EBAD_ARGUMENT,
	 .msg = "launch priority 1 is out of range: device 0 allows -5 (highest) .. 0 (lowest)", .exact = true,
	 .outcome = ANSWERED},
	{"a priority field not sent counts for nothing", setup_std, CUA_OP_LAUNCH, 0, b_lx_prio_tail8, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1},
	{"cooperative launch queues (co-residency is the worker's)", setup_std, CUA_OP_LAUNCH, 0, b_lx_coop,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"set NON_PORTABLE_CLUSTER_SIZE_ALLOWED queues", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0, b_setattr_np,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 2", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0, b_setattr_np2,
	 .status = CUA_EBAD_ARGUMENT, .msg = "NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 2 is out of range: 0 or 1",
	 .outcome = ANSWERED},
	{"cluster attribute on sm_80", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0, b_setattr_np80,
	 .status = CUA_EUNSUPPORTED, .msg = "thread block clusters require sm_90 or newer; target sm_80",
	 .outcome = ANSWERED},
	{"REQUIRED_CLUSTER_DEPTH = 17", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0, b_setattr_req17,
	 .status = CUA_EBAD_ARGUMENT, .msg = "REQUIRED_CLUSTER_DEPTH = 17 is out of range: 0..16 blocks",
	 .outcome = ANSWERED},
	{"cluster scheduling policy cannot be set", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0, b_setattr_sched,
	 .status = CUA_EBAD_ARGUMENT, .msg = "(CLUSTER_SCHEDULING_POLICY_PREFERENCE) cannot be set",
	 .outcome = ANSWERED},

	/* launches */
	{"launch queues", setup_std, CUA_OP_LAUNCH, 0, b_launch_ok, .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"fire-and-forget launch is answered and queued", setup_std, CUA_OP_LAUNCH, 0, b_launch_nowait,
	 .status = CUA_OK, .outcome = ANSWERED | QUEUED, .ncmds = 1},
	{"launch: wrong argument count", setup_std, CUA_OP_LAUNCH, 0, b_launch_1arg, .status = CUA_EBAD_ARGUMENT,
	 .msg = "the kernel takes 2 arguments, the launch has 1", .outcome = ANSWERED, .check = chk_no_queue},
	{"launch: wrong argument size", setup_std, CUA_OP_LAUNCH, 0, b_launch_size, .status = CUA_EBAD_ARGUMENT,
	 .msg = "argument 1 is 8 bytes, the kernel's parameter 1 is 4 bytes", .outcome = ANSWERED},
	{"launch: pointer outside allocations", setup_std, CUA_OP_LAUNCH, 0, b_launch_wild, .status = CUA_EBAD_ARGUMENT,
	 .msg = "argument 0: device pointer 0x1000 (1 bytes) is not inside an allocation of this session",
	 .outcome = ANSWERED},
	{"launch: pointer to another device", setup_std, CUA_OP_LAUNCH, 0, b_launch_otherdev,
	 .status = CUA_EBAD_ARGUMENT, .msg = "argument 0 points to device 1, the kernel runs on 0",
	 .outcome = ANSWERED},
	{"launch: zero grid", setup_std, CUA_OP_LAUNCH, 0, b_launch_grid0, .status = CUA_EBAD_ARGUMENT,
	 .msg = "grid and block dimensions must be at least 1 (got grid 0x1x1, block 32x1x1)", .outcome = ANSWERED},
	{"launch: PDL on sm_80", setup_std, CUA_OP_LAUNCH, 0, b_launch_pdl80, .status = CUA_EPDL_UNSUPPORTED,
	 .msg = pdl_msg, .exact = true, .outcome = ANSWERED},
	{"launch: PDL on sm_90 queues", setup_std, CUA_OP_LAUNCH, 0, b_launch_pdl90, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1},
	{"launch: stale function handle", setup_restarted, CUA_OP_LAUNCH, 0, b_launch_stale,
	 .status = CUA_ECONTEXT_LOST, .msg = "belongs to a GPU context that was lost (device 0 restarted); recreate it",
	 .outcome = ANSWERED},
	{"launch: a stream handle as the function", setup_std, CUA_OP_LAUNCH, 0, b_launch_kind,
	 .status = CUA_ENOT_FOUND, .msg = "is not an object of this session", .outcome = ANSWERED},
};

#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

int
main(void)
{
	return core_run(core_cases_suite("core-launch", cases, NCASES, NULL));
}
