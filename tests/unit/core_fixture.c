/*
 * core_fixture.c — the part of the daemon core's unit tests that every family shares (see core_fixture.h).
 */
#include "config.h"

#include "core_fixture.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ the stub edge */

struct rec replies[MAX_REPLIES];

unsigned nreplies, msgs_freed;

static size_t
stub_reply(void *ctx, const struct reply *rep)
{
	ck_assert_ptr_nonnull(ctx);
	ck_assert_uint_lt(nreplies, MAX_REPLIES);
	struct rec *r = &replies[nreplies++];
	memset(r, 0, sizeof(*r));
	r->op = rep->op;
	r->status = rep->status;
	r->has_message = rep->message != NULL;
	snprintf(r->message, sizeof(r->message), "%s", rep->message ? rep->message : "");
	const cua_rep_body *body = rep->body;
	if (rep->status != CUA_OK || body == NULL)
		return 0;
	if (rep->op == CUA_OP_PING)
		r->value = body->ping.nonce;
	else if (rep->op == CUA_OP_HELLO)
		r->value = body->hello.session;
	else if (rep->op == CUA_OP_BATCH) {
		r->nitems = body->batch.nresults;
		for (uint32_t i = 0; i < r->nitems && i < MAX_ITEMS; i++) {
			const cua_item_result *x = &body->batch.results[i];
			r->item_status[i] = x->status;
			snprintf(r->item_msg[i], sizeof(r->item_msg[i]), "%.*s", (int)x->message.len,
				 (const char *)x->message.ptr);
		}
	}
	return 0; /* nothing queued: the request counts as sent at once */
}

static void
stub_msg_free(void *msg)
{
	msgs_freed++;
	free(msg);
}

static int64_t
stub_peer_pid(uint32_t pipe)
{
	(void)pipe;
	return -1;
}

static void
stub_drop(void *ctx)
{
	(void)ctx;
}

static const struct edge_ops stub_edge = {.reply = stub_reply,
					  .drop = stub_drop,
					  .msg_free = stub_msg_free,
					  .peer_pid = stub_peer_pid};

/* ------------------------------------------------------------------ the front-end and a session's state */

struct env E;

void
env_init(struct env *e)
{
	memset(e, 0, sizeof(*e));
	fe_init(&e->fe);
	e->fe.edge = &stub_edge;
	e->fe.cfg.session_pending = 64; /* main.c derives it from --contexts (512 / 8) */
	e->fe.ndevs = 2;
	e->fe.devs = calloc(2, sizeof(struct device));
	ck_assert_ptr_nonnull(e->fe.devs);
	for (int i = 0; i < 2; i++) {
		struct device *d = &e->fe.devs[i];
		d->fe = &e->fe;
		d->index = d->ordinal = i;
		d->state = DEV_READY;
		d->gen = 1;
		d->shm_fd = -1;
		d->info.sm_major = i == 0 ? 9 : 8; /* device 0: sm_90, device 1: sm_80 */
		d->info.sm_minor = 0;
		d->info.pool_streams = 4;
		d->info.prio_least = 0;
		d->info.prio_greatest = -5;
		d->info.max_param_bytes = i == 0 ? 32764 : 4096; /* device 1 as before CUDA 12.1 */
		d->info.max_shared_optin = 232448;
		d->info.cluster_launch = i == 0; /* sm_90 only */
		d->info.cooperative_launch = 1;
		snprintf(d->info.name, sizeof(d->info.name), "fake sm_%u0", d->info.sm_major);
	}
	nreplies = 0;
	msgs_freed = 0;
}

void
env_fini(struct env *e)
{
	struct fe *fe = &e->fe;
	struct session *s;
	struct request *r;
	struct request_queue q;
	TAILQ_INIT(&q);
	while ((s = TAILQ_FIRST(&fe->sessions)) != NULL) {
		TAILQ_CONCAT(&q, &s->queue, qlink);
		TAILQ_CONCAT(&q, &s->parked, qlink);
		while ((r = TAILQ_FIRST(&q)) != NULL) {
			TAILQ_REMOVE(&q, r, qlink);
			request_free(fe, r);
		}
		do_graphs_free(s);
		do_session_free(fe, s);
	}
	do_pipe_tombs_free(fe);
	free(fe->devs);
	stats_fini(&fe->stats);
	pthread_cond_destroy(&fe->cond);
	pthread_mutex_destroy(&fe->lock);
}

void
send_bytes(struct env *e, uint32_t pipe, const void *bytes, size_t len)
{
	void *msg = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(msg);
	memcpy(msg, bytes, len);
	request_receive(&e->fe, &(struct incoming){msg, msg, len, (void *)(uintptr_t)(++e->ctx_next), pipe});
}

void
send_req(struct env *e, uint32_t pipe, uint32_t op, uint64_t seq, const void *body)
{
	cua_wbuf b = {0};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), op, seq, body), 0);
	send_bytes(e, pipe, b.data, b.len);
	cua_wbuf_free(&b);
}

uint64_t
add_alloc(struct session *s, int dev, uint32_t gen, uint64_t addr, uint64_t len)
{
	ck_assert_int_eq(do_alloc_add(s, dev, gen, addr, len), 0);
	s->counts.allocations++;
	s->counts.alloc_bytes += len;
	s->dev_bytes[dev] += len;
	return addr;
}

uint64_t
add_handle(struct session *s, unsigned kind, int dev, uint32_t gen, uint64_t wid)
{
	uint64_t h;
	ck_assert_int_eq(do_handle_new(s, kind, dev, gen, wid, &h), 0);
	return h;
}

uint64_t
add_function(struct session *s, uint64_t mod, int dev, uint32_t gen, uint64_t wid)
{
	uint64_t h = add_handle(s, CUA_HK_FUNCTION, dev, gen, wid);
	struct hslot *hs = &s->slots[cua_handle_slot(h)];
	hs->module_slot = cua_handle_slot(mod);
	hs->params = calloc(2, sizeof(*hs->params));
	ck_assert_ptr_nonnull(hs->params);
	hs->params[0] = (cua_param_info){0, 8};
	hs->params[1] = (cua_param_info){8, 4};
	hs->nparams = 2;
	s->counts.functions++;
	return h;
}

/* ---- setups: the session state of a case ---- */

void
setup_pipe(struct env *e)
{
	request_pipe_added(&e->fe, PIPE, false);
	e->s = do_session_by_pipe(&e->fe, PIPE);
	ck_assert_ptr_nonnull(e->s);
}

void
setup_hello(struct env *e)
{
	setup_pipe(e);
	e->s->hello = true;
}

void
setup_std(struct env *e)
{
	struct session *s;
	setup_hello(e);
	s = e->s;
	add_alloc(s, 0, 1, ADDR_A, ALLOC_LEN);
	add_alloc(s, 1, 1, ADDR_B, ALLOC_LEN);
	e->mod0 = add_handle(s, CUA_HK_MODULE, 0, 1, 11);
	uint64_t mod1 = add_handle(s, CUA_HK_MODULE, 1, 1, 12);
	s->counts.modules += 2;
	e->fn0 = add_function(s, e->mod0, 0, 1, 21);
	e->fn1 = add_function(s, mod1, 1, 1, 22);
	e->st0 = add_handle(s, CUA_HK_STREAM, 0, 1, 4);
	e->st1 = add_handle(s, CUA_HK_STREAM, 1, 1, 5);
	s->counts.streams += 2;
}

void
setup_restarted(struct env *e)
{
	setup_std(e);
	struct session *s = e->s;
	add_alloc(s, 0, 1, ADDR_S, ALLOC_LEN);
	e->fn_stale = e->fn0;
	e->st_stale = e->st0;
	e->fe.devs[0].gen = 2;
	add_alloc(s, 0, 2, ADDR_A, ALLOC_LEN); /* the same address again, live */
	uint64_t mod = add_handle(s, CUA_HK_MODULE, 0, 2, 31);
	e->fn0 = add_function(s, mod, 0, 2, 32);
	e->st0 = add_handle(s, CUA_HK_STREAM, 0, 2, 6);
}

uint64_t
add_event(struct session *s, uint32_t gen, uint64_t wid, uint8_t flags)
{
	uint64_t h = add_handle(s, CUA_HK_EVENT, 0, gen, wid);
	s->slots[cua_handle_slot(h)].evflags = flags;
	s->events++;
	return h;
}

void
setup_other_session(struct env *e)
{
	setup_std(e);
	struct session *o = do_session_new(&e->fe, PIPE_OTHER);
	ck_assert_ptr_nonnull(o);
	o->hello = true;
	add_alloc(o, 0, 1, ADDR_X, ALLOC_LEN);
}

/* ---- bodies (some name the handles a setup made) ---- */

const int32_t n32 = 1024;

const int64_t n64 = 1024;

const char bytes16[16] = "0123456789abcde";

BODY_FN(b_ping1, b->ping.nonce = 1)
BODY_FN(b_alloc, b->mem_alloc = (struct cua_req_mem_alloc){0, 1024})
BODY_FN(b_free_a, b->mem_free.ptr = ADDR_A)
BODY_FN(b_htod_a, b->memcpy_htod = (struct cua_req_memcpy_htod){ADDR_A, 0, {bytes16, 16}})
BODY_FN(b_launch_ok, e->args[0] = DEVPTR(ADDR_A); e->args[1] = INT32; b->launch = LAUNCH(e->fn0, 8, 0, 2))

/* ---- the table ---- */

void
chk_no_queue(struct env *e)
{
	ck_assert_uint_eq(e->s->queued, 0);
	ck_assert_uint_eq(e->s->held, 0); /* its receive context was given back */
}

void
chk_barrier(struct env *e)
{
	ck_assert(TAILQ_LAST(&e->s->queue, request_queue)->barrier);
}

void
check_msg(const char *what, const char *got, const char *want)
{
	if (want == NULL)
		return;
	ck_assert_msg(strstr(got, want) != NULL, "%s: message \"%s\" lacks \"%s\"", what, got, want);
}

void
check_exact(const char *what, const char *got, const char *want)
{
	ck_assert_msg(strcmp(got, want) == 0, "%s: message \"%s\", want exactly \"%s\"", what, got, want);
}

void
run_ccase(const struct ccase *c)
{
	struct env *e = &E;
	env_init(e);
	if (c->setup)
		c->setup(e);
	unsigned r0 = nreplies;
	uint32_t q0 = e->s ? e->s->queued : 0, p0 = e->s ? e->s->nparked : 0;

	cua_req_body body;
	memset(&body, 0, sizeof(body));
	if (c->raw != NULL) {
		send_bytes(e, PIPE, c->raw, c->rawlen);
	} else {
		if (c->body)
			c->body(e, &body);
		send_req(e, PIPE, c->op, c->seq, c->body ? &body : NULL);
	}
	if (e->s == NULL)
		e->s = do_session_by_pipe(&e->fe, PIPE);
	struct session *s = e->s;
	uint32_t q1 = s ? s->queued : 0, p1 = s ? s->nparked : 0;

	/* the outcome */
	ck_assert_msg((nreplies > r0) == !!(c->outcome & ANSWERED), "%s: %u replies", c->name, nreplies - r0);
	ck_assert_msg((q1 == q0 + 1) == !!(c->outcome & QUEUED), "%s: queued %u -> %u", c->name, q0, q1);
	ck_assert_msg((p1 == p0 + 1) == !!(c->outcome & PARKED), "%s: parked %u -> %u", c->name, p0, p1);

	/* the status and message */
	const struct rec *rep = nreplies > r0 ? &replies[r0] : NULL;
	const struct request *r = (c->outcome & QUEUED) ? TAILQ_LAST(&s->queue, request_queue) : NULL;
	if (rep != NULL) {
		uint32_t want_op = c->raw ? rep->op : c->op;
		ck_assert_uint_eq(rep->op, want_op);
		ck_assert_msg(rep->status == c->status, "%s: status %s (%s), want %s", c->name,
			      cua_strerror_name((int)rep->status), rep->message, cua_strerror_name((int)c->status));
		if (c->msg != NULL && c->exact)
			check_exact(c->name, rep->message, c->msg);
		else if (c->msg != NULL)
			check_msg(c->name, rep->message, c->msg);
		else
			ck_assert_msg(!rep->has_message, "%s: unexpected message \"%s\"", c->name, rep->message);
	} else if (r != NULL) {
		ck_assert_msg(request_status(r) == c->status, "%s: queued with status %s", c->name,
			      cua_strerror_name((int)request_status(r)));
		const char *m = r->status_msg;
		for (uint32_t i = 0; m == NULL && i < r->nitems; i++)
			m = r->items[i].msg;
		if (c->msg != NULL)
			check_msg(c->name, m ? m : "", c->msg);
		else
			ck_assert_msg(m == NULL, "%s: unexpected message \"%s\"", c->name, m);
	}
	if (r != NULL && c->ncmds >= 0)
		ck_assert_msg((int)r->ncmds == c->ncmds, "%s: %u worker commands, want %d", c->name, r->ncmds,
			      c->ncmds);
	if (r != NULL) /* it holds its receive context until answered */
		ck_assert(r->held == !(c->outcome & ANSWERED));

	/* BATCH items: in the reply when answered, else in the queued request */
	if (c->nitems > 0) {
		bool in_reply = r == NULL;
		ck_assert_msg(in_reply ? rep != NULL : true, "%s: no reply to read the items from", c->name);
		uint32_t n = in_reply ? rep->nitems : r->nitems;
		ck_assert_uint_eq(n, c->nitems);
		for (uint32_t i = 0; i < c->nitems; i++) {
			uint32_t st = in_reply ? rep->item_status[i] : r->items[i].status;
			const char *m = in_reply ? rep->item_msg[i] : (r->items[i].msg ? r->items[i].msg : "");
			ck_assert_msg(st == c->items[i].status, "%s: item %u: %s", c->name, i,
				      cua_strerror_name((int)st));
			check_msg(c->name, m, c->items[i].msg);
		}
	}
	if (c->check)
		c->check(e);
	env_fini(e);
}

int
core_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static const struct ccase *suite_cases; /* core_cases_suite's, for its loop test */

START_TEST(ccase_test)
{
	run_ccase(&suite_cases[_i]);
}
END_TEST

Suite *
core_cases_suite(const char *name, const struct ccase *cases, int n, TCase **tc)
{
	Suite *s = suite_create(name);
	TCase *t = tcase_create("requests");
	suite_cases = cases;
	tcase_add_loop_test(t, ccase_test, 0, n);
	suite_add_tcase(s, t);
	if (tc != NULL)
		*tc = t;
	return s;
}
