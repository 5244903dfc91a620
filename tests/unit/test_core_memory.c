/*
 * test_core_memory.c — unit tests of the daemon's core (libcuadcore): memory, copies and batches. The stub edge, the
 * session states and the table-driven request case are in core_fixture.h.
 */
#include "config.h"

#include "core_fixture.h"

#include <string.h>

static void
setup_mem_quota(struct env *e)
{
	setup_std(e);
	e->fe.cfg.session_mem = 1u << 20; /* 2 × 4096 in use */
}

BODY(b_alloc_dev5, b->mem_alloc = (struct cua_req_mem_alloc){5, 1024})

BODY(b_alloc_1m, b->mem_alloc = (struct cua_req_mem_alloc){0, 1u << 20})

BODY(b_alloc_0, b->mem_alloc = (struct cua_req_mem_alloc){0, 0})

BODY(b_free_x, b->mem_free.ptr = ADDR_X)

BODY(b_free_a16, b->mem_free.ptr = ADDR_A + 16)

BODY(b_dtoh_cross, b->memcpy_dtoh = (struct cua_req_memcpy_dtoh){ADDR_A + 4000, 200, 0})

BODY(b_htod_s, b->memcpy_htod = (struct cua_req_memcpy_htod){ADDR_S + 64, 0, {bytes16, 16}})

BODY(b_dtod_ab, b->memcpy_dtod = (struct cua_req_memcpy_dtod){ADDR_A, ADDR_B, 16, 0})

BODY(b_memset_w3, b->memset = (struct cua_req_memset){ADDR_A, 0, 3, 16, 0})

BODY(b_memset_st1, b->memset = (struct cua_req_memset){ADDR_A, 0, 4, 16, e->st1})

BODY(b_batch_bad_good, e->items[0] = (cua_batch_item){.kind = CUA_OP_MEMSET, .u.memset = {ADDR_A, 0, 3, 16, 0}};
     e->items[1] = (cua_batch_item){.kind = CUA_OP_MEMSET, .u.memset = {ADDR_A, 0xab, 1, 16, 0}};
     b->batch = (struct cua_req_batch){0, e->items, 2})

BODY(b_batch_bad_bad, e->items[0] = (cua_batch_item){.kind = CUA_OP_MEMSET, .u.memset = {ADDR_A, 0, 3, 16, 0}};
     e->items[1] = (cua_batch_item){.kind = CUA_OP_MEMCPY_DTOD, .u.dtod = {ADDR_A, 0x1000, 16, 0}};
     b->batch = (struct cua_req_batch){0, e->items, 2})

BODY(b_batch_3, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32;
     e->items[0] = (cua_batch_item){.kind = CUA_OP_MEMCPY_HTOD, .u.htod = {ADDR_A, 0, {bytes16, 16}}};
     e->items[1] = (cua_batch_item){.kind = CUA_OP_LAUNCH, .u.launch = LAUNCH(e->fn0, 8, 0, 2)};
     e->items[2] = (cua_batch_item){.kind = CUA_OP_MEMCPY_DTOH, .u.dtoh = {ADDR_A, 16, e->st0}};
     b->batch = (struct cua_req_batch){0, e->items, 3})

static void
chk_htod_staged(struct env *e)
{
	struct request *r = TAILQ_LAST(&e->s->queue, request_queue);
	ck_assert_uint_eq(r->nstages, 1);
	ck_assert_uint_eq(r->stages[0].len, 16);
	ck_assert_int_eq(r->dev, 0);
}

static void
chk_batch3(struct env *e)
{
	struct request *r = TAILQ_LAST(&e->s->queue, request_queue);
	ck_assert_uint_eq(r->nstages, 2); /* HTOD in, DTOH out */
	ck_assert_uint_eq(r->dep_gen, 1);
	for (uint32_t i = 0; i < 3; i++)
		ck_assert_int_eq(r->items[i].cmd, (int)i);
}

/* ------------------------------------------------------------------ the cases */

static const struct ccase cases[] = {
	/* memory */
	{"alloc queues", setup_std, CUA_OP_MEM_ALLOC, 0, b_alloc, .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"alloc: device out of range", setup_std, CUA_OP_MEM_ALLOC, 0, b_alloc_dev5, .status = CUA_EBAD_ARGUMENT,
	 .msg = "device 5 does not exist (2 devices)", .exact = true, .outcome = ANSWERED, .check = chk_no_queue},
	{"alloc: memory quota", setup_mem_quota, CUA_OP_MEM_ALLOC, 0, b_alloc_1m, .status = CUA_EQUOTA,
	 .msg = "1048576 more would take the session to 1052672 bytes of device memory on device 0, past its quota of "
		"1048576 (4096 held, 0 reserved by its requests not yet completed); free some, or raise it with "
		"--session-mem",
	 .outcome = ANSWERED},
	{"alloc: zero bytes", setup_std, CUA_OP_MEM_ALLOC, 0, b_alloc_0, .status = CUA_EBAD_ARGUMENT,
	 .msg = "cannot allocate 0 bytes", .outcome = ANSWERED},
	{"free queues as a barrier", setup_std, CUA_OP_MEM_FREE, 0, b_free_a, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 1, .check = chk_barrier},
	{"free of another session's pointer", setup_other_session, CUA_OP_MEM_FREE, 0, b_free_x,
	 .status = CUA_ENOT_FOUND, .msg = "0x7f0000900000 is not an allocation of this session", .outcome = ANSWERED},
	{"free inside an allocation", setup_std, CUA_OP_MEM_FREE, 0, b_free_a16, .status = CUA_EBAD_ARGUMENT,
	 .msg = "0x7f0000100010 is inside an allocation; free 0x7f0000100000 instead", .outcome = ANSWERED},

	/* copies */
	{"htod queues with its bytes staged", setup_std, CUA_OP_MEMCPY_HTOD, 0, b_htod_a, .status = CUA_OK,
	 .outcome = QUEUED, .ncmds = 1, .check = chk_htod_staged},
	{"dtoh reaching past its allocation", setup_std, CUA_OP_MEMCPY_DTOH, 0, b_dtoh_cross,
	 .status = CUA_EBAD_ARGUMENT,
	 .msg = "device pointer 0x7f0000100fa0 (200 bytes) is not inside an allocation of this session",
	 .outcome = ANSWERED},
	{"htod into a stale allocation", setup_restarted, CUA_OP_MEMCPY_HTOD, 0, b_htod_s, .status = CUA_ECONTEXT_LOST,
	 .msg = "device pointer 0x7f0000300040 is in memory of a GPU context that was lost; allocate again",
	 .outcome = ANSWERED},
	{"htod into an address reused after a restart", setup_restarted, CUA_OP_MEMCPY_HTOD, 0, b_htod_a,
	 .status = CUA_OK, .outcome = QUEUED, .ncmds = 1},
	{"dtod across two devices", setup_std, CUA_OP_MEMCPY_DTOD, 0, b_dtod_ab, .status = CUA_EBAD_ARGUMENT,
	 .msg = "one request must target one device (device 0, then 1)", .outcome = ANSWERED},
	{"memset width 3", setup_std, CUA_OP_MEMSET, 0, b_memset_w3, .status = CUA_EBAD_ARGUMENT,
	 .msg = "memset width must be 1, 2 or 4 bytes, not 3", .exact = true, .outcome = ANSWERED},
	{"memset on a stream of another device", setup_std, CUA_OP_MEMSET, 0, b_memset_st1, .status = CUA_EBAD_ARGUMENT,
	 .msg = "stream is on device 1, the work on device 0", .outcome = ANSWERED},

	/* batches */
	{"BATCH: one bad item, one good", setup_std, CUA_OP_BATCH, 0, b_batch_bad_good, .status = CUA_EBAD_ARGUMENT,
	 .msg = "memset width must be 1, 2 or 4 bytes, not 3", .outcome = QUEUED, .ncmds = 1, .nitems = 2,
	 .items = {{CUA_EBAD_ARGUMENT, "memset width must be 1, 2 or 4 bytes, not 3"}, {CUA_OK, NULL}}},
	{"BATCH: every item bad is answered at once", setup_std, CUA_OP_BATCH, 0, b_batch_bad_bad, .status = CUA_OK,
	 .outcome = ANSWERED, .nitems = 2,
	 .items = {{CUA_EBAD_ARGUMENT, "memset width must be 1, 2 or 4 bytes, not 3"},
		   {CUA_EBAD_ARGUMENT,
		    "device pointer 0x1000 (16 bytes) is not inside an allocation of this session"}}},
	{"BATCH: three good items", setup_std, CUA_OP_BATCH, 0, b_batch_3, .status = CUA_OK, .outcome = QUEUED,
	 .ncmds = 3, .nitems = 3, .items = {{CUA_OK, NULL}, {CUA_OK, NULL}, {CUA_OK, NULL}}, .check = chk_batch3},
};

#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

int
main(void)
{
	return core_run(core_cases_suite("core-memory", cases, NCASES, NULL));
}
