/*
 * test_core_kfeat.c — unit tests of the daemon's core (libcuadcore): module globals, kernel parameter bytes, function
 * attributes and occupancy. The stub edge, the session states and the table-driven request case are in core_fixture.h.
 */
#include "config.h"

#include "core_fixture.h"

#define ADDR_G 0x7f0000400000ull /* dev 0: mod0's 1024-byte global, looked up (setup_global) */

/* setup_std, and the session looked up a 1024-byte global of mod0 at ADDR_G. */
static void
setup_global(struct env *e)
{
	setup_std(e);
	ck_assert_int_eq(do_global_add(e->s, cua_handle_slot(e->mod0), ADDR_G, 1024), 0);
	ck_assert_int_eq(do_global_add(e->s, cua_handle_slot(e->mod0), ADDR_G, 1024), 0); /* looked up twice */
	ck_assert_uint_eq(e->s->nglobals, 1);
}

/* setup_global, and request seq 9 (not yet completed) unloads mod0. */
static void
setup_global_unloading(struct env *e)
{
	setup_global(e);
	e->s->slots[cua_handle_slot(e->mod0)].release = (struct release){5, 9};
}

/* setup_restarted, and the session had looked up a global of mod0 (now of the lost generation) at ADDR_G. */
static void
setup_global_stale(struct env *e)
{
	setup_restarted(e);
	ck_assert_int_eq(do_global_add(e->s, cua_handle_slot(e->mod0), ADDR_G, 1024), 0);
}

/* setup_global_stale, and the module loaded again in the new generation has its global at the same address. */
static void
setup_global_reused(struct env *e)
{
	setup_global_stale(e);
	uint32_t mod = e->s->slots[cua_handle_slot(e->fn0)].module_slot;
	ck_assert_int_eq(do_global_add(e->s, mod, ADDR_G, 1024), 0);
}

static uint8_t bytes4096[4096];

BODY(b_htod_g, b->memcpy_htod = (struct cua_req_memcpy_htod){ADDR_G + 1008, 0, {bytes16, 16}})

BODY(b_htod_g_past, b->memcpy_htod = (struct cua_req_memcpy_htod){ADDR_G + 1009, 0, {bytes16, 16}})

BODY(b_free_g, b->mem_free.ptr = ADDR_G)

BODY(b_launch_g, e->args[0] = DEVPTR(ADDR_G + 4); e->args[1] = INT32; b->launch = LAUNCH(e->fn0, 8, 0, 2))

BODY(b_get_global, b->module_get_global = (struct cua_req_module_get_global){e->mod0, {"g", 1}})

BODY(b_get_global_empty, b->module_get_global = (struct cua_req_module_get_global){e->mod0, {"", 0}})

BODY(b_launch_4104, e->args[0] = DEVPTR(ADDR_B); e->args[1] = (cua_wire_arg){CUA_ARG_BYTES, 0, {bytes4096, 4096}};
     b->launch = LAUNCH(e->fn1, 8, 0, 2))

BODY(b_getattr_regs, b->func_attribute = (struct cua_req_func_attribute){e->fn0, CUA_FATTR_NUM_REGS, 0})

BODY(b_setattr_regs, b->func_attribute = (struct cua_req_func_attribute){e->fn0, CUA_FATTR_NUM_REGS, 16})

BODY(b_setattr_dyn, b->func_attribute = (struct cua_req_func_attribute){e->fn0, CUA_FATTR_MAX_DYNAMIC_SHARED, 65536})

BODY(b_setattr_dyn_big,
     b->func_attribute = (struct cua_req_func_attribute){e->fn0, CUA_FATTR_MAX_DYNAMIC_SHARED, 232449})

BODY(b_setattr_carve, b->func_attribute = (struct cua_req_func_attribute){e->fn0, CUA_FATTR_PREFERRED_CARVEOUT, -2})

BODY(b_setattr_stream, b->func_attribute = (struct cua_req_func_attribute){e->st0, CUA_FATTR_PREFERRED_CARVEOUT, 0})

BODY(b_occ_ok, b->occupancy = (struct cua_req_occupancy){e->fn0, 256, 0})

BODY(b_occ_block0, b->occupancy = (struct cua_req_occupancy){e->fn0, 0, 0})

BODY(b_occ_smem, b->occupancy = (struct cua_req_occupancy){e->fn0, 32, 232449})

/* ------------------------------------------------------------------ the cases */

static const struct ccase cases[] = {
	/* module globals, kernel parameter bytes, function attributes (issue 13) */
	{"htod inside a module global queues", setup_global, CUA_OP_MEMCPY_HTOD, 0, b_htod_g, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1},
	{"htod past a module global's end", setup_global, CUA_OP_MEMCPY_HTOD, 0, b_htod_g_past,
	 .status = CUA_EBAD_ARGUMENT, .msg = "runs past the end of its 1024-byte module global", .outcome = ANSWERED},
	{"launch with a pointer into a module global queues", setup_global, CUA_OP_LAUNCH, 0, b_launch_g,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"mem_free of a module global", setup_global, CUA_OP_MEM_FREE, 0, b_free_g, .status = CUA_EBAD_ARGUMENT,
	 .msg = "is in a module global", .outcome = ANSWERED},
	{"a global of a module being unloaded", setup_global_unloading, CUA_OP_MEMCPY_HTOD, 0, b_htod_g,
	 .status = CUA_ENOT_FOUND, .msg = "in a global of a module unloaded by request seq 9", .outcome = ANSWERED},
	{"a global never looked up is no memory of the session", setup_std, CUA_OP_MEMCPY_HTOD, 0, b_htod_g,
	 .status = CUA_EBAD_ARGUMENT, .msg = "not inside an allocation of this session", .outcome = ANSWERED},
	{"a global of a lost context", setup_global_stale, CUA_OP_MEMCPY_HTOD, 0, b_htod_g, .status = CUA_ECONTEXT_LOST,
	 .msg = "is in a module global of a lost GPU context", .outcome = ANSWERED},
	{"a live global at the address of a lost one wins", setup_global_reused, CUA_OP_MEMCPY_HTOD, 0, b_htod_g,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"get_global queues", setup_std, CUA_OP_MODULE_GET_GLOBAL, 0, b_get_global, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 1},
	{"get_global: empty name", setup_std, CUA_OP_MODULE_GET_GLOBAL, 0, b_get_global_empty,
	 .status = CUA_EBAD_ARGUMENT, .msg = "global name must be non-empty", .outcome = ANSWERED},
	{"launch: more argument bytes than the device passes", setup_std, CUA_OP_LAUNCH, 0, b_launch_4104,
	 .status = CUA_EBAD_ARGUMENT,
	 .msg = "arguments take 4104 bytes, more than the 4096 bytes a launch may pass on device 1 (sm_80)",
	 .exact = true, .outcome = ANSWERED},
	{"get_attribute queues", setup_std, CUA_OP_FUNC_GET_ATTRIBUTE, 0, b_getattr_regs, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1},
	{"set_attribute of a read-only attribute", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0, b_setattr_regs,
	 .status = CUA_EBAD_ARGUMENT, .msg = "attribute 4 (NUM_REGS) cannot be set", .outcome = ANSWERED},
	{"set_attribute: 64 KiB of dynamic shared memory queues", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0,
	 b_setattr_dyn, .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"set_attribute: more dynamic shared memory than the device", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0,
	 b_setattr_dyn_big, .status = CUA_EBAD_ARGUMENT,
	 .msg = "MAX_DYNAMIC_SHARED_SIZE_BYTES = 232449 is out of range: device 0 allows 0..232448 bytes",
	 .outcome = ANSWERED},
	{"set_attribute: carveout -2", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0, b_setattr_carve,
	 .status = CUA_EBAD_ARGUMENT, .msg = "a percentage 0..100, or -1", .outcome = ANSWERED},
	{"set_attribute of a stream handle", setup_std, CUA_OP_FUNC_SET_ATTRIBUTE, 0, b_setattr_stream,
	 .status = CUA_ENOT_FOUND, .msg = "function handle", .outcome = ANSWERED},
	{"occupancy queues", setup_std, CUA_OP_OCCUPANCY, 0, b_occ_ok, .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"occupancy: block of 0 threads", setup_std, CUA_OP_OCCUPANCY, 0, b_occ_block0, .status = CUA_EBAD_ARGUMENT,
	 .msg = "block_size 0 is out of range (1..1024 threads)", .outcome = ANSWERED},
	{"occupancy: more shared memory than the device", setup_std, CUA_OP_OCCUPANCY, 0, b_occ_smem,
	 .status = CUA_EBAD_ARGUMENT, .msg = "allows 0..232448 bytes", .outcome = ANSWERED},
};

#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

int
main(void)
{
	return core_run(core_cases_suite("core-kfeat", cases, NCASES, NULL));
}
