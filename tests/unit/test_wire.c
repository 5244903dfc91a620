/* Unit tests of the wire codec: every message round-trips; hostile input gets its specific error. */
#include "config.h"

#include "cua_wire.h"

#include <check.h>
#include <errno.h>
#include <msgpack.h> /* the hostile cases mutate decoded trees: this test reaches under the codec */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BYTES(s) ((cua_bytes){(s), (uint32_t)(sizeof(s) - 1)})

/* ------------------------------------------------------------------ sample messages */

struct sample {
	const char *name; /* what the sample is (named like the golden vector of the same message) */
	int is_reply;
	uint32_t op, status;
	const char *message;
	const void *body;
};

static const float f2 = 2.0f;
static cua_wire_arg launch_args[] = {
	{CUA_ARG_BYTES, 0, {&f2, 4}},
	{CUA_ARG_DEVPTR, 0x7f0000001000ull, {NULL, 0}},
	{CUA_ARG_DEVPTR, 0x7f0000002000ull, {NULL, 0}},
	{CUA_ARG_BYTES, 0, {"\x00\x10\x00\x00\x00\x00\x00\x00", 8}},
};
static const struct cua_req_hello s_hello = {1, 1, BYTES("test-client"), 4242};
static const struct cua_req_ping s_ping = {0xdeadbeefcafeull};
static const struct cua_req_module_load s_mload = {0, CUA_IMAGE_FATBIN, BYTES("\x50\xed\x55\xba\x01\x00")};
static const struct cua_req_module_unload s_munload = {0x1000000100000001ull};
static const struct cua_req_function_get s_fget = {0x1000000100000001ull, BYTES("axpy")};
static const struct cua_req_mem_alloc s_alloc = {0, 1u << 20};
static const struct cua_req_mem_free s_free = {0x7f0000001000ull};
static const struct cua_req_memcpy_htod s_htod = {0x7f0000001000ull, 0, BYTES("0123456789abcdef")};
static const struct cua_req_memcpy_dtoh s_dtoh = {0x7f0000001000ull, 16, 0x3000000100000002ull};
static const struct cua_req_memcpy_dtod s_dtod = {0x7f0000002000ull, 0x7f0000001000ull, 4096, 0};
static const struct cua_req_memset s_memset = {0x7f0000001000ull, 0xab, 1, 4096, 0};
static const struct cua_req_stream_create s_screate = {0, -1, 0};
static const struct cua_req_stream s_stream = {0x3000000100000002ull};
static struct cua_req_launch s_launch =
	{0x2000000100000003ull, {1024, 1, 1}, {256, 1, 1}, 0, 0, CUA_LAUNCH_PDL, launch_args, 4};
static cua_batch_item batch_items[5];
static struct cua_req_batch s_batch = {CUA_FLAG_NO_WAIT, batch_items, 5};

static const struct cua_req_host_register s_hreg = {0, 7, 64u << 20};
static const struct cua_rep_host_register r_hreg = {0x4000000100000005ull};
static const struct cua_req_host_unregister s_hunreg = {0x4000000100000005ull};
static const struct cua_req_memcpy_host s_hcopy = {0x7f0000001000ull, 0, 0x4000000100000005ull, 4096, 1u << 20};
static const struct cua_rep_hello r_hello = {1,
					     7,
					     BYTES("cuasyncd 0.1.0"),
					     64u << 20,
					     CUA_MAX_BATCH,
					     CUA_MAX_ARGS,
					     1,
					     BYTES("0123456789abcdef0123456789abcdef")};
static cua_wire_device r_dev[] = {
	{0, BYTES("NVIDIA H200"), 9, 0, 150754820096ull, 132, 0, -5, BYTES("cuda"), 1},
	{1, BYTES("emulated device"), 8, 0, 1u << 30, 4, 0, -1, BYTES("emu"), 3},
};
static const struct cua_rep_devices r_devices = {r_dev, 2};
static const struct cua_rep_module_load r_mload = {0x1000000100000001ull};
static cua_param_info r_params[] = {{0, 4}, {8, 8}, {16, 8}, {24, 8}};
static const struct cua_rep_function_get r_fget = {0x2000000100000003ull, r_params, 4};
static const struct cua_rep_mem_alloc r_alloc = {0x7f0000001000ull};
static const struct cua_rep_memcpy_dtoh r_dtoh = {BYTES("0123456789abcdef")};
static const struct cua_rep_stream_create r_screate = {0x3000000100000002ull};
static cua_item_result r_results[] = {
	{CUA_OK, BYTES("OK"), BYTES("success"), {NULL, 0}},
	{CUA_EBAD_ARGUMENT, BYTES("BAD_ARGUMENT"), BYTES("argument 1: 4 bytes, the kernel takes 8"), {NULL, 0}},
	{CUA_OK, BYTES("OK"), BYTES("success"), BYTES("\x01\x02\x03\x04")},
};
static const struct cua_rep_batch r_batch = {r_results, 3};
static cua_wire_dev_status r_devstat[] = {{0, 2, 1, 5, 3, 3u << 20}};
static const struct cua_rep_status r_status =
	{123456, 3, 1000, 7, r_devstat, 1, {1, 4096, 1, 2, 1, 0}, {3, 3u << 20, 2, 4, 2, 5}};

static const struct sample samples[] = {
	{"req_hello", 0, CUA_OP_HELLO, 0, NULL, &s_hello},
	{"req_ping", 0, CUA_OP_PING, 0, NULL, &s_ping},
	{"req_devices", 0, CUA_OP_DEVICES, 0, NULL, NULL},
	{"req_module_load", 0, CUA_OP_MODULE_LOAD, 0, NULL, &s_mload},
	{"req_module_unload", 0, CUA_OP_MODULE_UNLOAD, 0, NULL, &s_munload},
	{"req_function_get", 0, CUA_OP_FUNCTION_GET, 0, NULL, &s_fget},
	{"req_mem_alloc", 0, CUA_OP_MEM_ALLOC, 0, NULL, &s_alloc},
	{"req_mem_free", 0, CUA_OP_MEM_FREE, 0, NULL, &s_free},
	{"req_memcpy_htod", 0, CUA_OP_MEMCPY_HTOD, 0, NULL, &s_htod},
	{"req_memcpy_dtoh", 0, CUA_OP_MEMCPY_DTOH, 0, NULL, &s_dtoh},
	{"req_memcpy_dtod", 0, CUA_OP_MEMCPY_DTOD, 0, NULL, &s_dtod},
	{"req_memset", 0, CUA_OP_MEMSET, 0, NULL, &s_memset},
	{"req_stream_create", 0, CUA_OP_STREAM_CREATE, 0, NULL, &s_screate},
	{"req_stream_destroy", 0, CUA_OP_STREAM_DESTROY, 0, NULL, &s_stream},
	{"req_stream_sync", 0, CUA_OP_STREAM_SYNC, 0, NULL, &s_stream},
	{"req_launch", 0, CUA_OP_LAUNCH, 0, NULL, &s_launch},
	{"req_batch", 0, CUA_OP_BATCH, 0, NULL, &s_batch},
	{"req_synchronize", 0, CUA_OP_SYNCHRONIZE, 0, NULL, NULL},
	{"req_status", 0, CUA_OP_STATUS, 0, NULL, NULL},
	{"req_host_register", 0, CUA_OP_HOST_REGISTER, 0, NULL, &s_hreg},
	{"req_host_unregister", 0, CUA_OP_HOST_UNREGISTER, 0, NULL, &s_hunreg},
	{"req_memcpy_htod_host", 0, CUA_OP_MEMCPY_HTOD_HOST, 0, NULL, &s_hcopy},
	{"req_memcpy_dtoh_host", 0, CUA_OP_MEMCPY_DTOH_HOST, 0, NULL, &s_hcopy},
	{"rep_hello", 1, CUA_OP_HELLO, CUA_OK, NULL, &r_hello},
	{"rep_ping", 1, CUA_OP_PING, CUA_OK, NULL, &s_ping},
	{"rep_devices", 1, CUA_OP_DEVICES, CUA_OK, NULL, &r_devices},
	{"rep_module_load", 1, CUA_OP_MODULE_LOAD, CUA_OK, NULL, &r_mload},
	{"rep_module_unload", 1, CUA_OP_MODULE_UNLOAD, CUA_OK, NULL, NULL},
	{"rep_function_get", 1, CUA_OP_FUNCTION_GET, CUA_OK, NULL, &r_fget},
	{"rep_mem_alloc", 1, CUA_OP_MEM_ALLOC, CUA_OK, NULL, &r_alloc},
	{"rep_mem_free", 1, CUA_OP_MEM_FREE, CUA_OK, NULL, NULL},
	{"rep_memcpy_htod", 1, CUA_OP_MEMCPY_HTOD, CUA_OK, NULL, NULL},
	{"rep_memcpy_dtoh", 1, CUA_OP_MEMCPY_DTOH, CUA_OK, NULL, &r_dtoh},
	{"rep_memcpy_dtod", 1, CUA_OP_MEMCPY_DTOD, CUA_OK, NULL, NULL},
	{"rep_memset", 1, CUA_OP_MEMSET, CUA_OK, NULL, NULL},
	{"rep_stream_create", 1, CUA_OP_STREAM_CREATE, CUA_OK, NULL, &r_screate},
	{"rep_stream_destroy", 1, CUA_OP_STREAM_DESTROY, CUA_OK, NULL, NULL},
	{"rep_stream_sync", 1, CUA_OP_STREAM_SYNC, CUA_OK, NULL, NULL},
	{"rep_launch", 1, CUA_OP_LAUNCH, CUA_OK, NULL, NULL},
	{"rep_batch", 1, CUA_OP_BATCH, CUA_OK, NULL, &r_batch},
	{"rep_synchronize", 1, CUA_OP_SYNCHRONIZE, CUA_OK, NULL, NULL},
	{"rep_status", 1, CUA_OP_STATUS, CUA_OK, NULL, &r_status},
	{"rep_host_register", 1, CUA_OP_HOST_REGISTER, CUA_OK, NULL, &r_hreg},
	{"rep_host_unregister", 1, CUA_OP_HOST_UNREGISTER, CUA_OK, NULL, NULL},
	{"rep_memcpy_htod_host", 1, CUA_OP_MEMCPY_HTOD_HOST, CUA_OK, NULL, NULL},
	{"rep_memcpy_dtoh_host", 1, CUA_OP_MEMCPY_DTOH_HOST, CUA_OK, NULL, NULL},
	{"rep_error_pdl", 1, CUA_OP_LAUNCH, CUA_EPDL_UNSUPPORTED,
	 "programmatic dependent launch requires sm_90 or newer; target sm_80", NULL},
	{"rep_error_protocol", 1, 0, CUA_EPROTOCOL, "message: expected an array of 4 elements", NULL},
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

static void
setup_batch(void)
{
	batch_items[0].kind = CUA_OP_LAUNCH;
	batch_items[0].u.launch = s_launch;
	batch_items[1].kind = CUA_OP_MEMCPY_HTOD;
	batch_items[1].u.htod = s_htod;
	batch_items[2].kind = CUA_OP_MEMCPY_DTOH;
	batch_items[2].u.dtoh = s_dtoh;
	batch_items[3].kind = CUA_OP_MEMSET;
	batch_items[3].u.memset = s_memset;
	batch_items[4].kind = CUA_OP_MEMCPY_HTOD_HOST;
	batch_items[4].u.host = s_hcopy;
}

static void
pack_sample(const struct sample *s, cua_wbuf *b)
{
	int r = s->is_reply ? cua_wire_pack_reply(cua_wbuf_out(b), s->op, s->status, s->message, s->body)
			    : cua_wire_pack_request(cua_wbuf_out(b), s->op, 42, s->body);
	ck_assert_msg(r == 0, "%s: pack failed %d", s->name, r);
}

/* Decodes buf as the sample's kind and re-encodes what was decoded. */
static int
roundtrip(const struct sample *s, const void *buf, size_t len, cua_wbuf *again, cua_err *err)
{
	cua_wire_out out = cua_wbuf_out(again);
	int r;
	if (s->is_reply) {
		cua_wire_reply rep;
		r = cua_wire_decode_reply(buf, len, &rep, err);
		if (r == 0) {
			char msg[CUA_MAX_MESSAGE_TEXT + 1];
			memcpy(msg, rep.message.ptr, rep.message.len);
			msg[rep.message.len] = '\0';
			ck_assert_uint_eq(rep.op, s->op);
			ck_assert_uint_eq(rep.status, s->status);
			ck_assert_int_eq(cua_wire_pack_reply(out, rep.op, rep.status, msg, &rep.body), 0);
		}
		cua_wire_reply_free(&rep);
	} else {
		cua_wire_request req;
		r = cua_wire_decode_request(buf, len, &req, err);
		if (r == 0) {
			ck_assert_uint_eq(req.op, s->op);
			ck_assert_uint_eq(req.seq, 42);
			ck_assert_int_eq(cua_wire_pack_request(out, req.op, req.seq, &req.body), 0);
		}
		cua_wire_request_free(&req);
	}
	return r;
}

/* ------------------------------------------------------------------ round trips */

START_TEST(every_message_roundtrips)
{
	setup_batch();
	const struct sample *s = &samples[_i];
	cua_wbuf b = {0}, again = {0};
	cua_err err = {0};
	pack_sample(s, &b);
	int r = roundtrip(s, b.data, b.len, &again, &err);
	ck_assert_msg(r == 0, "%s: decode failed: %s %s", s->name, cua_strerror_name(r), err.detail);
	ck_assert_uint_eq(again.len, b.len);
	ck_assert_mem_eq(again.data, b.data, b.len);
	cua_wbuf_free(&b);
	cua_wbuf_free(&again);
}
END_TEST

START_TEST(decoded_fields_match)
{
	setup_batch();
	cua_wbuf b = {0};
	pack_sample(&samples[15], &b); /* launch */
	cua_wire_request req;
	cua_err err;
	ck_assert_int_eq(cua_wire_decode_request(b.data, b.len, &req, &err), 0);
	const struct cua_req_launch *l = &req.body.launch;
	ck_assert_uint_eq(l->function, s_launch.function);
	ck_assert_uint_eq(l->grid[0], 1024);
	ck_assert_uint_eq(l->block[0], 256);
	ck_assert_uint_eq(l->flags, CUA_LAUNCH_PDL);
	ck_assert_uint_eq(l->nargs, 4);
	ck_assert_uint_eq(l->args[0].kind, CUA_ARG_BYTES);
	ck_assert_uint_eq(l->args[0].bytes.len, 4);
	ck_assert_mem_eq(l->args[0].bytes.ptr, &f2, 4);
	/* payloads are referenced in place, not copied */
	ck_assert((const char *)l->args[0].bytes.ptr > b.data && (const char *)l->args[0].bytes.ptr < b.data + b.len);
	ck_assert_uint_eq(l->args[1].kind, CUA_ARG_DEVPTR);
	ck_assert_uint_eq(l->args[1].devptr, 0x7f0000001000ull);
	cua_wire_request_free(&req);
	cua_wbuf_free(&b);
}
END_TEST

/* LAUNCH's optional tail: sent only as far as nfields asks (7 without it: what older daemons read), decoded with
 * the count of fields that came, absent fields zero. */
START_TEST(launch_tail_is_optional)
{
	static const uint32_t want_n[] = {CUA_LAUNCH_FIELDS, CUA_LAUNCH_FIELDS, CUA_LAUNCH_FIELDS_CLUSTER,
					  CUA_LAUNCH_FIELDS_PRIORITY, CUA_LAUNCH_FIELDS_PRIORITY};
	static const uint32_t ask[] = {0, CUA_LAUNCH_FIELDS, CUA_LAUNCH_FIELDS_CLUSTER, CUA_LAUNCH_FIELDS_PRIORITY, 99};
	for (size_t k = 0; k < sizeof(ask) / sizeof(ask[0]); k++) {
		struct cua_req_launch q = s_launch;
		q.cluster[0] = 2, q.cluster[1] = 1, q.cluster[2] = 1, q.priority = -3, q.nfields = ask[k];
		cua_wbuf b = {0};
		ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), CUA_OP_LAUNCH, 1, &q), 0);
		ck_assert_uint_eq((unsigned char)b.data[12], 0x90 | want_n[k]); /* the body's fixarray header */
		cua_wire_request req;
		cua_err err;
		ck_assert_int_eq(cua_wire_decode_request(b.data, b.len, &req, &err), 0);
		const struct cua_req_launch *l = &req.body.launch;
		ck_assert_uint_eq(l->nfields, want_n[k]);
		ck_assert_uint_eq(l->cluster[0], want_n[k] >= CUA_LAUNCH_FIELDS_CLUSTER ? 2 : 0);
		ck_assert_int_eq(l->priority, want_n[k] >= CUA_LAUNCH_FIELDS_PRIORITY ? -3 : 0);
		ck_assert_uint_eq(l->nargs, s_launch.nargs);
		cua_wire_request_free(&req);
		cua_wbuf_free(&b);
	}
}
END_TEST

/* ------------------------------------------------------------------ hex */

/* The golden vectors of proto/vectors/ are tested by test_vectors against their table (tools/vectors.c). */

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* ------------------------------------------------------------------ hostile input */

START_TEST(every_truncation_is_rejected)
{
	setup_batch();
	const struct sample *s = &samples[_i];
	cua_wbuf b = {0};
	pack_sample(s, &b);
	for (size_t cut = 0; cut < b.len; cut++) {
		cua_wbuf again = {0};
		cua_err err = {0};
		/* a private copy of exactly `cut` bytes so ASan sees any over-read */
		char *copy = malloc(cut ? cut : 1);
		memcpy(copy, b.data, cut);
		int r = roundtrip(s, copy, cut, &again, &err);
		ck_assert_msg(r == CUA_EPROTOCOL, "%s cut at %zu: got %s (%s)", s->name, cut, cua_strerror_name(r),
			      err.detail);
		free(copy);
		cua_wbuf_free(&again);
	}
	cua_wbuf_free(&b);
}
END_TEST

/* Replaces node number `target` (pre-order) of the object tree with a value of a wrong type. Returns 1 when
 * the node was found and replaced. */
static const msgpack_object wrong_uint = {.type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = 7};
static const msgpack_object wrong_str = {.type = MSGPACK_OBJECT_STR, .via.str = {1, "x"}};

static int
mutate(msgpack_object *o, int *counter, int target, msgpack_object *saved, msgpack_object **where)
{
	if ((*counter)++ == target) {
		*saved = *o;
		*where = o;
		*o = (o->type == MSGPACK_OBJECT_STR || o->type == MSGPACK_OBJECT_ARRAY) ? wrong_uint : wrong_str;
		return 1;
	}
	if (o->type == MSGPACK_OBJECT_ARRAY)
		for (uint32_t i = 0; i < o->via.array.size; i++)
			if (mutate(&o->via.array.ptr[i], counter, target, saved, where))
				return 1;
	return 0;
}

START_TEST(wrong_type_in_every_field_is_rejected)
{
	setup_batch();
	const struct sample *s = &samples[_i];
	cua_wbuf b = {0};
	pack_sample(s, &b);
	for (int target = 1;; target++) { /* node 0 is the whole message */
		msgpack_unpacked unp;
		msgpack_unpacked_init(&unp);
		size_t off = 0;
		ck_assert_int_eq(msgpack_unpack_next(&unp, b.data, b.len, &off), MSGPACK_UNPACK_SUCCESS);
		int counter = 0;
		msgpack_object saved, *where = NULL;
		if (!mutate(&unp.data, &counter, target, &saved, &where)) {
			msgpack_unpacked_destroy(&unp);
			break;
		}
		/* The reply's message text is free-form, a str replaced by a str is no error: skip those. */
		cua_wbuf m = {0}, again = {0};
		msgpack_packer pk;
		msgpack_packer_init(&pk, &m, cua_wbuf_write);
		msgpack_pack_object(&pk, unp.data);
		msgpack_unpacked_destroy(&unp);
		cua_err err = {0};
		int r = roundtrip(s, m.data, m.len, &again, &err);
		/* A mutated status code is still a uint; everything else must be refused. */
		int status_node = s->is_reply && target == 3;
		if (!status_node)
			ck_assert_msg(r == CUA_EPROTOCOL || r == CUA_EVERSION || r == CUA_EUNKNOWN_OP,
				      "%s node %d: got %s", s->name, target, cua_strerror_name(r));
		cua_wbuf_free(&m);
		cua_wbuf_free(&again);
	}
	cua_wbuf_free(&b);
}
END_TEST

struct bad_case {
	const char *what;
	const char *hex;
	int code;
	const char *detail; /* substring of the detail */
	uint32_t op;        /* the op the decoder reports (echoed in the reply): read whenever it could be */
	bool header;        /* version, op and seq were all read */
	uint64_t seq;       /* the seq reported when header */
};

/* The hostile table reads as a table: */
/* clang-format off */
static const struct bad_case bad_cases[] = {
	{"empty message", "", CUA_EPROTOCOL, "empty", 0, false, 0},
	{"array32 claiming 4 billion elements", "ddff000000", CUA_EPROTOCOL, "exceeds the 0 bytes left", 0, false, 0},
	{"str longer than the message", "a541", CUA_EPROTOCOL, "exceeds", 0, false, 0},
	{"bin32 longer than the message", "c6ffffffff00", CUA_EPROTOCOL, "exceeds", 0, false, 0},
	{"deep nesting", "9191919191919191919101", CUA_EPROTOCOL, "nesting deeper", 0, false, 0},
	{"trailing byte after a ping", "940102 00 91 01 00", CUA_EPROTOCOL, "trailing", 2, true, 0},
	{"unknown op", "940163 00 90", CUA_EUNKNOWN_OP, "unknown op 99", 99, true, 0},
	{"op zero", "940100 00 90", CUA_EUNKNOWN_OP, "unknown op 0", 0, true, 0},
	{"wrong version", "940202 00 9101", CUA_EVERSION, "version 2", 2, true, 0},
	{"version zero", "940002 00 9101", CUA_EVERSION, "version 0", 2, true, 0},
	{"map at top level", "81 01 02", CUA_EPROTOCOL, "map", 0, false, 0},
	{"nil field", "940102 00 91c0", CUA_EPROTOCOL, "nil", 2, true, 0},
	{"float field", "940102 00 91ca3f800000", CUA_EPROTOCOL, "float", 2, true, 0},
	{"ext value", "940102 00 91d40100", CUA_EPROTOCOL, "not used", 2, true, 0},
	{"map body", "940102 00 80", CUA_EPROTOCOL, "map", 2, true, 0},
	{"reserved byte 0xc1", "c1", CUA_EPROTOCOL, "not used", 0, false, 0},
	{"header of three elements", "930102 00", CUA_EPROTOCOL, "array of 4", 0, false, 0},
	{"seq as str", "940102 a178 9101", CUA_EPROTOCOL, "message.seq", 2, false, 0},
	{"negative seq", "940102 ff 9101", CUA_EPROTOCOL, "message.seq", 2, false, 0},
	{"float version", "94ca3f800000 02 00 9101", CUA_EPROTOCOL, "float", 0, false, 0},
	{"op over 32 bits", "9401 cf0000000100000000 00 90", CUA_EPROTOCOL, "message.op", 0, false, 0},
	{"ping without its nonce", "940102 00 90", CUA_EPROTOCOL, "expected 1 fields", 2, true, 0},
	{"ping with a str nonce", "940102 00 91a178", CUA_EPROTOCOL, "PING.nonce: expected uint", 2, true, 0},
	{"negative nonce", "940102 00 91ff", CUA_EPROTOCOL, "PING.nonce", 2, true, 0},
	{"mem alloc on device 64", "940107 00 92 40 01", CUA_EPROTOCOL, "MEM_ALLOC.device", 7, true, 0},
	{"memset width 8", "94010c 00 95 01 00 08 01 00", CUA_EPROTOCOL, "MEMSET.width", 12, true, 0},
	{"array over the element limit", "940102 00 dc1389", CUA_EPROTOCOL, "exceeds", 2, true, 0},
	{"grid of 4 dimensions", "940110 00 97 01 9401010101 93010101 00 00 00 90", CUA_EPROTOCOL, "LAUNCH.grid", 16, true, 0},
	{"launch with unknown flag", "940110 00 97 01 93010101 93010101 00 00 08 90", CUA_EPROTOCOL, "LAUNCH.flags", 16, true, 0},
	{"launch of 6 fields", "940110 00 96 01 93010101 93010101 00 00 00", CUA_EPROTOCOL, "expected 7..9 fields", 16, true, 0},
	{"launch of 10 fields", "940110 00 9a 01 93010101 93010101 00 00 00 90 93000000 00 00", CUA_EPROTOCOL, "expected 7..9 fields", 16, true, 0},
	{"launch cluster of 2", "940110 00 98 01 93010101 93010101 00 00 00 90 920101", CUA_EPROTOCOL, "LAUNCH.cluster", 16, true, 0},
	{"launch priority as str", "940110 00 99 01 93010101 93010101 00 00 00 90 93000000 a131", CUA_EPROTOCOL, "LAUNCH.priority", 16, true, 0},
	{"empty bin argument", "940110 00 97 01 93010101 93010101 00 00 00 91 c400", CUA_EPROTOCOL, "LAUNCH.args[0]", 16, true, 0},
	{"str argument", "940110 00 97 01 93010101 93010101 00 00 00 91 a178", CUA_EPROTOCOL, "LAUNCH.args[0]", 16, true, 0},
	{"batch item of unknown kind", "940111 00 92 00 91 92 63 90", CUA_EPROTOCOL, "is not an item kind", 17, true, 0},
	{"batch item without body", "940111 00 92 00 91 91 10", CUA_EPROTOCOL, "[kind, body]", 17, true, 0},
	{"float body, seq in 9 bytes", "940102 cf0000000000000105 91ca3f800000", CUA_EPROTOCOL, "float", 2, true, 261},
	{"array16 header, unknown op, seq 7", "dc0004 01 63 07 90", CUA_EUNKNOWN_OP, "unknown op 99", 99, true, 7},
};
/* clang-format on */
#define NBAD (sizeof(bad_cases) / sizeof(bad_cases[0]))

/* Decodes buf and checks the error, its detail, and what of the header was reported (op, has_header). */
static void
check_bad(const char *what, const unsigned char *buf, size_t len, int code, const char *detail, uint32_t op,
	  bool header, uint64_t seq)
{
	cua_wire_request req;
	cua_err err = {0};
	char *copy = malloc(len ? len : 1);
	memcpy(copy, buf, len);
	int r = cua_wire_decode_request(copy, len, &req, &err);
	cua_wire_request_free(&req);
	free(copy);
	ck_assert_msg(r == code, "%s: expected %s, got %s (%s)", what, cua_strerror_name(code), cua_strerror_name(r),
		      err.detail);
	ck_assert_msg(strstr(err.detail, detail) != NULL, "%s: detail '%s' lacks '%s'", what, err.detail, detail);
	ck_assert_msg(req.op == op, "%s: op %u reported, want %u", what, req.op, op);
	ck_assert_msg(req.has_header == header, "%s: has_header %d", what, (int)req.has_header);
	if (header)
		ck_assert_uint_eq(req.seq, seq);
}

START_TEST(malformed_inputs_get_their_specific_error)
{
	const struct bad_case *c = &bad_cases[_i];
	unsigned char buf[256];
	size_t n = 0;
	int hi = -1;
	for (const char *p = c->hex; *p; p++) {
		if (hexval(*p) < 0)
			continue;
		if (hi < 0) {
			hi = hexval(*p);
			continue;
		}
		buf[n++] = (unsigned char)(hi << 4 | hexval(*p));
		hi = -1;
	}
	check_bad(c->what, buf, n, c->code, c->detail, c->op, c->header, c->seq);
}
END_TEST

START_TEST(oversized_values_are_too_large)
{
	/* a kernel name of CUA_MAX_NAME + 1 bytes */
	size_t nlen = CUA_MAX_NAME + 1;
	unsigned char *buf = malloc(nlen + 32);
	size_t n = 0;
	buf[n++] = 0x94, buf[n++] = 0x01, buf[n++] = CUA_OP_FUNCTION_GET, buf[n++] = 0x00;
	buf[n++] = 0x92, buf[n++] = 0x01;
	buf[n++] = 0xda, buf[n++] = (unsigned char)(nlen >> 8), buf[n++] = (unsigned char)nlen;
	memset(buf + n, 'k', nlen);
	n += nlen;
	check_bad("kernel name over the limit", buf, n, CUA_ETOO_LARGE, "FUNCTION_GET.name", CUA_OP_FUNCTION_GET, true,
		  0);
	free(buf);

	/* an array of 5000 elements, all present: over CUA_WIRE_MAX_ARRAY */
	buf = malloc(5000 + 16);
	n = 0;
	buf[n++] = 0x94, buf[n++] = 0x01, buf[n++] = CUA_OP_BATCH, buf[n++] = 0x00, buf[n++] = 0x92, buf[n++] = 0x00;
	buf[n++] = 0xdc, buf[n++] = 5000 >> 8, buf[n++] = 5000 & 0xff;
	memset(buf + n, 0, 5000);
	n += 5000;
	check_bad("array of 5000", buf, n, CUA_ETOO_LARGE, "limit of 4096", CUA_OP_BATCH, true, 0);
	free(buf);

	/* a launch argument of CUA_MAX_ARG_BYTES + 1 bytes */
	size_t alen = CUA_MAX_ARG_BYTES + 1;
	buf = malloc(alen + 64);
	n = 0;
	/* clang-format off */
	const unsigned char head[] = {0x94, 0x01, CUA_OP_LAUNCH, 0x00, 0x97, 0x01, 0x93, 1, 1, 1, 0x93, 1, 1, 1,
				      0, 0, 0, 0x91, 0xc5};
	/* clang-format on */
	memcpy(buf, head, sizeof(head));
	n = sizeof(head);
	buf[n++] = (unsigned char)(alen >> 8), buf[n++] = (unsigned char)alen;
	memset(buf + n, 1, alen);
	n += alen;
	check_bad("argument over 4096 bytes", buf, n, CUA_EPROTOCOL, "LAUNCH.args[0]", CUA_OP_LAUNCH, true, 0);
	free(buf);
}
END_TEST

START_TEST(reply_with_error_must_have_empty_body)
{
	/* [1, MEM_ALLOC, NOT_FOUND, "NOT_FOUND", "", [5]] */
	/* clang-format off */
	const unsigned char m[] = {0x96, 0x01, 0x07, 0x06, 0xa9, 'N', 'O', 'T', '_', 'F', 'O', 'U', 'N', 'D',
				   0xa0, 0x91, 0x05};
	/* clang-format on */
	cua_wire_reply rep;
	cua_err err;
	ck_assert_int_eq(cua_wire_decode_reply(m, sizeof(m), &rep, &err), CUA_EPROTOCOL);
	cua_wire_reply_free(&rep);
}
END_TEST

START_TEST(sequence_number_is_patched_in_place)
{
	cua_wbuf b = {0};
	struct cua_req_ping p = {7};
	ck_assert_int_eq(cua_wire_pack_request(cua_wbuf_out(&b), CUA_OP_PING, 0, &p), 0);
	ck_assert_int_eq(cua_wire_patch_seq(b.data, b.len, 0x0102030405060708ull), 0);
	cua_wire_request req;
	cua_err err;
	ck_assert_int_eq(cua_wire_decode_request(b.data, b.len, &req, &err), 0);
	ck_assert_uint_eq(req.seq, 0x0102030405060708ull);
	ck_assert_uint_eq(req.body.ping.nonce, 7);
	cua_wire_request_free(&req);
	ck_assert_int_eq(cua_wire_patch_seq(b.data, 5, 1), CUA_EBAD_ARGUMENT);
	cua_wbuf_free(&b);
}
END_TEST

START_TEST(error_table_is_complete_and_stable)
{
	ck_assert_str_eq(cua_strerror_name(CUA_OK), "OK");
	ck_assert_str_eq(cua_strerror_name(CUA_ECONTEXT_LOST), "CONTEXT_LOST");
	ck_assert_str_eq(cua_strerror_name(CUA_EPDL_UNSUPPORTED), "PDL_UNSUPPORTED");
	ck_assert_int_eq(CUA_ECONTEXT_LOST, 7); /* wire values never move */
	ck_assert_int_eq(CUA_EQUOTA, 8);
	ck_assert_str_eq(cua_strerror_name(9999), "UNKNOWN");
	for (int i = 0; i < CUA_ERROR_COUNT; i++) {
		ck_assert(cua_status_valid(i));
		ck_assert(strlen(cua_strerror(i)) > 5);
	}
	cua_err e;
	ck_assert_int_eq(cua_err_set(&e, CUA_EDEVICE, "%s", "CUDA_ERROR_ILLEGAL_ADDRESS"), CUA_EDEVICE);
	ck_assert_str_eq(e.detail, "CUDA_ERROR_ILLEGAL_ADDRESS");
#define CHECK_OP_NAME(name, value) ck_assert_str_eq(cua_op_name(value), #name);
	CUA_OP_TABLE(CHECK_OP_NAME) /* every op of the table has its name; numbers between them have none */
#undef CHECK_OP_NAME
	ck_assert_ptr_null(cua_op_name(0));
	ck_assert_ptr_null(cua_op_name(CUA_OP_MAX));
}
END_TEST

static Suite *
wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("roundtrip");
	tcase_add_loop_test(tc, every_message_roundtrips, 0, NSAMPLES);
	tcase_add_test(tc, decoded_fields_match);
	tcase_add_test(tc, launch_tail_is_optional);
	tcase_add_test(tc, error_table_is_complete_and_stable);
	tcase_add_test(tc, sequence_number_is_patched_in_place);
	suite_add_tcase(s, tc);
	tc = tcase_create("hostile");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, every_truncation_is_rejected, 0, NSAMPLES);
	tcase_add_loop_test(tc, wrong_type_in_every_field_is_rejected, 0, NSAMPLES);
	tcase_add_loop_test(tc, malformed_inputs_get_their_specific_error, 0, NBAD);
	tcase_add_test(tc, oversized_values_are_too_large);
	tcase_add_test(tc, reply_with_error_must_have_empty_body);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(wire_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
