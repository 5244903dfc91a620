/*
 * test_core_release.c — unit tests of the daemon's core (libcuadcore): completion (the worker's part faked) and the
 * release of objects in sequence order. The stub edge, the session states and the table-driven request case are in
 * core_fixture.h.
 */
#include "config.h"

#include "core_fixture.h"

#include <string.h>

/* ------------------------------------------------------------------ completion (the worker's part faked) */

/* Takes the oldest queued request of s and completes it as if the worker ran its commands successfully. */
static void
complete_head(struct env *e, uint64_t value)
{
	struct request *r = TAILQ_FIRST(&e->s->queue);
	ck_assert_ptr_nonnull(r);
	TAILQ_REMOVE(&e->s->queue, r, qlink);
	e->s->queued--;
	if (r->dev >= 0) /* what dispatching does: the worker it went to */
		r->wdev = do_session_worker(&e->fe, e->s, r->dev);
	for (uint32_t i = 0; i < r->nitems; i++)
		r->items[i].value = value;
	do_request_finish(&e->fe, r);
}

/* Device 0 restarts; its module is unloaded (CONTEXT_LOST, forgotten); a new module reuses the slot and is
 * unloaded in turn. The stale function of the first module must not be left behind, nor counted twice. */
START_TEST(stale_module_unload_takes_its_functions)
{
	struct env *e = &E;
	env_init(e);
	setup_std(e);
	struct session *s = e->s;
	e->fe.devs[0].gen = 2;
	do_sessions_mark_stale(&e->fe, &e->fe.devs[0], 1);
	ck_assert_uint_eq(s->counts.functions, 1); /* fn1, on device 1 */
	ck_assert_uint_eq(s->counts.modules, 1);
	send_req(e, PIPE, CUA_OP_MODULE_UNLOAD, 0, &(struct cua_req_module_unload){e->mod0});
	ck_assert_uint_eq(nreplies, 1);
	ck_assert_uint_eq(replies[0].status, CUA_ECONTEXT_LOST);
	ck_assert_ptr_null(do_handle_slot(s, e->mod0, CUA_HK_MODULE));
	bool orphan = do_handle_slot(s, e->fn0, CUA_HK_FUNCTION) != NULL;
	uint64_t mod = add_handle(s, CUA_HK_MODULE, 0, 2, 41);
	s->counts.modules++;
	ck_assert_uint_eq(cua_handle_slot(mod), cua_handle_slot(e->mod0)); /* the slot is reused */
	send_req(e, PIPE, CUA_OP_MODULE_UNLOAD, 0, &(struct cua_req_module_unload){mod});
	ck_assert_uint_eq(s->queued, 1);
	complete_head(e, 0);
	ck_assert_uint_eq(nreplies, 2);
	ck_assert_uint_eq(replies[1].status, CUA_OK);
	ck_assert_ptr_null(do_handle_slot(s, mod, CUA_HK_MODULE));
	ck_assert_uint_eq(s->counts.modules, 1);
	/* Regression (daemon/cmd-module.c v_module_unload, the CONTEXT_LOST branch): the stale module's slot was freed
	 * but not its functions; they stay in the table (counted in nhandles against the handle quota) with
	 * module_slot naming a free slot, and when a new module takes that slot, unloading it frees them too
	 * and decrements counts.functions a second time (session_mark_stale already did): STATUS undercounts
	 * (and the count wraps when it was the last function). */
	ck_assert(!orphan);
	ck_assert_uint_eq(s->counts.functions, 1);
	env_fini(e);
}
END_TEST

/* A successful allocation, completed: recorded in the session's table and counted; then freed. */
START_TEST(alloc_then_free_completed)
{
	struct env *e = &E;
	int dev;
	struct alloc_rec *a;
	cua_err err;
	env_init(e);
	setup_std(e);
	struct session *s = e->s;
	uint64_t bytes0 = s->counts.alloc_bytes;
	send_req(e, PIPE, CUA_OP_MEM_ALLOC, 0, &(struct cua_req_mem_alloc){1, 1000});
	complete_head(e, 0x7f0000500000ull);
	ck_assert_uint_eq(nreplies, 1);
	ck_assert_uint_eq(replies[0].status, CUA_OK);
	ck_assert_int_eq(do_alloc_find(&e->fe, s, 0x7f0000500000ull + 999, 1, &dev, &a, &err), 0);
	ck_assert_int_eq(dev, 1);
	ck_assert_uint_eq(s->counts.alloc_bytes, bytes0 + 1000);
	ck_assert_uint_eq(e->fe.devs[1].alloc_bytes, 1000);
	send_req(e, PIPE, CUA_OP_MEM_FREE, 0, &(struct cua_req_mem_free){0x7f0000500000ull});
	complete_head(e, 0);
	ck_assert_uint_eq(nreplies, 2);
	ck_assert_uint_eq(replies[1].status, CUA_OK);
	ck_assert_int_eq(do_alloc_find(&e->fe, s, 0x7f0000500000ull, 1, &dev, &a, &err), CUA_EBAD_ARGUMENT);
	ck_assert_uint_eq(s->counts.alloc_bytes, bytes0);
	ck_assert_uint_eq(e->fe.devs[1].alloc_bytes, 0);
	ck_assert_uint_eq(s->held, 0);
	env_fini(e);
}
END_TEST

/* ------------------------------------------------------------------ release in sequence order (issue 9) */

/* A request that frees an object takes effect in the session's tables when it is validated: a later request
 * naming the object is refused although the freeing command has not run; once it ran, the object is gone.
 * Each case: a long launch (seq 1), the release (seq 2), then `use` (seq 3) while both are queued, and `use`
 * again (seq 4) after both completed. */
struct rcase {
	const char *name;
	uint32_t rel_op;
	void (*rel)(struct env *, cua_req_body *);
	uint32_t use_op;
	void (*use)(struct env *, cua_req_body *);
	uint32_t status, status_after; /* of `use` before and after the release ran */
	const char *msg, *msg_after;
};

BODY(b_unload_mod0, b->module_unload.module = e->mod0)

BODY(b_fget_mod0, b->function_get = (struct cua_req_function_get){e->mod0, {"k", 1}})

BODY(b_destroy_st0, b->stream.stream = e->st0)

BODY(b_memset_a_st0, b->memset = (struct cua_req_memset){ADDR_A, 0, 4, 16, e->st0})

BODY(b_dtoh_a, b->memcpy_dtoh = (struct cua_req_memcpy_dtoh){ADDR_A, 16, 0})

BODY(b_memset_a, b->memset = (struct cua_req_memset){ADDR_A, 0, 1, 16, 0})

BODY(b_unreg_hb0, b->host_unregister.buffer = e->hb0)

BODY(b_hcopy_hb0, b->memcpy_host = (struct cua_req_memcpy_host){ADDR_A, 0, e->hb0, 0, 16})

BODY(b_destroy_ev, b->event.event = e->ev_rec)

BODY(b_record_ev, b->event_stream = (struct cua_req_event_stream){e->ev_rec, e->st0})

static const struct rcase rcases[] = {
	{"HTOD after MEM_FREE", CUA_OP_MEM_FREE, b_free_a, CUA_OP_MEMCPY_HTOD, b_htod_a, CUA_ENOT_FOUND,
	 CUA_EBAD_ARGUMENT, "freed by request seq 2", "not inside an allocation"},
	{"DTOH after MEM_FREE", CUA_OP_MEM_FREE, b_free_a, CUA_OP_MEMCPY_DTOH, b_dtoh_a, CUA_ENOT_FOUND,
	 CUA_EBAD_ARGUMENT, "freed by request seq 2", "not inside an allocation"},
	{"MEMSET after MEM_FREE", CUA_OP_MEM_FREE, b_free_a, CUA_OP_MEMSET, b_memset_a, CUA_ENOT_FOUND,
	 CUA_EBAD_ARGUMENT, "freed by request seq 2", "not inside an allocation"},
	{"a second MEM_FREE", CUA_OP_MEM_FREE, b_free_a, CUA_OP_MEM_FREE, b_free_a, CUA_ENOT_FOUND, CUA_ENOT_FOUND,
	 "freed by request seq 2", "not an allocation of this session"},
	{"a launch with the freed pointer", CUA_OP_MEM_FREE, b_free_a, CUA_OP_LAUNCH, b_launch_ok, CUA_ENOT_FOUND,
	 CUA_EBAD_ARGUMENT, "argument 0: device pointer", "not inside an allocation"},
	{"a launch of an unloaded module's function", CUA_OP_MODULE_UNLOAD, b_unload_mod0, CUA_OP_LAUNCH, b_launch_ok,
	 CUA_ENOT_FOUND, CUA_ENOT_FOUND, "was released by request seq 2", "not an object of this session"},
	{"FUNCTION_GET in an unloaded module", CUA_OP_MODULE_UNLOAD, b_unload_mod0, CUA_OP_FUNCTION_GET, b_fget_mod0,
	 CUA_ENOT_FOUND, CUA_ENOT_FOUND, "module handle", "not an object of this session"},
	{"work on a destroyed stream", CUA_OP_STREAM_DESTROY, b_destroy_st0, CUA_OP_MEMSET, b_memset_a_st0,
	 CUA_ENOT_FOUND, CUA_ENOT_FOUND, "stream handle", "not an object of this session"},
	{"STREAM_SYNC of a destroyed stream", CUA_OP_STREAM_DESTROY, b_destroy_st0, CUA_OP_STREAM_SYNC, b_destroy_st0,
	 CUA_ENOT_FOUND, CUA_ENOT_FOUND, "was released by request seq 2", "not an object of this session"},
	{"a copy into an unregistered host buffer", CUA_OP_HOST_UNREGISTER, b_unreg_hb0, CUA_OP_MEMCPY_HTOD_HOST,
	 b_hcopy_hb0, CUA_ENOT_FOUND, CUA_ENOT_FOUND, "host buffer handle", "not an object of this session"},
	{"EVENT_SYNC of a destroyed event", CUA_OP_EVENT_DESTROY, b_destroy_ev, CUA_OP_EVENT_SYNC, b_destroy_ev,
	 CUA_ENOT_FOUND, CUA_ENOT_FOUND, "was released by request seq 2", "not an object of this session"},
	{"a record of a destroyed event", CUA_OP_EVENT_DESTROY, b_destroy_ev, CUA_OP_EVENT_RECORD, b_record_ev,
	 CUA_ENOT_FOUND, CUA_ENOT_FOUND, "event handle", "not an object of this session"},
	{"a second EVENT_DESTROY", CUA_OP_EVENT_DESTROY, b_destroy_ev, CUA_OP_EVENT_DESTROY, b_destroy_ev,
	 CUA_ENOT_FOUND, CUA_ENOT_FOUND, "was released by request seq 2", "not an object of this session"},
};

static void
send_seq(struct env *e, uint32_t op, uint64_t seq, void (*body)(struct env *, cua_req_body *))
{
	cua_req_body b;
	memset(&b, 0, sizeof(b));
	body(e, &b);
	send_req(e, PIPE, op, seq, &b);
}

START_TEST(release_in_order)
{
	const struct rcase *c = &rcases[_i];
	struct env *e = &E;
	env_init(e);
	setup_std(e);
	e->hb0 = add_handle(e->s, CUA_HK_HOSTBUF, 0, 1, 1);
	e->s->slots[cua_handle_slot(e->hb0)].size = 4096;
	e->ev_rec = add_event(e->s, 1, 9, EVF_TIMING | EVF_RECORDED);
	send_seq(e, CUA_OP_LAUNCH, 1, b_launch_ok);
	send_seq(e, c->rel_op, 2, c->rel);
	ck_assert_uint_eq(e->s->queued, 2); /* nothing ran */
	ck_assert_uint_eq(nreplies, 0);
	send_seq(e, c->use_op, 3, c->use);
	ck_assert_uint_eq(nreplies, 1);
	ck_assert_msg(replies[0].status == c->status, "%s: %s (%s)", c->name, cua_strerror_name((int)replies[0].status),
		      replies[0].message);
	check_msg(c->name, replies[0].message, c->msg);
	complete_head(e, 0); /* the launch */
	complete_head(e, 0); /* the release */
	ck_assert_uint_eq(nreplies, 3);
	ck_assert_uint_eq(replies[2].status, CUA_OK);
	send_seq(e, c->use_op, 4, c->use);
	ck_assert_uint_eq(nreplies, 4);
	ck_assert_msg(replies[3].status == c->status_after, "%s, after: %s (%s)", c->name,
		      cua_strerror_name((int)replies[3].status), replies[3].message);
	check_msg(c->name, replies[3].message, c->msg_after);
	env_fini(e);
}
END_TEST

/* A release that did not happen gives the object back: its command failed (a failed clear keeps memory or a
 * module, CUDA refused the destroy), or the request failed as a whole after validation (refused at dispatch:
 * the worker restarted, the ring was too small). The same release sent again is then accepted (queued), not
 * refused as "released by request seq 2" forever (before: the object stayed hidden and counted until the
 * session ended). _i: the release (rfail[_i / 2]), failed by its item (even) or as a whole (odd). */
static const struct rcase rfail[] = {
	{"MEM_FREE", CUA_OP_MEM_FREE, b_free_a, 0, NULL, 0, 0, NULL, NULL},
	{"MODULE_UNLOAD", CUA_OP_MODULE_UNLOAD, b_unload_mod0, CUA_OP_LAUNCH, b_launch_ok, 0, 0, NULL, NULL},
	{"STREAM_DESTROY", CUA_OP_STREAM_DESTROY, b_destroy_st0, CUA_OP_MEMSET, b_memset_a_st0, 0, 0, NULL, NULL},
	{"HOST_UNREGISTER", CUA_OP_HOST_UNREGISTER, b_unreg_hb0, CUA_OP_MEMCPY_HTOD_HOST, b_hcopy_hb0, 0, 0, NULL,
	 NULL},
	{"EVENT_DESTROY", CUA_OP_EVENT_DESTROY, b_destroy_ev, CUA_OP_EVENT_RECORD, b_record_ev, 0, 0, NULL, NULL},
};

START_TEST(failed_release_gives_the_object_back)
{
	const struct rcase *c = &rfail[_i / 2];
	bool whole = _i % 2;
	struct env *e = &E;
	env_init(e);
	setup_std(e);
	e->hb0 = add_handle(e->s, CUA_HK_HOSTBUF, 0, 1, 1);
	e->s->slots[cua_handle_slot(e->hb0)].size = 4096;
	e->ev_rec = add_event(e->s, 1, 9, EVF_TIMING | EVF_RECORDED);
	send_seq(e, c->rel_op, 1, c->rel);
	ck_assert_uint_eq(e->s->queued, 1);
	struct request *r = TAILQ_FIRST(&e->s->queue);
	TAILQ_REMOVE(&e->s->queue, r, qlink);
	e->s->queued--;
	if (whole)
		request_fail(r, CUA_ECONTEXT_LOST, "refused at dispatch (injected)");
	else
		item_fail(&r->items[0], CUA_EDEVICE, "CUDA_ERROR_UNKNOWN (injected)");
	do_request_finish(&e->fe, r);
	ck_assert_uint_eq(nreplies, 1);
	ck_assert_uint_ne(replies[0].status, CUA_OK);
	if (c->use != NULL) { /* usable again */
		send_seq(e, c->use_op, 2, c->use);
		ck_assert_msg(nreplies == 1, "%s failed %s: then %s: %s (%s)", c->name, whole ? "whole" : "by its item",
			      cua_op_name(c->use_op), cua_strerror_name((int)replies[1].status), replies[1].message);
	}
	send_seq(e, c->rel_op, c->use ? 3 : 2, c->rel); /* released again */
	ck_assert_msg(nreplies == 1, "%s failed %s, sent again: %s (%s)", c->name, whole ? "whole" : "by its item",
		      cua_strerror_name((int)replies[1].status), replies[1].message);
	env_fini(e);
}
END_TEST

static Suite *
release_suite(void)
{
	Suite *s = suite_create("core-release");
	TCase *tc = tcase_create("completion");
	tcase_add_test(tc, alloc_then_free_completed);
	tcase_add_loop_test(tc, failed_release_gives_the_object_back, 0, 2 * (int)(sizeof(rfail) / sizeof(rfail[0])));
	tcase_add_test(tc, stale_module_unload_takes_its_functions);
	tcase_add_loop_test(tc, release_in_order, 0, (int)(sizeof(rcases) / sizeof(rcases[0])));
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	return core_run(release_suite());
}
